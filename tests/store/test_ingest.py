"""Partitioned ingestion: a Dask cluster gives the single-process result; finished work is kept."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import HashEmbedder, copy_corpus

from ragsieve.config import IngestConfig, PipelineConfig, StoreConfig
from ragsieve.index import Index
from ragsieve.store.ingest import PartitionedReport, compute_partitions, ingest_partitioned


class LoggingEmbedder(HashEmbedder):
    """Appends every text it embeds to a file (shared by threads and processes); can fail once."""

    def __init__(self, log: Path, fail_on: str | None = None, failed_marker: Path | None = None) -> None:
        super().__init__()
        self.log, self.fail_on, self.failed_marker = str(log), fail_on, str(failed_marker) if failed_marker else None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail_on and self.failed_marker and any(self.fail_on in t for t in texts):
            marker = Path(self.failed_marker)
            if not marker.exists():
                marker.write_text("failed once")
                raise RuntimeError("worker lost")
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(t) + "\n" for t in texts)
        return super().embed(texts)


def embedded(log: Path) -> list[str]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


CONFIG = PipelineConfig(ingest=IngestConfig(extract_entities=False))


@pytest.fixture
def client():
    distributed = pytest.importorskip("dask.distributed")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def test_cluster_gives_the_single_process_chunks_and_vectors(tmp_path: Path, client) -> None:
    corpus = copy_corpus(tmp_path)
    single, single_vectors = compute_partitions(
        corpus, tmp_path / "work1", CONFIG, embedder=HashEmbedder(), files_per_partition=2
    )
    report = PartitionedReport()
    spread, spread_vectors = compute_partitions(
        corpus, tmp_path / "work2", CONFIG, embedder=HashEmbedder(), client=client, files_per_partition=2, report=report
    )
    assert report.partitions == 3 and report.partitions_reused == 0
    assert [c.id for c in spread] == [c.id for c in single]
    assert spread == single
    assert np.array_equal(spread_vectors, single_vectors)
    # The same chunks, in the same order, as the folder index's own (file-by-file) build.
    built = Index.build(corpus, tmp_path / "idx", config=CONFIG, embedder=HashEmbedder())
    assert [c.id for c in built.chunks] == [c.id for c in single]
    assert np.allclose(np.asarray(built.embeddings), single_vectors)
    built.close()


def test_a_failed_partition_is_retried_and_finished_ones_are_not_redone(tmp_path: Path, client) -> None:
    corpus = copy_corpus(tmp_path)
    log, marker = tmp_path / "embedded.log", tmp_path / "failed"
    flaky = LoggingEmbedder(log, fail_on="Ribosomes", failed_marker=marker)
    chunks, _ = compute_partitions(
        corpus, tmp_path / "work", CONFIG, embedder=flaky, client=client, files_per_partition=2
    )
    assert marker.exists(), "the flaky partition must have failed once"
    assert any("Ribosomes" in c.text for c in chunks)
    first = embedded(log)
    assert sorted(first) == sorted(c.text for c in chunks), "each partition is embedded once after its retry"

    report = PartitionedReport()
    again, _ = compute_partitions(
        corpus, tmp_path / "work", CONFIG, embedder=flaky, client=client, files_per_partition=2, report=report
    )
    assert again == chunks
    assert report.partitions_reused == report.partitions == 3
    assert embedded(log) == first, "finished partitions are read back, not recomputed"


def test_an_interrupted_ingest_resumes_with_only_the_unfinished_partitions(tmp_path: Path) -> None:
    corpus = copy_corpus(tmp_path)
    log = tmp_path / "embedded.log"
    failing = LoggingEmbedder(log, fail_on="Ribosomes", failed_marker=tmp_path / "failed")
    with pytest.raises(RuntimeError, match="worker lost"):
        ingest_partitioned(corpus, tmp_path / "idx", CONFIG, embedder=failing, files_per_partition=2)
    done_before = len(embedded(log))
    assert done_before > 0, "partitions before the failure finished"

    report = ingest_partitioned(corpus, tmp_path / "idx", CONFIG, embedder=failing, files_per_partition=2)
    assert 0 < report.partitions_reused < report.partitions
    index = Index.open(tmp_path / "idx", embedder=HashEmbedder())
    # each chunk embedded once, by its partition (the sentence vectors are embedded when the index is written)
    chunk_texts = {c.text for c in index.chunks}
    assert len(index) == report.chunks and len([t for t in embedded(log) if t in chunk_texts]) == report.chunks
    index.close()

    # A changed file invalidates only its own partition.
    (corpus / "astronomy" / "sun.md").write_text("# Sun\n\nThe Sun is a G-type main-sequence star.\n")
    report = ingest_partitioned(corpus, tmp_path / "idx", CONFIG, embedder=failing, files_per_partition=2)
    assert report.partitions_reused == report.partitions - 1
    assert len(list((tmp_path / "idx" / "ingest-work").glob("*.done.json"))) == report.partitions


def test_partitioned_ingest_into_milvus_matches_the_folder_index(tmp_path: Path) -> None:
    pytest.importorskip("milvus_lite")
    from ragsieve.store.open import open_store

    corpus = copy_corpus(tmp_path)
    config = CONFIG.model_copy(update={"store": StoreConfig(backend="milvus")})
    ingest_partitioned(corpus, tmp_path / "m", config, embedder=HashEmbedder(), files_per_partition=2)
    folder = Index.build(corpus, tmp_path / "f", config=CONFIG, embedder=HashEmbedder())
    store = open_store(config, tmp_path / "m", HashEmbedder())
    try:
        assert sorted(c.id for c in store.chunks) == sorted(c.id for c in folder.chunks)  # type: ignore[attr-defined]
        for question in ("What do ribosomes build?", "largest planet"):
            dense = store.search(question, k=4, mode="dense")
            assert [h.chunk.id for h in dense] == [h.chunk.id for h in folder.search(question, k=4, mode="dense")]
        # Re-ingesting after a file is removed deletes its chunks from the collection.
        (corpus / "astronomy" / "moon.txt").unlink()
        ingest_partitioned(corpus, tmp_path / "m", config, embedder=HashEmbedder(), files_per_partition=2)
        store.close()
        store = open_store(config, tmp_path / "m", HashEmbedder())
        assert not [c for c in store.chunks if c.source.endswith("moon.txt")]  # type: ignore[attr-defined]
    finally:
        store.close()
        folder.close()


class CountingEmbedder(HashEmbedder):
    """Counts how often a model is built and warmed, as the bundled embedder's load would cost."""

    built = 0

    def __init__(self) -> None:
        super().__init__()
        type(self).built += 1


