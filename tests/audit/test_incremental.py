"""The incremental audit: after a re-ingest only what changed is checked against what was there,
the work done grows with the change (candidate pairs and neighbourhoods counted), and the findings
are a full audit's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ragsieve.audit import audit_with_state
from ragsieve.audit.corpus import NEIGHBOURS, RARE_NAME_POSTINGS
from ragsieve.audit.incremental import AuditState
from ragsieve.audit.saved import STATE_SUFFIX, latest_state, saved_path
from ragsieve.cli import main
from ragsieve.index import Index
from ragsieve.types import Chunk

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "audit" / "corpus"
DOC = "news/records.jsonl#"

_rng = np.random.default_rng(7)
NAMES = ["".join(chr(97 + int(x)) for x in _rng.integers(0, 26, 7)).capitalize() for _ in range(400)]
WORDS = ["".join(chr(97 + int(x)) for x in _rng.integers(0, 26, 6)) for _ in range(3000)]


def _corpus(n: int, changed: frozenset[int] = frozenset(), added: int = 0) -> SimpleNamespace:
    """``n`` passages, two per bridge, the two stating different opening years (a conflict each);
    ``changed`` passages state another year; ``added`` new passages at the end."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(n + added, 32)).astype(np.float32)
    chunks = []
    for i in range(n + added):
        name = f"{NAMES[i // 2]} Bridge"
        year = 1960 + i % 7 if i in changed else (1931 if i % 2 == 0 else 1947)
        filler = " ".join(WORDS[(i * 13 + j) % len(WORDS)] for j in range(8))
        text = (f"The {name} crosses the river on stone piers, {filler}. "
                f"The {name} opened in {year} after years of work.")
        chunks.append(Chunk(f"c{i}", text, f"doc{i}", f"https://host{i % 40}.example/{i}", title=name))
    return SimpleNamespace(chunks=chunks, embeddings=vectors, corpus_root=None, dir=Path("/nowhere"), generation="g")


def _findings(report) -> list[dict]:
    return [f.to_dict() for f in report.findings]


def test_the_work_grows_with_the_change_and_the_findings_are_a_full_audits():
    n = 200
    full, state = audit_with_state(_corpus(n), use_reader=False)
    assert full.counts()["conflict"] == n // 2  # a test that cannot pass by finding nothing
    state = AuditState.parse(json.loads(json.dumps(state.to_json())))  # as saved and read back
    assert state is not None
    read = {}
    for changes in (2, 8):
        changed = frozenset(range(0, 20 * changes, 20))
        corpus = _corpus(n, changed, added=changes)
        again, _ = audit_with_state(corpus, use_reader=False, previous=state)
        reference, _ = audit_with_state(corpus, use_reader=False)
        assert _findings(again) == _findings(reference)
        c = again.candidates
        assert c["changed_passages"] == 2 * changes and c["removed_passages"] == changes
        read[changes] = c["conflict"]
        # every pair read holds a changed or new passage: at most its neighbours and rare-name partners
        # either way round; every other candidate pair is reused
        assert 0 < c["conflict"] <= 2 * changes * 2 * (NEIGHBOURS + RARE_NAME_POSTINGS)
        assert c["conflict"] + c["conflict_reused"] == reference.candidates["conflict"]
        assert c["mirror"] + c["mirror_reused"] == reference.candidates["mirror"]
        assert c["neighbour_rows_searched"] < n / 2
    assert read[8] >= 2.5 * read[2]  # four times the change, about four times the work
    assert read[8] < full.candidates["conflict"] / 5


def test_a_state_of_another_shape_is_not_reused():
    _, state = audit_with_state(_corpus(40), use_reader=False)
    data = state.to_json()
    assert AuditState.parse({**data, "keys": data["keys"][:-1]}) is None  # rows out of range
    assert AuditState.parse({**data, "pairs": [[0, 1, [["only three", "strings", "here"]]]]}) is None
    assert AuditState.parse({**data, "run": "__import__('os')"}) is None
    assert AuditState.parse("not json") is None


