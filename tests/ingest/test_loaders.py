from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from tests.helpers import copy_corpus, minimal_pdf

from ragsieve.config import IngestConfig
from ragsieve.errors import IngestError
from ragsieve.ingest import IngestReport, iter_files, load_folder
from ragsieve.ingest.loaders import safe_relpath


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
        ("broken.jsonl", b'{not json}\n[1]\n', "no valid JSON line (line 1 is not valid JSON"),
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


def test_a_malformed_jsonl_line_drops_only_that_line(tmp_path):
    (tmp_path / "notes.jsonl").write_bytes(
        b'{"id": "a", "text": "first good record"}\n{not json}\n\n"a string"\n{"id": "b", "text": "second good"}\n'
    )
    docs, report = _docs(tmp_path)
    assert sorted(docs) == ["notes.jsonl#a", "notes.jsonl#b"]
    assert [s.path for s in report.skipped] == ["notes.jsonl:2", "notes.jsonl:4"]
    assert "not valid JSON" in report.skipped[0].reason and "not a JSON object" in report.skipped[1].reason


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_symlinks_leaving_the_folder_are_skipped_unless_allowed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("a private note outside the corpus")
    (outside / "sub").mkdir()
    (outside / "sub" / "more.md").write_text("# More\n\nprivate too")
    root = tmp_path / "corpus"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("inside text")
    (root / "docs" / "inner-link.txt").symlink_to(root / "docs" / "a.txt")
    (root / "docs" / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "docs" / "leakdir").symlink_to(outside / "sub", target_is_directory=True)
    (root / "docs" / "dangling.txt").symlink_to(tmp_path / "gone.txt")
    (root / "docs" / "loop").symlink_to(root, target_is_directory=True)

    skipped: list[tuple[str, str]] = []
    files = iter_files(root, skipped=skipped)
    assert [f.relative_to(root).as_posix() for f in files] == ["docs/a.txt", "docs/inner-link.txt"]
    reasons = dict(skipped)
    assert set(reasons) == {"docs/leak.txt", "docs/leakdir", "docs/dangling.txt"}
    assert "outside the ingested folder" in reasons["docs/leak.txt"] and "--follow-symlinks" in reasons["docs/leak.txt"]
    assert "broken symlink" in reasons["docs/dangling.txt"]

    docs, report = _docs(root)
    assert "private" not in " ".join(d.text for d in docs.values())
    assert {s.path for s in report.skipped} == set(reasons)

    docs, _ = _docs(root, IngestConfig(follow_symlinks=True))
    assert {"docs/leak.txt", "docs/leakdir/more.md"} <= set(docs)


@pytest.mark.skipif(sys.platform != "linux", reason="needs a filesystem that stores raw bytes in names")
def test_a_file_name_that_is_not_utf8_is_ingested_under_an_escaped_name(tmp_path):
    root = tmp_path / "corpus"
    (root / "caf\xe9").mkdir(parents=True)
    raw = os.fsencode(root / "caf\xe9") + b"/men\xfc.txt"
    with open(raw, "wb") as fh:
        fh.write(b"A menu with coffee.")
    docs, report = _docs(root)
    assert report.skipped == []
    (doc,) = docs.values()
    assert doc.doc_id == "caf\xe9/men\\xfc.txt" and doc.domain == "caf\xe9"
    doc.doc_id.encode("utf-8")  # storable as UTF-8 JSON
    assert safe_relpath(Path(os.fsdecode(b"x/\xff.md"))) == "x/\\xff.md"


def test_a_record_domain_that_is_not_a_name_skips_the_record(tmp_path):
    (tmp_path / "r.jsonl").write_text(
        '{"text": "ok", "topic": "physics"}\n{"text": "bad", "topic": {"nested": 1}}\n{"text": "x", "topic": ".."}\n'
    )
    docs, report = _docs(tmp_path, IngestConfig(partition_by="topic"))
    assert sorted(d.domain for d in docs.values()) == ["..", "physics"]
    assert [s.path for s in report.skipped] == ["r.jsonl line 2"]
