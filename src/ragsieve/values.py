"""Typed values in text: numbers, dates, quantities with units, proper names, code identifiers.

A checker that reads word overlap forgives a wrong year in an otherwise copied sentence; one that
reads *values* does not. :func:`extract_values` finds the values a sentence states, each as a
:class:`Value` (kind, surface text, normalised form, character span), and :func:`find_in` decides
whether another text (the evidence) states the same value after normalisation:

* numbers: digits with thousands separators, decimals, signs (also the Unicode minus), number
  words ("twenty-five", "1.5 million"), ordinals ("3rd", "third"); a decimal or a scaled number
  matches within half a unit of its last digit ("1.5 million" ~ "1,534,000");
* dates: ISO (1933-03-12), "12 March 1933", "March 12, 1933", "March 1933", numeric D/M/Y and
  M/D/Y (both readings kept when ambiguous), years (1000-2099, "300 BC", "AD 79"), decades
  ("1930s"); a date matches an evidence date that states every part it states, equal;
* quantities: a number followed by a unit from a curated lexicon (length, mass, temperature,
  time, area, volume, speed, energy, power, pressure, frequency, voltage, data, percent,
  currencies); equal dimensions are converted with ``pint`` (imported on first use), so
  "4.2 kelvin" matches "−268.95 °C" and "5 miles" matches "8.05 km";
* proper names: capitalised spans (with connectors such as "of", "van", "de"); matched as a
  contiguous token sequence after folding case and diacritics, where an initial matches a full
  name ("W. Meissner" ~ "Walther Meissner") and an evidence initial may sit in between;
* code identifiers: snake_case, CamelCase, ALL_CAPS with digits or underscores, dotted names
  (``os.path.join``); matched exactly as a whole token (code is case-sensitive).

Example:
    >>> from ragsieve.values import extract_values, find_in
    >>> [(v.kind, v.norm) for v in extract_values("Meissner found it in 1912.")]
    [('name', 'meissner'), ('date', '1912')]
    >>> year = extract_values("in 1912")[0]
    >>> find_in(year, "Walther Meissner and Robert Ochsenfeld discovered it in 1933.") is None
    True
"""

from __future__ import annotations

import atexit
import difflib
import functools
import json
import logging
import math
import re
import shutil
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from ragsieve.lexicon import (
    CITATION_MARKER_RE,
    MONTH_NAMES,
    MONTHS,
    NAME_OPENERS,
    NON_SPACE_RE,
    STOP_WORDS,
    WORD_RE,
)

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


# ----------------------------------------------------------------------------- text folding
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


def _prepare(text: str) -> str:
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


# ----------------------------------------------------------------------------- numbers
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


def _fmt(x: float) -> str:
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.6g}"


# ----------------------------------------------------------------------------- units
# Units are pint's: the words after a number are a unit when pint's registry names them (a unit's
# name, plural or symbol, SI prefixes included), read strictly, because pint's free-text parser
# takes many English words for units ("in" inch, "a" annum, "at" technical atmosphere, "units"
# micro-nit). Read strictly means: a function word is never a unit (except a unit's own full
# name, "year"); a prefix and its unit are both symbols or both names ("km", "kilometre", not
# "u" + "nit"); several words are one unit's name ("light year", "degrees Celsius") or joined by
# pint's own operator words ("miles per hour", "square kilometres"), never a product by juxtaposition.
_UNIT_OPERATOR_WORDS = frozenset({"per", "square", "cubic", "sq"})
# forms pint does not know, to the unit they write
_UNIT_ALIASES = {"per cent": "percent", "percentage point": "percent"}
_UNIT_WORDS_MAX = 3
_POWERS = {"2": 2, "3": 3, "²": 2, "³": 3}
_UNIT_TOKEN_RE = re.compile(r"[^\s,;:!?()\[\]\"“”]+")
_CURRENCY_SYMBOLS = {"$": "USD", "US$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR"}
_CURRENCY_WORDS = {
    "dollar": "USD", "usd": "USD", "euro": "EUR", "eur": "EUR", "pound sterling": "GBP", "gbp": "GBP",
    "yen": "JPY", "jpy": "JPY", "rupee": "INR", "yuan": "CNY", "franc": "CHF",
}  # fmt: skip
# a currency symbol just before a number ("$5", "US$ 5")
_CURRENCY_BEFORE_RE = re.compile(r"(?P<cur>US\$|[$€£¥₹])\s*$")
_CURRENCY_WORD_RE = re.compile(
    r"(?P<cur>" + "|".join(sorted(_CURRENCY_WORDS, key=len, reverse=True)) + r")s?(?![\w])", re.IGNORECASE
)


