"""The on-disk index: chunks, embeddings, a global dense+sparse index and one per domain.

An index folder (layout and locking in :mod:`ragsieve.index.storage`) holds immutable
generations; each generation is one complete build::

    generations/<id>/manifest.json   format version, embedder name + dim, chunking, counts, domains,
                                     size + sha256 of every other file of the generation
    generations/<id>/chunks.jsonl    one Chunk per line, row i = embeddings[i]
    generations/<id>/embeddings.npy  float32 (n, dim), memory-mapped on open
    generations/<id>/global/         ids.npy + dense.faiss + bm25/ over every chunk
    generations/<id>/partitions/<d>/ the same per domain (<d>: sanitised name + hash of the domain)
    source_weights.json, router/     optional, written beside the generations by later stages

Guarantees: a build never deletes or replaces a folder that is not a ragsieve index; one writer
at a time (others wait, then fail clearly); a crash or ``kill -9`` mid-build leaves the previous
generation live; an open :class:`Index` keeps reading the generation it opened, even across a
re-ingest; every missing, truncated or (with ``verify=True``) altered file is one
``IndexStoreError`` that names it. The manifest never chooses an endpoint, key or path: the
embedder comes from the caller's configuration and must match the recorded model and dimension.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragsieve.config import EmbedderConfig, IngestConfig, PipelineConfig, RetrievalConfig
from ragsieve.embed import Embedder, load_embedder
from ragsieve.errors import IndexStoreError, InputError, check_unicode
from ragsieve.index import storage
from ragsieve.index.backends import DenseBackend, SparseBackend, bm25_tokenize
from ragsieve.index.filters import check_where, known_fields, where_mask
from ragsieve.index.fusion import reciprocal_rank_fusion, top_k, weighted_score_fusion
from ragsieve.index.sentences import (
    METHOD_ONE_PASS,
    METHOD_SEPARATE,
    OFFSETS,
    SPLIT_VERSION,
    VECTORS,
    compute_sentence_vectors,
    embed_chunks_with_sentences,
    own_sentences,
    save_sentence_vectors,
    sentence_method,
)
from ragsieve.types import Chunk, SearchHit

logger = logging.getLogger(__name__)

FORMAT_VERSION = storage.FORMAT_VERSION
SearchMode = Literal["dense", "sparse", "hybrid"]
ProgressFn = Callable[[str, int, int], None]
# IngestConfig fields that do not change how files become chunks (a change must not re-chunk).
_NOT_CHUNKING = {"follow_symlinks", "lock_timeout_s"}
# What a chunk records beyond its text; a re-ingest of an index built with an older version
# re-chunks every file (and re-embeds only text that changed). 2: source locations, cleaner
# HTML/PDF text, segments (pages, sections) that chunks never cross. 3: document tags
# (metadata["tags"]: front matter, folders, ingest.tag_rules), what access keys grant.
CHUNK_FORMAT = 3


def _chunk_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _chunking_settings(config: IngestConfig) -> dict[str, Any]:
    return {k: v for k, v in config.model_dump(mode="json").items() if k not in _NOT_CHUNKING}


def validate_k(k: Any) -> int:
    """The number of results asked for: a whole number >= 1 (CLI and API share this check)."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise InputError(f"k must be a whole number of results (1 or more), got {k!r} ({type(k).__name__})")
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}")
    return int(k)


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
    generation: str = ""
    embed_seconds: float = 0.0  # the embedder's share of ``seconds``, for chunks/s

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "skipped": [{"path": p, "reason": r} for p, r in self.skipped]}


class _Partition:
    folder: Path = Path(DenseBackend.FILE).parent

    def __init__(self, rows: np.ndarray, dense: DenseBackend, sparse: SparseBackend) -> None:
        self.rows = rows  # local row -> global row
        self.dense = dense
        self.sparse = sparse


