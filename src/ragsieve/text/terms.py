"""The one lexicon and stemmer the trust checks share: stop words, negations, key terms.

A check that asks "does this sentence talk about what the question asks?" compares the
question's content words with the sentence's. Every check does it the same way here: words
are folded (:func:`ragsieve.values.fold`: case and accents), stop words (:mod:`ragsieve.lexicon`) dropped, and the rest
stemmed with the Snowball English stemmer (PyStemmer, already the sparse index's stemmer), so
"opened" ~ "open", "bridges" ~ "bridge", "discovery" ~ "discover".

Example:
    >>> sorted(key_terms("When did the Kessel Bridge open?"))
    ['bridg', 'kessel', 'open']
    >>> stems("The bridge was opened in 1931.")
    ['the', 'bridg', 'was', 'open', 'in', '1931']
"""

from __future__ import annotations

import functools
from typing import Any

from ragsieve.lexicon import NEGATIONS, STOP_WORDS, WORD_RE
from ragsieve.values import fold

__all__ = ["NEGATIONS", "STOP_WORDS", "WORD_RE", "key_terms", "stem", "stems", "words"]


@functools.lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball English stem of one folded word."""
    return str(_stemmer().stemWord(word))


def words(text: str) -> list[str]:
    """Folded words of ``text`` (letters and digits; punctuation dropped)."""
    return WORD_RE.findall(fold(text))


def stems(text: str) -> list[str]:
    """Folded, stemmed words of ``text``, in order."""
    return [stem(w) for w in words(text)]


def key_terms(question: str) -> set[str]:
    """The question's content words, folded and stemmed (what a passage must talk about)."""
    return {stem(w) for w in words(question) if w not in STOP_WORDS and len(w) > 1}
