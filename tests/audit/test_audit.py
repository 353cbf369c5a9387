"""``ragsieve audit``: planted problems are found, clean text gives none, the JSON matches the
documented schema, ``--fail-on`` gates, ``--exclude`` never touches the audited index, and the
candidate work grows linearly with the corpus."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from ragsieve.audit import AUDIT_SCHEMA, FINDING_KINDS, audit_index
from ragsieve.audit.conflicts import candidate_pairs, derive_question
from ragsieve.audit.corpus import NEIGHBOURS, RARE_NAME_POSTINGS, Corpus
from ragsieve.audit.mirrors import exact_jaccard, find_mirrors, shingles
from ragsieve.cli import main
from ragsieve.conflict import NEAR_DUPLICATE_JACCARD
from ragsieve.index import Index
from ragsieve.types import Chunk

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "audit" / "corpus"
DOC = "news/records.jsonl#"


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory, embedder) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("audit")
    corpus = root / "corpus"
    shutil.copytree(CORPUS, corpus)
    Index.build(corpus, root / "idx", embedder=embedder).close()
    return corpus, root / "idx"


@pytest.fixture(scope="module")
def report(planted, embedder):
    with Index.open(planted[1], embedder=embedder) as index:
        return audit_index(index)


def test_each_planted_problem_is_found_once(report):
    assert report.counts() == {"mirror": 1, "coordinated-voice": 1, "conflict": 1, "harmful-source": 0}
    (mirror,) = report.of_kind("mirror")
    assert set(mirror.documents) == {DOC + "lighthouse", DOC + "lighthouse-copy"}
    assert mirror.exclude == (DOC + "lighthouse-copy",) and mirror.original is None  # no dates in the records
    (voice,) = report.of_kind("coordinated-voice")
    assert set(voice.documents) == {DOC + f"dam-{i}" for i in range(1, 5)}
    assert len({m.host for m in voice.members}) == 4 and "1874" in voice.evidence
    (conflict,) = report.of_kind("conflict")
    assert set(conflict.documents) == {DOC + "bridge-a", DOC + "bridge-b"}
    assert conflict.values is not None and {conflict.values.first, conflict.values.second} == {"1931", "1947"}
    assert conflict.values.kind == "date" and all(0.0 <= s <= 1.0 for s in (conflict.values.first_sureness or 0,
                                                                           conflict.values.second_sureness or 0))
    assert conflict.exclude == ()  # which side is wrong is for a person to decide
    assert any("1931" in m.sentence for m in conflict.members) and any("1947" in m.sentence for m in conflict.members)
    assert all(m.link and m.link.startswith("https://") for f in report.findings for m in f.members)


def test_the_neighbour_graph_finds_the_same_problems(planted, embedder, report):
    """Above ``exact_neighbours_up_to`` passages the neighbours come from an HNSW graph: the same
    findings on the planted corpus, and the report says how its neighbours were found."""
    with Index.open(planted[1], embedder=embedder) as index:
        graph = audit_index(index, exact_neighbours_up_to=2)
    assert [(f.kind, f.documents) for f in graph.findings] == [(f.kind, f.documents) for f in report.findings]
    assert any("HNSW graph" in n for n in graph.notes) and not any("HNSW graph" in n for n in report.notes)


def test_json_matches_the_documented_schema(report):
    page = (ROOT / "docs" / "audit.md").read_text(encoding="utf-8")
    documented = json.loads(re.search(r"```json\n(.*?)```", page, re.S).group(1))
    assert documented == AUDIT_SCHEMA
    data = json.loads(report.to_json())
    jsonschema.validate(data, documented)
    assert data["counts"]["conflict"] == 1 and data["findings"][0]["severity"] == "high"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**data, "findings": [{**data["findings"][0], "kind": "rumour"}]}, documented)


def test_one_documents_chunks_and_shared_boilerplate_are_not_mirrors():
    footer = "Copyright the Example Press. All rights reserved. Subscribe to our newsletter for weekly updates."
    body = "The {} river floods its valley every spring, carrying silt from the {} hills down to the {} plain."
    chunks = [Chunk(f"long:{i}", "The same paragraph of one report repeated on every page of it, word for word.",
                    "long", "one.example", position=i) for i in range(4)]
    for i, (a, b, c) in enumerate([("Amber", "Birch", "Coral"), ("Dune", "Elm", "Fern"), ("Gale", "Hazel", "Iris")]):
        chunks += [Chunk(f"d{i}:0", body.format(a, b, c), f"d{i}", f"site{i}.example", position=0),
                   Chunk(f"d{i}:1", footer, f"d{i}", f"site{i}.example", position=1)]
    # pages filled in from one template share most of their words and none of their values
    template = ("{} is the {} day of the year in the Gregorian calendar, with {} days remaining until the end of "
                "the year. This page lists the events, births and deaths that fall on this date in history, and "
                "the holidays and observances that are celebrated on it in different countries around the world.")
    pages = [template.format(*fill) for fill in (("April 15", "105th", 260), ("August 9", "221st", 144))]
    assert exact_jaccard(shingles(pages[0]), shingles(pages[1])) >= NEAR_DUPLICATE_JACCARD
    chunks += [Chunk(f"t{i}:0", page, f"t{i}", "wiki.example", position=0) for i, page in enumerate(pages)]
    corpus = Corpus.of(chunks, np.eye(len(chunks), dtype=np.float32))
    findings, proposed = find_mirrors(corpus)
    assert findings == [] and proposed >= 1  # the template pair was proposed, and refused for its values


def test_a_conflict_question_is_derived_from_what_two_sentences_share():
    q = derive_question("The Kessel Bridge opened in 1931.", "The Kessel Bridge opened to traffic in 1947.")
    assert q is not None and q.startswith("When") and "Kessel Bridge" in q and "open" in q
    assert derive_question("The Kessel Bridge opened in 1931.", "The Oder Dam opened in 1947.") is None
    assert derive_question("The Kessel Bridge is made of stone.", "The Kessel Bridge opened in 1947.") is None
    # a number after a name is part of the name, not a value of the subject
    assert derive_question("Apollo 8's mission was shown in several films.",
                           "The Apollo 16 mission included several field trips.") is None
    # the same attribute of two subjects: "Einstein" and "Bohr" are not named in both
    assert derive_question("Einstein received the Nobel Prize in 1921.",
                           "Bohr received the Nobel Prize in 1922.") is None


def _synthetic(n: int, seed: int = 0) -> Corpus:
    rng = np.random.default_rng(seed)
    names = [f"Name{chr(65 + i % 26)}{i}" for i in range(n)]
    chunks = [Chunk(f"c{i}", f"{names[i]} met {names[(i * 7) % n]} in {1800 + i % 200} near the old mill.",
                    f"doc{i // 2}", f"host{i % 50}.example", position=i % 2) for i in range(n)]
    return Corpus.of(chunks, rng.normal(size=(n, 32)).astype(np.float32))


def test_candidate_pairs_grow_linearly_never_all_pairs():
    counts = {}
    for n in (300, 600):
        corpus = _synthetic(n)
        ids, _ = corpus.neighbours()
        counts[n] = len(candidate_pairs(corpus, ids))
        assert counts[n] <= n * (NEIGHBOURS + RARE_NAME_POSTINGS)
        assert counts[n] < n * (n - 1) / 2 / 10
    assert 1.6 <= counts[600] / counts[300] <= 2.4, counts


def test_fail_on_exits_non_zero_and_an_unknown_kind_is_refused(planted, capsys):
    index = str(planted[1])
    with pytest.raises(SystemExit) as exc:
        main(["audit", "--index", index, "--check", "mirror", "--fail-on", "mirror"])
    assert exc.value.code == 1
    shown = capsys.readouterr()
    assert "1 mirror" in shown.out and "failing: findings of kind mirror" in shown.err
    main(["audit", "--index", index, "--check", "mirror", "--fail-on", "conflict"])  # none: exits 0
    with pytest.raises(SystemExit) as exc:
        main(["audit", "--index", index, "--fail-on", "rumour"])
    assert exc.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "'rumour' is not a finding kind" in err and all(k in err for k in FINDING_KINDS)


def test_cli_json_and_html(planted, tmp_path, capsys):
    page = tmp_path / "audit.html"
    main(["audit", "--index", str(planted[1]), "--json", "--html", str(page), "--no-reader"])
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, AUDIT_SCHEMA)
    assert data["counts"] == {"mirror": 1, "coordinated-voice": 1, "conflict": 1, "harmful-source": 0}
    assert data["findings"][0]["values"] is None or data["findings"][0]["values"]["sureness"] == [None, None]
    html = page.read_text(encoding="utf-8")
    assert "<script" not in html and "style=" not in html and html.count("<style>") == 1
    assert 'href="https://rivers.example/kessel"' in html and "1947" in html


def _hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


def test_exclude_writes_a_new_index_and_touches_nothing_else(planted, tmp_path, capsys, embedder):
    corpus, index = planted
    main(["audit", "--index", str(index), "--json", "--check", "mirror", "--check", "coordinated-voice"])
    findings = tmp_path / "findings.json"
    findings.write_text(capsys.readouterr().out, encoding="utf-8")
    before = (_hashes(index), _hashes(corpus), (index / "CURRENT").read_text())
    out = tmp_path / "clean"
    main(["audit", "--index", str(index), "--exclude", str(findings), "--out", str(out)])
    assert (_hashes(index), _hashes(corpus), (index / "CURRENT").read_text()) == before
    with Index.open(out, embedder=embedder) as clean, Index.open(index, embedder=embedder) as old:
        dropped = {DOC + "lighthouse-copy"} | {DOC + f"dam-{i}" for i in range(1, 5)}
        assert {c.doc_id for c in clean.chunks} == {c.doc_id for c in old.chunks} - dropped
        assert np.array_equal(clean.embeddings, old.embeddings[[old.row(c.id) for c in clean.chunks]])
        assert audit_index(clean, checks=["mirror", "coordinated-voice"]).findings == ()
    with pytest.raises(SystemExit) as exc:
        main(["audit", "--index", str(index), "--exclude", str(findings), "--out", str(tmp_path / "o2"), "--switch"])
    assert exc.value.code == 2 and "--switch" in capsys.readouterr().err
    assert (_hashes(index), (index / "CURRENT").read_text()) == before[::2]


def test_sources_that_hurt_from_labelled_questions(planted, tmp_path, embedder):
    rows = []
    for q in range(20):
        # ten useless passages of one source push the useful ones out of the top 10
        bad = [{"id": f"bad{q}-{i}", "source": "free-articles.example", "utility": 0.0} for i in range(10)]
        good = [{"id": f"good{q}", "source": "rivers.example", "utility": 1.0},
                {"id": f"ok{q}", "source": "sky.example", "utility": 1.0}]
        rows.append({"id": f"q{q}", "items": bad + good})
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with Index.open(planted[1], embedder=embedder) as index:
        report = audit_index(index, checks=["harmful-source"], questions=questions)
    sources = [f.details["source"] for f in report.of_kind("harmful-source")]
    assert sources == ["free-articles.example"]
    assert report.of_kind("harmful-source")[0].exclude == (DOC + "lighthouse-copy",)