def _strict_unit_name(word: str) -> str | None:
    """pint's name of the unit ``word`` writes: a unit's name, alias or symbol, plural or not,
    with an SI prefix of the same sort (``"km"``, ``"kilometres"``; not ``"u"`` + ``"nit"``)."""
    if not _may_name_a_unit(word):
        return None
    known, name = _UNIT_READINGS.get(f"name:{word}")
    if not known:
        name = _read_unit_name(word)
        _UNIT_READINGS.put(f"name:{word}", name)
    return name


def _read_unit_name(word: str) -> str | None:
    reg = _registry()
    try:
        parses = sorted(reg.parse_unit_name(word), key=lambda p: (bool(p[2]), bool(p[0])))
    except Exception:  # pint's parser raises on odd characters
        return None
    for prefix, unit, suffix in parses:
        definition = reg._units.get(unit)
        if definition is None:
            continue
        if not prefix:
            if suffix and len(word) - len(suffix) < 2:
                continue  # "ms" is milliseconds, not metres
            return str(reg.get_name(unit))
        own_symbol = definition.symbol if definition.symbol != definition.name else None
        symbols = {a for a in definition.aliases if len(a) <= 2} | ({own_symbol} if own_symbol else set())
        names = {a for a in (definition.name, *definition.aliases) if a and len(a) > 2}
        p = reg._prefixes[prefix]
        prefix_symbols = {a for a in (p.symbol, *p.aliases) if a and len(a) <= 2}
        prefix_names = {a for a in (p.name, *p.aliases) if a and len(a) > 2}
        as_symbols = {ps + us for ps in prefix_symbols for us in symbols}
        as_names = {pn + n + plural for pn in prefix_names for n in names for plural in ("", "s", "es")}
        if word in as_symbols or word in as_names:
            try:
                return str(reg.get_name(prefix + unit))
            except Exception:  # a prefixed offset unit ("kilodegree Celsius") is no unit
                return None
    return None


def _unit_string(expression: str) -> str:
    known, unit = _UNIT_READINGS.get(f"unit:{expression}")
    if not known:
        try:
            unit = str(_registry().Unit(expression)).replace(" ", "")
        except Exception:
            unit = None
        _UNIT_READINGS.put(f"unit:{expression}", unit)
    if unit is None:  # as pint raises for units it cannot combine (an offset unit in a product)
        raise ValueError(f"pint cannot read {expression!r} as one unit")
    return unit


