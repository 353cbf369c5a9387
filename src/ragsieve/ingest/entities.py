"""Rule-based entity extraction at ingestion: people, dates and places.

Fast regular expressions plus a small gazetteer, no model: good enough to filter chunks
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
* **person**: an honorific followed by capitalised words (``Dr. Jane Smith``), or two to
  four capitalised words whose first is a known given name (``Albert Einstein``), or a
  capitalised pair followed by a person verb (``Lise Meitner discovered``).
* **place**: a gazetteer of countries, continents, US states and large cities, and
  capitalised words after ``in``/``at``/``from``/``near`` that are not already a date or
  person and are not sentence-initial stop words.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ragsieve.lexicon import NAME_OPENERS

ENTITY_TYPES = ("person", "date", "place")

_HONORIFICS = r"(?:Dr|Mr|Mrs|Ms|Prof|Professor|Sir|Dame|Lord|Lady|King|Queen|President|Saint|St|Pope|General)"
_CAP = r"[A-Z][a-zA-Z'\-]+"
_INITIAL = r"[A-Z]\."
_NAME_PART = rf"(?:{_CAP}|{_INITIAL})"
_HONORIFIC_RE = re.compile(rf"\b{_HONORIFICS}\.?\s+((?:{_NAME_PART}\s+){{0,3}}{_CAP})")
_CAP_SEQ_RE = re.compile(rf"\b({_NAME_PART}(?:\s+(?:von|van|de|der|da|di|del|la|le)?\s*{_NAME_PART}){{1,3}})")
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
_PLACES = frozenset(
    [
        "africa",
        "america",
        "antarctica",
        "asia",
        "australia",
        "europe",
        "oceania",
        "afghanistan",
        "albania",
        "algeria",
        "argentina",
        "armenia",
        "austria",
        "bangladesh",
        "belgium",
        "bolivia",
        "brazil",
        "bulgaria",
        "cambodia",
        "canada",
        "chile",
        "china",
        "colombia",
        "croatia",
        "cuba",
        "cyprus",
        "czechia",
        "denmark",
        "egypt",
        "england",
        "estonia",
        "ethiopia",
        "finland",
        "france",
        "germany",
        "ghana",
        "greece",
        "hungary",
        "iceland",
        "india",
        "indonesia",
        "iran",
        "iraq",
        "ireland",
        "israel",
        "italy",
        "jamaica",
        "japan",
        "jordan",
        "kenya",
        "korea",
        "latvia",
        "lebanon",
        "libya",
        "lithuania",
        "luxembourg",
        "malaysia",
        "mexico",
        "mongolia",
        "morocco",
        "nepal",
        "netherlands",
        "nigeria",
        "norway",
        "pakistan",
        "peru",
        "philippines",
        "poland",
        "portugal",
        "romania",
        "russia",
        "scotland",
        "serbia",
        "singapore",
        "slovakia",
        "slovenia",
        "somalia",
        "spain",
        "sudan",
        "sweden",
        "switzerland",
        "syria",
        "taiwan",
        "thailand",
        "tunisia",
        "turkey",
        "uganda",
        "ukraine",
        "uruguay",
        "venezuela",
        "vietnam",
        "wales",
        "yemen",
        "zimbabwe",
        "alabama",
        "alaska",
        "arizona",
        "california",
        "colorado",
        "florida",
        "georgia",
        "hawaii",
        "illinois",
        "indiana",
        "kansas",
        "kentucky",
        "louisiana",
        "maine",
        "maryland",
        "massachusetts",
        "michigan",
        "minnesota",
        "mississippi",
        "missouri",
        "montana",
        "nebraska",
        "nevada",
        "ohio",
        "oklahoma",
        "oregon",
        "pennsylvania",
        "tennessee",
        "texas",
        "utah",
        "vermont",
        "virginia",
        "washington",
        "wisconsin",
        "wyoming",
        "amsterdam",
        "athens",
        "bangkok",
        "barcelona",
        "beijing",
        "berlin",
        "boston",
        "brussels",
        "budapest",
        "cairo",
        "chicago",
        "copenhagen",
        "delhi",
        "dublin",
        "edinburgh",
        "geneva",
        "hamburg",
        "istanbul",
        "jerusalem",
        "kyoto",
        "lisbon",
        "london",
        "madrid",
        "manchester",
        "melbourne",
        "milan",
        "moscow",
        "mumbai",
        "munich",
        "naples",
        "oslo",
        "oxford",
        "cambridge",
        "paris",
        "prague",
        "rome",
        "seoul",
        "shanghai",
        "stockholm",
        "sydney",
        "tokyo",
        "toronto",
        "venice",
        "vienna",
        "warsaw",
        "zurich",
    ]
)
_MULTIWORD_PLACES = (
    "United States",
    "United Kingdom",
    "New York",
    "Los Angeles",
    "San Francisco",
    "New Zealand",
    "South Africa",
    "Soviet Union",
    "Hong Kong",
    "North America",
    "South America",
    "Middle East",
)
_MULTIWORD_PLACE_RE = re.compile(r"\b(" + "|".join(re.escape(p) for p in _MULTIWORD_PLACES) + r")\b")
# what may not open a name or a place: function words, sentence openers, month and day names
_NOT_NAMES = NAME_OPENERS
_WORD_RE = re.compile(r"\b[A-Z][a-zA-Z'\-]+\b")


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = item.strip()
        if key and key not in seen:
            seen.add(key)
            out.append(key)
    return out


def _dates(text: str) -> list[str]:
    """The dates :mod:`ragsieve.values` reads (the one value extractor), in order."""
    from ragsieve.values import extract_values

    return [v.text for v in sorted(extract_values(text, ("date",)), key=lambda v: v.span)]


def _strip_leading_stopwords(name: str) -> str:
    parts = name.split()
    while parts and parts[0].lower() in _NOT_NAMES:
        parts = parts[1:]
    return " ".join(parts)


def _people(text: str) -> list[str]:
    people: list[tuple[int, str]] = []
    for m in _HONORIFIC_RE.finditer(text):
        people.append((m.start(1), m.group(1)))
    for m in _CAP_SEQ_RE.finditer(text):
        name = _strip_leading_stopwords(m.group(1))
        parts = name.split()
        if len(parts) >= 2 and parts[0].lower() in _GIVEN_NAMES and not _is_place(name):
            people.append((m.start(1), name))
    for m in _PERSON_VERB_RE.finditer(text):
        name = _strip_leading_stopwords(m.group(1))
        if len(name.split()) == 2 and not _is_place(name):
            people.append((m.start(1), name))
    people.sort()
    names = _dedupe([p for _, p in people])
    # Drop a name contained in a longer one found too ("Marie Curie" inside "Pierre and Marie Curie" is kept;
    # "Curie" alone never gets here because single words are not names).
    return [n for n in names if not any(n != o and f" {n} " in f" {o} " for o in names)]


def _is_place(name: str) -> bool:
    return name.lower() in _PLACES or name in _MULTIWORD_PLACES


def _places(text: str, exclude: set[str]) -> list[str]:
    found: list[tuple[int, str]] = []
    for m in _MULTIWORD_PLACE_RE.finditer(text):
        found.append((m.start(), m.group(1)))
    for m in _WORD_RE.finditer(text):
        if m.group(0).lower() in _PLACES:
            found.append((m.start(), m.group(0)))
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
    dates = _dates(text)
    people = _people(text)
    exclude = set(people) | set(dates) | {w for p in people for w in p.split()}
    places = [p for p in _places(text, exclude) if not re.fullmatch(r"[\d\s]+", p)]
    return tuple(people), tuple(dates), tuple(places)


def extract_entities(text: str) -> dict[str, list[str]]:
    """People, dates and places mentioned in ``text``, each list in order of first mention."""
    if not text or not text.strip():
        return {name: [] for name in ENTITY_TYPES}
    people, dates, places = _extract_cached(text)
    return {"person": list(people), "date": list(dates), "place": list(places)}


__all__ = ["ENTITY_TYPES", "extract_entities"]
