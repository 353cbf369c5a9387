"""Whether evidence states a value: the evidence read once (:class:`EvidenceValues`,
:func:`read_evidence`), :func:`find_in` (each kind matched by its own reader's rule),
:func:`find_entity` (a name in any of its written forms) and :func:`nearest` (the evidence's value
of the same kind closest to one it does not state: what it says instead).
"""

from __future__ import annotations

import difflib
import functools
import math
from dataclasses import dataclass, field
from typing import Literal

from ragsieve.values.core import Match, Value, _prepare, fold
from ragsieve.values.dates import _date_match
from ragsieve.values.extract import extract_values
from ragsieve.values.identifiers import _identifier_match
from ragsieve.values.names import _entity_form, _name_match, _name_variant, _named, _names_another, _word_tokens
from ragsieve.values.numbers import _number_match
from ragsieve.values.quantities import _convert, _quantity_match


@dataclass
class EvidenceValues:
    """The evidence text read once: its values and folded tokens (reuse it across sentences)."""

    text: str
    values: list[Value] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    folded: str = ""

    @classmethod
    def read(cls, text: str) -> EvidenceValues:
        prepared = _prepare(text)
        folded = fold(prepared)
        return cls(prepared, extract_values(prepared), _word_tokens(prepared), folded)


@functools.lru_cache(maxsize=256)
def read_evidence(text: str) -> EvidenceValues:
    """:meth:`EvidenceValues.read`, remembered: every sentence of an answer that cites one
    passage reads it once (the result is shared; treat it as read-only)."""
    return EvidenceValues.read(text)


def find_in(value: Value, evidence: str | EvidenceValues) -> Match | None:
    """Where ``evidence`` states ``value`` after normalisation, or ``None`` when it does not."""
    ev = evidence if isinstance(evidence, EvidenceValues) else read_evidence(evidence)
    if value.kind == "identifier":
        return _identifier_match(value, ev.text)
    if value.kind == "name":
        return _name_match(value, ev.tokens, ev.text) or _name_variant(value, ev.values)
    if value.kind == "date":
        return _date_match(value, ev.values)
    if value.kind == "quantity":
        return _quantity_match(value, ev.values, ev.folded)
    return _number_match(value, ev.values)


# The shortest trailing form of a name that names it on its own (:func:`find_entity`): its
# longest word has at least this many letters. Chosen on the conflict stage's training split
# (`python benchmarks/conflicts.py --choose-name-forms`; tried 3, 4, 5, 6, 8 and none; rule: the
# shortest at which no ordinary question of the split shows a false conflict and ConflictQA's
# precision stays at least 90%): 3, every length tried was clean. ``None``: trailing forms are
# not read.
NAME_TAIL_MIN_CHARS: int | None = 3


def find_entity(
    value: Value,
    evidence: str | EvidenceValues,
    *,
    within: str | EvidenceValues | None = None,
    tail_min: int | None | Literal["default"] = "default",
) -> Match | None:
    """Where ``evidence`` names the entity a name ``value`` names, in any of its written forms, or
    ``None`` (for a value of another kind: :func:`find_in`). The forms: the name as :func:`find_in`
    matches it (as written, initials, its leading words, acronym, another spelling); the name with
    more words between its first and last ("Mari Christine Fitzduff" names "Mari Fitzduff"); its
    trailing words standing alone as a name ("Seadlund" names "John Henry Seadlund") when the
    longest of them has at least ``tail_min`` letters (default :data:`NAME_TAIL_MIN_CHARS`;
    ``None``: trailing forms are not read). A shortened form (leading or trailing words) names
    the entity only where no name of the evidence holds it beside words that are not the name's:
    "Schmeichel" beside "Peter Schmeichel" does not name "Kasper Schmeichel", and "Walther"
    beside "Walther Ochsenfeld" does not name "Walther Meissner". ``within``: the whole text
    ``evidence`` is part of (a sentence of a passage); a shortened form is read against the names
    of both.

    >>> v = extract_values("John Henry Seadlund", ("name",))[0]
    >>> find_entity(v, "Seadlund was executed in 1938.").how
    'variant'
    >>> find_entity(v, "Peter Seadlund met him; Seadlund was executed.") is None
    True
    """
    ev = evidence if isinstance(evidence, EvidenceValues) else read_evidence(evidence)
    found = find_in(value, ev)
    if value.kind != "name":
        return found
    toks = tuple(t.rstrip(".") for t in value.tokens)
    context = [] if within is None else (within if isinstance(within, EvidenceValues) else read_evidence(within)).values
    others = [etoks for _, etoks in _named([*ev.values, *context])]
    if found is not None:
        lead = tuple(t.rstrip(".") for t in found.evidence.tokens)
        shorter = found.how == "variant" and 0 < len(lead) < len(toks) and toks[: len(lead)] == lead
        if not (shorter and any(_names_another(toks, lead, o) for o in others)):
            return found
        return None  # its leading words also name another thing here
    return _entity_form(value, ev.values, NAME_TAIL_MIN_CHARS if tail_min == "default" else tail_min, others)


def _distance(a: Value, b: Value) -> float:
    if a.kind in ("number", "date", "quantity") and a.number is not None and b.number is not None:
        bn = b.number
        if a.kind == "quantity" and a.unit and b.unit:
            conv = _convert(b.number, b.unit, a.unit)
            if conv is None:
                return math.inf
            bn = conv
        return abs(a.number - bn) / max(1.0, abs(a.number))
    return 1.0 - difflib.SequenceMatcher(None, a.norm, b.norm).ratio()


def nearest(value: Value, evidence: str | EvidenceValues) -> Value | None:
    """The evidence value of the same kind closest to ``value`` (what the evidence says instead)."""
    ev = evidence if isinstance(evidence, EvidenceValues) else read_evidence(evidence)
    same = [v for v in ev.values if v.kind == value.kind]
    if value.kind == "quantity":
        same = [v for v in same if _distance(value, v) != math.inf] or same
    if value.kind in ("number", "date") and not same:
        same = [v for v in ev.values if v.kind in ("number", "date")]
    if not same:
        return None
    return min(same, key=lambda v: _distance(value, v))