class Index:
    """A searchable collection of chunks with dense, sparse and hybrid retrieval.

    ``dir`` is the index folder (other stages keep ``source_weights.json`` and ``router/`` there);
    the chunks and search structures are read from one immutable generation, ``generation_dir``.

    Example:
        >>> import shutil
        >>> from ragsieve.index import Index
        >>> from ragsieve.types import Chunk
        >>> shutil.rmtree("/tmp/ragsieve-doc-index", ignore_errors=True)
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
        generation: str = "",
        lease: storage.GenerationLease | None = None,
        generation_dir: Path | None = None,
    ) -> None:
        self.dir = directory
        self.generation = generation
        self.generation_dir = generation_dir or (directory / storage.GENERATIONS / generation)
        self.chunks = chunks
        self.embeddings = embeddings
        self.manifest = manifest
        self.embedder = embedder
        self._lease = lease
        self._by_id = {c.id: i for i, c in enumerate(chunks)}
        self._global: _Partition | None = None
        self._partitions: dict[str, _Partition] = {}
        self._mask_cache: dict[str, np.ndarray] = {}
        # Whether partition files are checked against their recorded sha256 as they load (Index.open sets it).
        self.check_contents = False
        self._fields: set[str] | None = None
        self._domain_of_row = np.array([c.domain for c in chunks], dtype=object)
        self.source_weights: dict[str, float] | None = self._read_source_weights()
        # (offsets, vectors) of the chunks' sentences, loaded (or computed once) on first use
        self._sentences: tuple[np.ndarray, np.ndarray] | None = None
        self._sentences_tried = False
        self._sentences_lock = threading.Lock()
        # the index's vector dimension while the embedder that must match it is still loading
        self._dim_unchecked: int | None = None
        # Unit vectors (the Embedder contract; judged from the stored vectors, since an index
        # built with normalize=False may be opened by a normalising embedder): dense scores are
        # then cosines times the query's norm, so anything beyond that means a corrupt file.
        self.normalized = looks_normalized(embeddings)

    # ------------------------------------------------------------------ properties
    @property
    def domains(self) -> list[str]:
        return list(self.manifest.get("domains", []))

    @property
    def corpus_root(self) -> Path | None:
        """The folder the chunks' ``path`` fields are relative to (``None`` when not a folder ingest).

        Pass it to :func:`ragsieve.citations.citation_uri` to link a cited file.
        """
        from ragsieve.ingest.loaders import SUPPORTED_SUFFIXES

        source = self.manifest.get("source")
        if not isinstance(source, str) or source == "chunks":
            return None
        root = Path(source)
        # A single file was ingested: paths are relative to the folder that holds it.
        return root.parent if root.suffix.lower() in SUPPORTED_SUFFIXES and not root.is_dir() else root

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

    def close(self) -> None:
        """Let writers remove this index's generation once it is no longer live."""
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def exists(index_dir: str | Path) -> bool:
        """Whether ``index_dir`` holds a published ragsieve index (without opening it)."""
        d = Path(index_dir)
        return ((d / storage.MARKER).is_file() and (d / storage.CURRENT).is_file()) or storage.dir_state(d) == "legacy"

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
        corpus: str | Path | None = None,
    ) -> Index:
        """Build and save an index over ready-made chunks (e.g. a dataset's sentences).

        ``embeddings`` may be passed when already computed (row i for chunk i). ``corpus``: the
        folder the chunks' ``path`` fields are relative to, recorded so citations can link files.
        """
        config = config or PipelineConfig()
        chunks = list(chunks)
        ids = [c.id for c in chunks]
        if len(set(ids)) != len(ids):
            raise InputError("chunk ids must be unique; found duplicates")
        _check_domains(chunks)
        target = storage.prepare_target(Path(index_dir))
        embedder = embedder if embedder is not None else load_embedder(config.embedder)
        with storage.writer_lock(target, config.ingest.lock_timeout_s):
            pooled: list[np.ndarray | None] | None = None
            if embeddings is None and sentence_method(config.ingest.sentence_vectors, embedder) == METHOD_ONE_PASS:
                embeddings, pooled = _embed_all_with_sentences([c.text for c in chunks], embedder, progress)
            elif embeddings is None:
                embeddings = _embed_all([c.text for c in chunks], embedder, progress)
            extra: dict[str, Any] = {"source": "chunks"}
            if corpus is not None:
                extra = {"source": str(Path(corpus).resolve()), "chunk_format": CHUNK_FORMAT}
            # the generation this one replaces: its stored sentence vectors are reused
            previous: Index | None = None
            if cls.exists(target):
                try:
                    previous = cls.open(target, embedder=embedder)
                except IndexStoreError as exc:
                    logger.info("not reusing the sentence vectors of %s (%s)", target, exc)
            try:
                return cls._write(
                    target, chunks, embeddings, embedder, config, extra, progress, previous, pooled=pooled
                )
            finally:
                if previous is not None:
                    previous.close()

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
        and embeddings, re-chunks changed files and drops deleted ones.

        ``index_dir`` must be new, empty or a ragsieve index, and must not overlap the corpus.
        """
        start = time.perf_counter()
        config = config or PipelineConfig()
        report = report if report is not None else BuildReport()
        corpus = Path(corpus_dir)
        if not corpus.exists():
            raise InputError(f"{corpus} does not exist; pass the folder to ingest")
        target = storage.prepare_target(Path(index_dir), corpus)
        embedder = embedder if embedder is not None else load_embedder(config.embedder)
        with storage.writer_lock(target, config.ingest.lock_timeout_s):
            index = cls._build_locked(corpus, target, config, embedder, progress, report)
        if index.partitioned:
            # Trained here, once, so that `ask --route auto` never fits a model at query time.
            from ragsieve.route.train import ensure_router

            ensure_router(index, config.stages.get("route", {}))
        report.seconds = time.perf_counter() - start
        report.generation = index.generation
        return index

    @classmethod
    def _build_locked(
        cls,
        corpus: Path,
        index_dir: Path,
        config: PipelineConfig,
        embedder: Embedder,
        progress: ProgressFn | None,
        report: BuildReport,
    ) -> Index:
        from ragsieve.ingest import iter_files

        previous: Index | None = None
        if cls.exists(index_dir):
            try:
                previous = cls.open(index_dir, embedder=embedder)
            except IndexStoreError as exc:
                if "built with" in str(exc):
                    raise
                logger.warning("existing index at %s is unusable (%s); rebuilding from scratch", index_dir, exc)
        if previous is not None:
            # the precision the index was built with, when the user left it at the default: a
            # re-ingest adds to an fp32 index with fp32 (never vectors of two precisions in one index)
            embedder = previous.embedder
        try:
            same_chunking = (
                previous is not None
                and previous.manifest.get("chunk_format", 1) == CHUNK_FORMAT
                and _chunking_settings(IngestConfig.model_validate(previous.manifest.get("ingest", {})))
                == _chunking_settings(config.ingest)
            )
        except ValueError:
            same_chunking = False
        old_files: dict[str, dict[str, Any]] = previous.manifest.get("files", {}) if previous and same_chunking else {}
        # documents left out of the previous generation (`ragsieve audit --exclude`) stay out
        excluded: set[str] = set(previous.manifest.get("excluded_documents") or []) if previous else set()

        base = corpus if corpus.is_dir() else corpus.parent
        link_skips: list[tuple[str, str]] = []
        files = iter_files(corpus, follow_symlinks=config.ingest.follow_symlinks, skipped=link_skips)
        for rel, reason in link_skips:
            report.skipped.append((rel, reason))
            logger.warning("skipping %s: %s", rel, reason)
        if not files:
            raise InputError(f"{corpus} holds no supported files to ingest")
        new_files: dict[str, dict[str, Any]] = {}
        chunks: list[Chunk] = []
        extract = entity_extractor(config.ingest)
        # Reuse embeddings of chunks whose text is unchanged; embed the rest on a background
        # thread while later files are still being read and chunked.
        reuse: dict[str, np.ndarray] = {}
        if previous is not None:
            for i, c in enumerate(previous.chunks):
                reuse.setdefault(_chunk_key(c.text), previous.embeddings[i])
        from ragsieve.embed.ahead import EmbedAhead

        one_pass = sentence_method(config.ingest.sentence_vectors, embedder) == METHOD_ONE_PASS
        ahead = EmbedAhead(
            embedder,
            skip=lambda text: _chunk_key(text) in reuse,
            # the chunks' sentence vectors come from the same forward pass as the chunks'
            with_sentences=(lambda texts: embed_chunks_with_sentences(texts, embedder)) if one_pass else None,
            progress=progress,
        )
        try:
            return cls._load_and_embed(
                corpus, index_dir, config, embedder, progress, report, previous, files, base, old_files,
                new_files, chunks, extract, reuse, ahead, excluded,
            )
        finally:
            ahead.close()

    @classmethod
    def _load_and_embed(
        cls,
        corpus: Path,
        index_dir: Path,
        config: PipelineConfig,
        embedder: Embedder,
        progress: ProgressFn | None,
        report: BuildReport,
        previous: Index | None,
        files: list[Path],
        base: Path,
        old_files: dict[str, dict[str, Any]],
        new_files: dict[str, dict[str, Any]],
        chunks: list[Chunk],
        extract: Callable[[str], dict[str, list[str]]] | None,
        reuse: dict[str, np.ndarray],
        ahead: Any,
        excluded: set[str] | None = None,
    ) -> Index:
        from ragsieve.ingest import file_hash, load_file
        from ragsieve.ingest.loaders import _SkipFile, safe_relpath, warn_file_type_domains

        for n, path in enumerate(files, 1):
            rel = safe_relpath(path.relative_to(base))
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
                warnings: list[tuple[str, str]] = []
                try:
                    docs = load_file(path, base, config.ingest, warnings=warnings)
                except _SkipFile as exc:
                    report.skipped.append((rel, str(exc)))
                    logger.warning("skipping %s: %s", rel, exc)
                    continue
                except OSError as exc:
                    report.skipped.append((rel, f"unreadable ({exc.strerror}); check permissions"))
                    continue
                finally:
                    report.skipped.extend(warnings)
                file_chunks = chunk_documents(docs, config.ingest, extract)
                if excluded:
                    file_chunks = [c for c in file_chunks if c.doc_id not in excluded]
                chunks.extend(file_chunks)
                ahead.submit([c.text for c in file_chunks])
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
            seen: set[str] = set()
            dupes = sorted({i for i in ids if i in seen or seen.add(i)})[:5]  # type: ignore[func-returns-value]
            raise InputError(f"duplicate chunk ids {dupes}; give records unique values in ingest.id_field")
        _check_domains(chunks)

        dim = embedder.dim
        embeddings = np.empty((len(chunks), dim), dtype=np.float32)
        todo = []
        for i, c in enumerate(chunks):
            vec = reuse.get(_chunk_key(c.text))
            if vec is not None and vec.shape == (dim,):
                embeddings[i] = vec
            else:
                todo.append(i)
        pooled: list[np.ndarray | None] | None = None
        if todo:
            embeddings[todo] = ahead.finish([chunks[i].text for i in todo], progress)
            report.embed_seconds = ahead.embed_seconds
            pooled = [ahead.sentences_of(c.text) for c in chunks]
        report.chunks = len(chunks)
        report.chunks_embedded = len(todo)
        warn_file_type_domains({c.domain for c in chunks}, config.ingest)
        extra: dict[str, Any] = {"source": str(corpus.resolve()), "files": new_files, "chunk_format": CHUNK_FORMAT}
        if excluded:
            extra["excluded_documents"] = sorted(excluded)
        try:
            return cls._write(index_dir, chunks, embeddings, embedder, config, extra, progress, previous, pooled=pooled)
        finally:
            if previous is not None:
                previous.close()

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
        stage: tuple[str, str] | None = None,
        pooled: Sequence[np.ndarray | None] | None = None,
    ) -> Index:
        """Write a new generation and publish it; the caller holds the writer lock. The chunks'
        sentence vectors are computed here (those of ``previous``, the generation this one
        replaces, are reused for sentences it has stored). ``stage`` (base generation, reason)
        writes it beside the live one instead, which stays live (:func:`storage.stage_generation`).
        ``pooled[i]``: chunk i's sentence vectors from its own forward pass, when the chunks were
        embedded that way (``ingest.sentence_vectors = "one-pass"``); chunks without them get a
        pass here unless ``previous`` stored theirs the same way."""
        if embeddings.shape[0] != len(chunks):
            raise InputError(f"{embeddings.shape[0]} embeddings for {len(chunks)} chunks")
        domains = sorted({c.domain for c in chunks})
        partitioned = len(domains) > 1
        part_dirs = {d: storage.partition_dirname(d) for d in domains} if partitioned else {}
        gens = index_dir / storage.GENERATIONS
        gens.mkdir(exist_ok=True)
        generation = storage.new_generation_id()
        tmp = gens / f"{storage.BUILDING_PREFIX}{generation}"
        tmp.mkdir()
        with open(tmp / "chunks.jsonl", "w", encoding="utf-8") as fh:
            for c in chunks:
                fh.write(json.dumps(c.to_dict(), ensure_ascii=False) + "\n")
        np.save(tmp / "embeddings.npy", np.ascontiguousarray(embeddings, dtype=np.float32))
        texts = [c.text for c in chunks]
        groups: list[tuple[Path, np.ndarray]] = [(tmp / "global", np.arange(len(chunks)))]
        if partitioned:
            domain_arr = np.array([c.domain for c in chunks], dtype=object)
            for d in domains:
                groups.append((tmp / "partitions" / part_dirs[d], np.flatnonzero(domain_arr == d)))
        for n, (folder, rows) in enumerate(groups, 1):
            folder.mkdir(parents=True)
            np.save(folder / "ids.npy", rows.astype(np.int64))
            DenseBackend.build(embeddings[rows], config.dense_index).save(folder)
            SparseBackend.build([texts[i] for i in rows]).save(folder)
            if progress:
                progress("index", n, len(groups))
        method = sentence_method(config.ingest.sentence_vectors, embedder)
        known: dict[str, np.ndarray] | None = None
        if (  # never mixes the two kinds, nor two embedders' vectors
            previous is not None
            and previous.sentence_method == method
            and previous.manifest.get("embedder", {}).get("model_name") == embedder.model_name
        ):
            try:
                known = previous.known_sentence_vectors()
            except IndexStoreError as exc:  # damaged: this build embeds the sentences again
                logger.warning("not reusing the previous sentence vectors (%s)", exc)
        if method == METHOD_ONE_PASS:
            pooled = _pool_missing(texts, embedder, pooled, known, progress)
        counts: dict[str, int] = {}
        offsets, sentence_vectors = compute_sentence_vectors(
            texts, embedder, known.get if known else None, progress,
            pooled=pooled if method == METHOD_ONE_PASS else None, counts=counts,
        )  # fmt: skip
        save_sentence_vectors(tmp, offsets, sentence_vectors)
        manifest = {
            "format_version": FORMAT_VERSION,
            "generation": generation,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            # Which vectors these are, never how to reach a model: endpoints and keys come from the reader.
            "embedder": {"model_name": embedder.model_name, "dim": int(embeddings.shape[1])},
            "dense_index": config.dense_index.model_dump(mode="json"),
            "ingest": config.ingest.model_dump(mode="json"),
            "n_chunks": len(chunks),
            "domains": domains,
            "partitioned": partitioned,
            "partition_dirs": part_dirs,
            "checksums": storage.checksum_tree(tmp),
            "sentence_vectors": {
                "split_version": SPLIT_VERSION,
                "method": method,
                # one pass: sentences embedded on their own all the same (cut off, or not found)
                "separate_rows": counts.get("separate", 0) if method == METHOD_ONE_PASS else None,
            },
            **extra,
        }
        if stage is not None:
            storage.stage_generation(index_dir, tmp, manifest, base=stage[0], reason=stage[1])
            logger.info("wrote generation %s of %s beside the live one (%s)", generation, index_dir, stage[1])
            return cls.open(index_dir, embedder=embedder, generation=generation)
        storage.publish_generation(index_dir, tmp, manifest)
        storage.finish_upgrade(index_dir)
        logger.info("published generation %s of %s", generation, index_dir)
        storage.collect_garbage(index_dir, generation)
        return cls.open(index_dir, embedder=embedder)

    def without_documents(self, documents: Sequence[str], reason: str, *, switch: bool = False) -> Index:
        """Write a generation of this index without the passages of ``documents``, reusing the
        stored vectors (nothing is embedded again), and return it opened.

        It is written beside the live generation and staged: the live one stays live until the
        user switches (``ragsieve index use GENERATION``, :func:`storage.switch_generation`), or
        now when ``switch``. This index must be the live generation (else an :class:`InputError`:
        the documents were chosen on another one). The manifest records the excluded documents
        (``excluded_documents``, with those excluded before), and a re-ingest keeps them out.
        Nothing else in the folder, and nothing of the ingested files, is changed.
        """
        if not self.generation:
            raise InputError(f"{self.dir} is a format-1 index; re-ingest it once before excluding documents")
        drop = set(documents)
        known = {c.doc_id for c in self.chunks}
        unknown = sorted(drop - known)
        if unknown:
            raise InputError(f"documents {unknown[:3]} are not in generation {self.generation} of {self.dir}; "
                             "were the findings written for another index?")
        rows = [i for i, c in enumerate(self.chunks) if c.doc_id not in drop]
        if not rows:
            raise InputError("excluding these documents leaves no passage; nothing to index")
        config = PipelineConfig()
        try:
            config.ingest = IngestConfig.model_validate(self.manifest.get("ingest", {}))
            config.ingest.sentence_vectors = self.sentence_method  # type: ignore[assignment]  # reused as stored
            config.dense_index = type(config.dense_index).model_validate(self.manifest.get("dense_index", {}))
        except ValueError as exc:
            raise IndexStoreError(f"the manifest of {self.generation_dir} is corrupt ({exc}); re-ingest") from exc
        kept_ids = {self.chunks[i].id for i in rows}
        extra: dict[str, Any] = {k: self.manifest[k] for k in ("source", "chunk_format") if k in self.manifest}
        if isinstance(self.manifest.get("files"), dict):
            extra["files"] = {rel: {**info, "chunks": [c for c in info.get("chunks", []) if c in kept_ids]}
                              for rel, info in self.manifest["files"].items()}
        extra["excluded_documents"] = sorted(set(self.manifest.get("excluded_documents") or []) | drop)
        extra["made_from"] = {"generation": self.generation, "reason": reason}
        with storage.writer_lock(self.dir, config.ingest.lock_timeout_s):
            live = storage.read_current(self.dir)[0]
            if live != self.generation:
                raise InputError(f"generation {self.generation} of {self.dir} is no longer live ({live} is: a "
                                 "re-ingest since); audit the live generation again and exclude from that")
            chunks = [self.chunks[i] for i in rows]
            vectors = np.ascontiguousarray(self.embeddings[rows], dtype=np.float32)
            staged = self._write(self.dir, chunks, vectors, self.embedder, config, extra, None, previous=self,
                                 stage=(self.generation, reason))
        if switch:
            storage.switch_generation(self.dir, staged.generation, config.ingest.lock_timeout_s)
        return staged

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(
        cls,
        index_dir: str | Path,
        embedder: Embedder | None = None,
        verify: bool = False,
        embedder_config: EmbedderConfig | None = None,
        check_contents: bool = True,
        generation: str | None = None,
    ) -> Index:
        """Open the live generation of an index; embeddings and faiss/bm25 data are memory-mapped.

        ``generation`` opens another one instead: a staged generation (``ragsieve audit
        --exclude``) or the previous live one, whose manifest sha256 the index records
        (:func:`storage.expected_manifest_sha256`).

        File sizes are always checked against the manifest. ``check_contents`` (the default)
        also checks the sha256 recorded at ingest of each file a query reads: the chunks, the
        stored vectors and the global index's ids, dense vectors and BM25 files here, a domain
        partition's when it first loads; each file once per process (:func:`storage.verify_contents`).
        ``verify=True`` checks every file's sha256 now, reading each again. Without ``embedder``
        one is built from ``embedder_config`` (default: ``EmbedderConfig()``), never from the
        index, and must match the recorded model and dim.
        """
        directory = Path(index_dir)
        if not directory.is_dir():
            raise IndexStoreError(f"no index at {directory}; build one with `ragsieve ingest PATH --index {directory}`")
        if not (directory / storage.MARKER).is_file():
            if (directory / "manifest.json").is_file():
                return cls._open_legacy(directory, embedder, embedder_config)
            raise IndexStoreError(
                f"{directory} is not a ragsieve index ({storage.MARKER} missing); "
                f"build one with `ragsieve ingest PATH --index NEW_FOLDER`"
            )
        version = storage.read_marker(directory)
        if version != FORMAT_VERSION:
            raise IndexStoreError(
                f"{directory} has index format {version}, this ragsieve reads format {FORMAT_VERSION}; "
                "delete it and re-ingest"
            )
        # A writer may retire the generation between reading CURRENT and taking the lease: re-read.
        wanted = generation
        for _ in range(5):
            if wanted is None:
                generation, manifest_sha = storage.read_current(directory)
            else:
                generation, manifest_sha = wanted, storage.expected_manifest_sha256(directory, wanted)
            lease = storage.GenerationLease(directory, generation)
            gen_dir = directory / storage.GENERATIONS / generation
            if gen_dir.is_dir():
                break
            lease.release()
        else:
            raise IndexStoreError(
                f"the live generation {gen_dir} of {directory} is missing; re-ingest it with "
                f"`ragsieve ingest PATH --index {directory}`"
            )
        try:
            manifest = _read_manifest(directory, gen_dir, manifest_sha)
            storage.verify_files(gen_dir, manifest.get("checksums"), directory, hashes=verify)
            if check_contents and not verify:
                # What every query reads: the chunks, the stored vectors and the global index's
                # files. A partition's files are checked when it first loads.
                for name in ("chunks.jsonl", "embeddings.npy", "global/"):
                    storage.verify_contents(gen_dir, manifest.get("checksums"), directory, name)
            emb_info = manifest["embedder"]
            model_name, dim = str(emb_info["model_name"]), int(emb_info["dim"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            lease.release()
            raise IndexStoreError(
                f"the manifest {gen_dir / storage.MANIFEST} is corrupt ({exc}); re-ingest the index"
            ) from exc
        except IndexStoreError:
            lease.release()
            raise
        try:
            embedder = embedder if embedder is not None else load_embedder(embedder_config or EmbedderConfig())
            embedder = _follow_index_precision(embedder, model_name)
            start_warm_up = getattr(embedder, "start_warm_up", None)
            if start_warm_up is not None and embedder.model_name == model_name:
                # the model loads while the index is read and its partitions load; its dimension
                # is checked once it has loaded (warm_up, or the first search)
                start_warm_up()
                dim_unchecked: int | None = dim
            else:
                _check_embedder(embedder, model_name, dim, directory)
                dim_unchecked = None
        except BaseException:
            lease.release()
            raise
        try:
            chunks = _read_chunks(gen_dir / "chunks.jsonl", directory)
            embeddings = _load_npy(gen_dir / "embeddings.npy", directory, mmap=True)
            if len(chunks) != manifest.get("n_chunks") or embeddings.shape != (len(chunks), dim):
                raise IndexStoreError(
                    f"the index at {gen_dir} is inconsistent ({len(chunks)} chunks, embeddings "
                    f"{embeddings.shape}, manifest {manifest.get('n_chunks')} x {dim}); re-ingest it"
                )
            if embeddings.dtype != np.float32:
                raise IndexStoreError(f"{gen_dir / 'embeddings.npy'} is not float32 vectors; re-ingest the index")
            check_vector_sample(embeddings, gen_dir / "embeddings.npy", directory, looks_normalized(embeddings))
        except IndexStoreError as exc:
            lease.release()
            _name_the_culprit(gen_dir, manifest, directory, exc)
            raise
        index = cls(directory, chunks, embeddings, manifest, embedder, str(generation), lease)
        index.check_contents = check_contents and not verify  # verify=True has read every file already
        index._dim_unchecked = dim_unchecked
        return index

    def check_embedder(self) -> None:
        """Check that the embedder (loaded by now, or waited for) gives this index's dimension;
        done at open unless the embedder was still loading then."""
        dim = self._dim_unchecked
        if dim is not None:
            _check_embedder(self.embedder, self.embedder.model_name, dim, self.dir)
            self._dim_unchecked = None

    @classmethod
    def _open_legacy(cls, directory: Path, embedder: Embedder | None, embedder_config: EmbedderConfig | None) -> Index:
        """Read a format-1 index: one folder, no generations, no checksums (a re-ingest upgrades it)."""
        path = directory / "manifest.json"
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            version = manifest["format_version"]
            model_name, dim = str(manifest["embedder"]["model_name"]), int(manifest["embedder"]["dim"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexStoreError(f"index file {path} is corrupt ({exc}); re-ingest into a new folder") from exc
        if version != 1:
            raise IndexStoreError(f"{directory} is not a ragsieve index this version can read (format {version!r})")
        logger.warning(
            "%s is a format-1 index, searched without checksums; re-ingest it (`ragsieve ingest PATH --index %s`) "
            "to upgrade it to a crash-safe, verifiable index",
            directory,
            directory,
        )
        embedder = embedder if embedder is not None else load_embedder(embedder_config or EmbedderConfig())
        embedder = _follow_index_precision(embedder, model_name)
        _check_embedder(embedder, model_name, dim, directory)
        chunks = _read_chunks(directory / "chunks.jsonl", directory)
        embeddings = _load_npy(directory / "embeddings.npy", directory, mmap=True)
        if len(chunks) != manifest.get("n_chunks") or embeddings.shape != (len(chunks), dim):
            raise IndexStoreError(f"the index at {directory} is inconsistent; re-ingest into a new folder")
        return cls(directory, chunks, embeddings, manifest, embedder, "", None, generation_dir=directory)

    def _load_partition(self, folder: Path) -> _Partition:
        try:
            return self._load_partition_files(folder)
        except IndexStoreError as exc:
            _name_the_culprit(self.generation_dir, self.manifest, self.dir, exc)
            raise

    def _load_partition_files(self, folder: Path) -> _Partition:
        if self.check_contents and "checksums" in self.manifest:
            # Before faiss or bm25 parse a byte of them: a damaged file is refused, not read.
            rel = folder.relative_to(self.generation_dir).as_posix() + "/"
            storage.verify_contents(self.generation_dir, self.manifest["checksums"], self.dir, rel)
        rows = _load_npy(folder / "ids.npy", self.dir, mmap=False)
        if rows.ndim != 1 or rows.dtype != np.int64 or (rows.size and (rows.min() < 0 or rows.max() >= len(self))):
            raise IndexStoreError(f"index file {folder / 'ids.npy'} is corrupt (row ids out of range); re-ingest")
        try:
            dense = DenseBackend.load(folder)
        except (OSError, RuntimeError, ValueError) as exc:
            raise IndexStoreError(
                f"index file {folder / DenseBackend.FILE} is missing or corrupt ({exc}); re-ingest the index"
            ) from exc
        try:
            sparse = SparseBackend.load(folder, len(rows))
        except (OSError, RuntimeError, ValueError, KeyError, TypeError, IndexError) as exc:
            raise IndexStoreError(
                f"the BM25 files in {folder / SparseBackend.FOLDER} are missing or corrupt ({exc}); re-ingest the index"
            ) from exc
        if dense.size != len(rows) or dense.dim != self.embeddings.shape[1]:
            raise IndexStoreError(
                f"index file {folder / DenseBackend.FILE} holds {dense.size} vectors of dim {dense.dim}, expected "
                f"{len(rows)} of dim {self.embeddings.shape[1]}; re-ingest the index"
            )
        sample = _dense_sample(dense, _sample_rows(dense.size))
        if sample is not None:
            check_vector_sample(sample, folder / DenseBackend.FILE, self.dir, self.normalized)
        part = _Partition(rows, dense, sparse)
        part.folder = folder
        return part

    def _global_partition(self) -> _Partition:
        if self._global is None:
            self._global = self._load_partition(self.generation_dir / "global")
        return self._global

    def _domain_partition(self, domain: str) -> _Partition:
        if domain not in self.domains:
            raise InputError(f"unknown domain {domain!r}; this index has {', '.join(self.domains)}")
        if not self.partitioned:
            return self._global_partition()
        part = self._partitions.get(domain)
        if part is None:
            name = storage.safe_component(self.manifest["partition_dirs"][domain], "partition folder")
            part = self._load_partition(self.generation_dir / "partitions" / name)
            self._partitions[domain] = part
        return part

    def warm_up(self, *, wait_for_embedder: bool = True) -> None:
        """Load every partition and the embedder now rather than on the first query (the
        partitions first: an embedder loading on its worker thread loads meanwhile).

        ``wait_for_embedder=False`` returns while an embedder that loads on a worker thread is
        still loading: the first embedding or search waits for it (and checks its dimension), so
        a caller's own start-up work overlaps the load."""
        self._global_partition()
        if self.partitioned:
            for d in self.domains:
                self._domain_partition(d)
        if not wait_for_embedder and self._dim_unchecked is not None:
            return
        self.ready_embedder()

    def ready_embedder(self) -> None:
        """Wait for the embedder (loading on its worker thread since :meth:`open`, or loaded
        now) and check its dimension against the index's."""
        self.embedder.warm_up()
        self.check_embedder()

    # ------------------------------------------------------------------ sentence vectors
    def sentence_vectors(self, rows: Sequence[int]) -> tuple[list[str], np.ndarray]:
        """The sentences of the chunks at ``rows`` (as the checks split them,
        :func:`ragsieve.index.sentences.passage_sentences`) with their stored vectors; a chunk that
        is one sentence contributes none (its chunk vector is that sentence's).

        An index built before sentence vectors were stored gets them here, once: they are
        computed and published as a new generation (the one open stays as it was), unless the
        index has over ``SENTENCES_ON_FIRST_USE`` sentences to embed; then none are returned
        and a re-ingest adds them."""
        empty = np.zeros((0, self.embeddings.shape[1]), dtype=np.float32)
        stored = self._sentence_store()
        if stored is None:
            return [], empty
        offsets, vectors = stored
        texts: list[str] = []
        picks: list[int] = []
        for row in rows:
            start, end = int(offsets[row]), int(offsets[row + 1])
            if start == end:
                continue
            own = own_sentences(self.chunks[row].text)
            if len(own) == end - start:
                texts.extend(own)
                picks.extend(range(start, end))
        if not picks:
            return [], empty
        return texts, np.asarray(vectors[picks], dtype=np.float32)

    @property
    def sentence_method(self) -> str:
        """How this generation's stored sentence vectors were made (``"one-pass"`` or
        ``"separate"``; an index that does not say was built with the separate pass)."""
        info = self.manifest.get("sentence_vectors")
        method = info.get("method") if isinstance(info, dict) else None
        return str(method) if method in (METHOD_ONE_PASS, METHOD_SEPARATE) else METHOD_SEPARATE

    def known_sentence_vectors(self) -> dict[str, np.ndarray]:
        """Every stored sentence vector by its sentence (a re-ingest reuses them), or nothing
        when this generation stores none."""
        stored = self._load_sentences() if self.generation else None
        if stored is None:
            return {}
        offsets, vectors = stored
        out: dict[str, np.ndarray] = {}
        for row, chunk in enumerate(self.chunks):
            start, end = int(offsets[row]), int(offsets[row + 1])
            if start == end:
                continue
            own = own_sentences(chunk.text)
            if len(own) == end - start:
                for j, sentence in enumerate(own):
                    out.setdefault(sentence, vectors[start + j])
        return out

    def _sentence_store(self) -> tuple[np.ndarray, np.ndarray] | None:
        with self._sentences_lock:
            if not self._sentences_tried:
                self._sentences_tried = True
                if self.generation:  # a format-1 index gets them when a re-ingest upgrades it
                    self._sentences = self._load_sentences() or self._compute_sentences()
            return self._sentences

    def _load_sentences(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The stored sentence vectors, checked like the other files a query reads; None when
        this generation has none (or has them from another sentence splitter)."""
        info = self.manifest.get("sentence_vectors")
        checksums = self.manifest.get("checksums") or {}
        if not isinstance(info, dict) or info.get("split_version") != SPLIT_VERSION:
            return None
        if OFFSETS not in checksums or VECTORS not in checksums:
            return None
        gen = self.generation_dir
        try:
            if self.check_contents:
                storage.verify_contents(gen, checksums, self.dir, OFFSETS)
                storage.verify_contents(gen, checksums, self.dir, VECTORS)
            offsets = _load_npy(gen / OFFSETS, self.dir, mmap=False)
            vectors = _load_npy(gen / VECTORS, self.dir, mmap=True)
            dim = self.embeddings.shape[1]
            if (
                offsets.dtype != np.int64
                or offsets.shape != (len(self) + 1,)
                or (offsets.size and (offsets[0] != 0 or np.any(np.diff(offsets) < 0)))
            ):
                raise IndexStoreError(f"index file {gen / OFFSETS} is corrupt (sentence offsets); re-ingest the index")
            if vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape != (int(offsets[-1]), dim):
                raise IndexStoreError(
                    f"index file {gen / VECTORS} holds {vectors.shape} {vectors.dtype} vectors, expected "
                    f"{int(offsets[-1])} x {dim} float32; re-ingest the index"
                )
            check_vector_sample(vectors, gen / VECTORS, self.dir, self.normalized)
        except IndexStoreError as exc:
            _name_the_culprit(gen, self.manifest, self.dir, exc)
            raise
        return offsets, vectors

    def _compute_sentences(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Sentence vectors for an index built before they were stored: computed now and
        published with the index (see :func:`storage.extend_generation`), so this runs once."""
        texts = [c.text for c in self.chunks]
        count = sum(len(own_sentences(t)) for t in texts)
        if count > SENTENCES_ON_FIRST_USE:
            logger.warning(
                "the index at %s was built before sentence vectors were stored with it, and has %d sentences: "
                "too many to embed on a question, so each question embeds its candidates' sentences; "
                "re-ingest it (`ragsieve ingest PATH --index %s`, unchanged chunks keep their vectors) to store them",
                self.dir, count, self.dir,
            )
            return None
        logger.warning(
            "the index at %s was built before sentence vectors were stored with it: embedding its %d sentences "
            "once and storing them (later questions reuse them)",
            self.dir, count,
        )
        offsets, vectors = compute_sentence_vectors(texts, self.embedder)

        def add(folder: Path) -> dict[str, Any]:
            save_sentence_vectors(folder, offsets, vectors)
            return {"sentence_vectors": {"split_version": SPLIT_VERSION, "method": METHOD_SEPARATE}}

        storage.extend_generation(self.dir, self.generation, self.manifest, add)
        return offsets, vectors

    # ------------------------------------------------------------------ source weights
    def _read_source_weights(self) -> dict[str, float] | None:
        return read_source_weights(self.dir)

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
        *,
        allowed: np.ndarray | None = None,
    ) -> list[SearchHit]:
        """Top-``k`` chunks for ``query``.

        ``domains`` restricts the search to those partitions (``None``: the global index);
        ``where`` filters on metadata; ``prune_threshold`` drops chunks whose source weight
        (from ``source_weights.json``) is below it; ``allowed`` (a boolean mask over the
        chunks, :class:`ragsieve.index.access.ScopedIndex`'s reader grants) is applied inside
        each retriever, so the ``k`` hits are ``k`` allowed ones.
        """
        retrieval = retrieval or RetrievalConfig()
        self.check_embedder()
        query = _check_query(query, retrieval.max_query_chars)
        k = validate_k(k)
        if mode not in ("dense", "sparse", "hybrid"):
            raise InputError(f"unknown search mode {mode!r}; use dense, sparse or hybrid")
        if domains is not None and (isinstance(domains, str) or not all(isinstance(d, str) for d in domains)):
            raise InputError(f"domains must be a list of domain names, got {domains!r}")
        # Single-retriever modes need only k per partition; fusion needs a deeper pool.
        candidates = max(retrieval.candidates, k) if mode == "hybrid" else k
        mask = None
        if where is not None:
            check_where(where, self.fields())
            if where:
                mask = self._where_mask(where)
        if prune_threshold is not None and self.source_weights:
            pm = self._source_mask(prune_threshold)
            mask = pm if mask is None else mask & pm
        if allowed is not None:
            if allowed.shape != (len(self.chunks),):
                raise InputError(f"the allowed mask covers {allowed.shape} rows, the index {len(self.chunks)}")
            mask = allowed if mask is None else mask & allowed

        parts = (
            [self._global_partition()] if not domains else [self._domain_partition(d) for d in dict.fromkeys(domains)]
        )
        qvec = None
        score_bound = math.inf
        if mode != "sparse":
            qvec = query_vector if query_vector is not None else self.embedder.embed([query])[0]
            qnorm = float(np.linalg.norm(np.asarray(qvec, dtype=np.float64)))
            if not math.isfinite(qnorm):
                raise InputError("the query vector holds non-finite values; check the embedder")
            if self.normalized:
                score_bound = qnorm * (1.0 + SCORE_EPS) + SCORE_EPS
        tokens = bm25_tokenize([query])[0] if mode != "dense" else []

        dense_list: list[tuple[int, float]] = []
        sparse_list: list[tuple[int, float]] = []
        for part in parts:
            local_mask = mask[part.rows] if mask is not None else None
            if qvec is not None:
                ids, scores = part.dense.search(qvec, candidates, local_mask)
                # Every search: a garbage vector must fail loudly, not rank first.
                check_dense_scores(scores, score_bound, part.folder / DenseBackend.FILE, self.dir)
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

    def fields(self) -> set[str]:
        """The keys a ``where`` filter may use: chunk attributes and every metadata path present."""
        if self._fields is None:
            self._fields = known_fields(self.chunks)
        return self._fields

    def _where_mask(self, where: dict[str, Any]) -> np.ndarray:
        check_where(where, self.fields())
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
        size = sum(p.stat().st_size for p in self.generation_dir.rglob("*") if p.is_file())
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
            "generation": self.generation,
            "format_version": self.manifest.get("format_version"),
        }


