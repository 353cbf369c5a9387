"""Sentence-aware chunking (pure functions).

Sentences come from the one sentence splitter (:func:`ragsieve.text.sentences.split_sentences`,
lists kept as written so a chunk holds the source's own words). Token counts are approximate: a
token is a word or a punctuation mark (regex ``\\w+|[^\\w\\s]``), which tracks subword counts of
English text within a small factor and costs nothing.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ragsieve.text.sentences import split_sentences as _split_text
from ragsieve.text.sentences import split_sentences_regex as split_sentences

# ``split_sentences`` here (and ``ragsieve.ingest.split_sentences``) is the relevance evaluator's
# frozen splitter (:func:`ragsieve.text.sentences.split_sentences_regex`), which its features and
# the index's stored sentence vectors are computed with; chunks are cut with the one splitter.
__all__ = ["TextChunk", "chunk_text", "count_tokens", "split_sentences"]

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


class TextChunk(NamedTuple):
    text: str
    position: int  # index of the chunk within its document
    n_tokens: int
    # The chunk's span in the text it was cut from: text[start:end] holds the same words (the
    # chunk's whitespace is normalised, the span's is the original).
    start: int = 0
    end: int = 0


def count_tokens(text: str) -> int:
    return len(_TOKEN_RE.findall(text))


class _Locator:
    """Finds successive pieces of ``text`` whose whitespace was normalised, left to right."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.cursor = 0

    def span(self, piece: str) -> tuple[int, int]:
        words = piece.split()
        if not words:
            return self.cursor, self.cursor
        first = self.text.find(words[0], self.cursor)
        if first < 0:  # a splitter that changed the words: keep the last known position
            return self.cursor, self.cursor
        end = first + len(words[0])
        for word in words[1:]:
            found = self.text.find(word, end)
            if found < 0:
                break
            end = found + len(word)
        self.cursor = end
        return first, end


def chunk_text(
    text: str, max_tokens: int = 200, overlap_tokens: int = 0, unit: str = "window", heading_chars: int = 0
) -> list[TextChunk]:
    """Split ``text`` into chunks that never cut a sentence unless it alone exceeds ``max_tokens``.

    ``unit="sentence"`` yields one chunk per sentence. ``unit="window"`` packs whole
    sentences up to ``max_tokens`` and starts the next chunk with trailing sentences of
    the previous one totalling at most ``overlap_tokens``. Each chunk carries its span
    (``start``, ``end``) in ``text``. The first ``heading_chars`` characters are headings
    (a section's, :attr:`ragsieve.ingest.loaders.Segment.heading_chars`): they go with the
    sentence after them, as its context, and never form a chunk of their own.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    sentences = _split_text(text, rewrite_lists=False)
    locate = _Locator(text)
    pieces: list[tuple[str, int, int, int]] = []  # (text, tokens, start, end)
    for sentence in sentences:
        n = count_tokens(sentence)
        if n <= max_tokens:
            pieces.append((sentence, n, *locate.span(sentence)))
            continue
        # A sentence longer than a chunk is cut at word boundaries.
        current: list[str] = []
        current_n = 0
        for word in sentence.split():
            m = count_tokens(word)
            if current and current_n + m > max_tokens:
                joined = " ".join(current)
                pieces.append((joined, current_n, *locate.span(joined)))
                current, current_n = [], 0
            current.append(word)
            current_n += m
        if current:
            joined = " ".join(current)
            pieces.append((joined, current_n, *locate.span(joined)))

    if heading_chars > 0:
        pieces = _with_headings_joined(pieces, heading_chars, max_tokens)
    if unit == "sentence":
        return [TextChunk(t, i, n, a, b) for i, (t, n, a, b) in enumerate(pieces)]

    def close(window: list[tuple[str, int, int, int]], position: int, size: int) -> TextChunk:
        return TextChunk(" ".join(p[0] for p in window), position, size, window[0][2], window[-1][3])

    chunks: list[TextChunk] = []
    window: list[tuple[str, int, int, int]] = []
    size = 0
    for piece in pieces:
        n = piece[1]
        if window and size + n > max_tokens:
            chunks.append(close(window, len(chunks), size))
            carried: list[tuple[str, int, int, int]] = []
            carried_size = 0
            for prev in reversed(window):
                m = prev[1]
                if carried_size + m > overlap_tokens or carried_size + m + n > max_tokens:
                    break
                carried.insert(0, prev)
                carried_size += m
            window, size = carried, carried_size
        window.append(piece)
        size += n
    if window:
        chunks.append(close(window, len(chunks), size))
    return chunks


def _with_headings_joined(
    pieces: list[tuple[str, int, int, int]], heading_chars: int, max_tokens: int
) -> list[tuple[str, int, int, int]]:
    """The leading pieces that lie within the first ``heading_chars`` characters (headings) joined
    to the piece after them, when the whole fits ``max_tokens``."""
    k = 0
    while k < len(pieces) and pieces[k][3] <= heading_chars:
        k += 1
    group = pieces[: k + 1]
    if len(group) < 2 or sum(p[1] for p in group) > max_tokens:
        return pieces
    joined = (" ".join(p[0] for p in group), sum(p[1] for p in group), group[0][2], group[-1][3])
    return [joined, *pieces[k + 1 :]]
