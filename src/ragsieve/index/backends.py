"""Thin wrappers over faiss (dense) and bm25s (sparse) with a common search signature.

Both return ``(ids, scores)`` as numpy arrays of local row ids, best first, and accept an
optional boolean mask of allowed rows.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
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
        bits = None
        if mask is not None:
            if not mask.any():
                return _EMPTY
            # A bitmap (one bit per row, faiss's little-endian bit order): built in microseconds and
            # tested per row in O(1); a batch selector hashes every allowed id on each search.
            bits = np.packbits(np.asarray(mask, dtype=bool), bitorder="little")
            selector = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bits))
            params = faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
        k = min(k, self.size)
        scores, ids = self.index.search(query.reshape(1, -1).astype(np.float32), k, params=params)
        del bits  # the selector reads it until the search returns
        keep = ids[0] >= 0
        return ids[0][keep].astype(np.int64), scores[0][keep]


_STEMMER: Any = None


def english_stemmer() -> Any:
    """The English Snowball stemmer (PyStemmer) the sparse index stems with, made once per process."""
    global _STEMMER
    if _STEMMER is None:
        import Stemmer

        _STEMMER = Stemmer.Stemmer("english")
    return _STEMMER


_BM25S_LOGGER_RESET = False


def import_bm25s() -> Any:
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


# bm25s.tokenize's token pattern (scikit-learn's CountVectorizer default)
_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_STOPWORDS: frozenset[str] | None = None


def _stopwords() -> frozenset[str]:
    """bm25s's English stop words, those every index was built with. Read from its
    ``stopwords`` module alone: importing the bm25s package imports numba and scipy.sparse,
    about half a second of a cold question that only reads an index."""
    global _STOPWORDS
    if _STOPWORDS is None:
        words: Any = None
        spec = importlib.util.find_spec("bm25s")
        if spec is not None and spec.submodule_search_locations:
            path = Path(next(iter(spec.submodule_search_locations))) / "stopwords.py"
            module_spec = importlib.util.spec_from_file_location("ragsieve._bm25s_stopwords", path)
            if module_spec is not None and module_spec.loader is not None and path.is_file():
                module = importlib.util.module_from_spec(module_spec)
                module_spec.loader.exec_module(module)
                words = getattr(module, "STOPWORDS_EN", None)
        if words is None:  # a layout this reader does not know: ask the package
            words = import_bm25s().stopwords.STOPWORDS_EN
        _STOPWORDS = frozenset(words)
    return _STOPWORDS


def bm25_tokenize(texts: list[str]) -> list[list[str]]:
    """English word tokens, stopwords removed, Snowball-stemmed: what ``bm25s.tokenize`` (with
    ``stopwords="en"`` and this stemmer) gives at index time, without importing bm25s."""
    stop = _stopwords()
    stem = english_stemmer().stemWords
    out = []
    for text in texts:
        words = [w for w in _TOKEN.findall(text.lower()) if w not in stop]
        out.append(list(stem(words)) if words else [])
    return out


class BM25Scores:
    """A saved bm25s index read with numpy alone: the per-token BM25 scores as a CSC matrix
    (``data``, ``indices``, ``indptr``, memory-mapped) and the vocabulary; a query's scores are
    the sum of its tokens' columns, and the top k are chosen as bm25s's numpy backend chooses
    them, so results (ties and their order included) are bm25s's own."""

    # scoring methods whose saved scores are all there is (bm25l and bm25+ add a per-token
    # score for documents without the token, which this reader does not apply)
    EAGER_METHODS = ("robertson", "lucene", "atire")

    def __init__(
        self,
        data: np.ndarray,
        indices: np.ndarray,
        indptr: np.ndarray,
        vocab: dict[str, int],
        num_docs: int,
        dtype: str,
    ) -> None:
        self.data, self.indices, self.indptr = data, indices, indptr
        self.vocab = vocab
        self.num_docs = num_docs
        self.dtype = np.dtype(dtype)

    @classmethod
    def load(cls, folder: Path) -> BM25Scores | None:
        """The index bm25s saved in ``folder``, or None when it uses a method this reader does
        not score (read it with bm25s then). Malformed files raise ValueError, KeyError or
        TypeError; missing ones OSError."""
        params = json.loads((folder / "params.index.json").read_text(encoding="utf-8"))
        if params.get("method") not in cls.EAGER_METHODS or (folder / "nonoccurrence_array.index.npy").exists():
            return None
        vocab = json.loads((folder / "vocab.index.json").read_text(encoding="utf-8"))
        if not isinstance(vocab, dict):
            raise TypeError("the BM25 vocabulary is not a mapping")

        def array(name: str) -> np.ndarray:
            return np.load(folder / name, mmap_mode="r", allow_pickle=False)

        data, indices = array("data.csc.index.npy"), array("indices.csc.index.npy")
        indptr = array("indptr.csc.index.npy")
        num_docs = int(params["num_docs"])
        # bm25s adds an empty token to the vocabulary with no column of its own; no query has it
        ids = {str(k): int(v) for k, v in vocab.items() if k != ""}
        if (
            data.ndim != 1
            or indices.shape != data.shape
            or indptr.ndim != 1
            or len(indptr) == 0
            or indptr[0] != 0
            or indptr[-1] != len(data)
            or (ids and (min(ids.values()) < 0 or max(ids.values()) >= len(indptr) - 1))
        ):
            raise ValueError("the BM25 score matrix is inconsistent")
        return cls(data, indices, indptr, ids, num_docs, params["dtype"])

    def scores(self, tokens: list[str]) -> np.ndarray:
        ids = np.asarray([self.vocab[t] for t in tokens if t in self.vocab], dtype=np.int64)
        scores = np.zeros(self.num_docs, dtype=self.dtype)
        for token in ids:
            start, end = self.indptr[token], self.indptr[token + 1]
            np.add.at(scores, self.indices[start:end], self.data[start:end])
        return scores

    @staticmethod
    def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """bm25s's numpy top-k (``selection._topk_numpy`` with ``sorted=True``), step for step."""
        part = np.argpartition(scores, -k)[-k:]
        part_scores = np.take(scores, part)
        order = np.flip(np.argsort(part_scores))
        return part_scores[order], part[order]


