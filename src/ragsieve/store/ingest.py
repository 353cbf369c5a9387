"""Partitioned ingestion: load, chunk and embed groups of files in parallel, then write the store.

The corpus's sorted file list is cut into contiguous partitions. Each partition is loaded,
chunked and embedded on its own (in this process, on a Dask ``LocalCluster`` or on a cluster by
scheduler address) and its result kept in a work folder under a key made of its files' content
hashes, the ingest settings and the embedder. A re-run reuses every finished partition and
computes the rest, so an interrupted ingest resumes; a partition whose worker fails is retried.
The store is written once all partitions are in, in partition order, so the chunks and vectors
are the same as the single-process path's whatever the number of workers.

Example:
    >>> from ragsieve.store.ingest import ingest_partitioned            # doctest: +SKIP
    >>> report = ingest_partitioned("docs/", "my-index", PipelineConfig(), workers=2)  # doctest: +SKIP
    >>> report.partitions_reused, report.chunks                          # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.cluster import cluster_client
from ragsieve.config import EmbedderConfig, PipelineConfig
from ragsieve.embed import Embedder, load_embedder
from ragsieve.errors import InputError, RagsieveError
from ragsieve.io import atomic_path, atomic_write_json, atomic_write_jsonl, read_jsonl
from ragsieve.store.protocol import Store
from ragsieve.types import Chunk

logger = logging.getLogger(__name__)

__all__ = [
    "cluster_client",
    "compute_partitions",
    "ingest_partitioned",
    "warm_workers",
    "write_store",
]

WORK_DIR = "ingest-work"
# How often a failed partition is tried again on the cluster before the ingest gives up.
RETRIES = 2


@dataclass
class Partition:
    number: int
    files: list[str]
    key: str


@dataclass
class PartitionedReport:
    partitions: int = 0
    partitions_reused: int = 0
    chunks: int = 0
    files: int = 0
    workers: int = 0
    compute_seconds: float = 0.0
    write_seconds: float = 0.0
    seconds: float = 0.0
    backend: str = "folder"
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _settings_digest(config: PipelineConfig, embedder_name: str) -> str:
    from ragsieve.index.store import CHUNK_FORMAT

    ingest = config.ingest.model_dump(mode="json", exclude={"lock_timeout_s"})
    return json.dumps({"ingest": ingest, "embedder": embedder_name, "chunk_format": CHUNK_FORMAT}, sort_keys=True)


def plan_partitions(
    corpus: Path, config: PipelineConfig, embedder_name: str, files_per_partition: int
) -> tuple[Path, list[Partition], list[tuple[str, str]]]:
    """The corpus's base folder, its partitions (contiguous runs of the sorted files) and skipped links."""
    from ragsieve.ingest import file_hash, iter_files
    from ragsieve.ingest.loaders import safe_relpath

    if files_per_partition < 1:
        raise InputError(f"files per partition must be at least 1, got {files_per_partition}")
    if not corpus.exists():
        raise InputError(f"{corpus} does not exist; pass the folder to ingest")
    base = corpus if corpus.is_dir() else corpus.parent
    skipped: list[tuple[str, str]] = []
    files = iter_files(corpus, follow_symlinks=config.ingest.follow_symlinks, skipped=skipped)
    if not files:
        raise InputError(f"{corpus} holds no supported files to ingest")
    settings = _settings_digest(config, embedder_name)
    parts = []
    for number, start in enumerate(range(0, len(files), files_per_partition)):
        group = files[start : start + files_per_partition]
        digest = hashlib.sha256(settings.encode())
        rels = []
        for path in group:
            rel = safe_relpath(path.relative_to(base))
            rels.append(rel)
            digest.update(f"\0{rel}\0{file_hash(path)}".encode())
        parts.append(Partition(number, rels, digest.hexdigest()[:32]))
    return base, parts, skipped


# One embedder per worker process, keyed by its config: a production ingest of many partitions
# loads the model once per worker, not once per partition.
_WORKER_EMBEDDERS: dict[str, Embedder] = {}
_WORKER_LOCK = threading.Lock()


def _worker_embedder(embedder_json: str) -> Embedder:
    # Threads of one worker (or in-process workers) share the model rather than each loading it.
    with _WORKER_LOCK:
        if embedder_json not in _WORKER_EMBEDDERS:
            embedder = load_embedder(EmbedderConfig.model_validate_json(embedder_json))
            embedder.warm_up()
            _WORKER_EMBEDDERS[embedder_json] = embedder
        return _WORKER_EMBEDDERS[embedder_json]


def _warm_worker(embedder_json: str) -> str:
    return _worker_embedder(embedder_json).model_name


