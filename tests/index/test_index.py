from __future__ import annotations

import json
import shutil

import bm25s
import numpy as np
import pytest
from tests.helpers import HashEmbedder, copy_corpus

from ragsieve.config import ChunkingConfig, IngestConfig, PipelineConfig, RetrievalConfig
from ragsieve.errors import IndexStoreError, InputError
from ragsieve.index import BuildReport, Index
from ragsieve.index.backends import bm25_tokenize
from ragsieve.io import atomic_write_json
from ragsieve.types import Chunk


@pytest.fixture()
def built(tmp_path, embedder):
    corpus = copy_corpus(tmp_path)
    report = BuildReport()
    index = Index.build(corpus, tmp_path / "idx", embedder=embedder, report=report)
    return corpus, index, report


def test_build_partitions_by_folder_and_reports(built):
    _, index, report = built
    assert index.domains == ["astronomy", "biology"]
    assert index.partitioned
    assert report.files_added == 6 and report.skipped == []
    assert report.chunks == len(index) == report.chunks_embedded
    part = index.generation_dir / "partitions" / index.manifest["partition_dirs"]["astronomy"]
    assert part.name.startswith("astronomy-") and (part / "dense.faiss").is_file()
    assert index.embeddings.shape == (len(index), 384)
    assert all(c.metadata.get("entities") is not None for c in index.chunks)


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
def test_each_mode_finds_the_relevant_chunk(built, mode):
    _, index, _ = built
    hits = index.search("Which organelle produces ATP energy in the cell?", k=3, mode=mode)
    assert hits[0].chunk.doc_id == "biology/cells.html"
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    expected = {"dense": {"dense"}, "sparse": {"sparse"}, "hybrid": {"fused"}}[mode]
    assert expected <= set(hits[0].scores)


def test_domain_partition_and_where_filter_restrict_results(built):
    _, index, _ = built
    for hits in (
        index.search("energy", k=10, domains=["astronomy"]),
        index.search("energy", k=10, where={"domain": "astronomy"}),
    ):
        assert hits and {h.chunk.domain for h in hits} == {"astronomy"}
    hits = index.search("energy", k=10, where={"source": "example-bio.org"})
    assert hits and {h.chunk.source for h in hits} == {"example-bio.org"}
    with pytest.raises(InputError, match="unknown domain 'geology'"):
        index.search("energy", domains=["geology"])


def test_partitioned_dense_search_equals_filtered_global_search(built):
    _, index, _ = built
    a = index.search("planets and storms", k=4, mode="dense", domains=["astronomy"])
    b = index.search("planets and storms", k=4, mode="dense", where={"domain": "astronomy"})
    assert [h.chunk.id for h in a] == [h.chunk.id for h in b]
    assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-6)


def test_dense_scores_are_cosine_similarities(built, embedder):
    _, index, _ = built
    query = "the red planet"
    hits = index.search(query, k=len(index), mode="dense")
    q = embedder.embed([query])[0]
    for h in hits:
        assert h.score == pytest.approx(float(index.embeddings[index.row(h.chunk.id)] @ q), abs=1e-5)


def test_sparse_scores_match_bm25s_directly(built):
    """Parity: our sparse retriever returns what bm25s returns on the same corpus."""
    _, index, _ = built
    texts = [c.text for c in index.chunks]
    ref = bm25s.BM25()
    ref.index(
        bm25s.tokenize(texts, stopwords="en", stemmer=__import__("Stemmer").Stemmer("english"), show_progress=False),
        show_progress=False,
    )
    query = "moon landing astronaut"
    ids, scores = ref.retrieve([bm25_tokenize([query])[0]], k=5, show_progress=False)
    expected = [(texts[i], s) for i, s in zip(ids[0], scores[0], strict=True) if s > 0]
    got = [(h.chunk.text, h.score) for h in index.search(query, k=5, mode="sparse")]
    assert [t for t, _ in got] == [t for t, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected])


def test_weighted_fusion_mode(built):
    _, index, _ = built
    hits = index.search("photosynthesis light", k=3, retrieval=RetrievalConfig(fusion="weighted", dense_weight=0.5))
    assert hits[0].chunk.doc_id == "biology/photosynthesis.md"
    assert hits[0].scores["fused"] <= 1.0 + 1e-9


def test_reingest_skips_unchanged_updates_changed_removes_deleted(built, embedder):
    corpus, index, _ = built
    (corpus / "astronomy" / "moon.txt").write_text("The Moon has no atmosphere to speak of.")
    (corpus / "biology" / "glossary.jsonl").unlink()
    (corpus / "biology" / "new.md").write_text("# Viruses\n\nA virus replicates only inside living cells.")
    report = BuildReport()
    index2 = Index.build(corpus, index.dir, embedder=embedder, report=report)
    assert (report.files_unchanged, report.files_updated, report.files_added, report.files_removed) == (4, 1, 1, 1)
    assert report.chunks_embedded == 2
    ids = {c.id for c in index2.chunks}
    assert "biology/new.md:0" in ids and not any(i.startswith("biology/glossary.jsonl") for i in ids)
    assert "atmosphere" in index2.get("astronomy/moon.txt:0").text


