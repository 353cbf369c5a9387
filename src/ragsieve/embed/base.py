"""The embedder interface, a content-hash cache shared by all backends, and an in-memory memo
that embeds each text once per process."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised float32 vectors (rows), so inner product = cosine."""

    @property
    def model_name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def warm_up(self) -> None: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def to_dict(self) -> dict[str, Any]: ...


def content_key(model_name: str, text: str) -> str:
    return hashlib.sha256(f"{model_name}\x00{text}".encode()).hexdigest()


class EmbeddingCache:
    """Vectors keyed by sha256(model, text) in one SQLite file; safe across processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._conn.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB)")
        return self._conn

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._lock:
            conn = self._connection()
            for start in range(0, len(keys), 500):
                batch = list(keys[start : start + 500])
                marks = ",".join("?" * len(batch))
                for key, blob in conn.execute(f"SELECT key, vec FROM vectors WHERE key IN ({marks})", batch):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        with self._lock:
            conn = self._connection()
            conn.executemany(
                "INSERT OR REPLACE INTO vectors (key, vec) VALUES (?, ?)",
                [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()],
            )
            conn.commit()


def embed_with_cache(
    texts: Sequence[str], model_name: str, compute: Any, cache: EmbeddingCache | None, dim: int
) -> np.ndarray:
    """Embed ``texts`` with ``compute`` (a callable on a list of texts), reusing cached rows."""
    if len(texts) == 0:
        return np.zeros((0, dim), dtype=np.float32)
    if cache is None:
        return np.asarray(compute(list(texts)), dtype=np.float32)
    keys = [content_key(model_name, t) for t in texts]
    found = cache.get_many(keys)
    missing = [i for i, k in enumerate(keys) if k not in found]
    out = np.empty((len(texts), dim), dtype=np.float32)
    if missing:
        fresh = np.asarray(compute([texts[i] for i in missing]), dtype=np.float32)
        cache.put_many({keys[i]: fresh[j] for j, i in enumerate(missing)})
        for j, i in enumerate(missing):
            out[i] = fresh[j]
    for i, k in enumerate(keys):
        if k in found:
            out[i] = found[k]
    return out


def l2_normalize(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (x / norms).astype(np.float32, copy=False)


class MemoEmbedder:
    """An embedder that embeds each text once: the vectors it computed, and vectors known from
    elsewhere (the index's stored rows, handed in with :meth:`remember`), are kept in memory and
    returned for the same text again. Bounded: beyond ``max_items`` texts the least recently used
    is forgotten.

    Why: one question's checks embed the same texts several times (the judge embeds each
    candidate passage and its sentences, the ScopeCoE selector and the verifier embed those
    sentences again, the poison check the passages), and the candidate passages are already
    embedded in the index. The vectors are the inner embedder's own; a remembered one may differ
    from a fresh call in the last float bits, as any two calls batching a text with different
    neighbours already do.

    Example:
        >>> from ragsieve.embed import OnnxEmbedder
        >>> memo = MemoEmbedder(OnnxEmbedder())   # doctest: +SKIP
        >>> memo.embed(["a", "b"]); memo.embed(["b"])  # the second call embeds nothing  # doctest: +SKIP
    """

    def __init__(self, inner: Embedder, max_items: int = 4096, *, wait_in_warm_up: bool = True) -> None:
        self.inner = inner
        self.max_items = max_items
        # False: warm_up only starts an inner embedder that loads on a worker thread (its owner,
        # e.g. an index, waits for it; the first embedding here does too)
        self.wait_in_warm_up = wait_in_warm_up
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def warm_up(self) -> None:
        start = getattr(self.inner, "start_warm_up", None)
        if not self.wait_in_warm_up and start is not None:
            start()
            return
        self.inner.warm_up()

    def to_dict(self) -> dict[str, Any]:
        return self.inner.to_dict()

    def __len__(self) -> int:
        return len(self._vectors)

    def __bool__(self) -> bool:
        # an embedder even while it remembers nothing (``__len__`` alone would make it falsy)
        return True

    def _store(self, text: str, vector: np.ndarray) -> None:
        self._vectors[text] = vector
        self._vectors.move_to_end(text)
        while len(self._vectors) > self.max_items:
            self._vectors.popitem(last=False)

    def remember(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Keep ``vectors[i]`` as the vector of ``texts[i]``, replacing one computed here (a stored
        vector is the text's canonical one: the index searched with it)."""
        rows = np.asarray(vectors, dtype=np.float32)
        with self._lock:
            for text, row in zip(texts, rows, strict=True):
                self._store(text, np.array(row, dtype=np.float32))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            found = {t: self._vectors[t] for t in texts if t in self._vectors}
            for t in found:
                self._vectors.move_to_end(t)
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            fresh = np.asarray(self.inner.embed(missing), dtype=np.float32)
            with self._lock:
                for t, row in zip(missing, fresh, strict=True):
                    found[t] = row
                    self._store(t, row)
        return np.stack([found[t] for t in texts]).astype(np.float32, copy=False)
