"""Every value a text states (:func:`extract_values`): the readers of each kind run in one order
over the prepared text, identifiers first, then dates, quantities and numbers, then names, and
each character belongs to one value (citation markers such as "[1]" to none).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ragsieve.lexicon import CITATION_MARKER_RE, NAME_OPENERS, NON_SPACE_RE
from ragsieve.values.core import VALUE_KINDS, Value, _overlaps, _prepare
from ragsieve.values.dates import _DATE_PATTERNS, _date_value
from ragsieve.values.identifiers import _IDENT_RE, _is_surname_after_given_name
from ragsieve.values.names import _NAME_CONNECTORS, NAME_RE, _at_sentence_start, _is_initial, _name_tokens
from ragsieve.values.numbers import _NUMBER_RE, _SCALES, _numbers
from ragsieve.values.quantities import (
    _CURRENCY_BEFORE_RE,
    _CURRENCY_SYMBOLS,
    _CURRENCY_WORD_RE,
    _CURRENCY_WORDS,
    _plausible_unit,
    _unit_after,
)


def extract_values(text: str, kinds: Iterable[str] = VALUE_KINDS) -> list[Value]:
    """Every value ``text`` states, in order of position; each character belongs to one value.

    Identifiers are read first (so ``ASN1_DEN`` is not a number and a name), then dates,
    quantities, numbers and names.
    """
    wanted = set(kinds)
    text = _prepare(text)
    # citation markers ("[1]") are not values of the sentence
    taken: list[tuple[int, int]] = [m.span() for m in CITATION_MARKER_RE.finditer(text)]
    out: list[Value] = []

    for m in _IDENT_RE.finditer(text):
        s = m.group(0)
        if re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]?", s):
            continue  # abbreviations (e.g., U.S.)
        if "." in s and not re.search(r"[a-z_]", s.split(".")[-1]) and not s.endswith("()"):
            continue  # "Mr.Smith"-like joins of capitalised words
        if "." in s and all(p[:1].isupper() and p[1:].islower() for p in s.split(".")):
            continue  # capitalised words joined by a full stop: prose missing a space, not a code name
        if _is_surname_after_given_name(s, text[: m.start()]):
            continue  # "William McLellan", "Danny DeVito": a surname, not a CamelCase code name
        taken.append(m.span())
        if "identifier" in wanted:
            out.append(Value("identifier", s, s, m.span(), tokens=(s.removesuffix("()"),)))

    for pattern in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            if _overlaps(m.span(), taken):
                continue
            if pattern is _DATE_PATTERNS[-1]:
                after = text[m.end() : m.end() + 24]
                ua = _unit_after(after.lstrip())
                if ua and len(ua[0]) > 1 and after[: len(after) - len(after.lstrip())] in (" ", ""):
                    continue
                number = _NUMBER_RE.match(text, m.start())
                if number and (number.group("scale") or "").lower() in _SCALES:
                    continue  # "1500 million" is a number, not a year
            v = _date_value(m, text)
            if v is None:
                continue
            taken.append(m.span())
            if "date" in wanted:
                out.append(v)

    numbers = _numbers(text, taken)
    for v, end in numbers:
        rest = text[end:]
        unit_m = _unit_after(rest.lstrip()) if rest[:1] in (" ", "") or not rest[:1].isalnum() else None
        gap = len(rest) - len(rest.lstrip())
        cur_m = _CURRENCY_BEFORE_RE.search(text[: v.span[0]])
        unit: str | None = None
        qend = v.span[1]
        qstart = v.span[0]
        if cur_m:
            unit, qstart = _CURRENCY_SYMBOLS[cur_m.group("cur")], cur_m.start()
        elif unit_m and gap <= 1 and _plausible_unit(v, unit_m[0]):
            unit, qend = unit_m[1], end + gap + unit_m[2]
        else:
            cw = _CURRENCY_WORD_RE.match(rest.lstrip())
            if cw and gap <= 1:
                unit, qend = _CURRENCY_WORDS[cw.group("cur").lower()], end + gap + cw.end()
        if unit and _overlaps((qstart, qend), taken) and qstart < v.span[0]:
            qstart = v.span[0]
        if unit and not _overlaps((v.span[1], qend), taken):
            span = (qstart, qend)
            taken.append(span)
            if "quantity" in wanted:
                out.append(
                    Value(
                        "quantity",
                        text[span[0] : span[1]],
                        f"{v.norm} {unit}",
                        span,
                        number=v.number,
                        tolerance=v.tolerance,
                        unit=unit,
                    )
                )
            continue
        taken.append(v.span)
        if "number" in wanted:
            out.append(v)

    for m in NAME_RE.finditer(text):
        start, end = m.span()
        words = list(NON_SPACE_RE.finditer(m.group(0)))
        # drop leading function words ("The Normans", "Although Rollo") and a lone sentence opener
        while words and words[0].group(0).lower().rstrip(".,") in NAME_OPENERS:
            words.pop(0)
        while words and words[-1].group(0).lower() in _NAME_CONNECTORS:
            words.pop()
        if not words:
            continue
        start, end = start + words[0].start(), m.start() + words[-1].end()
        surface = text[start:end].rstrip(".'’")
        if surface.endswith(("'s", "’s")):
            surface = surface[:-2]
        end = start + len(surface)
        if not surface or _overlaps((start, end), taken):
            continue
        if len(words) == 1 and _at_sentence_start(text, start) and words[0].group(0).lower().endswith("ly"):
            continue  # a sentence-opening adverb ("Currently") is not a name
        if _is_initial(surface):
            continue
        toks = _name_tokens(surface)
        if not toks:
            continue
        taken.append((start, end))
        if "name" in wanted:
            out.append(Value("name", surface, " ".join(toks), (start, end), tokens=toks))
    out.sort(key=lambda v: v.span)
    return out
