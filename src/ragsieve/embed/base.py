"""The embedder interface and a content-hash cache shared by all backends."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
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