def read_source_weights(directory: Path) -> dict[str, float] | None:
    """The per-source weights that ``ragsieve importance apply`` wrote beside an index, if any."""
    path = directory / "source_weights.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise IndexStoreError(f"{path} is corrupt ({exc}); re-run `ragsieve importance apply`") from exc
    weights = data.get("weights", data)
    return {str(k): float(v) for k, v in weights.items()}


def _dense_sample(dense: DenseBackend, rows: np.ndarray) -> np.ndarray | None:
    """The stored vectors at ``rows``, or None where the faiss index cannot give them back
    (IVF without a direct map): the per-search score check still covers those."""
    if rows.size == 0:
        return None
    try:
        return np.stack([np.asarray(dense.index.reconstruct(int(i)), dtype=np.float32) for i in rows])
    except (RuntimeError, AttributeError, TypeError):
        return None


def looks_normalized(vectors: np.ndarray) -> bool:
    """Whether an index stores unit vectors: most of a sample of rows has norm 1 (a few damaged
    rows do not change the verdict; they are what the norm check then reports)."""
    if len(vectors) == 0:
        return True
    norms = np.linalg.norm(np.asarray(vectors[_sample_rows(len(vectors))], dtype=np.float64), axis=1)
    norms = norms[np.isfinite(norms) & (norms > 1e-6)]
    if norms.size == 0:
        return True
    return bool(np.mean(np.abs(norms - 1.0) <= 1e-2) >= 0.5)


