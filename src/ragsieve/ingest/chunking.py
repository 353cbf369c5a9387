"""Sentence splitting and sentence-aware chunking (pure functions).

Token counts are approximate: a token is a word or a punctuation mark (regex ``\\w+|[^\\w\\s]``),
which tracks subword counts of English text within a small factor and costs nothing.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) and whitespace,
# unless the word before the period is a common abbreviation, an initial or a number.
_ABBREVIATIONS = {
    "e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "st", "fig", "eq", "no", "vol",
    "approx", "ca", "cf", "al", "jr", "sr", "inc", "ltd", "co", "jan", "feb", "mar", "apr", "jun",
    "jul", "aug", "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "ph.d", "a.m", "p.m",
}
_BOUNDARY_RE = re.compile(r"([.!?]+[\"')\]]*)(\s+)(?=[\"'(\[]?[A-Z0-9])")


class TextChunk(NamedTuple):
    text: str
    position: int  # index of the chunk within its document
    n_tokens: int


def count_tokens(text: str) -> int:
    return len(_TOKEN_RE.findall(text))


def split_sentences(text: str) -> list[str]:
    """Split text into sentences; paragraph breaks always end a sentence."""
    sentences: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = " ".join(paragraph.split())
        if not paragraph:
            continue
        start = 0
        for match in _BOUNDARY_RE.finditer(paragraph):
            end = match.end(1)
            candidate = paragraph[start:end]
            last_word = candidate[:-1].rsplit(" ", 1)[-1].lower().rstrip(".")
            if match.group(1).startswith(".") and (
                last_word in _ABBREVIATIONS or (len(last_word) == 1 and last_word.isalpha())
            ):
                continue
            sentences.append(candidate.strip())
            start = match.end()
        tail = paragraph[start:].strip()
        if tail:
            sentences.append(tail)
    return sentences


def chunk_text(
    text: str, max_tokens: int = 200, overlap_tokens: int = 0, unit: str = "window"
) -> list[TextChunk]:
    """Split ``text`` into chunks that never cut a sentence unless it alone exceeds ``max_tokens``.

    ``unit="sentence"`` yields one chunk per sentence. ``unit="window"`` packs whole
    sentences up to ``max_tokens`` and starts the next chunk with trailing sentences of
    the previous one totalling at most ``overlap_tokens``.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    sentences = split_sentences(text)
    pieces: list[tuple[str, int]] = []
    for sentence in sentences:
        n = count_tokens(sentence)
        if n <= max_tokens:
            pieces.append((sentence, n))
            continue
        # A sentence longer than a chunk is cut at word boundaries.
        current: list[str] = []
        current_n = 0
        for word in sentence.split():
            m = count_tokens(word)
            if current and current_n + m > max_tokens:
                pieces.append((" ".join(current), current_n))
                current, current_n = [], 0
            current.append(word)
            current_n += m
        if current:
            pieces.append((" ".join(current), current_n))

    if unit == "sentence":
        return [TextChunk(t, i, n) for i, (t, n) in enumerate(pieces)]

    chunks: list[TextChunk] = []
    window: list[tuple[str, int]] = []
    size = 0
    for piece, n in pieces:
        if window and size + n > max_tokens:
            chunks.append(TextChunk(" ".join(p for p, _ in window), len(chunks), size))
            carried: list[tuple[str, int]] = []
            carried_size = 0
            for prev, m in reversed(window):
                if carried_size + m > overlap_tokens or carried_size + m + n > max_tokens:
                    break
                carried.insert(0, (prev, m))
                carried_size += m
            window, size = carried, carried_size
        window.append((piece, n))
        size += n
    if window:
        chunks.append(TextChunk(" ".join(p for p, _ in window), len(chunks), size))
    return chunks
