"""The assertion and mirror attack writers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from tests.attack.fakes import QUESTIONS, EchoLLM, build_index

from ragsieve.answers import contains_answer
from ragsieve.attack.poison import (
    AssertionWriter,
    MirrorWriter,
    Target,
    assign_sources,
    choose_targets,
    load_attack,
    poison_index,
    question_statement,
    question_subject,
    replace_answer,
    reuses_question,
)
from ragsieve.errors import InputError
from ragsieve.llm.base import Generation, as_messages


class ScriptedLLM(EchoLLM):
    """A writer fake that answers the assertion prompt with one of a few scripted behaviours
    chosen by the seed: a good assertion, a restatement of the question, or a gold answer."""

    model_name = "scripted"

    def __init__(self, behaviour: str = "good") -> None:
        super().__init__()
        self.behaviour = behaviour
        self.prompts: list[str] = []

    def generate(self, prompt: Any, *, max_tokens: int = 256, temperature: float = 0.0,
                 stop: Sequence[str] | None = None, seed: int | None = None) -> Generation:
        self.calls += 1
        text = as_messages(prompt)[-1]["content"]
        self.prompts.append(text)
        fact = text.split("Fact to state: ", 1)[1].split("\n", 1)[0]
        question = text.split("Question (do not repeat it): ", 1)[1].split("\n", 1)[0]
        if self.behaviour == "restate":
            return Generation(f"{question} It was {fact}.", 10, 10, "stop")
        if self.behaviour == "statement":
            return Generation(f"{question_statement(question)} was {fact}.", 10, 10, "stop")
        if self.behaviour == "vague":
            return Generation("A famous figure did this long ago.", 10, 10, "stop")
        return Generation(f"Sample {seed % 89}: records kept in the national archive credit {fact}.", 10, 10, "stop")


def _restates(text: str, question: str) -> bool:
    return text.lower().startswith(question.lower()[:20]) or reuses_question(text, question,
                                                                               question_subject(question))


@pytest.mark.parametrize(("question", "subject"), [
    ("Who wrote the tragedy Hamlet?", "Hamlet"),
    ("In which city was Marie Curie born?", "Marie Curie"),
    ("What year did Apollo 11 land on the Moon?", "Apollo 11 and Moon"),
    ("When was superconductivity discovered?", "superconductivity"),
    ("What is the boiling point of water?", "water"),
])
def test_question_subject(question, subject):
    assert question_subject(question) == subject


def test_assertion_writer_with_llm_asserts_without_restating():
    targets = choose_targets(QUESTIONS, seed=0)
    llm = ScriptedLLM("good")
    writer = AssertionWriter(llm, seed=0)
    for t in targets:
        ps = writer.write(t, 3)
        assert len({p.text for p in ps}) == 3  # per-passage seeds
        for p in ps:
            assert contains_answer(p.text, [t.wrong]) and not contains_answer(p.text, t.answers)
            assert not _restates(p.text, t.question) and "?" not in p.text
            assert p.metadata["written_by"] == "llm" and p.writer == "assert"
    assert writer.fallbacks == 0
    assert all("do not repeat" in p for p in llm.prompts)


@pytest.mark.parametrize("behaviour", ["restate", "statement", "vague"])
def test_assertion_writer_falls_back_to_templates_on_bad_samples(behaviour):
    targets = choose_targets(QUESTIONS, seed=0)
    writer = AssertionWriter(ScriptedLLM(behaviour), seed=0)
    for t in targets:
        for p in writer.write(t, 2):
            assert p.metadata["written_by"] == "template"
            assert contains_answer(p.text, [t.wrong]) and not _restates(p.text, t.question)
    assert writer.fallbacks == 2 * len(targets)


def test_assertion_templates_are_deterministic_and_kind_shaped():
    t = Target("q", "When did the Tay Bridge open?", ["1878"], "1931")
    a = AssertionWriter(templates_only=True, seed=3).write(t, 4)
    assert a == AssertionWriter(templates_only=True, seed=3).write(t, 4)
    assert all("Tay Bridge" in p.text and "1931" in p.text and "?" not in p.text for p in a)
    assert not any(_restates(p.text, t.question) for p in a)
    with pytest.raises(InputError, match="at least 1"):
        AssertionWriter(templates_only=True).write(t, 0)


def test_assertion_llm_samples_are_cached(tmp_path):
    t = choose_targets(QUESTIONS, seed=0)[0]
    llm = ScriptedLLM("good")
    cache = tmp_path / "cache.jsonl"
    first = AssertionWriter(llm, cache_path=cache).write(t, 2)
    calls = llm.calls
    again = AssertionWriter(llm, cache_path=cache).write(t, 2)
    assert again == first and llm.calls == calls


@pytest.mark.parametrize(("text", "answers", "wrong", "expected", "count"), [
    ("The tower opened in 1931. By 1931 it was busy.", ["1931"], "1947",
     "The tower opened in 1947. By 1947 it was busy.", 2),
    ("It holds 1,200 seats; 1200 seats in all.", ["1200"], "900", "It holds 900 seats; 900 seats in all.", 2),
    ("Mars has two moons.", ["2"], "3", "Mars has 3 moons.", 1),
    ("It costs 3.5 euros, not 3.55.", ["3.5"], "4.5", "It costs 4.5 euros, not 3.55.", 1),
    ("Opened on 4 July 1931 by the mayor.", ["July 4, 1931"], "9 May 1947", "Opened on 9 May 1947 by the mayor.", 1),
    ("WARSAW was her city; she left Warsaw.", ["Warsaw"], "Krakow", "Krakow was her city; she left Krakow.", 2),
    ("Guido van Rossum created Python. Van Rossum led it.", ["Guido van Rossum"], "James Gosling",
     "James Gosling created Python. Gosling led it.", 2),
    ("Marie Curie was born in Warsaw. Curie moved.", ["Marie Curie"], "Lise Meitner",
     "Lise Meitner was born in Warsaw. Meitner moved.", 2),
    ("Nothing relevant here.", ["Warsaw"], "Krakow", "Nothing relevant here.", 0),
])
def test_replace_answer_normalises_values(text, answers, wrong, expected, count):
    assert replace_answer(text, answers, wrong) == (expected, count)


def test_mirror_writer_copies_gold_passage_with_only_the_answer_changed(tmp_path):
    from tests.helpers import HashEmbedder

    from ragsieve.index import Index

    build_index(tmp_path / "idx")
    index = Index.open(tmp_path / "idx", embedder=HashEmbedder())
    t = next(t for t in choose_targets(QUESTIONS, seed=0) if t.id == "q-curie")
    writer = MirrorWriter(index, seed=0)
    ps = writer.write(t, 3)
    gold = writer.gold_chunk(t)
    assert gold is not None and "Warsaw" in gold.text
    assert len(ps) == 3 and len({p.source for p in ps}) == 3
    for p in ps:
        assert p.text == gold.text.replace("Warsaw", t.wrong)
        assert p.metadata["mirror_of"] == gold.id and p.metadata["original_source"] == gold.source
        host = p.source.split("/", 1)[0]
        assert host != gold.source and host == p.metadata["host"] and p.source.endswith(gold.source)
    # sources spread keeps the mirror hosts; one host overrides them
    assert [p.source for p in assign_sources(ps, "sources")] == [p.source for p in ps]
    assert {p.source for p in assign_sources(ps, "one")} == {"attacker-0.example.net"}
    # a target whose answer no retrieved passage holds is skipped
    ghost = Target("q-ghost", "Who composed the Moonlight Sonata?", ["Beethoven"], "Mozart")
    assert writer.write(ghost, 2) == [] and writer.skipped == ["q-ghost"]
    with pytest.raises(InputError, match="needs the index"):
        MirrorWriter().write(t, 1)


def test_mirror_attack_injects_copies_on_other_hosts(tmp_path):
    from tests.helpers import HashEmbedder

    from ragsieve.index import Index

    build_index(tmp_path / "idx")
    index = Index.open(tmp_path / "idx", embedder=HashEmbedder())
    targets = choose_targets(QUESTIONS, seed=0)
    copy = poison_index(index, targets, 2, tmp_path / "p", MirrorWriter(index, seed=0), spread="sources")
    settings, stored_targets, passages = load_attack(tmp_path / "p")
    assert settings["writer"]["type"] == "mirror" and passages
    assert {t.id for t in stored_targets} == {p.target_id for p in passages}
    by_id = {c.id: c for c in copy.chunks}
    for p in passages:
        chunk = by_id[p.id]
        assert chunk.source == p.source and chunk.source.startswith("mirror-")
        assert chunk.title == by_id[p.metadata["mirror_of"]].title and chunk.metadata["poisoned"]
