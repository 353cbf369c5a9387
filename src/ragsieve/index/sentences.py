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

How the vectors were made is recorded too (``sentence_vectors.method``): ``"one-pass"`` pools each
sentence from its chunk's own forward pass (the mean of the sentence's token vectors, found by
the tokenizer's character offsets: :func:`embed_chunks_with_sentences`), ``"separate"`` embeds
each sentence on its own. A one-pass sentence vector carries its passage's context, so it is not
the vector of the sentence alone: a re-ingest reuses the previous generation's vectors only when
they were made the same way, and a sentence the chunk's pass did not reach (cut off at the model's
maximum length) or could not be found in the chunk's text is embedded on its own (the manifest
counts them as ``separate_rows``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "FOLDER",
    "METHOD_ONE_PASS",
    "METHOD_SEPARATE",
    "OFFSETS",
    "SPLIT_VERSION",
    "VECTORS",
    "compute_sentence_vectors",
    "embed_chunks_with_sentences",
    "pools_sentences",
    "sentence_method",
    "sentence_spans",
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
METHOD_ONE_PASS = "one-pass"
METHOD_SEPARATE = "separate"


def passage_sentences(text: str) -> list[str]:
    """The sentences of a passage as the checks embed them (the relevance judge's features and
    the verifier's evidence): :func:`ragsieve.ingest.split_sentences`, or the passage itself when
    it has none. The splits of the last :data:`SPLIT_CACHE` passages are kept (an ingest with
    one-pass sentence vectors splits each chunk when it embeds it and again when it stores the
    rows; the cache saved about 7% of the demo ingest's CPU)."""
    return list(_split_cached(text))


# How many passages' sentence splits are kept in memory.
SPLIT_CACHE = 4096


@functools.lru_cache(maxsize=SPLIT_CACHE)
def _split_cached(text: str) -> tuple[str, ...]:
    from ragsieve.ingest.chunking import split_sentences

    return tuple(s for s in split_sentences(text) if s.strip()) or (text,)


def own_sentences(text: str) -> list[str]:
    """The sentences of a chunk that need a stored row: none when its only sentence is its text
    (the chunk's own vector is that sentence's)."""
    sentences = passage_sentences(text)
    return [] if sentences == [text] else sentences


def sentence_spans(text: str, sentences: Sequence[str]) -> list[tuple[int, int] | None]:
    """The character span of each of ``sentences`` in ``text``, found in order; a sentence whose
    whitespace the splitter collapsed is found with any whitespace between its words, and one it
    rewrote (a list turned into prose) is not a piece of the text as written: ``None``."""
    spans: list[tuple[int, int] | None] = []
    cursor = 0
    for sentence in sentences:
        piece = sentence.strip()
        at = text.find(piece, cursor) if piece else -1
        end = at + len(piece)
        if at < 0 and piece:
            found = re.compile(r"\s+".join(map(re.escape, piece.split()))).search(text, cursor)
            at, end = (found.start(), found.end()) if found else (-1, -1)
        if at < 0:
            spans.append(None)
            continue
        spans.append((at, end))
        cursor = end
    return spans


def pools_sentences(embedder: Any) -> bool:
    """Whether ``embedder`` can pool a chunk's sentences from the chunk's own forward pass."""
    if not callable(getattr(embedder, "embed_with_sentences", None)):
        return False
    try:
        return bool(getattr(embedder, "pools_sentences", False))
    except Exception:  # noqa: BLE001 - a model that does not load cannot pool either
        return False


def sentence_method(requested: str, embedder: Any) -> str:
    """The method an ingest with ``ingest.sentence_vectors = requested`` uses with ``embedder``:
    one pass where asked and the embedder can, else the separate pass."""
    return METHOD_ONE_PASS if requested == METHOD_ONE_PASS and pools_sentences(embedder) else METHOD_SEPARATE


def embed_chunks_with_sentences(texts: Sequence[str], embedder: Any) -> tuple[np.ndarray, list[np.ndarray]]:
    """The vectors of ``texts`` and, from the same forward pass, those of each text's
    :func:`own_sentences` (one row per sentence, in order; NaN for a sentence the pass could not
    give, which :func:`compute_sentence_vectors` embeds on its own)."""
    per_text = [own_sentences(t) for t in texts]
    located = [sentence_spans(t, own) for t, own in zip(texts, per_text, strict=True)]
    spans = [[span for span in found if span is not None] for found in located]
    vectors, pooled = embedder.embed_with_sentences(list(texts), spans)
    dim = vectors.shape[1]
    out: list[np.ndarray] = []
    for found, rows in zip(located, pooled, strict=True):
        full = np.full((len(found), dim), np.nan, dtype=np.float32)
        where = [j for j, span in enumerate(found) if span is not None]
        if where:
            full[where] = rows
        out.append(full)
    return np.asarray(vectors, dtype=np.float32), out


def compute_sentence_vectors(
    texts: Sequence[str],
    embedder: Any,
    known: Callable[[str], np.ndarray | None] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    pooled: Sequence[np.ndarray | None] | None = None,
    counts: dict[str, int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, vectors)`` for the chunks whose texts are ``texts``. ``pooled[i]``, when given,
    holds chunk i's sentence rows from its own forward pass (:func:`embed_chunks_with_sentences`;
    NaN rows are not taken). Every other sentence is embedded on its own, each distinct one once,
    except those ``known`` gives a vector for (a previous generation's). ``counts`` gets how many
    rows came from each source (``pooled``, ``known``, ``separate``)."""
    per_chunk = [own_sentences(t) for t in texts]
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in per_chunk], out=offsets[1:])
    dim = int(embedder.dim)
    vectors = np.empty((int(offsets[-1]), dim), dtype=np.float32)
    tally = {"pooled": 0, "known": 0, "separate": 0}
    rows_of: dict[str, list[int]] = {}
    row = 0
    for i, sentences in enumerate(per_chunk):
        given = pooled[i] if pooled is not None else None
        usable = given is not None and np.shape(given) == (len(sentences), dim)
        for j, sentence in enumerate(sentences):
            if usable and given is not None and np.isfinite(given[j]).all():
                vectors[row] = given[j]
                tally["pooled"] += 1
            else:
                rows_of.setdefault(sentence, []).append(row)
            row += 1
    todo: list[str] = []
    for sentence, rows in rows_of.items():
        vec = known(sentence) if known is not None else None
        if vec is not None and np.shape(vec) == (dim,):
            vectors[rows] = vec
            tally["known"] += len(rows)
        else:
            todo.append(sentence)
            tally["separate"] += len(rows)
    if counts is not None:
        counts.update(tally)
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