def _follow_index_precision(embedder: Embedder, model_name: str) -> Embedder:
    """The embedder, or, when the user left its precision at the default, the same model with the
    precision the index was built with (an fp32 index stays searchable after int8 became the
    default): :meth:`ragsieve.embed.OnnxEmbedder.for_index`."""
    for_index = getattr(embedder, "for_index", None)
    if for_index is None or embedder.model_name == model_name:
        return embedder
    chosen: Embedder = for_index(model_name)
    return chosen


def _check_embedder(embedder: Embedder, model_name: str, dim: int, directory: Path) -> None:
    if embedder.model_name != model_name:
        raise IndexStoreError(
            f"the index at {directory} was built with embedding model {model_name!r} but the "
            f"configured embedder is {embedder.model_name!r}; use the same embedder.model (and "
            "embedder.precision) or rebuild the index"
        )
    if embedder.dim != dim:
        raise IndexStoreError(
            f"the index at {directory} holds {dim}-dimensional vectors but the configured embedder "
            f"{embedder.model_name!r} gives {embedder.dim}; use the embedder the index was built with"
        )


def _name_the_culprit(gen_dir: Path, manifest: dict[str, Any], index_dir: Path, error: IndexStoreError) -> None:
    """A loader failed: hash the generation's files so the error names the file that changed."""
    if "checksums" not in manifest:
        return  # a format-1 index records none
    try:
        storage.verify_files(gen_dir, manifest.get("checksums"), index_dir, hashes=True)
    except IndexStoreError as named:
        raise named from error


