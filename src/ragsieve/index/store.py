"""The on-disk index: chunks, embeddings, a global dense+sparse index and one per domain.

Layout of an index directory (``manifest.json`` is versioned)::

    manifest.json        format version, embedder, chunking, counts, domains
    files.json           ingested file -> content hash and chunk ids (incremental re-ingest)
    chunks.jsonl         one Chunk per line, row i = embeddings[i]
    embeddings.npy       float32 (n, dim), memory-mapped on open
    global/              dense.faiss + bm25/ over every chunk
    partitions/<domain>/ ids.npy (global rows) + dense.faiss + bm25/
    source_weights.json  optional, written by the importance stage
    router/              optional, written by the routing stage

Every build writes a fresh directory beside the old one and swaps it in, so an
interrupted build leaves the previous index usable.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragsieve.config import IngestConfig, PipelineConfig, RetrievalConfig
from ragsieve.embed import Embedder, load_embedder
from ragsieve.errors import IndexStoreError, InputError
from ragsieve.index.backends import DenseBackend, SparseBackend, bm25_tokenize
from ragsieve.index.filters import where_mask
from ragsieve.index.fusion import reciprocal_rank_fusion, top_k, weighted_score_fusion
from ragsieve.io import atomic_directory, atomic_write_json
from ragsieve.types import Chunk, SearchHit

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
SearchMode = Literal["dense", "sparse", "hybrid"]
ProgressFn = Callable[[str, int, int], None]


def _chunk_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _safe_name(domain: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in domain) or "_"


@dataclass
class BuildReport:
    """What a build did; the CLI prints it."""

    files_seen: int = 0
    files_unchanged: int = 0
    files_updated: int = 0
    files_added: int = 0
    files_removed: int = 0
    chunks: int = 0
    chunks_embedded: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    embed_seconds: float = 0.0  # the embedder's share of ``seconds``, for chunks/s

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "skipped": [{"path": p, "reason": r} for p, r in self.skipped]}


class _Partition:
    def __init__(self, rows: np.ndarray, dense: DenseBackend, sparse: SparseBackend) -> None:
        self.rows = rows  # local row -> global row
        self.dense = dense
        self.sparse = sparse


class Index:
    """A searchable collection of chunks with dense, sparse and hybrid retrieval.

    Example:
        >>> from ragsieve.index import Index
        >>> from ragsieve.types import Chunk
        >>> chunks = [Chunk(id="a", text="Graphene is one layer of carbon.", doc_id="a", source="a.md")]
        >>> index = Index.from_chunks(chunks, "/tmp/ragsieve-doc-index")
        >>> index.search("carbon sheet", k=1)[0].chunk.id
        'a'
    """

    def __init__(
        self,
        directory: Path,
        chunks: list[Chunk],
        embeddings: np.ndarray,
        manifest: dict[str, Any],
        embedder: Embedder,
    ) -> None:
        self.dir = directory
        self.chunks = chunks
        self.embeddings = embeddings
        self.manifest = manifest
        self.embedder = embedder
        self._by_id = {c.id: i for i, c in enumerate(chunks)}
        self._global: _Partition | None = None
        self._partitions: dict[str, _Partition] = {}
        self._mask_cache: dict[str, np.ndarray] = {}
        self._domain_of_row = np.array([c.domain for c in chunks], dtype=object)
        self.source_weights: dict[str, float] | None = self._read_source_weights()

    # ------------------------------------------------------------------ properties
    @property
    def domains(self) -> list[str]:
        return list(self.manifest.get("domains", []))

    @property
    def partitioned(self) -> bool:
        return bool(self.manifest.get("partitioned"))

    def __len__(self) -> int:
        return len(self.chunks)

    def get(self, chunk_id: str) -> Chunk:
        try:
            return self.chunks[self._by_id[chunk_id]]
        except KeyError:
            raise InputError(f"no chunk with id {chunk_id!r} in the index at {self.dir}") from None

    def row(self, chunk_id: str) -> int:
        return self._by_id[chunk_id]

    # ------------------------------------------------------------------ building
    @classmethod
    def from_chunks(
        cls,
        chunks: Sequence[Chunk],
        index_dir: str | Path,
        embedder: Embedder | None = None,
        config: PipelineConfig | None = None,
        embeddings: np.ndarray | None = None,
        progress: ProgressFn | None = None,
    ) -> Index:
        """Build and save an index over ready-made chunks (e.g. a dataset's sentences).

        ``embeddings`` may be passed when already computed (row i for chunk i).
        """
        config = config or PipelineConfig()
        embedder = embedder or load_embedder(config.embedder)
        chunks = list(chunks)
        ids = [c.id for c in chunks]
        if len(set(ids)) != len(ids):
            raise InputError("chunk ids must be unique; found duplicates")
        if embeddings is None:
            embeddings = _embed_all([c.text for c in chunks], embedder, progress)
        manifest_extra = {"source": "chunks"}
        return cls._write(Path(index_dir), chunks, embeddings, embedder, config, manifest_extra, progress)

    @classmethod
    def build(
        cls,
        corpus_dir: str | Path,
        index_dir: str | Path,
        config: PipelineConfig | None = None,
        embedder: Embedder | None = None,
        progress: ProgressFn | None = None,
        report: BuildReport | None = None,
    ) -> Index:
        """Ingest a folder into ``index_dir``; re-ingesting reuses unchanged files' chunks
        and embeddings, re-chunks changed files and drops deleted ones."""
        from ragsieve.ingest import chunk_text, file_hash, iter_files, load_file
        from ragsieve.ingest.loaders import _SkipFile

        start = time.perf_counter()
        config = config or PipelineConfig()
        report = report if report is not None else BuildReport()
        corpus = Path(corpus_dir)
        if not corpus.exists():
            raise InputError(f"{corpus} does not exist; pass the folder to ingest")
        embedder = embedder or load_embedder(config.embedder)
        index_dir = Path(index_dir)

        previous: Index | None = None
        if (index_dir / "manifest.json").exists():
            try:
                previous = cls.open(index_dir, embedder=embedder)
            except IndexStoreError as exc:
                if "built with" in str(exc):
                    raise
                logger.warning("existing index at %s is unusable (%s); rebuilding from scratch", index_dir, exc)
        same_chunking = previous is not None and previous.manifest.get("ingest") == config.ingest.model_dump(
            mode="json"
        )
        old_files: dict[str, dict[str, Any]] = previous.manifest.get("files", {}) if previous and same_chunking else {}

        files = iter_files(corpus)
        if not files:
            raise InputError(f"{corpus} holds no supported files to ingest")
        base = corpus if corpus.is_dir() else corpus.parent
        new_files: dict[str, dict[str, Any]] = {}
        chunks: list[Chunk] = []
        extract = _entity_extractor(config.ingest)
        for n, path in enumerate(files, 1):
            rel = path.relative_to(base).as_posix()
            report.files_seen += 1
            try:
                digest = file_hash(path)
            except OSError as exc:
                report.skipped.append((rel, f"unreadable ({exc.strerror}); check permissions"))
                logger.warning("skipping %s: unreadable", rel)
                continue
            old = old_files.get(rel)
            if previous is not None and old is not None and old["hash"] == digest:
                chunks.extend(previous.get(cid) for cid in old["chunks"])
                new_files[rel] = old
                report.files_unchanged += 1
            else:
                try:
                    docs = load_file(path, base, config.ingest)
                except _SkipFile as exc:
                    report.skipped.append((rel, str(exc)))
                    logger.warning("skipping %s: %s", rel, exc)
                    continue
                except OSError as exc:
                    report.skipped.append((rel, f"unreadable ({exc.strerror}); check permissions"))
                    continue
                file_chunks = []
                for doc in docs:
                    pieces = chunk_text(
                        doc.text,
                        config.ingest.chunking.max_tokens,
                        config.ingest.chunking.overlap_tokens,
                        config.ingest.chunking.unit,
                    )
                    for piece in pieces:
                        metadata = dict(doc.metadata)
                        if extract is not None:
                            metadata["entities"] = extract(piece.text)
                        file_chunks.append(
                            Chunk(
                                id=f"{doc.doc_id}:{piece.position}",
                                text=piece.text,
                                doc_id=doc.doc_id,
                                source=doc.source,
                                domain=doc.domain,
                                title=doc.title,
                                position=piece.position,
                                metadata=metadata,
                            )
                        )
                chunks.extend(file_chunks)
                new_files[rel] = {"hash": digest, "chunks": [c.id for c in file_chunks]}
                if rel in old_files:
                    report.files_updated += 1
                else:
                    report.files_added += 1
            if progress:
                progress("load", n, len(files))
        report.files_removed = len(set(old_files) - set(new_files))
        if not chunks:
            raise InputError(f"no text could be ingested from {corpus}; see the skipped files above")
        ids = [c.id for c in chunks]
        if len(set(ids)) != len(ids):
            dupes = sorted({i for i in ids if ids.count(i) > 1})[:5]
            raise InputError(f"duplicate chunk ids {dupes}; give records unique values in ingest.id_field")

        # Reuse embeddings of chunks whose text is unchanged; embed only the rest.
        reuse: dict[str, np.ndarray] = {}
        if previous is not None:
            for i, c in enumerate(previous.chunks):
                reuse.setdefault(_chunk_key(c.text), previous.embeddings[i])
        dim = embedder.dim
        embeddings = np.empty((len(chunks), dim), dtype=np.float32)
        todo = []
        for i, c in enumerate(chunks):
            vec = reuse.get(_chunk_key(c.text))
            if vec is not None and vec.shape == (dim,):
                embeddings[i] = vec
            else:
                todo.append(i)
        if todo:
            embed_start = time.perf_counter()
            embeddings[todo] = _embed_all([chunks[i].text for i in todo], embedder, progress)
            report.embed_seconds = time.perf_counter() - embed_start
        report.chunks = len(chunks)
        report.chunks_embedded = len(todo)
        extra = {"source": str(corpus.resolve()), "files": new_files}
        index = cls._write(index_dir, chunks, embeddings, embedder, config, extra, progress, previous)
        report.seconds = time.perf_counter() - start
        return index

    @classmethod
    def _write(
        cls,
        index_dir: Path,
        chunks: list[Chunk],
        embeddings: np.ndarray,
        embedder: Embedder,
        config: PipelineConfig,
        extra: dict[str, Any],
        progress: ProgressFn | None,
        previous: Index | None = None,
    ) -> Index:
        if embeddings.shape[0] != len(chunks):
            raise InputError(f"{embeddings.shape[0]} embeddings for {len(chunks)} chunks")
        domains = sorted({c.domain for c in chunks})
        partitioned = len(domains) > 1
        with atomic_directory(index_dir) as tmp:
            with open(tmp / "chunks.jsonl", "w", encoding="utf-8") as fh:
                for c in chunks:
                    fh.write(json.dumps(c.to_dict(), ensure_ascii=False) + "\n")
            np.save(tmp / "embeddings.npy", np.ascontiguousarray(embeddings, dtype=np.float32))
            texts = [c.text for c in chunks]
            groups: list[tuple[Path, np.ndarray]] = [(tmp / "global", np.arange(len(chunks)))]
            if partitioned:
                domain_arr = np.array([c.domain for c in chunks], dtype=object)
                for d in domains:
                    groups.append((tmp / "partitions" / _safe_name(d), np.flatnonzero(domain_arr == d)))
            for n, (folder, rows) in enumerate(groups, 1):
                folder.mkdir(parents=True)
                np.save(folder / "ids.npy", rows.astype(np.int64))
                DenseBackend.build(embeddings[rows], config.dense_index).save(folder)
                SparseBackend.build([texts[i] for i in rows]).save(folder)
                if progress:
                    progress("index", n, len(groups))
            # Artefacts of other stages stored with the index survive a rebuild.
            if previous is not None:
                for name in ("source_weights.json", "router"):
                    src = previous.dir / name
                    if src.exists():
                        import shutil

                        (shutil.copytree if src.is_dir() else shutil.copy2)(src, tmp / name)
            manifest = {
                "format_version": FORMAT_VERSION,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "embedder": {
                    "model_name": embedder.model_name,
                    "dim": int(embeddings.shape[1]),
                    "config": embedder.to_dict(),
                },
                "dense_index": config.dense_index.model_dump(mode="json"),
                "ingest": config.ingest.model_dump(mode="json"),
                "n_chunks": len(chunks),
                "domains": domains,
                "partitioned": partitioned,
                "partition_dirs": {d: _safe_name(d) for d in domains} if partitioned else {},
                **extra,
            }
            atomic_write_json(tmp / "manifest.json", manifest)
        return cls.open(index_dir, embedder=embedder)

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, index_dir: str | Path, embedder: Embedder | None = None) -> Index:
        """Open an index; embeddings and faiss/bm25 data are memory-mapped where possible."""
        directory = Path(index_dir)
        manifest_path = directory / "manifest.json"
        if not directory.is_dir():
            raise IndexStoreError(f"no index at {directory}; build one with `ragsieve ingest PATH --index {directory}`")
        if not manifest_path.is_file():
            raise IndexStoreError(
                f"{directory} is not a ragsieve index (manifest.json missing); "
                f"rebuild it with `ragsieve ingest PATH --index {directory}`"
            )
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            version = manifest["format_version"]
            emb_info = manifest["embedder"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise IndexStoreError(f"the manifest of {directory} is corrupt ({exc}); rebuild the index") from exc
        if version != FORMAT_VERSION:
            raise IndexStoreError(
                f"{directory} has index format {version}, this ragsieve reads format {FORMAT_VERSION}; rebuild it"
            )
        if embedder is None:
            from ragsieve.config import EmbedderConfig

            cfg = {k: v for k, v in emb_info.get("config", {}).items() if k in EmbedderConfig.model_fields}
            embedder = load_embedder(EmbedderConfig(**cfg))
        if embedder.model_name != emb_info["model_name"]:
            raise IndexStoreError(
                f"the index at {directory} was built with embedding model {emb_info['model_name']!r} but the "
                f"configured embedder is {embedder.model_name!r}; use the same embedder.model or rebuild the index"
            )
        try:
            with open(directory / "chunks.jsonl", encoding="utf-8") as fh:
                chunks = [Chunk.from_dict(json.loads(line)) for line in fh]
            embeddings = np.load(directory / "embeddings.npy", mmap_mode="r")
        except (OSError, ValueError, TypeError, json.JSONDecodeError) as exc:
            raise IndexStoreError(f"the index at {directory} is corrupt ({exc}); rebuild it") from exc
        if len(chunks) != manifest.get("n_chunks") or embeddings.shape != (len(chunks), emb_info["dim"]):
            raise IndexStoreError(
                f"the index at {directory} is inconsistent ({len(chunks)} chunks, "
                f"embeddings {embeddings.shape}); rebuild it"
            )
        return cls(directory, chunks, embeddings, manifest, embedder)

    def _load_partition(self, folder: Path) -> _Partition:
        try:
            rows = np.load(folder / "ids.npy")
            return _Partition(rows, DenseBackend.load(folder), SparseBackend.load(folder, len(rows)))
        except (OSError, RuntimeError, ValueError) as exc:
            raise IndexStoreError(f"index data in {folder} is missing or corrupt ({exc}); rebuild the index") from exc

    def _global_partition(self) -> _Partition:
        if self._global is None:
            self._global = self._load_partition(self.dir / "global")
        return self._global

    def _domain_partition(self, domain: str) -> _Partition:
        if domain not in self.domains:
            raise InputError(f"unknown domain {domain!r}; this index has {', '.join(self.domains)}")
        if not self.partitioned:
            return self._global_partition()
        part = self._partitions.get(domain)
        if part is None:
            part = self._load_partition(self.dir / "partitions" / self.manifest["partition_dirs"][domain])
            self._partitions[domain] = part
        return part

    def warm_up(self) -> None:
        """Load every partition and the embedder now rather than on the first query."""
        self.embedder.warm_up()
        self._global_partition()
        if self.partitioned:
            for d in self.domains:
                self._domain_partition(d)

    # ------------------------------------------------------------------ source weights
    def _read_source_weights(self) -> dict[str, float] | None:
        path = self.dir / "source_weights.json"
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise IndexStoreError(f"{path} is corrupt ({exc}); re-run `ragsieve importance apply`") from exc
        weights = data.get("weights", data)
        return {str(k): float(v) for k, v in weights.items()}

    def _source_mask(self, threshold: float) -> np.ndarray:
        key = f"__prune__{threshold}"
        if key not in self._mask_cache:
            weights = self.source_weights or {}
            self._mask_cache[key] = np.fromiter(
                (weights.get(c.source, 1.0) >= threshold for c in self.chunks), dtype=bool, count=len(self.chunks)
            )
        return self._mask_cache[key]

    # ------------------------------------------------------------------ search
    def search(
        self,
        query: str,
        k: int = 10,
        mode: SearchMode = "hybrid",
        where: dict[str, Any] | None = None,
        domains: Sequence[str] | None = None,
        retrieval: RetrievalConfig | None = None,
        query_vector: np.ndarray | None = None,
        prune_threshold: float | None = None,
    ) -> list[SearchHit]:
        """Top-``k`` chunks for ``query``.

        ``domains`` restricts the search to those partitions (``None``: the global index);
        ``where`` filters on metadata; ``prune_threshold`` drops chunks whose source weight
        (from ``source_weights.json``) is below it.
        """
        retrieval = retrieval or RetrievalConfig()
        query = _check_query(query, retrieval.max_query_chars)
        if k < 1:
            raise InputError(f"k must be at least 1, got {k}")
        if mode not in ("dense", "sparse", "hybrid"):
            raise InputError(f"unknown search mode {mode!r}; use dense, sparse or hybrid")
        # Single-retriever modes need only k per partition; fusion needs a deeper pool.
        candidates = max(retrieval.candidates, k) if mode == "hybrid" else k
        mask = None
        if where:
            mask = self._where_mask(where)
        if prune_threshold is not None and self.source_weights:
            pm = self._source_mask(prune_threshold)
            mask = pm if mask is None else mask & pm

        parts = (
            [self._global_partition()] if not domains else [self._domain_partition(d) for d in dict.fromkeys(domains)]
        )
        qvec = None
        if mode != "sparse":
            qvec = query_vector if query_vector is not None else self.embedder.embed([query])[0]
        tokens = bm25_tokenize([query])[0] if mode != "dense" else []

        dense_list: list[tuple[int, float]] = []
        sparse_list: list[tuple[int, float]] = []
        for part in parts:
            local_mask = mask[part.rows] if mask is not None else None
            if qvec is not None:
                ids, scores = part.dense.search(qvec, candidates, local_mask)
                dense_list.extend(zip(part.rows[ids].tolist(), scores.tolist(), strict=True))
            if tokens:
                ids, scores = part.sparse.search(tokens, candidates, local_mask)
                sparse_list.extend(zip(part.rows[ids].tolist(), scores.tolist(), strict=True))
        if len(parts) > 1:
            dense_list.sort(key=lambda t: -t[1])
            sparse_list.sort(key=lambda t: -t[1])
            dense_list, sparse_list = dense_list[:candidates], sparse_list[:candidates]

        dense_scores = dict(dense_list)
        sparse_scores = dict(sparse_list)
        if mode == "dense":
            ranked = dense_list[:k]
        elif mode == "sparse":
            ranked = sparse_list[:k]
        elif retrieval.fusion == "rrf":
            ranked = top_k(reciprocal_rank_fusion([dense_list, sparse_list], k=retrieval.rrf_k), k)
        else:
            w = retrieval.dense_weight
            ranked = top_k(weighted_score_fusion([dense_list, sparse_list], [w, 1.0 - w]), k)

        hits = []
        for rank, (row, score) in enumerate(ranked, 1):
            per_retriever: dict[str, float] = {}
            if row in dense_scores:
                per_retriever["dense"] = float(dense_scores[row])
            if row in sparse_scores:
                per_retriever["sparse"] = float(sparse_scores[row])
            if mode == "hybrid":
                per_retriever["fused"] = float(score)
            hits.append(SearchHit(self.chunks[row], float(score), rank, per_retriever))
        return hits

    def _where_mask(self, where: dict[str, Any]) -> np.ndarray:
        key = json.dumps(where, sort_keys=True, default=str)
        mask = self._mask_cache.get(key)
        if mask is None:
            if set(where) == {"domain"}:
                wanted = where["domain"] if isinstance(where["domain"], list) else [where["domain"]]
                unknown = [d for d in wanted if d not in self.domains]
                if unknown:
                    raise InputError(f"unknown domain {unknown[0]!r}; this index has {', '.join(self.domains)}")
                mask = np.isin(self._domain_of_row, wanted)
            else:
                mask = where_mask(self.chunks, where)
            self._mask_cache[key] = mask
        return mask

    def stats(self) -> dict[str, Any]:
        size = sum(p.stat().st_size for p in self.dir.rglob("*") if p.is_file())
        per_domain: dict[str, int] = {}
        for c in self.chunks:
            per_domain[c.domain] = per_domain.get(c.domain, 0) + 1
        return {
            "dir": str(self.dir),
            "chunks": len(self.chunks),
            "domains": per_domain,
            "sources": len({c.source for c in self.chunks}),
            "embedder": self.manifest["embedder"]["model_name"],
            "bytes": size,
            "created": self.manifest.get("created"),
        }


def _check_query(query: str, max_chars: int) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InputError("the query is empty; pass a question or search text")
    if len(query) > max_chars:
        raise InputError(
            f"the query has {len(query)} characters, over the limit of {max_chars}; "
            "shorten it or raise retrieval.max_query_chars"
        )
    return query.strip()


def _embed_all(texts: list[str], embedder: Embedder, progress: ProgressFn | None, batch: int = 128) -> np.ndarray:
    # Small batches so a progress bar moves during embedding; the embedder batches internally anyway.
    embedder.warm_up()
    out = np.empty((len(texts), embedder.dim), dtype=np.float32)
    for start in range(0, len(texts), batch):
        out[start : start + batch] = embedder.embed(texts[start : start + batch])
        if progress:
            progress("embed", min(start + batch, len(texts)), len(texts))
    return out


def _entity_extractor(config: IngestConfig) -> Callable[[str], dict[str, list[str]]] | None:
    if not config.extract_entities:
        return None
    try:
        from ragsieve.ingest.entities import extract_entities
    except ImportError:
        return None
    return extract_entities


def iter_chunks_jsonl(path: str | Path) -> Iterable[Chunk]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            yield Chunk.from_dict(json.loads(line))