def test_workers_load_the_configured_embedder_once_and_keep_it(tmp_path: Path, client, monkeypatch) -> None:
    from ragsieve.store import ingest

    monkeypatch.setattr(ingest, "_WORKER_EMBEDDERS", {})
    monkeypatch.setattr(ingest, "load_embedder", lambda config=None: CountingEmbedder())
    CountingEmbedder.built = 0
    corpus = copy_corpus(tmp_path)
    ingest.warm_workers(client, CONFIG.embedder)
    warmed = CountingEmbedder.built
    assert warmed >= 1
    first, _ = compute_partitions(corpus, tmp_path / "w1", CONFIG, client=client, files_per_partition=1)
    again, _ = compute_partitions(corpus, tmp_path / "w2", CONFIG, client=client, files_per_partition=1)
    assert again == first and len({c.source for c in first}) > 2
    # Workers here share this process, so one model serves every partition of both ingests; the
    # only other builds are the references compute_partitions makes to name the model (never warmed).
    assert len(ingest._WORKER_EMBEDDERS) == 1
    assert CountingEmbedder.built - warmed == 2


def test_write_store_deletes_stale_chunks_by_id_batches(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("milvus_lite")
    from ragsieve.store import MilvusStore
    from ragsieve.store.ingest import write_store

    corpus = copy_corpus(tmp_path)
    chunks, vectors = compute_partitions(corpus, tmp_path / "work", CONFIG, embedder=HashEmbedder())
    store = MilvusStore(str(tmp_path / "m.db"), HashEmbedder())
    try:
        write_store(store, chunks, vectors, batch=2)
        assert len(store) == len(chunks)

        def whole_collection(self: MilvusStore) -> None:
            raise AssertionError("write_store read every chunk")

        monkeypatch.setattr(MilvusStore, "chunks", property(whole_collection))
        deletes: list[int] = []
        delete = MilvusStore.delete
        monkeypatch.setattr(MilvusStore, "delete", lambda self, ids: deletes.append(len(ids)) or delete(self, ids))
        kept = [c for c in chunks if c.domain != "astronomy"]
        gone = len(chunks) - len(kept)
        assert gone >= 3, "the fixture corpus must give at least two batches to delete"
        write_store(store, kept, np.stack([v for c, v in zip(chunks, vectors, strict=True) if c in kept]), batch=2)
        assert sorted(i for ids in store.iter_ids(batch_size=3) for i in ids) == sorted(c.id for c in kept)
        assert len(store) == len(kept) and deletes and max(deletes) <= 2 and sum(deletes) == gone
    finally:
        store.close()