def warm_workers(client: Any, config: EmbedderConfig) -> None:
    """Load the embedder ``config`` describes on every worker of ``client`` now, once per worker process.

    Partitions find it there; a worker that joins later loads it with its first partition.
    """
    client.run(_warm_worker, config.model_dump_json())


def _built_from(embedder: Embedder, config: EmbedderConfig) -> bool:
    """Whether ``embedder`` is the one ``config`` builds, so that workers may build (and keep) their own."""
    try:
        reference = load_embedder(config)
    except RagsieveError:
        return False
    return type(embedder) is type(reference) and embedder.to_dict() == reference.to_dict()


def run_partition(base: str, part: Partition, config_json: str, work_dir: str, embedder: Embedder | None = None) -> str:
    """Load, chunk and embed one partition into ``work_dir``; returns its key. Safe to run twice."""
    from ragsieve.index.store import _embed_all, chunk_documents, entity_extractor
    from ragsieve.ingest import load_file
    from ragsieve.ingest.loaders import _SkipFile

    config = PipelineConfig.model_validate_json(config_json)
    if embedder is None:
        embedder = _worker_embedder(config.embedder.model_dump_json())
    else:
        # Idempotent: a shipped embedder is one object per worker, so this loads it once there.
        embedder.warm_up()
    extract = entity_extractor(config.ingest)
    chunks: list[Chunk] = []
    skipped: list[tuple[str, str]] = []
    root = Path(base)
    for rel in part.files:
        try:
            docs = load_file(root / rel, root, config.ingest, warnings=skipped)
        except _SkipFile as exc:
            skipped.append((rel, str(exc)))
            continue
        except OSError as exc:
            skipped.append((rel, f"unreadable ({exc.strerror}); check permissions"))
            continue
        chunks.extend(chunk_documents(docs, config.ingest, extract))
    vectors = (
        _embed_all([c.text for c in chunks], embedder, None)
        if chunks
        else np.zeros((0, embedder.dim), dtype=np.float32)
    )
    out = Path(work_dir)
    atomic_write_jsonl(out / f"{part.key}.chunks.jsonl", (c.to_dict() for c in chunks))
    with atomic_path(out / f"{part.key}.npy") as tmp, open(tmp, "wb") as fh:
        np.save(fh, vectors.astype(np.float32))
        fh.flush()
        os.fsync(fh.fileno())
    # Written last: its presence is what marks the partition finished.
    atomic_write_json(out / f"{part.key}.done.json", {"files": part.files, "chunks": len(chunks), "skipped": skipped})
    return part.key


def _finished(work: Path, part: Partition) -> bool:
    return all((work / f"{part.key}{s}").is_file() for s in (".done.json", ".chunks.jsonl", ".npy"))


def _read_partition(work: Path, key: str) -> tuple[list[Chunk], np.ndarray, list[tuple[str, str]]]:
    chunks = [Chunk.from_dict(row) for row in read_jsonl(work / f"{key}.chunks.jsonl")]
    vectors = np.load(work / f"{key}.npy")
    done = json.loads((work / f"{key}.done.json").read_text(encoding="utf-8"))
    return chunks, vectors, [(str(a), str(b)) for a, b in done.get("skipped", [])]


def compute_partitions(
    corpus: str | Path,
    work_dir: str | Path,
    config: PipelineConfig,
    *,
    embedder: Embedder | None = None,
    client: Any = None,
    files_per_partition: int = 32,
    progress: Callable[[str, int, int], None] | None = None,
    report: PartitionedReport | None = None,
) -> tuple[list[Chunk], np.ndarray]:
    """Every chunk of ``corpus`` and its vector, in file order, computing only unfinished partitions.

    ``client``: a ``dask.distributed.Client``; ``None`` computes the partitions in this process.
    ``embedder``: used in this process. On a cluster, each worker builds ``config.embedder`` once and
    keeps it when ``embedder`` is ``None`` or is the one that config builds; any other embedder is
    sent once to each worker (it must pickle).
    """
    report = report if report is not None else PartitionedReport()
    start = time.perf_counter()
    name = embedder.model_name if embedder is not None else load_embedder(config.embedder).model_name
    base, parts, skipped = plan_partitions(Path(corpus), config, name, files_per_partition)
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    todo = [p for p in parts if not _finished(work, p)]
    report.partitions, report.partitions_reused = len(parts), len(parts) - len(todo)
    report.files = sum(len(p.files) for p in parts)
    config_json = config.model_dump_json()
    if todo and client is None:
        local = embedder if embedder is not None else load_embedder(config.embedder)
        for n, part in enumerate(todo, 1):
            run_partition(str(base), part, config_json, str(work), local)
            if progress:
                progress("partitions", n, len(todo))
    elif todo:
        from dask.distributed import as_completed

        shipped: Any = None
        if embedder is None or _built_from(embedder, config.embedder):
            warm_workers(client, config.embedder)
        else:
            # Sent once to each worker and kept there, rather than once with every partition.
            shipped = client.scatter(embedder, broadcast=True, hash=False)
        futures = [
            client.submit(
                run_partition, str(base), p, config_json, str(work), shipped, key=f"ingest-{p.key}", retries=RETRIES
            )
            for p in todo
        ]
        for n, _ in enumerate(as_completed(futures), 1):
            if progress:
                progress("partitions", n, len(todo))
        client.gather(futures)
    report.compute_seconds = time.perf_counter() - start

    chunks: list[Chunk] = []
    vectors: list[np.ndarray] = []
    report.skipped = list(skipped)
    for part in parts:
        c, v, s = _read_partition(work, part.key)
        chunks.extend(c)
        vectors.append(v)
        report.skipped.extend(s)
    _remove_stale(work, {p.key for p in parts})
    from ragsieve.ingest.loaders import warn_file_type_domains

    warn_file_type_domains({c.domain for c in chunks}, config.ingest)
    report.chunks = len(chunks)
    dim = vectors[0].shape[1] if vectors else 0
    return chunks, (np.concatenate(vectors) if vectors else np.zeros((0, dim), dtype=np.float32))