class SparseBackend:
    """BM25 (Okapi, bm25s defaults k1=1.5, b=0.75) over stemmed, English-stopworded word tokens.

    Built and saved by bm25s; searched by :class:`BM25Scores` (numpy) when it can read the
    saved method, else by bm25s."""

    FOLDER = "bm25"

    def __init__(self, retriever: Any, size: int) -> None:
        self.retriever = retriever  # a BM25Scores, or a bm25s.BM25
        self._size = size

    @classmethod
    def build(cls, texts: list[str]) -> SparseBackend:
        bm25s = import_bm25s()

        retriever = bm25s.BM25()
        if texts:
            tokens = bm25s.tokenize(texts, stopwords="en", stemmer=english_stemmer(), show_progress=False)
            retriever.index(tokens, show_progress=False)
        return cls(retriever, len(texts))

    def save(self, folder: Path) -> None:
        if self._size:
            self.retriever.save(str(folder / self.FOLDER))

    @classmethod
    def load(cls, folder: Path, size: int) -> SparseBackend:
        if size == 0:
            return cls(None, 0)
        scores = BM25Scores.load(folder / cls.FOLDER)
        if scores is not None:
            if scores.num_docs != size:
                raise ValueError(f"the BM25 index holds {scores.num_docs} documents, expected {size}")
            return cls(scores, size)
        return cls(import_bm25s().BM25.load(str(folder / cls.FOLDER), mmap=True), size)

    @property
    def size(self) -> int:
        return self._size

    def search(self, tokens: list[str], k: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        if self._size == 0 or k <= 0 or not tokens:
            return _EMPTY
        k = min(k, self._size)
        weight_mask = mask.astype(np.float32) if mask is not None else None
        if isinstance(self.retriever, BM25Scores):
            scores = self.retriever.scores(tokens)
            if weight_mask is not None:
                scores *= weight_mask
            top_scores, top_ids = BM25Scores.top_k(scores, k)
            ids, found = top_ids.astype(np.int64), top_scores
        else:
            found_ids, found_scores = self.retriever.retrieve(
                [tokens], k=k, show_progress=False, n_threads=1, weight_mask=weight_mask
            )
            ids, found = found_ids[0].astype(np.int64), found_scores[0]
        keep = found > 0  # a zero score means no query term occurs in the chunk
        return ids[keep], found[keep]
