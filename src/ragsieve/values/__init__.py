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

The readers, one module each, by what they read (this package re-exports their public names):

* :mod:`ragsieve.values.core` - the :class:`Value` and :class:`Match` types, :func:`fold`,
  :func:`phrase_pattern`;
* :mod:`ragsieve.values.numbers` - numbers;
* :mod:`ragsieve.values.dates` - dates;
* :mod:`ragsieve.values.quantities` - quantities with units (``pint``) and currencies;
* :mod:`ragsieve.values.names` - proper names;
* :mod:`ragsieve.values.identifiers` - code identifiers;
* :mod:`ragsieve.values.extract` - :func:`extract_values`, every value of a text;
* :mod:`ragsieve.values.evidence` - :func:`find_in`, :func:`find_entity`, :func:`nearest`: whether
  evidence states a value.

They sit beneath the reading layer (:mod:`ragsieve.text` reads values with them) and import
nothing of ragsieve but :mod:`ragsieve.lexicon` and :mod:`ragsieve.io`. A setting is read where it
is defined: set ``NAME_TAIL_MIN_CHARS`` on :mod:`ragsieve.values.evidence` and
``NAME_SPELLING_RATIO`` on :mod:`ragsieve.values.names`, not on this package.

Example:
    >>> from ragsieve.values import extract_values, find_in
    >>> [(v.kind, v.norm) for v in extract_values("Meissner found it in 1912.")]
    [('name', 'meissner'), ('date', '1912')]
    >>> year = extract_values("in 1912")[0]
    >>> find_in(year, "Walther Meissner and Robert Ochsenfeld discovered it in 1933.") is None
    True
"""

from __future__ import annotations

from ragsieve.values.core import VALUE_KINDS, Match, Value, ValueKind, fold, phrase_pattern, value_to_dict
from ragsieve.values.core import _prepare as _prepare
from ragsieve.values.core import prepare_text as prepare_text
from ragsieve.values.dates import MONTH_NUMBERS
from ragsieve.values.evidence import NAME_TAIL_MIN_CHARS, EvidenceValues, find_entity, find_in, nearest, read_evidence
from ragsieve.values.extract import extract_values
from ragsieve.values.names import NAME_RE, NAME_SPELLING_RATIO
from ragsieve.values.names import _initials as _initials
from ragsieve.values.quantities import parse_unit, same_measure

__all__ = [
    "prepare_text",
    "MONTH_NUMBERS",
    "NAME_RE",
    "NAME_SPELLING_RATIO",
    "NAME_TAIL_MIN_CHARS",
    "VALUE_KINDS",
    "EvidenceValues",
    "Match",
    "Value",
    "ValueKind",
    "extract_values",
    "find_entity",
    "find_in",
    "fold",
    "nearest",
    "parse_unit",
    "phrase_pattern",
    "read_evidence",
    "same_measure",
    "value_to_dict",
]