def _read_manifest(index_dir: Path, gen_dir: Path, expected_sha256: str) -> dict[str, Any]:
    path = gen_dir / storage.MANIFEST
    try:
        data = path.read_bytes()
    except OSError:
        raise IndexStoreError(f"index file {path} is missing; re-ingest the index at {index_dir}") from None
    if hashlib.sha256(data).hexdigest() != expected_sha256:
        raise IndexStoreError(
            f"index file {path} does not match the checksum in {index_dir / storage.CURRENT} (corrupted on disk); "
            f"re-ingest the index at {index_dir}"
        )
    manifest = json.loads(data.decode("utf-8"))
    if not isinstance(manifest, dict) or manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"format_version is not {FORMAT_VERSION}")
    return manifest


def _read_chunks(path: Path, index_dir: Path) -> list[Chunk]:
    try:
        with open(path, encoding="utf-8") as fh:
            return [Chunk.from_dict(json.loads(line)) for line in fh]
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise IndexStoreError(
            f"index file {path} is missing or corrupt ({type(exc).__name__}); re-ingest the index at {index_dir}"
        ) from exc


def _load_npy(path: Path, index_dir: Path, mmap: bool) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise IndexStoreError(
            f"index file {path} is missing or corrupt ({exc}); re-ingest the index at {index_dir}"
        ) from exc


