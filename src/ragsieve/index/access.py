"""Who may read which passages: :class:`Access` (a reader's grants) and :class:`ScopedIndex`
(an open index as one reader sees it).

A reader may read a chunk when any of its grants matches: its partition (``domains``), one of
its document tags (``chunk.metadata["tags"]``, set at ingest), or its file path under one of
``paths`` (at folder boundaries: ``hr`` and ``hr/`` cover ``hr/a.md`` and ``hr/x/b.md``, not
``hrx/c.md``; a file's own path covers that file). ``everything`` reads all. A chunk without
tags (an index built before tags existed) can be reached only through a partition or path grant.

:class:`ScopedIndex` puts the grants inside the search itself: the allowed rows are the search's
mask, so ``k`` hits are ``k`` allowed ones, and every other read (a chunk by id, the chunk list,
the stored vectors, the filterable fields) sees only allowed chunks. What it does not offer
raises ``AttributeError``: nothing reaches the whole index through it by accident.

Example:
    >>> from ragsieve.types import Chunk
    >>> hr = Access(tags=frozenset({"hr"}))
    >>> hr.allows(Chunk(id="a", text="t", doc_id="a", source="a", metadata={"tags": ["hr"]}))
    True
    >>> hr.allows(Chunk(id="b", text="t", doc_id="b", source="b"))
    False
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.errors import ConfigError, InputError
from ragsieve.index.filters import check_where, known_fields
from ragsieve.types import Chunk, SearchHit


def normalise_prefix(prefix: str) -> str:
    """A path grant as stored: forward slashes, no leading ``./`` or ``/``, no trailing ``/``."""
    value = prefix.replace("\\", "/").strip()
    while value.startswith("./"):
        value = value[2:]
    return value.strip("/")


def chunk_tags(chunk: Chunk) -> list[str]:
    """The document tags of ``chunk`` (``metadata["tags"]``: a list, or one text)."""
    tags = (chunk.metadata or {}).get("tags")
    if isinstance(tags, str):
        return [tags]
    if isinstance(tags, list | tuple):
        return [str(t) for t in tags]
    return []


@dataclass(frozen=True)
class Access:
    """One reader's grants. ``everything``: all passages; else the union of the partitions in
    ``domains``, the documents tagged with one of ``tags`` and the files under one of ``paths``."""

    everything: bool = False
    domains: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()
    paths: tuple[str, ...] = ()
    # The name the operator gave the grant (logs only; never sent to a client).
    name: str = field(default="", compare=False)

    @classmethod
    def all(cls, name: str = "all-access") -> Access:
        return cls(everything=True, name=name)

    @property
    def scope_key(self) -> str:
        """The grants as one text: equal grants, equal key (pipelines and caches are per key)."""
        if self.everything:
            return "all"
        return json.dumps(
            {"domains": sorted(self.domains), "tags": sorted(self.tags), "paths": sorted(set(self.paths))},
            separators=(",", ":"),
        )

    def _path_allowed(self, path: str | None) -> bool:
        if not path or not self.paths:
            return False
        norm = normalise_prefix(path)
        return any(norm == p or norm.startswith(p + "/") for p in self.paths if p)

    def allows(self, chunk: Chunk) -> bool:
        if self.everything:
            return True
        if chunk.domain in self.domains:
            return True
        if self.tags and any(t in self.tags for t in chunk_tags(chunk)):
            return True
        return self._path_allowed(chunk.path)

    def mask(self, chunks: Sequence[Chunk]) -> np.ndarray:
        """Boolean mask over ``chunks`` of those this reader may read."""
        if self.everything:
            return np.ones(len(chunks), dtype=bool)
        return np.fromiter((self.allows(c) for c in chunks), dtype=bool, count=len(chunks))


def searchable_index(opened: Any) -> Any:
    """The :class:`ragsieve.index.Index` behind ``opened`` (itself, or a folder store's), or a
    :class:`ConfigError` when it is a store whose search cannot take the reader's mask."""
    from ragsieve.index.store import Index

    if isinstance(opened, Index):
        return opened
    inner = getattr(opened, "index", None)
    if isinstance(inner, Index):
        return inner
    raise ConfigError(
        "access keys limited to some documents need the folder index (store.backend = 'folder'), whose "
        "search applies the reader's grants; give this key `all = true` or serve a folder index"
    )


class _AllowedRows:
    """Rows of an array as the scoped index numbers them (its allowed rows, in order)."""

    def __init__(self, array: np.ndarray, rows: np.ndarray) -> None:
        self._array = array
        self._rows = rows

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self._rows), *self._array.shape[1:])

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, local: Any) -> np.ndarray:
        return np.asarray(self._array[self._rows[np.asarray(local, dtype=np.int64)]])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # The whole allowed block (the corpus audit reads every allowed vector at once).
        block = np.asarray(self._array[self._rows])
        return block if dtype is None else block.astype(dtype, copy=False)


