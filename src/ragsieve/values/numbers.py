"""Numbers: digits with thousands separators, decimals, signs (also the Unicode minus), scientific
notation, number words ("twenty-five", "1.5 million"), ordinals ("3rd", "third"); a decimal or a
scaled number matches within half a unit of its last digit ("1.5 million" ~ "1,534,000"), and a
count matches a bare year.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragsieve.lexicon import WORD_RE
from ragsieve.values.core import Match, Value, _close, _fmt, _overlaps
from ragsieve.values.quantities import _CURRENCY_BEFORE_RE

_UNITS_WORDS = {
    "zero": 0, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip


_TENS_WORDS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip


_ORDINAL_WORDS = {
    "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9,
    "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14, "fifteenth": 15,
    "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19, "twentieth": 20, "thirtieth": 30,
    "fortieth": 40, "fiftieth": 50, "hundredth": 100, "thousandth": 1000,
}  # fmt: skip


_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000, "trillion": 10**12}


# "one" and "first" alone are left out: far more often a pronoun or "earliest" than a count, and
# flagging them would refuse paraphrases; inside a compound ("twenty-one", "one million") they count.
_COMPOUND_ONLY = {"one": 1, "first": 1}


_ALL_NUMBER_WORDS = {**_UNITS_WORDS, **_TENS_WORDS, **_ORDINAL_WORDS, **_SCALES, **_COMPOUND_ONLY}


_WORD_ALT = "|".join(sorted(_ALL_NUMBER_WORDS, key=len, reverse=True))


_NUMBER_WORDS_RE = re.compile(rf"\b(?:{_WORD_ALT})(?:(?:[\s-]+|\s+and\s+)(?:{_WORD_ALT}))*\b", re.IGNORECASE)


_DIGITS = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+"


_NUMBER_RE = re.compile(
    rf"(?<![\w.,/])(?P<sign>[-+])?(?P<num>{_DIGITS})(?P<exp>[eE][-+]?\d+)?(?P<ord>st|nd|rd|th)?"
    rf"(?:\s*(?P<scale>hundred|thousand|million|billion|trillion|bn|m\b|k\b))?(?![\w])(?![.,]\d)",
    re.IGNORECASE,
)


def _decimals(num: str) -> int:
    return len(num.split(".", 1)[1]) if "." in num else 0


def _parse_number_words(words: str) -> float | None:
    """``"two hundred and fifty"`` -> 250; ``None`` when the words are not one number."""
    tokens = [t for t in WORD_RE.findall(words.lower()) if t != "and"]
    total, current, seen = 0, 0, False
    for t in tokens:
        if t in _SCALES:
            scale = _SCALES[t]
            current = max(current, 1) * scale if scale == 100 else current
            if scale > 100:
                total += max(current, 1) * scale
                current = 0
        elif t in _UNITS_WORDS or t in _COMPOUND_ONLY:
            current += _UNITS_WORDS.get(t, _COMPOUND_ONLY.get(t, 0))
        elif t in _TENS_WORDS:
            current += _TENS_WORDS[t]
        elif t in _ORDINAL_WORDS:
            v = _ORDINAL_WORDS[t]
            current = current * v if v >= 100 else current + v
        else:
            return None
        seen = True
    return float(total + current) if seen else None


def _numbers(text: str, taken: list[tuple[int, int]]) -> list[tuple[Value, int]]:
    """Numbers with the end offset a unit may follow from."""
    found: list[tuple[Value, int]] = []
    for m in _NUMBER_RE.finditer(text):
        span = m.span()
        if _overlaps(span, taken):
            continue
        # digits glued to letters are part of a name or code ("COVID-19", "B-52"): not a quantity
        if m.start() > 0 and text[m.start() - 1] == "-" and m.start() > 1 and text[m.start() - 2].isalpha():
            continue
        num = m.group("num")
        x = float(num.replace(",", ""))
        tol = 0.5 * 10 ** (-_decimals(num)) if "." in num else 0.0
        if m.group("exp"):
            # scientific notation ("1.602e-19") is one number, never its leading digit
            power = 10.0 ** int(m.group("exp")[1:])
            x, tol = x * power, tol * power
        scale_word = (m.group("scale") or "").lower()
        scale = {"bn": 1e9, "m": 1e6, "k": 1e3}.get(scale_word) or _SCALES.get(scale_word, 1)
        if scale_word in ("m", "k") and not _CURRENCY_BEFORE_RE.search(text[: m.start()]):
            # "5 m" is five metres unless money is being counted
            scale, span = 1, (m.start(), m.end("num") + len(m.group("ord") or ""))
        if m.group("sign") == "-":
            x = -x
        if scale != 1:
            tol = max(tol, 0.5 * 10 ** (-_decimals(num))) * scale
            x *= scale
        text_span = text[span[0] : span[1]]
        found.append((Value("number", text_span, _fmt(x), span, number=x, tolerance=tol), span[1]))
    for m in _NUMBER_WORDS_RE.finditer(text):
        span = m.span()
        if _overlaps(span, taken) or any(_overlaps(span, [v.span]) for v, _ in found):
            continue
        words = m.group(0)
        if words.lower() in _COMPOUND_ONLY or words.lower() in _SCALES:
            continue
        parsed = _parse_number_words(words)
        if parsed is None:
            continue
        found.append((Value("number", words, _fmt(parsed), span, number=parsed), span[1]))
    # a digit number followed by a scale word ("1.5 million") was read above; a word number
    # followed by digits is rare enough to leave alone
    return found


def _number_match(value: Value, candidates: Sequence[Value]) -> Match | None:
    if value.number is None:
        return None
    for c in candidates:
        if c.number is None:
            continue
        if c.kind == "date" and (value.number != int(value.number) or c.dates[0][1] or c.dates[0][2]):
            continue  # a count matches a bare year only ("in 1912" vs "1,912 people" is handled by kind)
        if _close(value.number, c.number, max(value.tolerance, c.tolerance if c.kind != "date" else 0.0)):
            return Match(value, c, "exact" if c.text == value.text else "normalised")
    return None