def test_changed_chunking_rechunks_everything(built, embedder):
    corpus, index, _ = built
    cfg = PipelineConfig(ingest=IngestConfig(chunking=ChunkingConfig(unit="sentence")))
    index2 = Index.build(corpus, index.dir, embedder=embedder, config=cfg)
    assert len(index2) > len(index)
    assert all(c.text.count(". ") == 0 or c.text.endswith(".") for c in index2.chunks)


def test_interrupted_build_leaves_previous_index_usable(built, embedder, monkeypatch):
    corpus, index, _ = built
    before = [c.id for c in index.chunks]
    (corpus / "astronomy" / "extra.txt").write_text("Saturn has rings of ice.")

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("ragsieve.index.store.SparseBackend.build", boom)
    with pytest.raises(KeyboardInterrupt):
        Index.build(corpus, index.dir, embedder=embedder)
    monkeypatch.undo()
    reopened = Index.open(index.dir, embedder=embedder)
    assert reopened.generation == index.generation
    assert [c.id for c in reopened.chunks] == before
    assert reopened.search("Sun", k=1)
    # The half-built generation is cleaned up by the next build.
    rebuilt = Index.build(corpus, index.dir, embedder=embedder)
    assert "astronomy/extra.txt:0" in {c.id for c in rebuilt.chunks}
    assert not list((index.dir / "generations").glob(".building-*"))


