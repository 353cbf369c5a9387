"""What every value reader shares: the :class:`Value` a text states and the :class:`Match` by which
evidence states it, text folding (case, diacritics; :func:`fold`) and the preparation a text gets
before values are read in it (dashes, minus signs and odd spaces made plain), numbers formatted and
compared within a tolerance, overlapping spans, and whole-word phrase patterns (:func:`phrase_pattern`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

ValueKind = Literal["number", "date", "quantity", "name", "identifier"]


VALUE_KINDS: tuple[str, ...] = get_args(ValueKind)


@dataclass(frozen=True)
class Value:
    """One value stated in a text.

    ``norm`` is the normalised form shown to people (``"1933-03-12"``, ``"4.2 kelvin"``,
    ``"walther meissner"``); matching uses the typed fields: ``number`` (numbers, quantity
    magnitudes, a year), ``tolerance`` (half a unit of the last stated digit), ``unit`` (a
    ``pint`` unit name or a currency code), ``dates`` (every reading of a date as
    ``(year, month, day)`` with ``0`` for an unstated part) and ``tokens`` (folded name tokens).
    """

    kind: ValueKind
    text: str
    norm: str
    span: tuple[int, int]
    number: float | None = None
    tolerance: float = 0.0
    unit: str | None = None
    dates: tuple[tuple[int, int, int], ...] = ()
    tokens: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "norm": self.norm, "span": list(self.span)}


@dataclass(frozen=True)
class Match:
    """Where the evidence states a value: the evidence's own value (or its words) and how."""

    value: Value
    evidence: Value
    how: Literal["exact", "normalised", "converted", "variant"]
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value.text, "evidence": self.evidence.text, "how": self.how, "detail": self.detail}


def fold(text: str) -> str:
    """Case- and diacritic-free text: NFKC (``₂`` -> ``2``), then accents removed, ``ß`` -> ``ss``."""
    text = unicodedata.normalize("NFKC", text).replace("ß", "ss").replace("ẞ", "SS")
    # accents go, and so do modifier letters ("ʿAbd" -> "abd") that transliterations add or drop
    text = "".join(
        " " if unicodedata.category(c) == "Lm" else c
        for c in unicodedata.normalize("NFKD", text)
        if not unicodedata.combining(c)
    )
    return text.casefold()


def prepare_text(text: str) -> str:
    """The text the value readers read and report spans on: NFKC-normalised, with minus signs and
    dashes as hyphens and non-breaking and thin spaces as spaces (for ordinary prose, the input).

    Example:
        >>> prepare_text("5\u2009km \u2212 2")
        '5 km - 2'
    """
    # NFKC keeps offsets close enough for display but changes lengths for some characters
    # (ligatures); spans are reported on this prepared text, which for ordinary prose is the input.
    return (
        unicodedata.normalize("NFKC", text)
        .replace("\u2212", "-")
        .replace("\u2013", "-")
        .replace("\u2014", " - ")
        .replace("\u00a0", " ")
        .replace("\u2009", " ")
        .replace("\u202f", " ")
    )


_prepare = prepare_text  # the name the readers call it by


def _fmt(x: float) -> str:
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.6g}"


def _close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol + 1e-9 * max(1.0, abs(a), abs(b))


def _overlaps(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(span[0] < e and s < span[1] for s, e in taken)


def phrase_pattern(*phrases: str, ignore_case: bool = False, possessive: bool = False) -> re.Pattern[str]:
    """A pattern for any of ``phrases`` written as whole words (no letter, digit or underscore
    just before or after), the longest first; ``possessive`` takes a following "'s" with it.

    >>> phrase_pattern("Scott Derrickson", "Derrickson", possessive=True).findall("Derrickson's film")
    ["Derrickson's"]
    """
    alternatives = sorted((re.escape(p) for p in phrases), key=len, reverse=True)
    return re.compile(
        r"(?<!\w)(?:" + "|".join(alternatives) + r")" + ("(?:'s)?" if possessive else "") + r"(?!\w)",
        re.IGNORECASE if ignore_case else 0,
    )


def value_to_dict(value: Value) -> dict[str, Any]:
    """Every field, for debugging and tests (``Value.to_dict`` is the short trace form)."""
    return asdict(value)
