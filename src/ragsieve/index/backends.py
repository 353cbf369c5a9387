"""Thin wrappers over faiss (dense) and bm25s (sparse) with a common search signature.

Both return ``(ids, scores)`` as numpy arrays of local row ids, best first, and accept an
optional boolean mask of allowed rows.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.config import DenseIndexConfig

logger = logging.getLogger(__name__)

_EMPTY = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))


class DenseBackend:
    """Inner-product search on normalised vectors (cosine) with faiss."""

    FILE = "dense.faiss"

    def __init__(self, index: Any) -> None:
        self.index = index

    @classmethod
    def build(cls, vectors: np.ndarray, config: DenseIndexConfig) -> DenseBackend:
        import faiss

        n, dim = vectors.shape
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        index: Any
        if config.kind == "hnsw":
            index = faiss.IndexHNSWFlat(dim, config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efSearch = config.ef_search
        elif config.kind == "ivf" and n >= 4 * config.nlist:
            quantizer = faiss.IndexFlatIP(dim)
            index = faiss.IndexIVFFlat(quantizer, dim, config.nlist, faiss.METRIC_INNER_PRODUCT)
            index.train(vectors)
            index.nprobe = config.nprobe
        else:
            if config.kind == "ivf":
                logger.info("only %d vectors: an IVF index needs >= %d, using exact search", n, 4 * config.nlist)
            index = faiss.IndexFlatIP(dim)
        if n:
            index.add(vectors)
        return cls(index)

    def save(self, folder: Path) -> None:
        import faiss

        faiss.write_index(self.index, str(folder / self.FILE))

    @classmethod
    def load(cls, folder: Path) -> DenseBackend:
        import faiss

        path = str(folder / cls.FILE)
        try:
            index = faiss.read_index(path, faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        except RuntimeError:
            index = faiss.read_index(path)
        return cls(index)

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    @property
    def dim(self) -> int:
        return int(self.index.d)

    def search(self, query: np.ndarray, k: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        if self.size == 0 or k <= 0:
            return _EMPTY
        params = None
        if mask is not None:
            allowed = np.flatnonzero(mask).astype(np.int64)
            if allowed.size == 0:
                return _EMPTY
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(allowed))  # type: ignore[call-arg]
        k = min(k, self.size)
        scores, ids = self.index.search(query.reshape(1, -1).astype(np.float32), k, params=params)
        keep = ids[0] >= 0
        return ids[0][keep].astype(np.int64), scores[0][keep]


_STEMMER: Any = None


def _stemmer() -> Any:
    global _STEMMER
    if _STEMMER is None:
        import Stemmer

        _STEMMER = Stemmer.Stemmer("english")
    return _STEMMER


_BM25S_LOGGER_RESET = False


def _bm25s() -> Any:
    """Import bm25s without its logger override: bm25s sets its own logger to DEBUG on import,
    which would print its internal debug lines under any application's logging setup."""
    global _BM25S_LOGGER_RESET
    import bm25s

    if not _BM25S_LOGGER_RESET:  # once, so an application's own later choice stands
        bm25s_logger = logging.getLogger("bm25s")
        if bm25s_logger.level == logging.DEBUG:
            bm25s_logger.setLevel(logging.NOTSET)
        _BM25S_LOGGER_RESET = True
    return bm25s


def bm25_tokenize(texts: list[str]) -> list[list[str]]:
    """English word tokens, stopwords removed, Snowball-stemmed (as at index time)."""
    bm25s = _bm25s()

    return bm25s.tokenize(
        texts, stopwords="en", stemmer=_stemmer(), return_ids=False, show_progress=False
    )


class SparseBackend:
    """BM25 (Okapi, bm25s defaults k1=1.5, b=0.75) over stemmed, English-stopworded word tokens."""

    FOLDER = "bm25"

    def __init__(self, retriever: Any, size: int) -> None:
        self.retriever = retriever
        self._size = size

    @classmethod
    def build(cls, texts: list[str]) -> SparseBackend:
        bm25s = _bm25s()

        retriever = bm25s.BM25()
        if texts:
            tokens = bm25s.tokenize(texts, stopwords="en", stemmer=_stemmer(), show_progress=False)
            retriever.index(tokens, show_progress=False)
        return cls(retriever, len(texts))

    def save(self, folder: Path) -> None:
        if self._size:
            self.retriever.save(str(folder / self.FOLDER))

    @classmethod
    def load(cls, folder: Path, size: int) -> SparseBackend:
        bm25s = _bm25s()

        if size == 0:
            return cls(bm25s.BM25(), 0)
        return cls(bm25s.BM25.load(str(folder / cls.FOLDER), mmap=True), size)

    @property
    def size(self) -> int:
        return self._size

    def search(self, tokens: list[str], k: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        if self._size == 0 or k <= 0 or not tokens:
            return _EMPTY
        k = min(k, self._size)
        weight_mask = mask.astype(np.float32) if mask is not None else None
        ids, scores = self.retriever.retrieve(
            [tokens], k=k, show_progress=False, n_threads=1, weight_mask=weight_mask
        )
        ids, scores = ids[0].astype(np.int64), scores[0]
        keep = scores > 0  # a zero score means no query term occurs in the chunk
        return ids[keep], scores[keep]