def _check_domains(chunks: Sequence[Chunk]) -> None:
    """Checked before any embedding work, so a bad domain never wastes a build."""
    for c in chunks:
        if not isinstance(c.domain, str) or not c.domain.strip():
            raise InputError(f"chunk {c.id!r} has an empty domain; give it a name or leave it at 'default'")
        try:
            c.domain.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"chunk {c.id!r} has a domain that is not valid Unicode text ({c.domain!r})") from None


def _check_query(query: str, max_chars: int) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InputError("the query is empty; pass a question or search text")
    check_unicode(query, "the query")
    if len(query) > max_chars:
        raise InputError(
            f"the query has {len(query)} characters, over the limit of {max_chars}; "
            "shorten it or raise retrieval.max_query_chars"
        )
    return query.strip()


def _embed_all_with_sentences(
    texts: list[str], embedder: Embedder, progress: ProgressFn | None, batch: int = 128
) -> tuple[np.ndarray, list[np.ndarray | None]]:
    """:func:`_embed_all` with each chunk's sentence vectors from the same pass."""
    embedder.warm_up()
    out = np.empty((len(texts), embedder.dim), dtype=np.float32)
    pooled: list[np.ndarray | None] = []
    for start in range(0, len(texts), batch):
        out[start : start + batch], rows = embed_chunks_with_sentences(texts[start : start + batch], embedder)
        pooled.extend(rows)
        if progress:
            progress("embed", min(start + batch, len(texts)), len(texts))
    return out, pooled


