"""Embedding on a background thread while ingest is still reading and chunking files."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ragsieve.embed.base import Embedder

__all__ = ["EmbedAhead"]


class EmbedAhead:
    """Embeds chunk texts on a background thread while the caller keeps reading and chunking
    files, so the embedder (which releases the GIL) works during loading instead of after it.

    ``submit`` queues texts (in batches of ``batch``, skipping those in ``skip`` and those seen
    before); ``finish`` waits, embeds whatever was not embedded ahead, and returns the vectors
    of the texts asked for, in order.

    Example:
        >>> ahead = EmbedAhead(embedder)                        # doctest: +SKIP
        >>> ahead.submit(["first file's chunk", "another"])     # doctest: +SKIP
        >>> vectors = ahead.finish(["first file's chunk", "another"])  # doctest: +SKIP
    """

    def __init__(self, embedder: Embedder, batch: int = 128, skip: Callable[[str], bool] | None = None) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.embedder = embedder
        self.batch = batch
        self.skip = skip
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragsieve-embed-ahead")
        self._pending: list[str] = []
        self._futures: list[Any] = []
        self._seen: set[str] = set()
        self.embed_seconds = 0.0  # time inside the embedder, ahead and at the end (for chunks/s)
        self._lock = threading.Lock()

    def submit(self, texts: Sequence[str]) -> None:
        for text in texts:
            if text in self._seen or (self.skip is not None and self.skip(text)):
                continue
            self._seen.add(text)
            self._pending.append(text)
        while len(self._pending) >= self.batch:
            group, self._pending = self._pending[: self.batch], self._pending[self.batch :]
            self._futures.append((group, self._pool.submit(self._embed, group)))

    def _embed(self, texts: list[str]) -> np.ndarray:
        start = time.perf_counter()
        self.embedder.warm_up()
        vectors = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        with self._lock:
            self.embed_seconds += time.perf_counter() - start
        return vectors

    def finish(
        self, texts: Sequence[str], progress: Callable[[str, int, int], None] | None = None
    ) -> np.ndarray:
        """The vectors of ``texts`` (row i for text i); embeds what was not embedded ahead."""
        try:
            done: dict[str, np.ndarray] = {}
            wanted = set(texts)
            for group, future in self._futures:
                for text, vec in zip(group, future.result(), strict=True):
                    done[text] = vec
                if progress:
                    # one line per batch embedded ahead, as for the batches embedded below
                    progress("embed", sum(t in done for t in wanted), len(texts))
            self.embedder.warm_up()
            out = np.empty((len(texts), self.embedder.dim), dtype=np.float32)
            rest = [i for i, t in enumerate(texts) if t not in done]
            for i, t in enumerate(texts):
                if t in done:
                    out[i] = done[t]
            if progress and not self._futures:
                progress("embed", len(texts) - len(rest), len(texts))
            for start in range(0, len(rest), self.batch):
                rows = rest[start : start + self.batch]
                out[rows] = self._embed([texts[i] for i in rows])
                if progress:
                    progress("embed", len(texts) - len(rest) + start + len(rows), len(texts))
            if progress and self._futures and not rest:
                progress("embed", len(texts), len(texts))  # repeated texts were embedded once
            return out
        finally:
            self.close()

    def close(self) -> None:
        """Stop queued work (a failed ingest should not keep embedding)."""
        for _, future in self._futures:
            future.cancel()
        self._pool.shutdown(wait=True)
