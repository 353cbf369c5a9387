"""The vectors of each chunk's sentences, computed at ingest and stored with the index.

The sieve's checks score a question against every sentence of each candidate passage (the
relevance judge's best-sentence cosine, which the ``need`` probe also runs, and the verifier's
support of an answer sentence by the evidence). Embedding those sentences at question time was
most of a cold ``ask``'s work before the first LLM call; stored here, the checks read them like
the chunks' own vectors.

A generation stores them as::

    sentences/offsets.npy   int64 (n_chunks + 1): chunk r's sentences are rows offsets[r]:offsets[r+1]
    sentences/vectors.npy   float32 (m, dim), row j the vector of one sentence

A chunk that is one sentence (its only sentence is its text, as in a sentence index) has no
rows: its stored chunk vector is that sentence's. The sentence texts are not stored: they are
:func:`passage_sentences` of the chunk text, and the manifest records the splitter's version
(``sentence_vectors.split_version``) so that a changed splitter never pairs a vector with the
wrong text. The files are checksummed like every other file of the generation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "FOLDER",
    "OFFSETS",
    "SPLIT_VERSION",
    "VECTORS",
    "compute_sentence_vectors",
    "own_sentences",
    "passage_sentences",
    "save_sentence_vectors",
]

FOLDER = "sentences"
OFFSETS = f"{FOLDER}/offsets.npy"
VECTORS = f"{FOLDER}/vectors.npy"
# Bumped whenever passage_sentences splits a text differently: stored vectors of another
# version are ignored (and computed again once).
SPLIT_VERSION = 1
# Sentences embedded per call while computing them (a progress line moves between calls).
BATCH = 256


def passage_sentences(text: str) -> list[str]:
    """The sentences of a passage as the checks embed them (the relevance judge's features and
    the verifier's evidence): :func:`ragsieve.ingest.split_sentences`, or the passage itself when
    it has none."""
    from ragsieve.ingest.chunking import split_sentences

    return [s for s in split_sentences(text) if s.strip()] or [text]


def own_sentences(text: str) -> list[str]:
    """The sentences of a chunk that need a stored row: none when its only sentence is its text
    (the chunk's own vector is that sentence's)."""
    sentences = passage_sentences(text)
    return [] if sentences == [text] else sentences


def compute_sentence_vectors(
    texts: Sequence[str],
    embedder: Any,
    known: Callable[[str], np.ndarray | None] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, vectors)`` for the chunks whose texts are ``texts``: each distinct sentence is
    embedded once, except those ``known`` gives a vector for (a previous generation's)."""
    per_chunk = [own_sentences(t) for t in texts]
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in per_chunk], out=offsets[1:])
    dim = int(embedder.dim)
    vectors = np.empty((int(offsets[-1]), dim), dtype=np.float32)
    rows_of: dict[str, list[int]] = {}
    row = 0
    for sentences in per_chunk:
        for sentence in sentences:
            rows_of.setdefault(sentence, []).append(row)
            row += 1
    todo: list[str] = []
    for sentence, rows in rows_of.items():
        vec = known(sentence) if known is not None else None
        if vec is not None and np.shape(vec) == (dim,):
            vectors[rows] = vec
        else:
            todo.append(sentence)
    if todo:
        embedder.warm_up()
    for start in range(0, len(todo), BATCH):
        batch = todo[start : start + BATCH]
        fresh = np.asarray(embedder.embed(batch), dtype=np.float32)
        for sentence, vec in zip(batch, fresh, strict=True):
            vectors[rows_of[sentence]] = vec
        if progress:
            progress("sentences", min(start + BATCH, len(todo)), len(todo))
    return offsets, vectors


def save_sentence_vectors(generation_dir: Path, offsets: np.ndarray, vectors: np.ndarray) -> None:
    folder = generation_dir / FOLDER
    folder.mkdir(exist_ok=True)
    np.save(generation_dir / OFFSETS, np.ascontiguousarray(offsets, dtype=np.int64))
    np.save(generation_dir / VECTORS, np.ascontiguousarray(vectors, dtype=np.float32))