def _pool_missing(
    texts: list[str],
    embedder: Embedder,
    pooled: Sequence[np.ndarray | None] | None,
    known: dict[str, np.ndarray] | None,
    progress: ProgressFn | None,
    batch: int = 128,
) -> list[np.ndarray | None]:
    """``pooled`` completed with a forward pass over the chunks that have sentences but no pooled
    rows and whose sentences ``known`` (the previous generation's, made the same way) lacks."""
    out: list[np.ndarray | None] = list(pooled) if pooled is not None else [None] * len(texts)
    todo = [
        i for i, text in enumerate(texts)
        if out[i] is None and any(known is None or s not in known for s in own_sentences(text))
    ]  # fmt: skip
    for start in range(0, len(todo), batch):
        rows = todo[start : start + batch]
        _, fresh = embed_chunks_with_sentences([texts[i] for i in rows], embedder)
        for i, vectors in zip(rows, fresh, strict=True):
            out[i] = vectors
        if progress:
            progress("sentences", min(start + batch, len(todo)), len(todo))
    return out


def _embed_all(texts: list[str], embedder: Embedder, progress: ProgressFn | None, batch: int = 128) -> np.ndarray:
    # Small batches so a progress bar moves during embedding; the embedder batches internally anyway.
    embedder.warm_up()
    out = np.empty((len(texts), embedder.dim), dtype=np.float32)
    for start in range(0, len(texts), batch):
        out[start : start + batch] = embedder.embed(texts[start : start + batch])
        if progress:
            progress("embed", min(start + batch, len(texts)), len(texts))
    return out


