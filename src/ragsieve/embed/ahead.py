"""Embedding on a background thread while ingest is still reading and chunking files."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ragsieve.embed.base import Embedder

__all__ = ["EmbedAhead"]

# What ``with_sentences`` gives for a batch of texts: their vectors, and each text's sentence rows.
WithSentences = Callable[[list[str]], tuple[np.ndarray, list[np.ndarray]]]


class EmbedAhead:
    """Embeds chunk texts on a background thread while the caller keeps reading and chunking
    files, so the embedder (which releases the GIL) works during loading instead of after it.

    ``submit`` queues texts (in batches of ``batch``, skipping those in ``skip`` and those seen
    before); ``finish`` waits, embeds whatever was not embedded ahead, and returns the vectors
    of the texts asked for, in order. At most ``max_pending`` batches wait for the embedder: a
    ``submit`` beyond that blocks until one is done, so reading never runs more than that far
    ahead of embedding, whatever the corpus size. ``progress`` (``(stage, done, total)``) hears
    of each batch embedded ahead, ``total`` being the texts submitted so far.

    ``with_sentences`` (e.g. :func:`ragsieve.index.sentences.embed_chunks_with_sentences` bound
    to the embedder) embeds each batch instead of ``embedder.embed`` and also gives each text's
    sentence vectors from the same forward pass; :meth:`sentences_of` returns them.

    Example:
        >>> ahead = EmbedAhead(embedder)                        # doctest: +SKIP
        >>> ahead.submit(["first file's chunk", "another"])     # doctest: +SKIP
        >>> vectors = ahead.finish(["first file's chunk", "another"])  # doctest: +SKIP
    """

    def __init__(
        self,
        embedder: Embedder,
        batch: int = 128,
        skip: Callable[[str], bool] | None = None,
        with_sentences: WithSentences | None = None,
        max_pending: int = 4,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.embedder = embedder
        self.batch = batch
        self.skip = skip
        self.with_sentences = with_sentences
        self.max_pending = max(1, max_pending)
        self.progress = progress
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragsieve-embed-ahead")
        self._pending: list[str] = []
        self._futures: list[Any] = []
        self._seen: set[str] = set()
        self._sentences: dict[str, np.ndarray] = {}
        self._slots = threading.BoundedSemaphore(self.max_pending)
        self._embedded_ahead = 0
        self.peak_pending = 0  # the most batches that ever waited for the embedder at once
        self._waiting = 0
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
            self._slots.acquire()  # blocks while max_pending batches wait: memory stays bounded
            with self._lock:
                self._waiting += 1
                self.peak_pending = max(self.peak_pending, self._waiting)
            self._futures.append((group, self._pool.submit(self._embed_ahead, group)))

    def _embed_ahead(self, texts: list[str]) -> np.ndarray:
        try:
            vectors = self._embed(texts)
        finally:
            with self._lock:
                self._waiting -= 1
            self._slots.release()
        with self._lock:
            self._embedded_ahead += len(texts)
            done, total = self._embedded_ahead, len(self._seen)
        if self.progress:
            self.progress("embed", done, total)
        return vectors

    def _embed(self, texts: list[str]) -> np.ndarray:
        start = time.perf_counter()
        self.embedder.warm_up()
        if self.with_sentences is not None:
            vectors, sentences = self.with_sentences(texts)
            with self._lock:
                self._sentences.update(zip(texts, sentences, strict=True))
        else:
            vectors = self.embedder.embed(texts)
        with self._lock:
            self.embed_seconds += time.perf_counter() - start
        return np.asarray(vectors, dtype=np.float32)

    def sentences_of(self, text: str) -> np.ndarray | None:
        """The sentence vectors ``with_sentences`` gave for ``text`` (``None`` when it was not
        embedded here, or without ``with_sentences``)."""
        with self._lock:
            return self._sentences.get(text)

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
            if progress and self._futures:
                # the batches embedded ahead (reported as they were done, when ``progress`` was given)
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
            if future.cancel():
                self._slots.release()  # its slot, never released by a run that will not happen
        self._pool.shutdown(wait=True)