def test_missing_corrupt_and_mismatched_indexes_are_clear_errors(built, tmp_path, embedder):
    _, index, _ = built
    with pytest.raises(IndexStoreError, match="no index at"):
        Index.open(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(IndexStoreError, match="not a ragsieve index"):
        Index.open(tmp_path / "empty")
    with pytest.raises(IndexStoreError, match="built with embedding model"):
        Index.open(index.dir, embedder=HashEmbedder())
    broken = tmp_path / "broken"
    shutil.copytree(index.dir, broken)
    gen = broken / "generations" / index.generation
    (gen / "manifest.json").write_text("{not json")
    with pytest.raises(IndexStoreError, match="manifest.json does not match"):
        Index.open(broken, embedder=embedder)
    shutil.rmtree(broken)
    shutil.copytree(index.dir, broken)
    (gen / "embeddings.npy").write_bytes(b"garbage")
    with pytest.raises(IndexStoreError, match="embeddings.npy has 7 bytes"):
        Index.open(broken, embedder=embedder)
    shutil.copy(index.dir / "generations" / index.generation / "embeddings.npy", gen / "embeddings.npy")
    shutil.rmtree(gen / "global")
    with pytest.raises(IndexStoreError, match="global/.* is missing; re-ingest"):
        Index.open(broken, embedder=embedder)


def _format_one_copy(index: Index, dest) -> None:
    """What an older ragsieve wrote: the same files at the top level, a version-1 manifest."""
    shutil.copytree(index.generation_dir, dest)
    shutil.rmtree(dest / "sentences")  # stored sentence vectors came after format 1
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest.pop("checksums")
    manifest.pop("sentence_vectors")
    manifest.pop("generation")
    manifest["format_version"] = 1
    manifest["embedder"]["config"] = {"backend": "openai", "base_url": "http://127.0.0.1:9", "api_key_env": "HOME"}
    (dest / "manifest.json").write_text(json.dumps(manifest))


def test_a_format_one_index_is_searched_then_upgraded_by_a_reingest(tmp_path):
    emb = HashEmbedder()
    corpus = copy_corpus(tmp_path)
    cfg = PipelineConfig(ingest=IngestConfig(extract_entities=False))
    current = Index.build(corpus, tmp_path / "v2", embedder=emb, config=cfg)
    legacy = tmp_path / "old"
    _format_one_copy(current, legacy)
    (legacy / "source_weights.json").write_text('{"weights": {"x": 0.5}}')
    (legacy / "my-notes.txt").write_text("a file the user put there")
    old = Index.open(legacy, embedder=emb)
    for domains in (None, ["astronomy"]):
        assert [h.chunk.id for h in old.search("planet storms", k=3, domains=domains)] == [
            h.chunk.id for h in current.search("planet storms", k=3, domains=domains)
        ]
    assert Index.exists(legacy) and old.generation == "" and old.generation_dir == legacy

    report = BuildReport()
    upgraded = Index.build(corpus, legacy, embedder=emb, config=cfg, report=report)
    assert report.chunks_embedded == 0 and report.files_unchanged == report.files_seen  # reused the old vectors
    assert upgraded.generation and (legacy / ".ragsieve-index").is_file()
    assert sorted(p.name for p in legacy.iterdir()) == [
        ".ragsieve-index", ".writer.lock", "CURRENT", "generations", "my-notes.txt", "router", "source_weights.json"
    ]  # router: trained by the ingest of this two-domain corpus
    assert upgraded.source_weights == {"x": 0.5}
    assert [h.chunk.id for h in upgraded.search("planet storms", k=3)] == [
        h.chunk.id for h in current.search("planet storms", k=3)
    ]


def test_a_folder_that_only_looks_like_a_format_one_index_is_not_replaced(tmp_path):
    other = tmp_path / "other-tool-output"
    other.mkdir()
    for name, text in [("manifest.json", '{"format_version": 1}'), ("chunks.jsonl", "{}"), ("embeddings.npy", "x")]:
        (other / name).write_text(text)
    with pytest.raises(IndexStoreError, match="not a ragsieve index"):
        Index.from_chunks([Chunk(id="a", text="x", doc_id="a", source="s")], other, embedder=HashEmbedder())
    assert sorted(p.name for p in other.iterdir()) == ["chunks.jsonl", "embeddings.npy", "manifest.json"]


@pytest.mark.parametrize("query, message", [("", "empty"), ("   ", "empty"), ("x" * 3000, "over the limit")])
def test_bad_queries(built, query, message):
    _, index, _ = built
    with pytest.raises(InputError, match=message):
        index.search(query)


def test_from_chunks_and_source_weight_pruning(tmp_path):
    emb = HashEmbedder()
    chunks = [
        Chunk(
            id=f"c{i}", text=f"fact number {i} about rivers", doc_id=f"d{i}", source="good.org" if i % 2 else "bad.net"
        )
        for i in range(10)
    ]
    index = Index.from_chunks(chunks, tmp_path / "idx", embedder=emb)
    assert index.domains == ["default"] and not index.partitioned
    atomic_write_json(
        index.dir / "source_weights.json", {"weights": {"good.org": 0.9, "bad.net": 0.1}, "threshold": 0.5}
    )
    index = Index.open(index.dir, embedder=emb)
    hits = index.search("rivers", k=10, prune_threshold=0.5)
    assert hits and {h.chunk.source for h in hits} == {"good.org"}
    with pytest.raises(InputError, match="unique"):
        Index.from_chunks(chunks + chunks[:1], tmp_path / "dup", embedder=emb)


def test_hnsw_and_ivf_configs_build(tmp_path):
    emb = HashEmbedder()
    chunks = [Chunk(id=f"c{i}", text=f"item {i} word{i % 7}", doc_id=f"d{i}", source="s") for i in range(300)]
    for kind in ("hnsw", "ivf"):
        cfg = PipelineConfig.model_validate({"dense_index": {"kind": kind, "nlist": 8, "nprobe": 8}})
        index = Index.from_chunks(chunks, tmp_path / kind, embedder=emb, config=cfg)
        manifest = json.loads((index.generation_dir / "manifest.json").read_text())
        assert manifest["dense_index"]["kind"] == kind
        hits = index.search("item 5 word5", k=5, mode="dense")
        assert len(hits) == 5 and np.isfinite([h.score for h in hits]).all()


def test_domains_that_sanitise_alike_or_look_like_paths_get_their_own_folders(tmp_path):
    emb = HashEmbedder()
    domains = ["my docs", "my_docs", "..", "/", "a/../../b", "\u00e9t\u00e9"]
    chunks = [
        Chunk(id=f"c{i}", text=f"note {i} about {d}", doc_id=f"d{i}", source="s", domain=d)
        for i, d in enumerate(domains)
    ]
    index = Index.from_chunks(chunks, tmp_path / "idx", embedder=emb)
    folders = index.manifest["partition_dirs"]
    assert len(set(folders.values())) == len(domains)
    assert all("/" not in f and f not in {".", ".."} for f in folders.values())
    parts = index.generation_dir / "partitions"
    assert sorted(p.name for p in parts.iterdir()) == sorted(folders.values())
    for i, d in enumerate(domains):
        assert [h.chunk.id for h in index.search(f"note {i}", k=1, domains=[d], mode="sparse")] == [f"c{i}"]
    assert not (tmp_path / "b").exists()


def test_ingest_keeps_good_jsonl_lines_and_non_utf8_names(tmp_path):
    import os
    import sys

    corpus = tmp_path / "corpus"
    (corpus / "my docs").mkdir(parents=True)
    (corpus / "my_docs").mkdir()
    (corpus / "my docs" / "a.txt").write_text("Alpha text about rivers.")
    (corpus / "my_docs" / "b.txt").write_text("Beta text about lakes.")
    (corpus / "my_docs" / "r.jsonl").write_text('{"id": "1", "text": "good"}\n{oops\n{"id": "3", "text": "ok"}\n')
    if sys.platform == "linux":
        with open(os.fsencode(corpus / "my_docs") + b"/caf\xe9.txt", "wb") as fh:
            fh.write(b"Coffee notes.")
    report = BuildReport()
    index = Index.build(corpus, tmp_path / "idx", embedder=HashEmbedder(), report=report)
    ids = {c.id for c in index.chunks}
    assert {"my_docs/r.jsonl#1:0", "my_docs/r.jsonl#3:0"} <= ids
    assert report.skipped == [("my_docs/r.jsonl:2", report.skipped[0][1])]
    assert set(index.domains) == {"my docs", "my_docs"}
    if sys.platform == "linux":
        assert "my_docs/caf\\xe9.txt:0" in ids
        assert Index.open(index.dir, embedder=HashEmbedder()).get("my_docs/caf\\xe9.txt:0").text == "Coffee notes."