class ScopedIndex:
    """An open index as a reader with ``access`` sees it: searches return only allowed chunks
    (the grants are the search's row mask), ``get`` of any other id fails as an unknown id does,
    and ``chunks``, ``row``, ``embeddings``, ``sentence_vectors`` and ``fields`` cover the allowed
    chunks only (numbered in their own order). Partition names (``domains``) are the index's.

    ``opened``: an :class:`~ragsieve.index.Index` or a folder store over one."""

    def __init__(self, opened: Any, access: Access) -> None:
        self._index = searchable_index(opened)
        self.access = access
        self._lock = threading.Lock()
        self._mask: np.ndarray | None = None
        self._rows: np.ndarray | None = None
        self._local: dict[str, int] | None = None
        self._chunks: list[Chunk] | None = None
        self._fields: set[str] | None = None

    # ------------------------------------------------------------------ the allowed set
    def _ensure(self) -> np.ndarray:
        if self._mask is None:
            with self._lock:
                if self._mask is None:
                    chunks = self._index.chunks
                    mask = self.access.mask(chunks)
                    rows = np.flatnonzero(mask).astype(np.int64)
                    self._chunks = [chunks[int(r)] for r in rows]
                    self._local = {c.id: i for i, c in enumerate(self._chunks)}
                    self._rows = rows
                    self._mask = mask
        return self._mask

    @property
    def mask(self) -> np.ndarray:
        """The allowed rows of the whole index (what its search is masked with)."""
        return self._ensure()

    @property
    def chunks(self) -> list[Chunk]:
        self._ensure()
        assert self._chunks is not None
        return self._chunks

    def __len__(self) -> int:
        return len(self.chunks)

    def row(self, chunk_id: str) -> int:
        self._ensure()
        assert self._local is not None
        return self._local[chunk_id]  # KeyError for an unknown or forbidden id alike

    def get(self, chunk_id: str) -> Chunk:
        try:
            return self.chunks[self.row(chunk_id)]
        except KeyError:
            raise InputError(f"no chunk with id {chunk_id!r} in the index") from None

    @property
    def embeddings(self) -> _AllowedRows:
        self._ensure()
        assert self._rows is not None
        return _AllowedRows(self._index.embeddings, self._rows)

    def sentence_vectors(self, rows: Sequence[int]) -> tuple[list[str], np.ndarray]:
        self._ensure()
        assert self._rows is not None
        return self._index.sentence_vectors([int(self._rows[int(r)]) for r in rows])

    def fields(self) -> set[str]:
        if self._fields is None:
            self._fields = known_fields(self.chunks)
        return self._fields

    # ------------------------------------------------------------------ what the index is
    @property
    def dir(self) -> Path:
        return self._index.dir

    @property
    def embedder(self) -> Any:
        return self._index.embedder

    @property
    def source_weights(self) -> dict[str, float] | None:
        return self._index.source_weights

    @property
    def generation(self) -> str:
        return str(self._index.generation)

    @property
    def domains(self) -> list[str]:
        return list(self._index.domains)

    @property
    def partitioned(self) -> bool:
        return bool(self._index.partitioned)

    @property
    def normalized(self) -> bool:
        return bool(self._index.normalized)

    @property
    def corpus_root(self) -> Path | None:
        return self._index.corpus_root

    def warm_up(self, *, wait_for_embedder: bool = True) -> None:
        self._index.warm_up(wait_for_embedder=wait_for_embedder)
        self._ensure()

    def ready_embedder(self) -> None:
        self._index.ready_embedder()

    def check_embedder(self) -> None:
        self._index.check_embedder()

    def close(self) -> None:
        """Nothing: the open index belongs to whoever opened it, not to this view."""

    # ------------------------------------------------------------------ search
    def search(
        self,
        query: str,
        k: int = 10,
        mode: Any = "hybrid",
        where: dict[str, Any] | None = None,
        domains: Sequence[str] | None = None,
        retrieval: Any = None,
        query_vector: np.ndarray | None = None,
        prune_threshold: float | None = None,
    ) -> list[SearchHit]:
        """:meth:`ragsieve.index.Index.search` with this reader's grants as its row mask."""
        if where:  # checked against the fields of allowed chunks only: no error names another's
            check_where(where, self.fields())
        hits: list[SearchHit] = self._index.search(
            query, k, mode, where, domains, retrieval, query_vector, prune_threshold, allowed=self.mask
        )
        return hits


def scoped(opened: Any, access: Access | None) -> Any:
    """``opened`` as ``access`` sees it: itself for all-access (or ``None``), else a :class:`ScopedIndex`."""
    if access is None or access.everything:
        return opened
    return ScopedIndex(opened, access)


def tags_of(values: Iterable[Any]) -> list[str]:
    """Tags as stored: texts, stripped, empty ones dropped, first occurrence kept."""
    return list(dict.fromkeys(str(v).strip() for v in values if str(v).strip()))


__all__ = ["Access", "ScopedIndex", "chunk_tags", "normalise_prefix", "scoped", "searchable_index", "tags_of"]
