"""The sieve on the bundled demo corpus with the real bundled models (slow)."""

from __future__ import annotations

import pytest

from ragsieve.config import PipelineConfig
from ragsieve.demo import DEMO_SHOWCASE, demo_corpus_dir, demo_questions
from ragsieve.index import Index
from ragsieve.sieve.pipeline import Pipeline

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_sieve(tmp_path_factory, embedder, llm):
    root = tmp_path_factory.mktemp("demo")
    index = Index.build(demo_corpus_dir(), root / "idx", embedder=embedder)
    return Pipeline(PipelineConfig(index_dir=str(root / "idx")), index=index, llm=llm)


def test_the_showcase_abstains_on_the_unanswerable_question(demo_sieve):
    unanswerable = {q["question"] for q in demo_questions(include_unanswerable=True) if q.get("answerable") is False}
    question = next(q for q in DEMO_SHOWCASE if q in unanswerable)
    answer = demo_sieve.ask(question)
    assert answer.abstained and answer.abstain_reason
    assert answer.text.startswith("I can't")
    assert answer.confidence is not None and answer.confidence < 0.5


def test_the_showcase_answers_with_a_check_dropping_candidates(demo_sieve):
    answer = demo_sieve.ask(DEMO_SHOWCASE[0])
    dropped = [d for d in answer.trace.decisions if d["verdict"] in ("dropped", "flagged")]
    assert dropped, "the judge or the selection should visibly drop or flag a candidate"
    assert {d["check"] for d in dropped} <= {"judge", "filter", "conflict", "select"}
    if not answer.abstained:
        assert answer.claims and answer.evidence
        assert all(c.judge == "lexical-embedding" for c in answer.claims)
    assert answer.trace.to_dict()["decisions"]
