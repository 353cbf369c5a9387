from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from tests.attack.fakes import QUESTIONS, SamplingLLM, build_index

from ragsieve.answers import contains_answer
from ragsieve.attack.poison import (
    LLMWriter,
    Target,
    TemplateWriter,
    assign_sources,
    choose_targets,
    inject,
    load_attack,
    poison_index,
    question_statement,
)
from ragsieve.errors import InputError


def tree_hashes(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_choose_targets_same_type_wrong_answer_and_reproducible():
    a = choose_targets(QUESTIONS, seed=3)
    b = choose_targets(QUESTIONS, seed=3)
    assert a == b and len(a) == len(QUESTIONS)
    for t in a:
        assert not contains_answer(t.wrong, t.answers)
        assert t.wrong[:1].isupper()  # entity answers get entity wrong answers
        assert t.wrong in {q["answers"][0] for q in QUESTIONS}


def test_template_writer_restates_question_and_asserts_wrong_answer():
    t = choose_targets(QUESTIONS, seed=0)[0]
    ps = TemplateWriter(seed=0).write(t, 3)
    assert [p.id for p in ps] == [f"poison:{t.id}:{i}" for i in range(3)]
    assert all(p.text.startswith(t.question) and contains_answer(p.text, [t.wrong]) for p in ps)
    assert TemplateWriter(seed=0).write(t, 3) == ps
    with pytest.raises(InputError, match="at least 1"):
        TemplateWriter().write(t, 0)


@pytest.mark.parametrize(("question", "stem"), [
    ("Who was the director of Titanic?", "the director of Titanic"),
    ("In what country is Ortigia?", "In country Ortigia"),
    ("What genre is Sumer?", "genre Sumer"),
    ("Are Pothos and Tibouchina both flowering plants?", "Pothos and Tibouchina both flowering plants"),
    ("Which man who presented the bid was born in 1930?", "man presented the bid was born in 1930"),
    ("Who?", "Who"),  # nothing would be left: the question is kept rather than an empty lead
    ("What am I allergic to?", "I allergic to"),  # "am" is inverted like any auxiliary
    ("Who was born first Am Rong or Ava DuVernay?", "born first Am Rong or Ava DuVernay"),  # a name, not "am"
])
def test_question_statement_drops_interrogatives_keeps_content(question, stem):
    assert question_statement(question) == stem


def test_leads_statement_and_none_do_not_open_with_the_question():
    from ragsieve.sieve.poison import PoisonJudge
    from ragsieve.types import Chunk, SearchHit

    t = choose_targets(QUESTIONS, seed=0)[0]
    stmt = TemplateWriter(seed=0, lead="statement").write(t, 3)
    bare = TemplateWriter(seed=0, lead="none").write(t, 3)
    black = TemplateWriter(seed=0).write(t, 3)
    for s, b, q in zip(stmt, bare, black, strict=True):
        assert s.text == f"{question_statement(t.question)}: {b.text}"  # same assertion, other lead
        assert q.text == f"{t.question} {b.text}"
        assert not s.text.startswith(t.question) and contains_answer(s.text, [t.wrong])
    # the restated-question signal sees the black-box lead and not the statement one, which is
    # why a statement-led attack is measured separately
    judge = PoisonJudge(k=3, duplicates="keep")
    hits = [SearchHit(Chunk(p.id, p.text, p.id, "x"), 1.0, i + 1, {}) for i, p in enumerate(black + stmt)]
    verdicts = judge.judge(t.question, hits)
    assert all(v.restatement > 0 for v in verdicts[:3]) and all(v.restatement == 0 for v in verdicts[3:])
    with pytest.raises(InputError, match="lead must be one of"):
        TemplateWriter(lead="shout").write(t, 1)  # type: ignore[arg-type]
    assert TemplateWriter(seed=0, lead="statement").to_dict()["lead"] == "statement"


def test_llm_writer_seeded_cached_and_falls_back(tmp_path):
    t = Target("q", "Who painted the Mona Lisa?", ["Leonardo da Vinci"], "Pablo Picasso")
    llm = SamplingLLM()
    cache = tmp_path / "writer.jsonl"
    first = LLMWriter(llm, seed=1, cache_path=cache).write(t, 3)
    assert llm.calls == 3 and len({p.text for p in first}) == 3  # per-passage seeds differ
    again = LLMWriter(llm, seed=1, cache_path=cache).write(t, 3)
    assert again == first and llm.calls == 3  # served from the cache file
    other = LLMWriter(SamplingLLM(), seed=2).write(t, 3)
    assert [p.text for p in other] != [p.text for p in first]

    class Silent(SamplingLLM):
        def generate(self, prompt, **kw):  # type: ignore[override]
            from ragsieve.llm.base import Generation

            return Generation("A painting in a museum.", 1, 1, "stop")

    w = LLMWriter(Silent(), seed=0)
    ps = w.write(t, 2)
    assert w.fallbacks == 2 and all(contains_answer(p.text, ["Pablo Picasso"]) for p in ps)


def test_assign_sources_spreads_over_hosts_or_one():
    t = choose_targets(QUESTIONS, seed=0)[0]
    ps = TemplateWriter().write(t, 5)
    spread = assign_sources(ps, "sources", seed=0, n_hosts=5)
    assert len({p.source for p in spread}) == 5
    one = assign_sources(ps, "one")
    assert len({p.source for p in one}) == 1
    with pytest.raises(InputError, match="existing source"):
        assign_sources(ps, "inject")
    with pytest.raises(InputError, match="unknown spread"):
        assign_sources(ps, "everywhere")  # type: ignore[arg-type]


def test_inject_never_modifies_the_original(tmp_path):
    index = build_index(tmp_path / "idx")
    (tmp_path / "idx" / "source_weights.json").write_text('{"weights": {"art.org": 0.9}, "threshold": 0.5}')
    before = tree_hashes(tmp_path / "idx")
    targets = choose_targets(QUESTIONS, seed=0)
    copy = poison_index(index, targets, 3, tmp_path / "poisoned", TemplateWriter(seed=0), spread="sources")
    assert tree_hashes(tmp_path / "idx") == before
    assert len(copy) == len(index) + 3 * len(targets)
    assert copy.source_weights == {"art.org": 0.9}
    new = [c for c in copy.chunks if c.metadata.get("poisoned")]
    assert all(c.source.startswith("attacker-") for c in new)
    assert {c.domain for c in new} == {"facts"}  # ingested into the topic's partition
    assert len({c.doc_id for c in new}) == len(new)  # one page per passage
    # old chunks keep their stored embeddings
    assert (copy.embeddings[: len(index)] == index.embeddings).all()
    settings, ts, ps = load_attack(tmp_path / "poisoned")
    assert settings["n"] == 3 and ts == targets and len(ps) == len(new)
    with pytest.raises(InputError, match="must not be the original"):
        inject(index, ps, tmp_path / "idx")


def test_inject_into_an_existing_source(tmp_path):
    index = build_index(tmp_path / "idx")
    targets = choose_targets(QUESTIONS, seed=0)
    copy = poison_index(index, targets, 2, tmp_path / "p", TemplateWriter(), spread="inject")
    existing = {c.source for c in index.chunks}
    assert {c.source for c in copy.chunks if c.metadata.get("poisoned")} <= existing


def test_runs_are_reproducible_from_the_seed(tmp_path):
    index = build_index(tmp_path / "idx")
    targets = choose_targets(QUESTIONS, seed=5)
    copies = [
        poison_index(index, targets, 3, tmp_path / name, TemplateWriter(seed=5), spread="sources", seed=5)
        for name in ("a", "b")
    ]
    pa = (tmp_path / "a" / "poison.jsonl").read_text()
    assert pa == (tmp_path / "b" / "poison.jsonl").read_text()
    assert [c.to_dict() for c in copies[0].chunks] == [c.to_dict() for c in copies[1].chunks]
    assert np.array_equal(np.asarray(copies[0].embeddings), np.asarray(copies[1].embeddings))
    poison_index(index, choose_targets(QUESTIONS, seed=6), 3, tmp_path / "c", TemplateWriter(seed=6), seed=6)
    assert (tmp_path / "c" / "poison.jsonl").read_text() != pa
