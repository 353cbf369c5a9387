"""Nothing a user stored is ever deleted: only provable ragsieve indexes are replaced."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from tests.reliability.support import FAST, run_cli

from ragsieve.errors import IndexStoreError, InputError
from ragsieve.index import Index


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its sha256, so 'untouched' means byte for byte."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize(
    "where, message",
    [
        (lambda corpus, tmp: corpus, "is the folder being ingested"),
        (lambda corpus, tmp: corpus / "astronomy", "inside the folder being ingested"),
        (lambda corpus, tmp: corpus / "new-index", "inside the folder being ingested"),
        (lambda corpus, tmp: tmp, "folder being ingested .* is inside the index folder"),
    ],
    ids=["index-is-corpus", "index-is-a-corpus-subfolder", "index-inside-corpus", "corpus-inside-index"],
)
def test_overlapping_index_and_corpus_are_refused(tmp_path, corpus, hash_embedder, where, message):
    before = snapshot(tmp_path)
    with pytest.raises(InputError, match=message):
        Index.build(corpus, where(corpus, tmp_path), config=FAST, embedder=hash_embedder)
    assert snapshot(tmp_path) == before


def test_a_symlink_to_the_corpus_is_seen_through(tmp_path, corpus, hash_embedder):
    link = tmp_path / "link-to-corpus"
    link.symlink_to(corpus, target_is_directory=True)
    before = snapshot(corpus)
    with pytest.raises(InputError, match="is the folder being ingested"):
        Index.build(corpus, link, config=FAST, embedder=hash_embedder)
    assert snapshot(corpus) == before


def test_an_existing_folder_that_is_not_an_index_is_never_replaced(tmp_path, corpus, hash_embedder):
    mine = tmp_path / "my-notes"
    (mine / "sub").mkdir(parents=True)
    (mine / "thesis.tex").write_bytes(b"\\documentclass{article} years of work")
    (mine / "sub" / "data.csv").write_text("a,b\n1,2\n")
    before = snapshot(mine)
    with pytest.raises(IndexStoreError, match="not a ragsieve index.*new or empty folder"):
        Index.build(corpus, mine, config=FAST, embedder=hash_embedder)
    with pytest.raises(IndexStoreError, match="not a ragsieve index"):
        Index.from_chunks(Index.build(corpus, tmp_path / "ok", config=FAST, embedder=hash_embedder).chunks, mine,
                          embedder=hash_embedder)
    assert snapshot(mine) == before
    assert sorted(p.name for p in mine.iterdir()) == ["sub", "thesis.tex"]

    a_file = tmp_path / "report.pdf"
    a_file.write_bytes(b"%PDF precious")
    with pytest.raises(IndexStoreError, match="is a file"):
        Index.build(corpus, a_file, config=FAST, embedder=hash_embedder)
    assert a_file.read_bytes() == b"%PDF precious"


def test_an_empty_folder_becomes_an_index_and_reingest_keeps_side_files(tmp_path, corpus, hash_embedder):
    target = tmp_path / "empty"
    target.mkdir()
    index = Index.build(corpus, target, config=FAST, embedder=hash_embedder)
    (target / "source_weights.json").write_text('{"weights": {"astronomy/sun.txt": 0.2}, "threshold": 0.5}')
    # ingest trains the domain router into router/; a file the user keeps there survives too
    router_meta = (target / "router" / "router.json").read_text()
    (target / "router" / "notes.txt").write_text("my notes")
    (corpus / "astronomy" / "moon.txt").write_text("The Moon orbits the Earth.")
    again = Index.build(corpus, target, config=FAST, embedder=hash_embedder)
    assert again.generation != index.generation
    assert again.source_weights == {"astronomy/sun.txt": 0.2}
    assert (again.dir / "router" / "notes.txt").read_text() == "my notes"
    assert (again.dir / "router" / "router.json").read_text() == router_meta  # same domains: not retrained


def test_cli_refuses_dangerous_targets_with_exit_2_and_no_traceback(
    tmp_path, corpus, fake_embedder, capsys, monkeypatch
):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("do not delete")
    monkeypatch.chdir(corpus / "astronomy")
    cases = [
        ([str(corpus), "--index", str(corpus)], "is the folder being ingested"),
        ([str(corpus), "--index", str(corpus / "idx")], "inside the folder being ingested"),
        ([str(corpus), "--index", str(mine)], "not a ragsieve index"),
        ([str(corpus), "--index", "."], "names the current folder or a parent"),
        ([str(corpus), "--index", ".."], "names the current folder or a parent"),
    ]
    before = snapshot(tmp_path)
    for args, message in cases:
        code, _, err = run_cli(capsys, "ingest", *args)
        assert code == 2, (args, err)
        assert message in err, (args, err)
        assert "Traceback" not in err
    work = tmp_path / "work" / "deep"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    for target in (work, tmp_path / "work"):
        code, _, err = run_cli(capsys, "ingest", str(corpus), "--index", str(target))
        assert code == 2 and "is the working folder or one of its parents" in err, err
    assert snapshot(tmp_path) == before
    assert os.listdir(mine) == ["keep.txt"]