def chunk_documents(
    docs: Iterable[Any], config: IngestConfig, extract: Callable[[str], dict[str, list[str]]] | None
) -> list[Chunk]:
    """The chunks of loaded documents, with ids ``<doc_id>:<position>`` (every ingest path uses this).

    Each of a document's segments (a PDF page, a Markdown/HTML section) is chunked on its own, so
    a chunk never crosses a page or a heading; positions run on across a document's segments.
    Every chunk records where it came from (path, page, heading path, character span, URL).
    """
    from ragsieve.ingest import chunk_text

    out = []
    for doc in docs:
        parts = doc.parts() if hasattr(doc, "parts") else []
        if not parts:  # a document-like object without segments
            from ragsieve.ingest.loaders import Segment

            parts = [Segment(doc.text)]
        position = 0
        for segment in parts:
            pieces = chunk_text(
                segment.text, config.chunking.max_tokens, config.chunking.overlap_tokens, config.chunking.unit,
                heading_chars=getattr(segment, "heading_chars", 0),
            )
            for piece in pieces:
                metadata = dict(doc.metadata)
                if extract is not None:
                    metadata["entities"] = extract(piece.text)
                out.append(
                    Chunk(
                        id=f"{doc.doc_id}:{position}",
                        text=piece.text,
                        doc_id=doc.doc_id,
                        source=doc.source,
                        domain=doc.domain,
                        title=doc.title,
                        position=position,
                        metadata=metadata,
                        path=getattr(doc, "path", None),
                        page=segment.page,
                        page_label=segment.page_label,
                        heading=list(segment.heading) or None,
                        char_start=segment.offset + piece.start,
                        char_end=segment.offset + piece.end,
                        url=getattr(doc, "url", None),
                    )
                )
                position += 1
    return out


def entity_extractor(config: IngestConfig) -> Callable[[str], dict[str, list[str]]] | None:
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


# An index built before sentence vectors were stored computes them on its first question only
# up to this many sentences (about a minute of MiniLM on two CPU cores); a larger one is told to
# re-ingest, which stores them without re-embedding its chunks.
SENTENCES_ON_FIRST_USE = 20_000
# A cosine of unit vectors lies in [-1, 1]; float32 rounding stays far inside this margin.
SCORE_EPS = 1e-3
# Rows whose norms are checked when an index (or a partition's vector file) is opened.
NORM_SAMPLE = 64


def _sample_rows(n: int, size: int = NORM_SAMPLE) -> np.ndarray:
    """Evenly spread rows (first and last included): the same rows on every open."""
    if n <= size:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, size).round().astype(np.int64))


def _bad_norms(vectors: np.ndarray, normalized: bool) -> bool:
    norms = np.linalg.norm(np.asarray(vectors, dtype=np.float64), axis=1)
    if not np.all(np.isfinite(norms)):
        return True
    # A unit vector, or the zero vector an empty text may embed to.
    return normalized and bool(np.any((np.abs(norms - 1.0) > 1e-2) & (norms > 1e-6)))


def _verify_hint(index_dir: Path) -> str:
    return (
        f"run `ragsieve info --index {index_dir} --verify` to find the damaged file, then re-ingest "
        f"(`ragsieve ingest PATH --index {index_dir}`)"
    )


def check_vector_sample(vectors: np.ndarray, path: Path, index_dir: Path, normalized: bool) -> None:
    """Norms of a sample of ``vectors`` (cheap: ``NORM_SAMPLE`` rows of a memory map): garbage
    bytes in a vector file usually show as non-finite or far-from-unit norms."""
    if len(vectors) == 0:
        return
    rows = _sample_rows(len(vectors))
    if _bad_norms(vectors[rows], normalized):
        raise IndexStoreError(
            f"index file {path} holds corrupt vectors (non-finite or not unit length); {_verify_hint(index_dir)}"
        )


def check_dense_scores(scores: np.ndarray, bound: float, path: Path, index_dir: Path) -> None:
    """Dense scores must be finite and, for unit vectors, within ``bound`` (the query's norm)."""
    if scores.size == 0:
        return
    if not np.all(np.isfinite(scores)) or float(np.max(np.abs(scores))) > bound:
        worst = float(np.max(np.abs(np.nan_to_num(scores, nan=np.inf))))
        raise IndexStoreError(
            f"index file {path} returned an impossible similarity ({worst:.3g}; cosines lie within [-1, 1]): "
            f"the file is corrupt; {_verify_hint(index_dir)}"
        )


def sparse_query_note(query: str) -> str | None:
    """Why BM25 cannot match ``query`` at all, or None: a query of only stopwords, punctuation,
    symbols or emoji has no term left after tokenisation, so sparse search returns 0 hits."""
    if bm25_tokenize([query])[0]:
        return None
    return (
        "the query has no searchable words for keyword (sparse) search: BM25 drops stopwords, "
        "punctuation, symbols and emoji, and nothing else is left; add content words, or search "
        "in dense or hybrid mode"
    )
