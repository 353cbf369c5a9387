"""The spread-out attack writer: one wrong answer in registers far apart in embedding space."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.attack.fakes import QUESTIONS, EchoLLM, build_index
from tests.helpers import HashEmbedder

import ragsieve.attack.cli as attack_cli
from ragsieve.answers import contains_answer
from ragsieve.attack.poison import (
    WRITERS,
    AssertionWriter,
    SpreadWriter,
    Target,
    TemplateWriter,
    question_subject,
    reuses_question,
)
from ragsieve.cli import main
from ragsieve.errors import InputError
from ragsieve.voices import pairwise_cosine

TARGETS = [Target(q["id"], q["question"], q["answers"], w) for q, w in zip(
    QUESTIONS, ["Christopher Marlowe", "Krakow", "James Gosling", "Buzz Aldrin", "Kyoto", "Raphael"], strict=True)]


def test_every_passage_asserts_the_wrong_answer_in_its_own_register():
    for t in TARGETS:
        passages = SpreadWriter(seed=0).write(t, 5)
        texts = [p.text for p in passages]
        assert len(set(texts)) == 5 and len({p.metadata["register"] for p in passages}) == 5
        assert all(contains_answer(x, [t.wrong]) and not contains_answer(x, t.answers) for x in texts)
        assert all(question_subject(t.question) in x for x in texts)
        assert not any(reuses_question(x, t.question, question_subject(t.question)) for x in texts)
        assert [p.id for p in passages] == [f"poison:{t.id}:{i}" for i in range(5)]
        assert all(p.writer == "spread" and p.wrong == t.wrong for p in passages)
    lengths = [len(p.text.split()) for p in SpreadWriter(seed=0).write(TARGETS[0], 8)]
    assert max(lengths) > 4 * min(lengths)  # a terse line and a paragraph
    assert "spread" in WRITERS


def test_seeded_and_repeats_registers_past_their_number():
    a = [p.text for p in SpreadWriter(seed=3).write(TARGETS[0], 5)]
    assert a == [p.text for p in SpreadWriter(seed=3).write(TARGETS[0], 5)]
    many = SpreadWriter(seed=0).write(TARGETS[0], 11)
    assert len({p.text for p in many}) == 11
    with pytest.raises(InputError, match="at least 1"):
        SpreadWriter().write(TARGETS[0], 0)


def test_a_target_whose_subject_names_the_gold_answer_is_skipped():
    t = Target("q", "Is Tokyo the capital of Japan?", ["Tokyo"], "Kyoto")
    writer = SpreadWriter(seed=0)
    assert writer.write(t, 3) == [] and writer.skipped == ["q"]


def test_with_an_embedder_it_starts_near_the_question_and_spreads():
    emb = HashEmbedder()
    t = TARGETS[3]
    passages = SpreadWriter(emb, seed=0).write(t, 3)
    options = SpreadWriter(seed=0).candidates(t)
    vecs = np.asarray(emb.embed([t.question] + [x for _, x in options]), dtype=np.float64)
    cos = pairwise_cosine(vecs)
    nearest = options[int(np.argmax(cos[0, 1:]))][1]
    assert passages[0].text == nearest
    assert SpreadWriter(emb).to_dict() == {"type": "spread", "seed": 0, "embedder": True}


@pytest.mark.slow
def test_spread_passages_are_farther_apart_than_other_writers(embedder):
    def mean_cosine(texts):
        cos = pairwise_cosine(embedder.embed(texts))
        return float(cos[np.triu_indices(len(texts), k=1)].mean())

    spread = [mean_cosine([p.text for p in SpreadWriter(embedder).write(t, 5)]) for t in TARGETS]
    template = [mean_cosine([p.text for p in TemplateWriter().write(t, 5)]) for t in TARGETS]
    asserted = [mean_cosine([p.text for p in AssertionWriter(templates_only=True).write(t, 5)]) for t in TARGETS]
    assert np.mean(spread) < np.mean(template) and np.mean(spread) < np.mean(asserted)


def test_cli_spread_writer(tmp_path, monkeypatch, capsys):
    from ragsieve.index import Index

    build_index(tmp_path / "idx")
    q = tmp_path / "q.jsonl"
    q.write_text("\n".join(json.dumps(r) for r in QUESTIONS) + "\n")
    monkeypatch.setattr(attack_cli, "_open_index", lambda path, cfg: Index.open(path, embedder=HashEmbedder()))
    monkeypatch.setattr(attack_cli, "_load_llm", lambda cfg: EchoLLM())
    try:
        main(["attack", "poison", "--index", str(tmp_path / "idx"), "--questions", str(q), "--out",
              str(tmp_path / "p"), "--writer", "spread", "--n", "3"])
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    rows = [json.loads(line) for line in (tmp_path / "p" / "poison.jsonl").read_text().splitlines()]
    assert rows[0]["writer"]["type"] == "spread"
    first = [r for r in rows if r["kind"] == "passage"]
    first = [r for r in first if r["target_id"] == first[0]["target_id"]]
    assert len({r["metadata"]["register"] for r in first}) == 3 and len({r["source"] for r in first}) == 3