@functools.lru_cache(maxsize=8192)
def parse_unit(phrase: str) -> str | None:
    """The pint unit ``phrase`` writes (``"km"`` -> ``"kilometer"``, ``"miles per hour"`` and
    ``"mph"`` -> a speed, ``"km²"`` -> ``"kilometer**2"``, ``"°C"`` -> ``"degree_Celsius"``), or
    ``None`` when it is not one unit."""
    words = phrase.split()
    if not words or len(words) > _UNIT_WORDS_MAX:
        return None
    joined = " ".join(words)
    for form in (joined, joined.lower(), joined.lower().removesuffix("s")):
        if form in _UNIT_ALIASES:
            return _UNIT_ALIASES[form]
    lowered = [w.lower() for w in words]
    try:
        if "per" in lowered[1:-1]:  # "miles per hour"
            i = lowered.index("per")
            num, den = parse_unit(" ".join(words[:i])), parse_unit(" ".join(words[i + 1 :]))
            return _unit_string(f"({num}) / ({den})") if num and den else None
        if lowered[0] in _UNIT_OPERATOR_WORDS and len(words) > 1:  # "square kilometres", "sq ft"
            base = parse_unit(" ".join(words[1:]))
            return _unit_string(f"({base}) ** {3 if lowered[0] == 'cubic' else 2}") if base else None
        if len(words) == 1 and words[0].count("/") == 1:  # "km/h"
            num, den = (parse_unit(p) for p in words[0].split("/"))
            return _unit_string(f"({num}) / ({den})") if num and den else None
        if len(words) == 1 and words[0][-1:] in _POWERS and len(words[0]) > 1:  # "km²", "m3"
            base = parse_unit(words[0][:-1])
            return _unit_string(f"({base}) ** {_POWERS[words[0][-1]]}") if base else None
    except Exception:  # pint cannot combine them (an offset unit in a product)
        return None
    if len(words) == 1:
        word = words[0].replace("-", "_")
        if word in STOP_WORDS and word == word.lower() and not _may_be_unit_name(word.rstrip("s")):
            return None  # the rule below, decided without the registry ("in" is never the inch)
        for form in (word, word.lower()) if len(word) > 2 else (word,):
            name = _strict_unit_name(form)
            if name is None:
                continue
            if form in STOP_WORDS and not (form.rstrip("s") == name and len(name) > 3):
                return None  # "in" (inch), "are" (100 m²): the word, not the unit
            return name
        return None
    # one unit's name in several words: "light year", "degrees Celsius", "nautical miles"
    singular = [words[0].removesuffix("s"), *words[1:]]
    for form in ("_".join(words), "_".join(singular)):
        for cand in (form, form[: len(words[0])].lower() + form[len(words[0]) :], form.lower()):
            name = _strict_unit_name(cand)
            if name is not None:
                return name
    return None


def _unit_after(rest: str) -> tuple[str, str, int] | None:
    """The unit that opens ``rest`` (no leading space): (surface, pint unit, end offset)."""
    tokens = list(_UNIT_TOKEN_RE.finditer(rest[:60]))
    # the words of a unit follow each other with single spaces, from the start of ``rest``
    run: list[re.Match[str]] = []
    for t in tokens[:_UNIT_WORDS_MAX]:
        if (run and rest[run[-1].end() : t.start()] != " ") or (not run and t.start() != 0):
            break
        run.append(t)
    for n in range(len(run), 0, -1):
        surface = rest[: run[n - 1].end()]
        if len(surface) > 1:
            surface = surface.rstrip(".'’ ") or surface  # a full stop or a quote is not the unit's
        unit = parse_unit(surface)
        if unit:
            return surface, unit, len(surface)
    return None


_REGISTRY_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _load_registry() -> Any:
    import pint

    from ragsieve.io import user_cache_dir

    # pint's own cache of its parsed definition files (checked by pint against their dates):
    # building the registry from it takes about a quarter of parsing them, which is most of
    # what a cold question waits for before its first quantity. The cache is pint's pickle, in
    # the user's own cache folder (made private here), the trust Python's bytecode caches already
    # have; nothing is read from an index or a config. A damaged cache is parsed again.
    cache = user_cache_dir() / f"pint-{pint.__version__}"
    try:
        cache.mkdir(parents=True, exist_ok=True, mode=0o700)
        return pint.UnitRegistry(cache_folder=cache)
    except Exception as exc:  # unwritable, or a damaged (half-written) cache file: parse the files instead
        logging.getLogger(__name__).info("pint's definition cache %s is unusable (%s); parsing them", cache, exc)
        shutil.rmtree(cache, ignore_errors=True)
        return pint.UnitRegistry()


def _registry() -> Any:
    # one load per process even when threads ask together: the others wait for it
    with _REGISTRY_LOCK:
        reg = _load_registry()
    _remember_unit_words(reg)
    return reg


