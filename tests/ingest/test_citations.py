"""Citations a user can open: formatting, links, and the fields every chunk, hit and answer carries."""

from __future__ import annotations

import json

import pytest

from ragsieve.citations import Citation, citation_uri, format_citation
from ragsieve.types import Answer, Chunk, SearchHit, Trace


def _chunk(**location) -> Chunk:
    base = {"id": "x", "text": "t", "doc_id": "x", "source": "x"}
    return Chunk(**{**base, **location})


@pytest.mark.parametrize(
    "location, expected",
    [
        ({"id": "manuals/guide.pdf:3", "path": "manuals/guide.pdf", "page": 4}, "manuals/guide.pdf#page=4"),
        ({"id": "g.pdf:0", "path": "g.pdf", "page": 1, "page_label": "i"}, "g.pdf#page=1 (page i)"),
        ({"id": "g.pdf:2", "path": "g.pdf", "page": 3, "page_label": "3"}, "g.pdf#page=3"),
        ({"id": "docs/m.md:2", "path": "docs/m.md", "heading": ["Mosses", "Structure"]},
         "docs/m.md#Mosses > Structure"),
        ({"id": "notes.txt:0", "path": "notes.txt"}, "notes.txt"),
        ({"id": "rows.jsonl#a:0", "path": "rows.jsonl", "url": "https://example.org/a"}, "https://example.org/a"),
        ({"id": "063-glossary.jsonl#quantum-dots-03:0", "path": "063-glossary.jsonl"},
         "063-glossary.jsonl#quantum-dots-03"),
        # chunks from an index built before locations were recorded: the whole id, never cut
        ({"id": "nanoscience/063-glossary.jsonl#quantum-dots-entry-03:0"},
         "nanoscience/063-glossary.jsonl#quantum-dots-entry-03:0"),
    ],
)
def test_format_citation(location, expected):
    assert format_citation(Citation.from_chunk(_chunk(**location))) == expected


def test_citation_uri_links_the_file_and_the_pdf_page():
    pdf = Citation.from_chunk(_chunk(id="a b/guide.pdf:1", path="a b/guide.pdf", page=2))
    assert citation_uri(pdf, "/data/corpus") == "file:///data/corpus/a%20b/guide.pdf#page=2"
    md = Citation.from_chunk(_chunk(path="m.md", heading=["Mosses"]))
    assert citation_uri(md, "/data/corpus/") == "file:///data/corpus/m.md"
    web = Citation.from_chunk(_chunk(path="rows.jsonl", url="https://example.org/a?q=1"))
    assert citation_uri(web, "/data") == "https://example.org/a?q=1"


def test_citation_uri_is_none_without_a_safe_location():
    assert citation_uri(Citation.from_chunk(_chunk()), "/data") is None
    assert citation_uri(Citation.from_chunk(_chunk(path="m.md")), None) is None
    assert citation_uri(Citation.from_chunk(_chunk(path="../etc/passwd")), "/data") is None
    # not an http(s) address: no link to it, the file is linked instead
    odd = Citation.from_chunk(_chunk(path="rows.jsonl", url="javascript:alert(1)"))
    assert citation_uri(odd, "/data") == "file:///data/rows.jsonl"


def test_hits_and_answers_carry_the_location_fields():
    chunk = _chunk(id="g.pdf:1", path="g.pdf", page=2, page_label="1", char_start=0, char_end=40)
    hit = SearchHit(chunk, 0.5, 1, {"fused": 0.5})
    data = hit.to_dict()
    assert data["path"] == "g.pdf" and data["page"] == 2 and data["page_label"] == "1"
    assert data["char_start"] == 0 and data["char_end"] == 40 and data["heading"] is None and data["url"] is None
    assert data["citation"] == "g.pdf#page=2 (page 1)"
    assert Citation.from_hit(data) == Citation.from_hit(hit) == Citation.from_chunk(chunk)
    answer = Answer("q", "It is [1].", [hit], ["g.pdf:1"], Trace("q"))
    assert json.loads(json.dumps(answer.to_dict()))["evidence"][0]["citation"] == "g.pdf#page=2 (page 1)"


def test_chunks_round_trip_and_old_chunks_still_load():
    chunk = _chunk(path="m.md", heading=["A", "B"], char_start=3, char_end=9)
    assert Chunk.from_dict(json.loads(json.dumps(chunk.to_dict()))) == chunk
    old = {"id": "a", "text": "t", "doc_id": "a", "source": "a", "domain": "default", "title": "", "position": 0,
           "metadata": {}}
    assert Chunk.from_dict(old).to_dict() == old  # unknown locations are not written
