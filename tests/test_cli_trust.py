"""``ragsieve ask --json`` shows the trust checks: value-grounding failures per answer sentence
and conflict groups with their sources (fake LLM and judge, hash embedder)."""

from __future__ import annotations

import json

import pytest
from tests.sieve.test_trust_acceptance import (
    BRIDGE_DOCS,
    BRIDGE_Q,
    CASES,
    MEISSNER,
    FakeLLM,
    KeywordJudge,
    build_index,
    first_passage_sentence,
    fixed,
)

from ragsieve.cli import main
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.verify import LexicalEmbeddingJudge


def ask_json(capsys, monkeypatch, index, llm, judge, *args: str) -> dict:
    def build(cfg):
        return Pipeline(cfg, index=index, llm=llm, judge=judge, claim_judge=LexicalEmbeddingJudge(embedding_weight=0.0))

    monkeypatch.setattr("ragsieve.sieve.pipeline.build_pipeline", build)
    try:
        main(["ask", *args, "--index", str(index.dir), "--route", "all", "--json"])
    except SystemExit as exc:
        assert not exc.code
    return json.loads(capsys.readouterr().out)


@pytest.fixture()
def no_responsive_config(tmp_path):
    path = tmp_path / "ragsieve.toml"
    # the value check's own verdict, as a veto (without the decide stage, which weighs it)
    path.write_text('ablate = ["decide"]\n\n[sieve]\nneed = "always"\nresponsive = false\n', encoding="utf-8")
    return path


def test_ask_json_shows_value_grounding_failures(tmp_path, capsys, monkeypatch, no_responsive_config):
    index = build_index(tmp_path, {"physics/meissner.txt": MEISSNER})
    question, _, wrong, value, _ = CASES[0]
    data = ask_json(
        capsys,
        monkeypatch,
        index,
        fixed(wrong),
        KeywordJudge(relevant=("meissner",)),
        question,
        "--config",
        str(no_responsive_config),
    )
    assert data["abstained"] is True
    failures = data["claims"][0]["value_failures"]
    assert failures[0]["text"] == value and failures[0]["evidence_says"]["text"] == "1933"
    verify = [e for e in data["trace"]["events"] if e["stage"] == "verify" and "sentence" in e]
    assert verify[0]["value_failures"][0]["text"] == value


def test_ask_json_shows_conflict_groups_with_their_sources(tmp_path, capsys, monkeypatch):
    index = build_index(tmp_path, BRIDGE_DOCS)
    judge = KeywordJudge(relevant=("kessel",))
    data = ask_json(capsys, monkeypatch, index, FakeLLM(first_passage_sentence), judge, BRIDGE_Q)
    conflict = next(e for e in data["trace"]["events"] if e["stage"] == "conflict")
    assert conflict["conflict"] is True and conflict["decision"] == "both"
    sources = {g["answer"]: [s["source"] for s in g["sources"]] for g in conflict["groups"]}
    assert sources == {"1931": ["site-a.example/kessel-bridge.txt"], "1947": ["site-b.example/kessel-bridge.txt"]}
    assert "1931" in data["answer"] and "1947" in data["answer"]