# The words pint can read as a unit, as parts: what its parser matches a word against (a prefix,
# a unit's name, alias or symbol, a plural suffix). Stored once beside pint's definition cache, so
# a later process tells that "landed" or "people" cannot be a unit without importing pint (about
# half a second, most of it pint importing dask where dask is installed), and loads the registry
# only for a word that could be one. A superset of pint's own test: every word pint would parse
# passes it, so no answer depends on whether the file exists.
_UNIT_WORDS_FILE = "ragsieve-unit-words.json"


@dataclass(frozen=True)
class _UnitWords:
    prefixes: tuple[str, ...]
    suffixes: tuple[str, ...]
    units: frozenset[str]  # case-sensitive names, aliases and symbols, and their lower-case forms
    names: frozenset[str]  # each unit's own name, what pint's ``get_name`` answers (with a prefix's)
    prefix_names: tuple[str, ...]


def _unit_words_path() -> Path | None:
    from importlib.metadata import PackageNotFoundError, version

    from ragsieve.io import user_cache_dir

    try:
        return user_cache_dir() / f"pint-{version('pint')}" / _UNIT_WORDS_FILE
    except PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def _stored_unit_words() -> _UnitWords | None:
    """The stored unit words, or None when there are none yet (or the file is unreadable)."""
    path = _unit_words_path()
    if path is None:
        return None
    try:
        return _unit_words_from(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def _unit_words_data(reg: Any) -> dict[str, list[str]]:
    """The parts of ``reg``'s unit words, as stored."""
    return {
        "prefixes": sorted(reg._prefixes),
        "suffixes": sorted(reg._suffixes),
        "units": sorted(set(reg._units) | {u.lower() for u in reg._units} | set(reg._units_casei)),
        "names": sorted({d.name for d in reg._units.values()}),
        "prefix_names": sorted({d.name for d in reg._prefixes.values()}),
    }


def _unit_words_from(data: Any) -> _UnitWords | None:
    keys = ("prefixes", "suffixes", "units", "names", "prefix_names")
    if not isinstance(data, dict) or not all(
        isinstance(data.get(k), list) and all(isinstance(x, str) for x in data[k]) for k in keys
    ):
        return None
    return _UnitWords(
        tuple(data["prefixes"]), tuple(data["suffixes"]), frozenset(data["units"]), frozenset(data["names"]),
        tuple(data["prefix_names"]),
    )


_UNIT_WORDS_WRITTEN: list[bool] = []


def _remember_unit_words(reg: Any) -> None:
    """Store ``reg``'s unit words for later processes (once per process; best effort)."""
    if _UNIT_WORDS_WRITTEN or _stored_unit_words() is not None:
        return
    _UNIT_WORDS_WRITTEN.append(True)
    path = _unit_words_path()
    if path is None:
        return
    _store_privately(path, _unit_words_data(reg))


def _store_privately(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically, in a folder only the user can read (best
    effort: a cache that cannot be written is only slower next time)."""
    from ragsieve.io import atomic_write_json

    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write_json(path, data)
    except OSError as exc:
        logging.getLogger(__name__).info("could not store %s (%s)", path, exc)


class _StoredReadings:
    """What pint answered for a word or an expression, kept beside its unit words for later
    processes: a corpus states the same units over and over, and a process that finds all of
    its words here never imports pint. Keyed by pint's version (the folder), so an upgrade
    starts afresh; read once, new readings merged into the file at exit, at most
    ``_UNIT_READINGS_MAX`` of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stored: dict[str, str | None] | None = None
        self._new: dict[str, str | None] = {}
        self._flush_at_exit = False

    def _load(self) -> dict[str, str | None]:
        if self._stored is None:
            self._stored = self._read()
        return self._stored

    @staticmethod
    def _read() -> dict[str, str | None]:
        path = _unit_words_path()
        if path is None:
            return {}
        try:
            data = json.loads((path.parent / _UNIT_READINGS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and (v is None or isinstance(v, str))}

    def get(self, key: str) -> tuple[bool, str | None]:
        with self._lock:
            stored = self._load()
            if key in self._new:
                return True, self._new[key]
            if key in stored:
                return True, stored[key]
            return False, None

    def put(self, key: str, value: str | None) -> None:
        with self._lock:
            if not self._flush_at_exit:
                self._flush_at_exit = True
                atexit.register(self.flush)
            if len(self._load()) + len(self._new) < _UNIT_READINGS_MAX:
                self._new[key] = value

    def flush(self) -> None:
        """Merge this process's new readings into the file (best effort; atomic replace)."""
        with self._lock:
            new, self._new = self._new, {}
        path = _unit_words_path()
        if not new or path is None:
            return
        merged = {**self._read(), **new}
        _store_privately(path.parent / _UNIT_READINGS_FILE, dict(list(merged.items())[:_UNIT_READINGS_MAX]))


_UNIT_READINGS_FILE = "ragsieve-unit-readings.json"
_UNIT_READINGS_MAX = 50_000
_UNIT_READINGS = _StoredReadings()


def _may_be_unit_name(word: str) -> bool:
    """False only when ``word`` is not what pint's ``get_name`` answers for any unit: a unit's own
    name after one of the prefixes' own names (or none). True when nothing is stored yet."""
    vocabulary = _stored_unit_words()
    if vocabulary is None:
        return True
    return any(word.startswith(p) and word[len(p) :] in vocabulary.names for p in vocabulary.prefix_names)


def _may_name_a_unit(word: str) -> bool:
    """False only when pint's parser cannot read ``word`` as a unit: no split of it into a
    prefix, a unit's name (either case) and a suffix (pint's ``parse_unit_name`` walks the same
    splits). True when nothing is stored yet."""
    vocabulary = _stored_unit_words()
    if vocabulary is None:
        return True
    for prefix in vocabulary.prefixes:
        if not word.startswith(prefix):
            continue
        for suffix in vocabulary.suffixes:
            if word.endswith(suffix) and len(word) >= len(prefix) + len(suffix):
                core = word[len(prefix) : len(word) - len(suffix)]
                if core in vocabulary.units or core.lower() in vocabulary.units:
                    return True
    return False


def _convert(magnitude: float, unit: str, to_unit: str) -> float | None:
    """``magnitude`` in ``unit`` expressed in ``to_unit``; ``None`` when the dimensions differ."""
    if unit == to_unit:
        return magnitude
    if unit.isupper() or to_unit.isupper():  # currency codes: no exchange rates here
        return None
    try:
        reg = _registry()
        q = reg.Quantity(magnitude, unit)
        return float(q.to(to_unit).magnitude)
    except Exception:  # pint raises DimensionalityError, UndefinedUnitError, OffsetUnitCalculusError
        return None


def same_measure(a: Value, b: Value) -> bool:
    """Whether ``a`` and ``b`` could state one fact: the same kind and, for quantities, units
    of one dimension (a length and a mass are two facts, whatever their sentence)."""
    if a.kind != b.kind:
        return False
    if a.kind != "quantity" or a.unit is None or b.unit is None:
        return True
    return _convert(1.0, a.unit, b.unit) is not None


# ----------------------------------------------------------------------------- dates
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


# ----------------------------------------------------------------------------- identifiers and names
_IDENT_RE = re.compile(
    r"(?<![\w.])(?:"
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?"  # dotted
    r"|[A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9](?:\(\))?"  # snake_case / ALL_CAPS_WITH_UNDERSCORES
    r"|[a-z]+[A-Z][A-Za-z0-9]*(?:\(\))?"  # camelCase
    r"|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+(?:\(\))?"  # CamelCase
    r"|[A-Z]+[0-9][A-Z0-9]*|[A-Z]{2,}[0-9]+[A-Z0-9]*"  # ALL CAPS with digits (ASN1, SHA256)
    r"|[A-Za-z_][A-Za-z0-9_]*\(\)"  # call()
    r")(?![\w])"
)
_NAME_CONNECTORS = {"of", "de", "da", "del", "della", "der", "van", "von", "la", "le", "du", "di", "bin", "al", "y"}
# A name: capitalised words (or initials) joined by spaces and connector words.
_CAP_TOKEN = r"(?:[A-Z]\.|[A-Z\u00C0-\u00DE][\w\u00C0-\u024F'’-]*)"
NAME_RE = re.compile(
    rf"{_CAP_TOKEN}(?:\s+(?:(?:{'|'.join(sorted(_NAME_CONNECTORS))})\s+)*{_CAP_TOKEN})*",
)
# One tokeniser for names and evidence: apostrophes split ("O'Hara" -> "o", "hara"; "Rollo's" ->
# "rollo", "s"), so a possessive or an Irish name reads the same on both sides.
_TOKEN_RE = re.compile(r"[^\W_]+\.?")
_SENTENCE_START_RE = re.compile(r"(?:^|[.!?:;]\s+|\n\s*|[\"“(]\s*)$")


def _name_tokens(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for tok in _word_tokens(text):
        if tok in _NAME_CONNECTORS:
            continue  # "University of Oxford" ~ "Oxford University"
        out.append(tok)
    return tuple(out)


def _word_tokens(text: str) -> list[str]:
    """Folded word tokens; an initial (one capital letter, "W" or "W.") becomes ``"w."`` so it
    can match a full name, while a lower-case "a" stays a word. Connector words stay lower-case
    only when written lower-case ("DER" is a name, "der" a connector)."""
    out: list[str] = []
    for raw in _TOKEN_RE.findall(text):
        word = raw.rstrip(".")
        if _is_initial(word):
            out.append(fold(word) + ".")
        elif word.islower() or word.lower() not in _NAME_CONNECTORS:
            out.extend(fold(word).split())  # a modifier letter folds to a space ("ibnʿArabī")
        else:
            out.append(fold(word) + "_")  # a capitalised connector word used as a name ("De")
    return out


def _is_initial(word: str) -> bool:
    """One capital letter, with or without its full stop ("W", "W.")."""
    return bool(re.fullmatch(r"[A-Z]\.?", word))


def _at_sentence_start(text: str, pos: int) -> bool:
    return bool(_SENTENCE_START_RE.search(text[max(0, pos - 4) : pos])) or pos == 0


# ----------------------------------------------------------------------------- extraction
def _overlaps(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(span[0] < e and s < span[1] for s, e in taken)


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


def _plausible_unit(number: Value, unit: str) -> bool:
    """A one-letter unit (K, A, T, B, V, W, N, L, g, m, s, t, h) is read only after a digit
    number that is not a year: "4.2 K" is kelvin, "the 2013 A. Sugar Bowl" and "the Second B.
    of Guam" are not amperes and bytes."""
    if len(unit) > 1:
        return True
    if not number.text[:1].isdigit() and number.text[:1] not in "+-":
        return False
    return not (number.number is not None and number.number == int(number.number) and 1000 <= number.number <= 2099)


def _is_surname_after_given_name(word: str, before: str) -> bool:
    """Whether ``word``, a capitalised word with one inner capital ("McLellan", "DeVito"), comes
    right after a capitalised word inside a sentence ("claimed by William McLellan"): a name
    then, as code names are not written after a given name. Not after a sentence's first word,
    which may be a verb ("Call HttpClient")."""
    if not (word.isalpha() and word[0].isupper() and word[1].islower() and sum(c.isupper() for c in word) == 2):
        return False
    if not before.endswith(" ") or before.endswith("  "):
        return False
    head, _, given = before[:-1].rpartition(" ")
    if not (len(given) > 1 and given.isalpha() and given[0].isupper() and given[1:].islower()):
        return False
    return bool(head) and _SENTENCE_START_RE.search(head + " ") is None


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


# ----------------------------------------------------------------------------- matching
def _close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol + 1e-9 * max(1.0, abs(a), abs(b))


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


def _quantity_match(value: Value, candidates: Sequence[Value], evidence_folded: str) -> Match | None:
    if value.number is None or value.unit is None:
        return None
    for c in candidates:
        if c.kind != "quantity" or c.number is None or c.unit is None:
            continue
        conv = _convert(c.number, c.unit, value.unit)
        if conv is None:
            continue
        # tolerance in the sentence's unit: its own last digit, or the evidence's converted
        tol_c = abs((_convert(c.number + c.tolerance, c.unit, value.unit) or conv) - conv)
        tol = max(value.tolerance, tol_c, 0.005 * abs(value.number) if c.unit != value.unit else 0.0)
        if _close(value.number, conv, tol):
            how: Literal["exact", "normalised", "converted"] = "normalised" if c.unit == value.unit else "converted"
            detail = "" if c.unit == value.unit else f"{c.norm} = {_fmt(round(conv, 6))} {value.unit}"
            return Match(value, c, "exact" if c.text == value.text else how, detail)
    # a bare number with the same magnitude counts when the unit's word is in the evidence: a
    # word of the evidence pint reads as the unit, or the currency's name (singular or plural)
    currency = [fold(k) for k, v in _CURRENCY_WORDS.items() if v == value.unit]
    unit_stated = any(len(w) > 2 and parse_unit(w) == value.unit for w in _TOKEN_RE.findall(evidence_folded)) or (
        bool(currency) and phrase_pattern(*currency, *(w + "s" for w in currency)).search(evidence_folded) is not None
    )
    for c in candidates if unit_stated else ():
        if c.kind == "number" and c.number is not None and _close(value.number, c.number, value.tolerance):
            return Match(value, c, "normalised", "unit stated elsewhere in the evidence")
    return None


def _tok_matches(claim_tok: str, ev_tok: str) -> bool:
    c, e = claim_tok.rstrip("._"), ev_tok.rstrip("._")
    if not c or not e:
        return False
    if c == e:
        return True
    if claim_tok.endswith("."):  # an initial matches the full name it abbreviates
        return e.startswith(c)
    if ev_tok.endswith("."):
        return c.startswith(e)
    return False


def _name_match(value: Value, evidence_tokens: Sequence[str], evidence_text: str) -> Match | None:
    toks = value.tokens
    n = len(evidence_tokens)
    for i in range(n):
        j, k = i, 0
        how: Literal["exact", "variant"] = "exact"
        while k < len(toks) and j < n:
            last = k == len(toks) - 1 and len(toks) > 1 or len(toks) == 1
            ev_tok = evidence_tokens[j]
            # an initial stands for a first or middle name, never for the last word of a name
            initial = toks[k].endswith(".") or ev_tok.endswith(".")
            if toks[k] == ev_tok or (not (last and initial) and _tok_matches(toks[k], ev_tok)):
                if toks[k].rstrip(".") != evidence_tokens[j].rstrip("."):
                    how = "variant"
                j, k = j + 1, k + 1
            elif k > 0 and evidence_tokens[j].endswith("."):
                j += 1  # an evidence middle initial ("John F. Kennedy" states "John Kennedy")
                how = "variant"
            elif k > 0 and evidence_tokens[j] in _NAME_CONNECTORS:
                j += 1
            else:
                break
        if k == len(toks):
            surface = " ".join(evidence_tokens[i:j])
            ev = Value("name", surface, surface, (0, 0), tokens=tuple(evidence_tokens[i:j]))
            return Match(value, ev, how)
    return None


# Two spellings of one name ("Tchaikovsky" / "Tschaikowsky") are this similar (difflib's ratio
# of the folded names); a different name sharing a word ("Walther Ochsenfeld" / "Walther
# Meissner") is well below. Set by arithmetic on such pairs, not on a benchmark.
NAME_SPELLING_RATIO = 0.9


def _initials(tokens: Sequence[str]) -> str:
    return "".join(t[0] for t in tokens if t and t not in _NAME_CONNECTORS)


def _name_variant(value: Value, evidence_values: Sequence[Value]) -> Match | None:
    """A name the evidence states in another form: a shorter form that keeps the name's leading
    words ("Sony" for "Sony Corporation"), an acronym of it ("IBM" for "International Business
    Machines", and the reverse), or another spelling (:data:`NAME_SPELLING_RATIO`)."""
    toks = tuple(t.rstrip(".") for t in value.tokens)
    if not toks:
        return None
    joined = " ".join(toks)
    for ev in evidence_values:
        if ev.kind != "name" or not ev.tokens:
            continue
        etoks = tuple(t.rstrip(".") for t in ev.tokens)
        ejoined = " ".join(etoks)
        if len(etoks) < len(toks) and toks[: len(etoks)] == etoks and len(etoks[0]) >= 3:
            return Match(value, ev, "variant", f"a shorter form of {value.text}")
        if len(etoks) == 1 and len(toks) >= 2 and etoks[0] == _initials(toks):
            return Match(value, ev, "variant", f"the initials of {value.text}")
        if len(toks) == 1 and len(etoks) >= 2 and toks[0] == _initials(etoks):
            return Match(value, ev, "variant", f"{value.text} is the initials of {ev.text}")
        if min(len(joined), len(ejoined)) >= 5 and (
            difflib.SequenceMatcher(None, joined, ejoined).ratio() >= NAME_SPELLING_RATIO
        ):
            return Match(value, ev, "variant", "another spelling")
    return None


# The shortest trailing form of a name that names it on its own (:func:`find_entity`): its
# longest word has at least this many letters. Chosen on the conflict stage's training split
# (`python benchmarks/conflicts.py --choose-name-forms`; tried 3, 4, 5, 6, 8 and none; rule: the
# shortest at which no ordinary question of the split shows a false conflict and ConflictQA's
# precision stays at least 90%): 3, every length tried was clean. ``None``: trailing forms are
# not read.
NAME_TAIL_MIN_CHARS: int | None = 3


def _subsequence(short: Sequence[str], long: Sequence[str]) -> bool:
    it = iter(long)
    return all(any(_tok_matches(s, t) for t in it) for s in short)


def _names_another(toks: Sequence[str], part: Sequence[str], ev: Sequence[str]) -> bool:
    """Whether evidence name ``ev`` holds ``part`` (a shorter form of the name ``toks``) beside
    words that are not the name's: it names something else ("Peter Schmeichel" beside "Kasper
    Schmeichel", "Walther Ochsenfeld" beside "Walther Meissner", "Williams Bridge" beside "Street
    Bridge")."""
    k = len(part)
    if len(ev) <= k:
        return False
    for i in range(len(ev) - k + 1):
        if tuple(ev[i : i + k]) == tuple(part):
            rest = [*ev[:i], *ev[i + k :]]
            if not all(any(_tok_matches(t, e) or _tok_matches(e, t) for t in toks) for e in rest):
                return True
    return False


def _named(evidence_values: Sequence[Value]) -> list[tuple[Value, tuple[str, ...]]]:
    return [(ev, tuple(t.rstrip(".") for t in ev.tokens)) for ev in evidence_values if ev.kind == "name" and ev.tokens]


def _entity_form(
    value: Value, evidence_values: Sequence[Value], tail_min: int | None, others: Sequence[tuple[str, ...]]
) -> Match | None:
    toks = tuple(t.rstrip(".") for t in value.tokens)
    if len(toks) < 2:
        return None
    named = _named(evidence_values)
    for ev, etoks in named:
        # the same first and last word with more words between ("Mari Christine Fitzduff")
        if len(etoks) > len(toks) and etoks[0] == toks[0] and etoks[-1] == toks[-1] and _subsequence(toks, etoks):
            return Match(value, ev, "variant", f"{value.text} with more words")
    if tail_min is None:
        return None
    for k in range(len(toks) - 1, 0, -1):
        tail = toks[-k:]
        if max(len(t) for t in tail) < tail_min or any(_names_another(toks, tail, o) for o in others):
            continue
        for ev, etoks in named:
            if etoks == tail:
                return Match(value, ev, "variant", f"the last words of {value.text}")
    return None


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


def _identifier_match(value: Value, evidence_text: str) -> Match | None:
    ident = value.tokens[0] if value.tokens else value.text
    m = phrase_pattern(ident).search(evidence_text)
    if m:
        return Match(value, Value("identifier", m.group(0), m.group(0), m.span(), tokens=(m.group(0),)), "exact")
    return None


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


def value_to_dict(value: Value) -> dict[str, Any]:
    """Every field, for debugging and tests (``Value.to_dict`` is the short trace form)."""
    return asdict(value)