def _remove_stale(work: Path, keep: set[str]) -> None:
    """Drop partitions of files that changed or left the corpus, so the work folder does not grow."""
    for path in work.iterdir():
        key = path.name.split(".", 1)[0]
        if path.is_file() and key not in keep and not path.name.startswith("."):
            path.unlink()


def write_store(store: Store, chunks: Sequence[Chunk], vectors: np.ndarray, batch: int = 2000) -> None:
    """Make a Milvus-like ``store`` hold exactly ``chunks``: upsert in order, then delete ids gone from the corpus.

    The ids already stored are read in batches (never the whole collection's rows at once) and
    the chunks of files that changed or left the corpus are deleted ``batch`` ids at a time.
    """
    wanted = {c.id for c in chunks}
    stale: list[str] = []
    if len(store):
        for ids in store.iter_ids(batch_size=max(batch, 10_000)):  # type: ignore[attr-defined]
            stale.extend(i for i in ids if i not in wanted)
    for start in range(0, len(chunks), batch):
        store.upsert(chunks[start : start + batch], vectors[start : start + batch])
    for start in range(0, len(stale), batch):
        store.delete(stale[start : start + batch])
    if stale:
        logger.info("deleted %d chunks of changed or removed files", len(stale))


def ingest_partitioned(
    corpus: str | Path,
    index_dir: str | Path,
    config: PipelineConfig,
    *,
    embedder: Embedder | None = None,
    client: Any = None,
    files_per_partition: int = 32,
    progress: Callable[[str, int, int], None] | None = None,
) -> PartitionedReport:
    """Ingest ``corpus`` into the store ``config.store`` names, over ``index_dir``, partition by partition.

    The work folder ``<index_dir>/ingest-work`` keeps finished partitions for a re-run.
    """
    from ragsieve.index import Index, storage
    from ragsieve.store.open import milvus_uri, open_store, write_store_file

    start = time.perf_counter()
    report = PartitionedReport(backend=config.store.backend)
    target = storage.prepare_target(Path(index_dir), Path(corpus))
    embedder = embedder if embedder is not None else load_embedder(config.embedder)
    if client is not None:
        report.workers = len(client.scheduler_info().get("workers", {}))
    # Partitions are written atomically under content keys, so computing them needs no lock; the
    # folder index takes its own writer lock to publish, Milvus is locked here for the whole write.
    chunks, vectors = compute_partitions(
        corpus,
        target / WORK_DIR,
        config,
        embedder=embedder,
        client=client,
        files_per_partition=files_per_partition,
        progress=progress,
        report=report,
    )
    if not chunks:
        raise InputError(f"no text could be ingested from {corpus}; see the skipped files")
    write_start = time.perf_counter()
    if config.store.backend == "folder":
        Index.from_chunks(
            chunks, target, embedder=embedder, config=config, embeddings=vectors, corpus=Path(corpus)
        ).close()
    else:
        with storage.writer_lock(target, config.ingest.lock_timeout_s):
            store = open_store(config, target, embedder)
            try:
                write_store(store, chunks, vectors)
            finally:
                store.close()
            write_store_file(target, config.store, milvus_uri(config.store, target))
    report.write_seconds = time.perf_counter() - write_start
    report.seconds = time.perf_counter() - start
    return report
