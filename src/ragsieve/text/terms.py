"""The one lexicon and stemmer the trust checks share: stop words, negations, key terms.

A check that asks "does this sentence talk about what the question asks?" compares the
question's content words with the sentence's. Every check does it the same way here: words
are folded (:func:`ragsieve.values.fold`: case and accents), stop words dropped, and the rest
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
import re
from typing import Any

from ragsieve.values import fold

__all__ = ["NEGATIONS", "STOP_WORDS", "WORD_RE", "key_terms", "stem", "stems", "words"]

WORD_RE = re.compile(r"[^\W_]+")

# Function words and question words: they say how a question is asked, not what about. One list
# for every check (it was written three times with different contents).
STOP_WORDS = frozenset(
    (  # noqa: SIM905
        "a an the of in on at to for from by with and or but as is are was were be been being it its this that "
        "these those there their they them he she his her him we our you your i me my us do does did done has "
        "have had not no yes so if then than which what who whom whose when where why how into onto over under "
        "about after before between during also only very can could will would shall should may might must such "
        "other both either neither each all any some more most much many same own just up out off again once "
        "here one name named called year years"
    ).split()
)

# Words that negate a clause (a yes/no stance reads them only in the clause that holds the
# question's terms).
NEGATIONS = frozenset(
    "not no never none neither nor cannot can't isn't wasn't aren't weren't doesn't didn't won't".split()  # noqa: SIM905
)


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
