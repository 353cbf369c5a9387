"""The one sentence splitter: segmentation that keeps list items, abbreviations, decimals and quotes whole.

Every module that cuts text into sentences (the checks, chunking at ingest, the sentence index)
uses :func:`split_sentences` from here; ``tests/test_architecture_reading.py`` fails on another
sentence-boundary rule anywhere else.

Sentence boundaries come from pysbd (the Golden Rules segmenter: rule-based, pure Python, no
model weights), which keeps ``Dr. Smith``, ``4.2 kelvin``, ``U.S.`` and a quoted ``"It works.
Really."`` inside one sentence. Lists are handled before that, because small models answer a
two-part question with a numbered list (``1. Heike Kamerlingh Onnes 2. 1911``) and a sentence
splitter cuts such a list into fragments such as ``2.``:

* :func:`find_list` finds a numbered list (``1.``/``1)``/``(1)`` numbered from 1 in order,
  inline or one item a line) or a bulleted list (``-``, ``*``, ``•`` at line starts);
* :func:`render_list` writes it as prose: items that are phrases become one sentence joined by
  ``;`` (``Heike Kamerlingh Onnes; 1911.``), items that are sentences stay sentences;
* :func:`normalize_lists` applies both to a text, and :func:`split_sentences` segments the
  result (paragraph breaks always end a sentence);
* :func:`split_clauses` cuts one sentence at its clause boundaries (a value belongs to the clause
  that holds what it is said about).

Example:
    >>> from ragsieve.text.sentences import split_sentences
    >>> split_sentences("1. Heike Kamerlingh Onnes 2. 1911")
    ['Heike Kamerlingh Onnes; 1911.']
    >>> split_sentences("Dr. Onnes cooled mercury to 4.2 K in 1911. It lost all resistance.")
    ['Dr. Onnes cooled mercury to 4.2 K in 1911.', 'It lost all resistance.']
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import Any, NamedTuple

from ragsieve.lexicon import CITATION_MARKER_RE, WORD_RE

__all__ = [
    "ListItems", "find_list", "first_sentence_end", "normalize_lists", "render_list", "split_clauses",
    "split_sentences", "split_sentences_regex",
]

logger = logging.getLogger(__name__)

# A numbered marker: "1." / "1)" / "(1)" followed by whitespace, standing after the start, a
# space or an opening bracket. The number has at most two digits, so a year ending a sentence
# ("in 1911. Then") is never a marker, and a decimal ("4.2") has no space after its point.
_NUMBERED_RE = re.compile(r"(?:(?<=^)|(?<=\s))\(?(\d{1,2})[.)](?=\s+\S)\s+")
_BULLET_LINE_RE = re.compile(r"^\s*(?:[-*•‣◦]|\d{1,2}[.)]|\(\d{1,2}\))\s+(?=\S)")
_SENTENCE_END_RE = re.compile(r"[.!?…][\"'”’)\]]*$")
# a list may open after the start of the text, a colon, or the end of a sentence
_LIST_OPENERS = ":.!?\n"


class ListItems(NamedTuple):
    """A list found in a text: the text before it, its items (markers removed), and where the
    list starts and ends in the text."""

    lead: str
    items: list[str]
    start: int
    end: int


@lru_cache(maxsize=2)
def _segmenter(char_span: bool = False) -> Any:
    import pysbd

    return pysbd.Segmenter(language="en", clean=False, char_span=char_span)


def _numbered_list(text: str) -> ListItems | None:
    markers = list(_NUMBERED_RE.finditer(text))
    for i, first in enumerate(markers):
        if int(first.group(1)) != 1:
            continue
        before = text[: first.start()].rstrip()
        if before and before[-1] not in _LIST_OPENERS:
            continue
        chain = [first]
        for m in markers[i + 1 :]:
            if int(m.group(1)) == int(chain[-1].group(1)) + 1:
                chain.append(m)
        if len(chain) < 2:
            continue
        items = [text[a.end() : b.start()] for a, b in zip(chain, chain[1:], strict=False)]
        # the last item ends at a paragraph break, or at the line end when each item has a line
        line_based = all(text[: m.start()].rstrip(" \t").endswith("\n") for m in chain[1:])
        stop = re.compile(r"\n" if line_based else r"\n\s*\n").search(text, chain[-1].end())
        end = stop.start() if stop else len(text)
        items.append(text[chain[-1].end() : end])
        return ListItems(before, [" ".join(it.split()) for it in items], first.start(), end)
    return None


def _bulleted_list(text: str) -> ListItems | None:
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if _BULLET_LINE_RE.match(line)]
    if len(starts) < 2:
        return None
    first = starts[0]
    items: list[str] = []
    last = first
    for j in range(first, len(lines)):
        line = lines[j]
        m = _BULLET_LINE_RE.match(line)
        if m:
            items.append(line[m.end() :].strip())
            last = j
        elif line.strip() and items and j == last + 1 and line[:1].isspace():
            items[-1] += " " + line.strip()  # an indented continuation of the item above
            last = j
        elif line.strip():
            break
    if len(items) < 2:
        return None
    start = sum(len(line) + 1 for line in lines[:first])
    end = sum(len(line) + 1 for line in lines[: last + 1]) - 1
    return ListItems("\n".join(lines[:first]).strip(), items, start, min(end, len(text)))


def find_list(text: str) -> ListItems | None:
    """The first numbered or bulleted list in ``text``, or ``None``.

    A numbered list counts from 1 in steps of one and opens at the start of the text, after a
    colon or after a sentence end; a bulleted list has at least two lines opening with a bullet
    or a number.

    >>> find_list("1. Heike Kamerlingh Onnes 2. 1911").items
    ['Heike Kamerlingh Onnes', '1911']
    >>> find_list("It was cooled to 4.2 K in 1911. 2. is not a list") is None
    True
    """
    numbered = _numbered_list(text)
    bulleted = _bulleted_list(text)
    if numbered and bulleted:
        return numbered if numbered.start <= bulleted.start else bulleted
    return numbered or bulleted


def _is_sentence(item: str) -> bool:
    """An item that reads as a sentence on its own: it ends with sentence punctuation (before
    any citation markers) and has at least four words."""
    bare = CITATION_MARKER_RE.sub("", item).strip()
    return bool(_SENTENCE_END_RE.search(bare)) and len(WORD_RE.findall(bare)) >= 4


def _trim_item(item: str) -> str:
    """An item without trailing separators (``,``, ``;``, ``.``, ``and``), markers kept."""
    out = item.strip()
    while True:
        new = re.sub(r"(?:[,;:.]|\s+(?:and|or))\s*$", "", out).strip()
        if new == out:
            return out
        out = new


def render_list(items: list[str], lead: str = "") -> str:
    """A list as prose: phrase items joined by ``;`` in one sentence, sentence items kept as
    sentences (a phrase among sentences gets its own full stop).

    >>> render_list(["Heike Kamerlingh Onnes [1]", "1911 [1]"])
    'Heike Kamerlingh Onnes [1]; 1911 [1].'
    >>> render_list(["Paris is the capital of France.", "Lyon is smaller."], lead="Two facts:")
    'Two facts: Paris is the capital of France. Lyon is smaller.'
    """
    kept = [it for it in (i.strip() for i in items) if WORD_RE.search(CITATION_MARKER_RE.sub("", it))]
    if not kept:
        return lead.strip()
    if all(not _is_sentence(it) for it in kept):
        body = "; ".join(_trim_item(it) for it in kept) + "."
    else:
        parts = []
        for it in kept:
            bare = CITATION_MARKER_RE.sub("", it).strip()
            parts.append(it if _SENTENCE_END_RE.search(bare) else _trim_item(it) + ".")
        body = " ".join(parts)
    lead = " ".join(lead.split())
    return f"{lead} {body}" if lead else body


def normalize_lists(text: str) -> str:
    """``text`` with every numbered or bulleted list rewritten by :func:`render_list`.

    >>> normalize_lists("The answers are: 1. Onnes 2. 1911")
    'The answers are: Onnes; 1911.'
    """
    out = text
    for _ in range(8):  # a text holds a few lists at most; each pass rewrites one
        found = find_list(out)
        if found is None:
            break
        out = out[: found.start] + render_list(found.items) + out[found.end :]
    return out


def split_sentences(text: str, *, rewrite_lists: bool = True) -> list[str]:
    """The sentences of ``text``: lists rewritten as prose first (:func:`normalize_lists`),
    paragraph breaks end a sentence, whitespace inside a sentence collapsed to one space.

    ``rewrite_lists=False`` keeps every word of ``text`` as written (chunking at ingest: a chunk
    must be the source's own words, located back in it), so a list's markers stay in its items.

    >>> split_sentences('He said "It works. Really." and left. The U.S. team won 3.5 points.')
    ['He said "It works. Really." and left.', 'The U.S. team won 3.5 points.']
    """
    sentences: list[str] = []
    for paragraph in re.split(r"\n\s*\n", normalize_lists(text) if rewrite_lists else text):
        paragraph = " ".join(paragraph.split())
        if not paragraph:
            continue
        pieces = [p.strip() for p in _segmenter().segment(paragraph)]
        sentences.extend(p for p in pieces if p)
    return sentences


def first_sentence_end(text: str) -> int:
    """Where the first sentence of ``text`` ends (pysbd's boundary): the offset of its closing
    ``.``, ``!`` or ``?``, or the sentence's end when it has none; ``len(text)`` for one sentence
    without closing punctuation.

    >>> text = "Dr. Onnes cooled mercury in 1911. It lost all resistance."
    >>> text[: first_sentence_end(text)]
    'Dr. Onnes cooled mercury in 1911'
    """
    spans = _segmenter(char_span=True).segment(text) if text.strip() else []
    if not spans:
        return len(text)
    sentence = spans[0].sent.rstrip()
    end = spans[0].start + len(sentence)
    return end - 1 if sentence[-1:] in ".!?" else end


# Clause boundaries inside a sentence: a semicolon or colon, a comma before a conjunction or a
# relative "which", a contrasting "while"/"whereas" ("Construction began in 1927, and the bridge
# opened in 1931").
_CLAUSE_RE = re.compile(
    r"\s*[;:]\s+|,\s+(?=(?:and|but|while|whereas|although|though|which)\b)|\s+(?=(?:while|whereas)\b)"
)


def split_clauses(sentence: str) -> list[str]:
    """The clauses of one sentence (the sentence itself when it has one).

    >>> split_clauses("Construction began in 1927, and the bridge opened in 1931.")
    ['Construction began in 1927', 'and the bridge opened in 1931.']
    """
    return [c for c in _CLAUSE_RE.split(sentence) if c and c.strip()] or [sentence]


# ----------------------------------------------------------------- the evaluator's splitter (frozen)
# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) and whitespace,
# unless the word before the period is a common abbreviation, an initial or a number.
_REGEX_ABBREVIATIONS = {
    "e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "st", "fig", "eq", "no", "vol",
    "approx", "ca", "cf", "al", "jr", "sr", "inc", "ltd", "co", "jan", "feb", "mar", "apr", "jun",
    "jul", "aug", "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "ph.d", "a.m", "p.m",
}
_REGEX_BOUNDARY_RE = re.compile(r"([.!?]+[\"')\]]*)(\s+)(?=[\"'(\[]?[A-Z0-9])")



def split_sentences_regex(text: str) -> list[str]:
    """The regular-expression splitter the shipped relevance evaluator's features were computed
    with (``ragsieve.tasks.evaluator``: its best-sentence cosine, over the sentence vectors the
    index stores, ``ragsieve.index.sentences``), kept exactly so that model reads what it was
    trained on; ``ragsieve.ingest.split_sentences`` is this function for those callers. Every
    other reader uses :func:`split_sentences`. Retire it when the evaluator is retrained on
    :func:`split_sentences` (and bump ``ragsieve.index.sentences.SPLIT_VERSION`` then).

    A sentence ends at ``.``, ``!`` or ``?`` (closing quotes and brackets kept) before white
    space and a capital or digit, unless the word before the period is a common abbreviation, an
    initial or a number; paragraph breaks always end a sentence.

    >>> split_sentences_regex("Dr. Smith met J. R. Tolkien in 1950. It rained!")
    ['Dr. Smith met J. R. Tolkien in 1950.', 'It rained!']
    """
    sentences: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = " ".join(paragraph.split())
        if not paragraph:
            continue
        start = 0
        for match in _REGEX_BOUNDARY_RE.finditer(paragraph):
            end = match.end(1)
            candidate = paragraph[start:end]
            last_word = candidate[:-1].rsplit(" ", 1)[-1].lower().rstrip(".")
            if match.group(1).startswith(".") and (
                last_word in _REGEX_ABBREVIATIONS or (len(last_word) == 1 and last_word.isalpha())
            ):
                continue
            sentences.append(candidate.strip())
            start = match.end()
        tail = paragraph[start:].strip()
        if tail:
            sentences.append(tail)
    return sentences
