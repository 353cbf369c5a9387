"""Dates: ISO (1933-03-12), "12 March 1933", "March 12, 1933", "March 1933", numeric D/M/Y and
M/D/Y (both readings kept when ambiguous), years (1000-2099, "300 BC", "AD 79"), decades ("1930s"),
a month named alone ("every March"); a date matches an evidence date that states every part it
states, equal, and a year matches the same bare number.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragsieve.lexicon import MONTH_NAMES, MONTHS
from ragsieve.values.core import Match, Value

# month names and abbreviations, folded, to their number (``ragsieve.lexicon``, from ``calendar``)
MONTH_NUMBERS: dict[str, int] = MONTHS


_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"


_YEAR = r"(?P<year>\d{3,4})"


_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"


_DATE_PATTERNS = [
    re.compile(r"(?<![\d-])(?P<year>\d{4})[-/](?P<m>\d{1,2})[-/](?P<d>\d{1,2})(?![\d-])"),
    re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(r"(?<![\d/.])(?P<a>\d{1,2})[/.](?P<b>\d{1,2})[/.](?P<year>\d{4})(?![\d/])"),
    re.compile(r"\b(?P<decade>1\d{2}0|20[0-9]0)'?s\b"),
    re.compile(r"\b(?P<year>\d{1,4})\s*(?P<era>BC|BCE|B\.C\.)(?![\w])"),
    re.compile(r"(?<![\w])(?P<era>AD|A\.D\.|CE)\s*(?P<year>\d{1,4})\b"),
    # a month named alone ("every March"): a proper noun, so capitalised ("it may rain" is no
    # month), and spelled out (an abbreviation alone is too often something else; the table
    # lists the twelve full names first)
    re.compile(r"\b(?P<month>" + "|".join(m.capitalize() for m in MONTH_NAMES) + r")\b"),
    re.compile(r"(?<![\w.,$€£-])(?P<year>1\d{3}|20\d{2})(?![\w%]|[.,]\d)"),
]
# A bare four-digit number is a year unless a unit follows it ("1912 metres" is a length).


def _month_ok(m: int) -> bool:
    return 1 <= m <= 12


def _date_value(m: re.Match[str], text: str) -> Value | None:
    g = m.groupdict()
    start, end = m.span()
    readings: list[tuple[int, int, int]] = []
    if g.get("decade"):
        y = int(g["decade"])
        return Value("date", m.group(0), f"{y}s", (start, end), number=float(y), dates=((y, 0, 0),), tolerance=9.0)
    if not g.get("year"):  # a month alone
        mo = MONTHS[g["month"].lower()]
        return Value("date", m.group(0), g["month"].lower(), (start, end), dates=((0, mo, 0),))
    year = int(g["year"])
    if g.get("era") and g["era"].upper().startswith("B"):
        year = -year
    if g.get("m") is not None:
        mo, d = int(g["m"]), int(g["d"])
        if not _month_ok(mo) or not 1 <= d <= 31:
            return None
        readings.append((year, mo, d))
    elif g.get("a") is not None:
        a, b = int(g["a"]), int(g["b"])
        if _month_ok(b) and 1 <= a <= 31:
            readings.append((year, b, a))
        if _month_ok(a) and 1 <= b <= 31 and a != b:
            readings.append((year, a, b))
        if not readings:
            return None
    elif g.get("month"):
        mo = MONTHS[g["month"].lower().rstrip(".")]
        d = int(g["day"]) if g.get("day") else 0
        if d > 31:
            return None
        readings.append((year, mo, d))
    else:
        readings.append((year, 0, 0))
    norm = "|".join("-".join(f"{p:02d}" if i else str(p) for i, p in enumerate(r) if p or i == 0) for r in readings)
    return Value("date", m.group(0), norm, (start, end), number=float(year), dates=tuple(readings))


def _date_match(value: Value, candidates: Sequence[Value]) -> Match | None:
    for c in candidates:
        if c.kind == "number" and c.number is not None and value.dates and len(value.dates) == 1:
            y, mo, d = value.dates[0]
            if not mo and not value.tolerance and c.number == y and not c.tolerance:
                return Match(value, c, "normalised")
            continue
        if c.kind != "date":
            continue
        if value.tolerance:  # a decade: any year inside it, or the same decade
            if c.number is not None and value.number is not None and 0 <= c.number - value.number <= 9:
                return Match(value, c, "normalised")
            continue
        for y, mo, d in value.dates:
            for cy, cmo, cd in c.dates:
                if c.tolerance:
                    continue
                if (y == cy or not y) and (not mo or mo == cmo) and (not d or d == cd):
                    return Match(value, c, "exact" if c.text == value.text else "normalised")
    return None
