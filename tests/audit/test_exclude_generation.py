"""``ragsieve audit --exclude``: a staged generation of the audited index without the chosen
documents, on the layout ``ragsieve ingest`` writes. The user's files and every generation
already written stay byte for byte as they were; the live generation stays live until
``ragsieve index use``; the new one reuses the stored vectors and lacks the documents; a
re-ingest keeps them out; a switch can be undone."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ragsieve.cli import main
from ragsieve.errors import InputError
from ragsieve.index import Index, storage

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "audit" / "corpus"
DOC = "news/records.jsonl#"
DROPPED = {DOC + "lighthouse-copy"} | {DOC + f"dam-{i}" for i in range(1, 5)}


def _hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


@pytest.fixture
def ingested(tmp_path: Path, embedder) -> tuple[Path, Path]:
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    Index.build(corpus, tmp_path / "idx", embedder=embedder).close()
    return corpus, tmp_path / "idx"


def _findings(index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    main(["audit", "--index", str(index), "--json", "--check", "mirror", "--check", "coordinated-voice"])
    path = tmp_path / "findings.json"
    path.write_text(capsys.readouterr().out, encoding="utf-8")
    assert set(d for f in json.loads(path.read_text())["findings"] for d in f["exclude"]) == DROPPED
    return path


def test_exclude_stages_a_generation_and_touches_nothing_stored(ingested, tmp_path, capsys, embedder):
    corpus, index = ingested
    findings = _findings(index, tmp_path, capsys)
    files_before, corpus_before = _hashes(index), _hashes(corpus)
    current_before = (index / "CURRENT").read_text()
    live = storage.read_current(index)[0]

    main(["audit", "--index", str(index), "--exclude", str(findings)])
    assert "stays live" in capsys.readouterr().err
    after = _hashes(index)
    # every file that was there is byte for byte the same (the new generation only adds files)
    assert {k: after.get(k) for k in files_before} == files_before
    assert _hashes(corpus) == corpus_before and (index / "CURRENT").read_text() == current_before
    records = {r.role: r for r in storage.generation_records(index)}
    staged = records["staged"].generation
    assert records["live"].generation == live and records["staged"].base == live
    assert "findings.json" in records["staged"].reason

    with Index.open(index, embedder=embedder) as old:  # the live generation: every document
        assert old.generation == live and {c.doc_id for c in old.chunks} >= DROPPED
        with Index.open(index, embedder=embedder, generation=staged) as new:
            assert {c.doc_id for c in new.chunks} == {c.doc_id for c in old.chunks} - DROPPED
            # the stored vectors are reused as they are: nothing was embedded again
            assert np.array_equal(new.embeddings, old.embeddings[[old.row(c.id) for c in new.chunks]])
            assert new.manifest["excluded_documents"] == sorted(DROPPED)
            assert new.search("lighthouse keeper", k=3)  # it opens and searches
            assert not {h.chunk.doc_id for h in new.search("dam 1874", k=10)} & DROPPED

    main(["index", "generations", "--index", str(index), "--json"])
    listed = {r["generation"]: r["role"] for r in json.loads(capsys.readouterr().out)}
    assert listed == {live: "live", staged: "staged"}


def test_switch_rollback_and_a_reingest_keeps_them_out(ingested, tmp_path, capsys, embedder):
    corpus, index = ingested
    findings = _findings(index, tmp_path, capsys)
    live = storage.read_current(index)[0]
    main(["audit", "--index", str(index), "--exclude", str(findings)])
    staged = next(r.generation for r in storage.generation_records(index) if r.role == "staged")
    old_files = {k: v for k, v in _hashes(index).items() if k.startswith(f"generations/{live}/")}

    main(["index", "use", staged, "--index", str(index)])
    assert storage.read_current(index)[0] == staged
    with Index.open(index, embedder=embedder) as now:
        assert not {c.doc_id for c in now.chunks} & DROPPED
    # the generation live until the switch is kept, unchanged, and is the one to switch back to
    assert {k: v for k, v in _hashes(index).items() if k.startswith(f"generations/{live}/")} == old_files
    roles = {r.generation: r.role for r in storage.generation_records(index)}
    assert roles == {staged: "live", live: "previous"}
    main(["index", "use", live, "--index", str(index)])
    assert storage.read_current(index)[0] == live
    main(["index", "use", staged, "--index", str(index)])

    # a re-ingest of the unchanged corpus keeps the excluded documents out (and re-embeds nothing)
    with Index.build(corpus, index, embedder=embedder) as again:
        assert not {c.doc_id for c in again.chunks} & DROPPED
        assert again.manifest["excluded_documents"] == sorted(DROPPED)
    # a changed file is re-chunked and its excluded documents still left out
    records = corpus / "news" / "records.jsonl"
    records.write_text(records.read_text(encoding="utf-8") + json.dumps(
        {"id": "extra", "title": "Extra", "text": "An extra record about the harbour ferry, which runs hourly."})
        + "\n", encoding="utf-8")
    with Index.build(corpus, index, embedder=embedder) as changed:
        docs = {c.doc_id for c in changed.chunks}
        assert not docs & DROPPED and any(d.endswith("#extra") for d in docs)


def test_a_staged_generation_survives_a_reingest_and_a_stale_one_is_not_switched_to(
        ingested, tmp_path, capsys, embedder):
    corpus, index = ingested
    findings = _findings(index, tmp_path, capsys)
    main(["audit", "--index", str(index), "--exclude", str(findings)])
    staged = next(r.generation for r in storage.generation_records(index) if r.role == "staged")
    staged_files = {k: v for k, v in _hashes(index).items() if k.startswith(f"generations/{staged}/")}
    (corpus / "news" / "more.txt").write_text("The harbour ferry runs every hour in summer.\n", encoding="utf-8")
    Index.build(corpus, index, embedder=embedder).close()
    Index.build(corpus, index, embedder=embedder).close()  # a second writer's garbage collection too
    assert {k: v for k, v in _hashes(index).items() if k.startswith(f"generations/{staged}/")} == staged_files
    with pytest.raises(InputError, match="is live now"):
        storage.switch_generation(index, staged, 5.0)
    storage.switch_generation(index, staged, 5.0, force=True)
    assert storage.read_current(index)[0] == staged
    # a generation nothing vouches for (neither live, previous nor staged) is refused
    with pytest.raises(InputError, match="neither live, previous nor staged"):
        Index.open(index, embedder=embedder, generation="20000101T000000000000-abcdef")


def test_exclusion_is_refused_on_a_generation_that_is_no_longer_live(ingested, embedder):
    corpus, index = ingested
    with Index.open(index, embedder=embedder) as old:
        (corpus / "news" / "more.txt").write_text("The harbour ferry runs every hour.\n", encoding="utf-8")
        Index.build(corpus, index, embedder=embedder).close()
        with pytest.raises(InputError, match="no longer live"):
            old.without_documents([DOC + "lighthouse-copy"], "test")
