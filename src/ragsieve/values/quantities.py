"""Quantities: a number followed by a unit, and currencies (a symbol before the number, or a
currency's name or code after it). Units are ``pint``'s (imported on first use), read strictly
(:func:`parse_unit`); equal dimensions are converted with ``pint``, so "4.2 kelvin" matches
"−268.95 °C" and "5 miles" matches "8.05 km" (:func:`same_measure`: whether two values could state
one fact). pint's parsed definitions, the words it can read as a unit and its readings of words
are stored beside each other in the user's cache folder, so a later process reads the units it has
seen without importing pint.
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import re
import shutil
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ragsieve.lexicon import STOP_WORDS
from ragsieve.values.core import Match, Value, _close, _fmt, fold, phrase_pattern
from ragsieve.values.names import _TOKEN_RE

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


def _plausible_unit(number: Value, unit: str) -> bool:
    """A one-letter unit (K, A, T, B, V, W, N, L, g, m, s, t, h) is read only after a digit
    number that is not a year: "4.2 K" is kelvin, "the 2013 A. Sugar Bowl" and "the Second B.
    of Guam" are not amperes and bytes."""
    if len(unit) > 1:
        return True
    if not number.text[:1].isdigit() and number.text[:1] not in "+-":
        return False
    return not (number.number is not None and number.number == int(number.number) and 1000 <= number.number <= 2099)


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