def test_a_reingest_is_audited_incrementally_from_the_saved_audit(tmp_path, capsys, embedder):
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    index = tmp_path / "idx"
    Index.build(corpus, index, embedder=embedder).close()
    main(["audit", "--index", str(index), "--save", "--json"])
    first = json.loads(capsys.readouterr().out)
    assert first["counts"] == {"mirror": 1, "coordinated-voice": 1, "conflict": 1, "harmful-source": 0}
    generation = first["generation"]
    assert saved_path(index, generation).is_file()
    state_file = saved_path(index, generation).with_name(f"{generation}{STATE_SUFFIX}")
    assert state_file.is_file()

    # a re-ingest: one more conflicting record, one record changed, one removed
    records = corpus / "news" / "records.jsonl"
    lines = records.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if json.loads(line)["id"] != "dam-4"]
    extra = {"id": "bridge-c", "title": "Kessel Bridge guide", "url": "https://travel.example/kessel",
             "text": "Visitors cross the Oder valley on foot. The Kessel Bridge opened in 1958 to walkers."}
    records.write_text("\n".join(kept + [json.dumps(extra)]) + "\n", encoding="utf-8")
    Index.build(corpus, index, embedder=embedder).close()
    main(["audit", "--index", str(index), "--json"])
    again = json.loads(capsys.readouterr().out)
    main(["audit", "--index", str(index), "--json", "--full"])
    full = json.loads(capsys.readouterr().out)
    assert again["generation"] == full["generation"] != generation
    assert again["findings"] == full["findings"]
    assert {frozenset(f["documents"]) for f in full["findings"] if f["kind"] == "conflict"} >= {
        frozenset({DOC + "bridge-a", DOC + "bridge-b"}), frozenset({DOC + "bridge-a", DOC + "bridge-c"})}
    assert any("incremental" in note for note in again["notes"]) and not any("incremental" in n for n in full["notes"])
    c = again["candidates"]
    assert c["conflict"] < full["candidates"]["conflict"] and c["conflict_reused"] > 0
    assert c["coordinated-voice"] + c["coordinated-voice_reused"] == full["candidates"]["coordinated-voice"]
    assert c["mirror"] < full["candidates"]["mirror"] or full["candidates"]["mirror"] == 0

    # a damaged state is not reused: the audit runs in full and says why
    main(["audit", "--index", str(index), "--save", "--json"])  # the new generation's own state
    capsys.readouterr()
    own = saved_path(index, again["generation"]).with_name(f"{again['generation']}{STATE_SUFFIX}")
    own.write_text('{"version": 1, "generation": "x"}', encoding="utf-8")
    state_file.unlink()
    state, note = latest_state(index, again["generation"])
    assert state is None and "does not match its schema" in note
    main(["audit", "--index", str(index), "--json"])
    shown = capsys.readouterr()
    assert "does not match its schema" in " ".join(shown.err.split())
    assert json.loads(shown.out)["findings"] == full["findings"]


@pytest.mark.parametrize("checks", [["mirror"], ["conflict"], ["coordinated-voice", "conflict"]])
def test_a_check_the_earlier_audit_did_not_run_runs_in_full(checks):
    _, state = audit_with_state(_corpus(60), checks=["mirror"], use_reader=False)
    corpus = _corpus(60, frozenset({4}))
    again, _ = audit_with_state(corpus, checks=checks, use_reader=False, previous=state)
    reference, _ = audit_with_state(corpus, checks=checks, use_reader=False)
    assert _findings(again) == _findings(reference)
    if "conflict" in checks:
        assert again.candidates["conflict"] == reference.candidates["conflict"]


def test_ingest_audit_saves_each_generations_audit_and_checks_only_what_changed(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    index = tmp_path / "idx"
    main(["ingest", str(corpus), "--index", str(index), "--audit", "--json"])
    first = json.loads(capsys.readouterr().out)
    assert first["audit"]["counts"]["mirror"] == 1 and "changed_passages" not in first["audit"]["candidates"]
    (corpus / "news" / "ferry.txt").write_text("The harbour ferry to Tamsin runs every hour in summer.\n",
                                               encoding="utf-8")
    main(["ingest", str(corpus), "--index", str(index), "--audit", "--json"])
    shown = capsys.readouterr()
    second = json.loads(shown.out)
    assert second["audit"]["candidates"]["changed_passages"] == 1
    assert second["audit"]["counts"] == first["audit"]["counts"]
    assert second["audit"]["candidates"]["conflict"] < first["audit"]["candidates"]["conflict"]
    assert Path(second["audit"]["saved"]).is_file() and "1 passages new or changed" in " ".join(shown.err.split())
