"""A Markdown heading with no text of its own never becomes a chunk: it joins the next section,
as the context of that section's text, in the layout ingest writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.helpers import HashEmbedder

from ragsieve.config import PipelineConfig, apply_overrides
from ragsieve.index import Index, storage
from ragsieve.ingest import chunk_text
from ragsieve.ingest.loaders import markdown_sections

GUIDE = """# Graphene

## Properties

Graphene is a single layer of carbon atoms. It conducts heat well.

## Uses

### Batteries

Graphene electrodes charge quickly.

## See also
"""


def _chunks(tmp_path: Path, unit: str) -> list[dict]:
    corpus = tmp_path / "corpus" / "materials"
    corpus.mkdir(parents=True)
    (corpus / "graphene.md").write_text(GUIDE, encoding="utf-8")
    cfg = apply_overrides(PipelineConfig(), {"ingest.chunking.unit": unit})
    index_dir = tmp_path / f"idx-{unit}"
    Index.build(tmp_path / "corpus", index_dir, config=cfg, embedder=HashEmbedder())
    generation, _ = storage.read_current(index_dir)
    return [json.loads(line) for line in (index_dir / "generations" / generation / "chunks.jsonl").open()]


@pytest.mark.parametrize("unit", ["window", "sentence"])
def test_no_chunk_is_a_heading_alone(tmp_path: Path, unit: str) -> None:
    rows = _chunks(tmp_path, unit)
    headings = {"Graphene", "Properties", "Uses", "Batteries"}
    assert not [r["text"] for r in rows if r["text"].strip() in headings]
    first = rows[0]
    assert first["text"].startswith("Graphene Properties Graphene is a single layer")
    assert first["heading"] == ["Graphene", "Properties"]
    batteries = next(r for r in rows if "electrodes" in r["text"])
    assert batteries["text"].startswith("Uses Batteries Graphene electrodes")
    assert batteries["heading"] == ["Graphene", "Uses", "Batteries"]
    # the trailing heading with no text stays in the index, at the end of the section before it
    assert any(r["text"].endswith("See also") for r in rows)
    text = (tmp_path / "corpus" / "materials" / "graphene.md").read_text(encoding="utf-8")
    assert all(isinstance(r["char_start"], int) and r["char_end"] > r["char_start"] for r in rows) and text


def test_sections_carry_where_their_headings_end() -> None:
    text, segments = markdown_sections(GUIDE)
    assert [s.heading for s in segments] == [["Graphene", "Properties"], ["Graphene", "Uses", "Batteries"]]
    for s in segments:
        assert text[s.offset : s.offset + len(s.text)] == s.text
    assert segments[0].text[: segments[0].heading_chars] == "Graphene\n\nProperties"


def test_a_section_with_text_keeps_its_heading_with_its_first_sentence() -> None:
    pieces = chunk_text("Properties\n\nIt is strong. It is light.", unit="sentence", heading_chars=len("Properties"))
    assert [p.text for p in pieces] == ["Properties It is strong.", "It is light."]
    assert pieces[0].start == 0
