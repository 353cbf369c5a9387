"""The training-draft builder: realistic retrieval problems (answerable, unanswerable without the
gold passage, attacked by the project's writers) answered by the sieve in observe mode, labelled
by the gold answers, cached append-only and resumable; the evaluation-only sets are refused.
Fake LLM, hash embedder, keyword judge and a 24-row fixture corpus (4 articles, 12 passages)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.helpers import HashEmbedder
from tests.sieve.test_trust_acceptance import FakeLLM

from ragsieve.config import validate_config
from ragsieve.errors import InputError
from ragsieve.eval.drafts import (
    ATTACK_WRITERS,
    DraftBuilder,
    DraftCache,
    DraftRecord,
    build_drafts,
    check_training_set,
    draft_label,
    load_training_rows,
    settings_hash,
)
from ragsieve.options import SIEVE_STAGES
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.signals import DECLARED
from ragsieve.verify import LexicalEmbeddingJudge

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "drafts" / "toy_training.jsonl"
SET = "toy_wiki"


class AllRelevant:
    """A relevance judge that keeps every candidate (the run always reaches generation)."""

    name = "all-relevant"
    upper = 0.6
    lower = 0.3

    def warm_up(self) -> None:
        pass

    def score(self, question: str, passages: list[str]) -> list[float]:
        return [0.9 for _ in passages]


def first_sentence(question: str, passages: list[str]) -> str:
    """An extractive model: the first sentence of passage [1], cited."""
    return re.split(r"(?<=\.)\s+", passages[0].strip())[0].rstrip(".") + " [1]." if passages else "I don't know."


# the injection check scores sentences with a shipped classifier; what it decides is not what
# these tests are about, and they need no model file
ABLATE = ["injection"] if "injection" in SIEVE_STAGES else []


def observe_config() -> object:
    return validate_config({"stages": {"need": {"mode": "always"}, "route": {"domain": "all"},
                                       "select": {"method": "top-k"}},
                            "decide": {"mode": "observe"}, "ablate": ABLATE})  # fmt: skip


@pytest.fixture(scope="module")
def builder(tmp_path_factory: pytest.TempPathFactory) -> DraftBuilder:
    rows = load_training_rows(FIXTURE, SET)
    b = DraftBuilder({SET: rows}, tmp_path_factory.mktemp("drafts"), seed=0, buckets=4, embedder=HashEmbedder())
    b.warm_up()
    return b


def pipeline(builder: DraftBuilder, set_name: str = SET) -> Pipeline:
    return Pipeline(observe_config(), index=builder.index(set_name), llm=FakeLLM(first_sentence),  # type: ignore[arg-type]
                    judge=AllRelevant(), claim_judge=LexicalEmbeddingJudge(embedding_weight=0.0))  # fmt: skip


def test_the_plan_has_every_kind_in_proportion_and_splits_by_article(builder: DraftBuilder) -> None:
    plan = builder.plan()
    assert len(plan) == 24 and len({p.row.id for p in plan}) == 24
    kinds = [p.kind for p in plan]
    assert kinds.count("unanswerable") >= 24 // 3 and kinds.count("attacked") >= 24 // 6
    assert {p.attack_writer for p in plan if p.kind == "attacked"} == set(ATTACK_WRITERS)
    # whole articles go to one split
    by_title: dict[str, set[str]] = {}
    for p in plan:
        by_title.setdefault(p.row.title, set()).add(p.split)
    assert all(len(s) == 1 for s in by_title.values())
    # seeded: the same plan again, another seed another order
    again = DraftBuilder({SET: load_training_rows(FIXTURE, SET)}, builder.work_dir, seed=0, buckets=4).plan()
    assert [(p.row.id, p.kind) for p in again] == [(p.row.id, p.kind) for p in plan]
    other = DraftBuilder({SET: load_training_rows(FIXTURE, SET)}, builder.work_dir, seed=1, buckets=4).plan()
    assert [p.row.id for p in other] != [p.row.id for p in plan]


def test_one_corpus_whose_views_hide_the_gold_passage_and_show_attacks_to_their_question(
    builder: DraftBuilder,
) -> None:
    index = builder.index(SET)
    plan = builder.plan()
    attack_chunks = [c for c in index.chunks if c.metadata.get("poisoned")]
    assert len(index.chunks) - len(attack_chunks) == 12  # every distinct passage once
    for p in plan:
        visible = {c.id for c in builder.visible(p)}
        if p.kind == "unanswerable":
            assert p.gold_chunk not in visible
            # a near miss: the article's other passages remain
            assert any(c.title == p.row.title for c in index.chunks if c.id in visible)
        else:
            assert p.gold_chunk in visible
        planted = {c.id for c in attack_chunks if c.metadata["target_id"] == p.row.id}
        assert bool(planted) == (p.kind == "attacked")
        assert planted <= visible
        # nobody else's attack passages
        assert not ({c.id for c in attack_chunks} - planted) & visible


def test_drafts_record_signals_labels_and_round_trip(builder: DraftBuilder, tmp_path: Path) -> None:
    pipe = pipeline(builder)
    cache = DraftCache(tmp_path, "fake")
    records = []
    for p in builder.plan():
        record = builder.draft(p, pipe, "fake", "fake-llm", "s1")
        cache.append(record)
        records.append(record)
        retrieved = [c["id"] for c in pipe.ask(p.row.question, where=p.where).trace.stage("retrieve")[-1]["candidates"]]
        if p.kind == "unanswerable":
            assert p.gold_chunk not in retrieved
        if p.kind == "attacked":
            assert any(cid.startswith(f"poison:{p.row.id}:") for cid in retrieved)
    assert {r.kind for r in records} == {"answerable", "unanswerable", "attacked"}
    for r in records:
        assert r.signals and set(r.signals) <= set(DECLARED)
        assert r.label == draft_label(r.draft, r.answers)
        assert r.plain_confidence["retrieval"] == r.signals["retrieval.top_score"]
        assert r.set == SET and r.split in ("train", "validation") and r.seconds > 0
    assert any(r.label == "right" for r in records) and any(r.label == "wrong" for r in records)
    assert all(r.states_attack_answer is not None for r in records if r.kind == "attacked")
    # through JSONL and back, equal
    assert sorted(cache.records(), key=lambda r: r.key) == sorted(records, key=lambda r: r.key)


def test_labels_come_from_the_gold_answers() -> None:
    assert draft_label("The bridge opened in 1932 [1].", ["1932"]) == "right"
    assert draft_label("It opened in 1933.", ["1932"]) == "wrong"
    assert draft_label("It opened in 19320.", ["1932"]) == "wrong"  # whole tokens only
    assert draft_label(None, ["1932"]) == "non-answer"
    assert draft_label("  [1] ", ["1932"]) == "non-answer"
    assert draft_label("I cannot tell from these passages.", ["1932"], declined=True) == "non-answer"


def test_a_rerun_skips_the_drafts_done(builder: DraftBuilder, tmp_path: Path) -> None:
    cache = DraftCache(tmp_path, "fake")
    problems = builder.plan()[:6]
    asked: list[str] = []

    def pipeline_for(name: str) -> Pipeline:
        asked.append(name)
        return pipeline(builder, name)

    settings = settings_hash(observe_config(), builder.plan_settings())
    assert build_drafts(builder, problems[:4], pipeline_for, cache, "fake", settings=settings) == 4
    # a killed run's last line cut short: that draft is built again
    path = cache.path(0)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:-1]) + lines[-1][:20], encoding="utf-8")
    assert build_drafts(builder, problems, pipeline_for, cache, "fake", settings=settings) == 3
    assert len({r.key for r in cache.records()}) == 6
    asked.clear()
    assert build_drafts(builder, problems, pipeline_for, cache, "fake", settings=settings) == 0
    assert asked == []  # nothing to do: no pipeline built
    # other settings are other drafts
    assert build_drafts(builder, problems[:1], pipeline_for, cache, "fake", settings="other") == 1


def test_the_builder_needs_observe_mode(builder: DraftBuilder) -> None:
    cfg = validate_config({"stages": {"need": {"mode": "always"}}, "ablate": ABLATE})
    pipe = Pipeline(cfg, index=builder.index(SET), llm=FakeLLM(first_sentence), judge=AllRelevant())
    with pytest.raises(InputError, match="observe"):
        builder.draft(builder.plan()[0], pipe, "fake")


@pytest.mark.parametrize("name", ["reddit", "amazon_reviews"])
def test_the_evaluation_only_sets_are_refused(name: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="evaluation under domain shift"):
        check_training_set(name)
    with pytest.raises(InputError, match=name):
        load_training_rows(FIXTURE, name)
    rows = load_training_rows(FIXTURE, SET)
    with pytest.raises(InputError, match=name):
        DraftBuilder({name: rows}, tmp_path)
    # a file of that set under another name is refused by its rows' source
    shifted = tmp_path / "rows.jsonl"
    row = json.loads(FIXTURE.read_text(encoding="utf-8").splitlines()[0]) | {"source": f"squadshifts/{name}"}
    shifted.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=name):
        load_training_rows(shifted, "renamed")
    # and no record of it is written
    record = DraftRecord(question_id="q", set=name, split="train", kind="answerable", attack_writer=None,
                         attack_answer=None, model="fake", model_identity="", settings="", question="q?",
                         draft="a", answers=("a",), label="right", answer_in_view=True, states_attack_answer=None,
                         stopped_by=None, fired=())  # fmt: skip
    with pytest.raises(InputError, match=name):
        DraftCache(tmp_path, "fake").append(record)


def test_no_record_of_a_build_is_from_an_evaluation_only_set(builder: DraftBuilder, tmp_path: Path) -> None:
    cache = DraftCache(tmp_path, "fake")
    build_drafts(builder, builder.plan()[:3], lambda name: pipeline(builder, name), cache, "fake")
    records = list(cache.records())
    assert records and not {r.set for r in records} & {"reddit", "amazon_reviews"}


def test_a_capacity_plans_a_prefix_of_the_seeded_order(builder: DraftBuilder) -> None:
    rows = load_training_rows(FIXTURE, SET)
    small = DraftBuilder({SET: rows}, builder.work_dir, seed=0, buckets=4, capacity=12)
    plan = small.plan()
    assert len(plan) == 12 and small.plan_settings(SET) != builder.plan_settings(SET)
    full = {p.row.id: p for p in builder.plan()}
    # the same questions in the same order, each of the same kind and split
    assert [(p.row.id, p.split) for p in plan] == [(p.row.id, p.split) for p in builder.plan()[:12]]
    assert all(p.kind == full[p.row.id].kind or full[p.row.id].kind == "attacked" for p in plan)
    with pytest.raises(InputError, match="capacity"):
        DraftBuilder({SET: rows}, builder.work_dir, capacity=0)
