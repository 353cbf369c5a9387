from __future__ import annotations

import pytest
from tests.helpers import copy_corpus, minimal_pdf

from ragsieve.config import IngestConfig
from ragsieve.errors import IngestError
from ragsieve.ingest import IngestReport, load_folder


def _docs(root, config=None):
    report = IngestReport()
    return {d.doc_id: d for d in load_folder(root, config or IngestConfig(), report)}, report


def test_every_supported_format_loads_with_metadata(tmp_path):
    root = copy_corpus(tmp_path)
    (root / "astronomy" / "comet.pdf").write_bytes(minimal_pdf("Halley's Comet returns every 76 years."))
    docs, report = _docs(root)
    assert report.skipped == []
    assert set(docs) == {
        "astronomy/sun.md",
        "astronomy/moon.txt",
        "astronomy/planets.csv#mars",
        "astronomy/planets.csv#jupiter",
        "astronomy/comet.pdf",
        "biology/cells.html",
        "biology/glossary.jsonl#dna",
        "biology/glossary.jsonl#enzyme",
        "biology/photosynthesis.md",
    }
    assert docs["astronomy/sun.md"].title == "The Sun"
    assert docs["astronomy/sun.md"].domain == "astronomy"
    assert "Halley" in docs["astronomy/comet.pdf"].text
    cells = docs["biology/cells.html"]
    assert cells.title == "Cells" and "Mitochondria" in cells.text and "var x" not in cells.text
    # web records take their site as the data source
    assert docs["biology/glossary.jsonl#dna"].source == "example-bio.org"
    assert docs["astronomy/planets.csv#mars"].title == "Mars"


def test_partition_by_metadata_field(tmp_path):
    (tmp_path / "rows.jsonl").write_text(
        '{"id": 1, "text": "alpha text", "topic": "a"}\n{"id": 2, "text": "beta text", "topic": "b"}\n'
    )
    docs, _ = _docs(tmp_path, IngestConfig(partition_by="topic", metadata_fields=["topic"]))
    assert sorted(d.domain for d in docs.values()) == ["a", "b"]
    assert docs["rows.jsonl#1"].metadata == {"topic": "a"}


@pytest.mark.parametrize(
    "name, content, reason",
    [
        ("latin1.txt", "caf\xe9 au lait".encode("latin-1"), "not valid UTF-8"),
        ("blob.txt", b"\x00\x01\x02binary", "binary content"),
        ("broken.jsonl", b'{"text": "ok"}\n{not json}\n', "line 2 is not valid JSON"),
        ("notext.jsonl", b'{"body": "x"}\n', "no text in field 'text'"),
        ("empty.md", b"   \n", "no text could be extracted"),
        ("bad.pdf", b"%PDF-1.4 this is not a pdf", "PDF could not be parsed"),
    ],
)
def test_bad_files_are_skipped_with_a_counted_reason(tmp_path, name, content, reason):
    (tmp_path / "good.txt").write_text("A good document.")
    (tmp_path / name).write_bytes(content)
    docs, report = _docs(tmp_path)
    assert list(docs) == ["good.txt"]
    assert len(report.skipped) == 1 and report.skipped[0].path == name
    assert reason in report.skipped[0].reason


def test_missing_or_empty_folder_is_a_clear_error(tmp_path):
    with pytest.raises(IngestError, match="does not exist"):
        list(load_folder(tmp_path / "nope"))
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    with pytest.raises(IngestError, match="no supported files"):
        list(load_folder(tmp_path))
