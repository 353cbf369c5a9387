"""Clean text in: HTML main content, Markdown sections, PDF pages without layout debris, and chunks
that carry where they came from (path, page and label, heading path, character span, record URL)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from tests.ingest.pdf_builder import multipage_pdf

from ragsieve.config import IngestConfig
from ragsieve.index.store import chunk_documents
from ragsieve.ingest import chunk_text, load_folder
from ragsieve.ingest.loaders import clean_pdf_pages, file_type_domains, load_file, markdown_sections

FIXTURES = Path(__file__).parents[1] / "fixtures" / "ingest"

# A field guide: a contents page (dot leaders), a running header and footer on every page, a word
# hyphenated across a line end, and page labels (i for the contents, then 1, 2, 3).
GUIDE_PAGES = [
    ["Field Guide to Ferns - draft", "Contents", "Introduction ............ 1", "Spores . . . . . . . . 2",
     "Habitat ........ 3", "Page 1 of 4"],
    ["Field Guide to Ferns - draft", "Introduction", "Ferns are vascular plants that repro-",
     "duce by spores. They have no seeds.", "Page 2 of 4"],
    ["Field Guide to Ferns - draft", "Spores", "Sori release the spores in dry weather.", "Page 3 of 4"],
    ["Field Guide to Ferns - draft", "Habitat", "Bracken spreads over open hillsides.", "Page 4 of 4"],
]
GUIDE_LABELS = "0 << /S /r >> 1 << /S /D >>"


def write_guide(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(multipage_pdf(GUIDE_PAGES, GUIDE_LABELS))
    return path


def _words(text: str) -> str:
    return " ".join(text.split())


def test_html_keeps_main_content_once_with_its_headings():
    (doc,) = load_file(FIXTURES / "botany" / "ferns.html", FIXTURES, IngestConfig())
    for debris in ("menu entry", "Join the society", "Copyright", "Privacy", "tracker", "font-family"):
        assert debris not in doc.text, debris
    # Nested list items (a <p> inside an <li> inside a <ul>) appear exactly once.
    assert doc.text.count("heart-shaped prothallus") == 1
    assert doc.text.count("male and the female sexual organs") == 1
    assert doc.text.count("thin film of water") == 1
    headings = {seg.text.split("\n")[0]: seg.heading for seg in doc.segments}
    assert headings["Life cycle"] == ["Ferns", "Life cycle"]
    assert headings["Spores"] == ["Ferns", "Life cycle", "Spores"]
    assert headings["Habitat"] == ["Ferns", "Habitat"]
    for seg in doc.segments:  # offsets point into the document's extracted text
        assert doc.text[seg.offset : seg.offset + len(seg.text)] == seg.text


def test_markdown_sections_have_heading_paths_and_code_is_not_a_heading():
    text, segments = markdown_sections((FIXTURES / "botany" / "mosses.md").read_text())
    assert [s.heading for s in segments] == [
        ["Mosses"], ["Mosses", "Structure"], ["Mosses", "Structure", "Leaves"], ["Mosses", "Reproduction"],
    ]
    assert "# a comment in a code block" in segments[-1].text
    assert "## " not in text and not text.startswith("#")


def test_markdown_without_headings_is_one_unlabelled_section():
    text, segments = markdown_sections("Plain text.\n\nA second paragraph, *emphasised*.")
    assert text == "Plain text.\n\nA second paragraph, emphasised."
    assert [s.heading for s in segments] == [[]]


def test_pdf_pages_load_separately_without_layout_debris(tmp_path):
    (doc,) = load_file(write_guide(tmp_path / "guide.pdf"), tmp_path, IngestConfig())
    assert [(s.page, s.page_label) for s in doc.segments] == [(1, "i"), (2, "1"), (3, "2"), (4, "3")]
    contents, intro, spores, habitat = (s.text for s in doc.segments)
    assert "...." not in contents and ". . ." not in contents and "Introduction 1" in contents
    assert "reproduce by spores" in intro
    for page in (intro, spores, habitat):
        assert "draft" not in page and "of 4" not in page
    assert "Sori release the spores" in spores


def test_pdf_without_page_labels_has_none(tmp_path):
    (tmp_path / "plain.pdf").write_bytes(multipage_pdf([["First page text."], ["Second page text."]]))
    (doc,) = load_file(tmp_path / "plain.pdf", tmp_path, IngestConfig())
    assert [(s.page, s.page_label) for s in doc.segments] == [(1, None), (2, None)]


def test_clean_pdf_pages_keeps_a_short_document_and_ordinary_hyphens():
    pages = ["Report\nA well-known result.\nSee the trade-\noff below.", "Second page"]
    cleaned = clean_pdf_pages(pages)
    assert cleaned[0].startswith("Report") and "well-known" in cleaned[0] and "tradeoff" in cleaned[0]
    assert cleaned[1] == "Second page"


def test_chunks_never_cross_a_page_and_carry_their_location(tmp_path):
    write_guide(tmp_path / "manuals" / "guide.pdf")
    shutil.copy(FIXTURES / "botany" / "mosses.md", tmp_path / "mosses.md")
    config = IngestConfig()
    docs = list(load_folder(tmp_path, config))
    chunks = chunk_documents(docs, config, None)
    by_doc = {d.doc_id: d for d in docs}
    pdf_chunks = [c for c in chunks if c.doc_id == "manuals/guide.pdf"]
    assert [c.page for c in pdf_chunks] == [1, 2, 3, 4]
    assert [c.page_label for c in pdf_chunks] == ["i", "1", "2", "3"]
    assert [c.position for c in pdf_chunks] == [0, 1, 2, 3]
    for c in pdf_chunks:
        page = by_doc[c.doc_id].segments[c.page - 1].text
        assert c.path == "manuals/guide.pdf" and c.heading is None
        assert _words(page[c.char_start : c.char_end]) == c.text
    md_chunks = [c for c in chunks if c.doc_id == "mosses.md"]
    assert [c.heading for c in md_chunks] == [
        ["Mosses"], ["Mosses", "Structure"], ["Mosses", "Structure", "Leaves"], ["Mosses", "Reproduction"],
    ]
    for c in md_chunks:
        assert c.page is None and c.path == "mosses.md"
        assert _words(by_doc["mosses.md"].text[c.char_start : c.char_end]) == c.text


def test_records_keep_their_original_url(tmp_path):
    (tmp_path / "rows.jsonl").write_text(
        '{"id": "a", "text": "Alpha text.", "url": "https://example.org/a"}\n'
        '{"id": "b", "text": "Beta text.", "link": "http://example.org/b"}\n'
        '{"id": "c", "text": "Gamma text.", "source_url": "ftp://example.org/c"}\n'
    )
    chunks = chunk_documents(load_folder(tmp_path, IngestConfig()), IngestConfig(), None)
    assert {c.doc_id: c.url for c in chunks} == {
        "rows.jsonl#a": "https://example.org/a", "rows.jsonl#b": "http://example.org/b", "rows.jsonl#c": None,
    }


@pytest.mark.parametrize("unit", ["window", "sentence"])
def test_chunk_spans_cover_the_chunk_words(unit):
    text = "First sentence here.\n\nSecond one,   spread\nover lines. Third!  " + "word " * 60
    for piece in chunk_text(text, max_tokens=20, overlap_tokens=5, unit=unit):
        assert _words(text[piece.start : piece.end]) == piece.text


def _domains(root: Path, config: IngestConfig) -> dict[str, str]:
    return {d.doc_id: d.domain for d in load_folder(root, config)}


def test_domains_follow_the_users_rules(tmp_path):
    for rel in ("pdf/manual-a.txt", "pdf/other.txt", "html/faq.txt", "top.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("Some text.")
    rules = IngestConfig(domain_rules={"pdf/manual-*": "manuals", "*/faq*": "faq"})
    assert _domains(tmp_path, rules) == {
        "pdf/manual-a.txt": "manuals", "pdf/other.txt": "pdf", "html/faq.txt": "faq", "top.txt": "default",
    }
    assert set(_domains(tmp_path, IngestConfig(partition_by="none")).values()) == {"default"}


def test_folder_names_that_look_like_file_types_are_reported(caplog):
    config = IngestConfig()
    assert file_type_domains({"pdf", "HTML", "md", "physics", "default"}, config) == ["HTML", "md", "pdf"]
    assert file_type_domains({"pdf"}, IngestConfig(partition_by="topic")) == []
    assert file_type_domains({"pdf"}, IngestConfig(domain_rules={"x/*": "pdf"})) == []


def test_ingest_warns_about_file_type_folders(tmp_path, caplog):
    from tests.helpers import HashEmbedder

    from ragsieve.config import PipelineConfig
    from ragsieve.index import Index

    for rel in ("pdf/a.txt", "html/b.txt"):
        (tmp_path / "corpus" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "corpus" / rel).write_text("Some text about ferns.")
    with caplog.at_level(logging.WARNING, logger="ragsieve"):
        Index.build(tmp_path / "corpus", tmp_path / "idx", PipelineConfig(), embedder=HashEmbedder()).close()
    assert any("look like file types" in r.getMessage() and "'html', 'pdf'" in r.getMessage() for r in caplog.records)
