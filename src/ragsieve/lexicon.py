"""The one word lexicon of the text checks: function words, negations, month names, and the
citation marker (``[n]``) every check reads past.

Imports nothing from ragsieve, so every ground module (``values``, ``text``) can share it.
Month names come from the standard library's :mod:`calendar` read in the C locale (English,
whatever locale the application set), not from a table written here.

Example:
    >>> MONTHS["sept"], MONTHS["december"], MONTH_NAMES[0]
    (9, 12, 'january')
    >>> "the" in STOP_WORDS, "however" in SENTENCE_OPENERS
    (True, True)
"""

from __future__ import annotations

import calendar
import re
from typing import Any

__all__ = [
    "MONTHS",
    "MONTH_NAMES",
    "NEGATIONS",
    "NAME_OPENERS",
    "SENTENCE_OPENERS",
    "STOP_WORDS",
    "WEEKDAYS",
    "CITATION_MARKER_RE",
    "NON_SPACE_RE",
    "WORD_RE",
    "citation_markers",
]


def _c_locale(names: Any, first: int, count: int) -> list[str]:
    # calendar's names follow LC_TIME; read them in the C locale so an application that set
    # another locale still gets the English names the extractor reads.
    try:
        with calendar.different_locale(("C", None)):
            return [names[i].lower() for i in range(first, first + count)]
    except Exception:  # locale switching unavailable: the process default is C unless set
        return [names[i].lower() for i in range(first, first + count)]


def _english_months() -> tuple[tuple[str, ...], dict[str, int]]:
    full = _c_locale(calendar.month_name, 1, 12)
    abbr = _c_locale(calendar.month_abbr, 1, 12)
    table = {name: i for i, name in enumerate(full, 1)}
    for i, name in enumerate(abbr, 1):
        table.setdefault(name, i)
    table.setdefault(abbr[8] + "t", 9)  # "Sept.", the one four-letter abbreviation in use
    return tuple(full), table


# The twelve month names, January first, and every written form (full names, abbreviations) ->
# month number.
MONTH_NAMES, MONTHS = _english_months()
# The seven day names, Monday first (standard library, C locale).
WEEKDAYS = frozenset(_c_locale(calendar.day_name, 0, 7))

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

# Words that open a sentence or a model's reply without naming anything ("However, ...",
# "Based on the evidence, ...", "Note: ..."): a capitalised one is not the start of a name.
SENTENCE_OPENERS = frozenset(
    (  # noqa: SIM905
        "although however since despite while because according until unlike like following today later "
        "early thus every another among around near even still yet whether nor just several few two first "
        "second new old therefore moreover furthermore meanwhile instead otherwise next finally answer note "
        "evidence overall based anything everything something nothing anyone everyone someone nobody none let "
        "please sure see thanks"
    ).split()
)

# What may not begin a name: function words, sentence openers, month and day names.
NAME_OPENERS = STOP_WORDS | SENTENCE_OPENERS | frozenset(MONTHS) | WEEKDAYS

# Words that negate a clause (a yes/no stance reads them only in the clause that holds the
# question's terms).
NEGATIONS = frozenset(
    "not no never none neither nor cannot can't isn't wasn't aren't weren't doesn't didn't won't".split()  # noqa: SIM905
)

# A citation marker an answer cites its passages with: "[1]" (the number is group 1).
CITATION_MARKER_RE = re.compile(r"\[(\d{1,3})\]")

# A word: a run of letters and digits (any script; underscores and punctuation split words).
WORD_RE = re.compile(r"[^\W_]+")
# A token between spaces, punctuation attached ("Paris," "[1].").
NON_SPACE_RE = re.compile(r"\S+")


def citation_markers(text: str) -> list[str]:
    """The ``[n]`` markers of ``text`` as written, in order (repeats kept).

    >>> citation_markers("Leiden [2], in 1911 [1][2].")
    ['[2]', '[1]', '[2]']
    """
    return [m.group(0) for m in CITATION_MARKER_RE.finditer(text)]
