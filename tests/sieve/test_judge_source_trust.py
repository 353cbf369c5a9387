"""The judge weighs each candidate's relevance by its source's learned weight, relative to the
most trusted candidate source, so a distrusted source's passage is not picked again after
retrieval reweighting."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ragsieve.config import JudgeConfig
from ragsieve.sieve.judge import JudgeStage, RelevanceScores, trust_weighted
from ragsieve.sieve.state import PipelineState
from ragsieve.types import Answer, Chunk, SearchHit, Trace


class FixedJudge:
    """Scores every passage 0.9: only the source weight tells the passages apart."""

    name = "fixed"
    upper = 0.5
    lower = 0.2

    def warm_up(self) -> None:
        pass

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        return [0.9 for _ in passages]


def hit(cid: str, source: str, weight: float | None) -> SearchHit:
    scores = {"fused": 1.0} if weight is None else {"fused": 1.0, "source_weight": weight}
    return SearchHit(Chunk(id=cid, text=f"passage {cid}", doc_id=cid, source=source), 1.0, 1, scores)


def stage() -> JudgeStage:
    config = JudgeConfig(cover_entities=False)
    return JudgeStage(RelevanceScores(lambda: FixedJudge(), config), config)


def test_a_source_with_learned_weight_zero_is_dropped_and_the_trusted_one_kept() -> None:
    candidates = [hit("gold", "wiki.example", 0.8), hit("attack", "attacker.example", 0.0)]
    trace, state = Trace("q?"), PipelineState("q?")
    kept = stage().run("q?", candidates, trace, state)
    assert not isinstance(kept, Answer)
    assert [h.chunk.id for h in kept] == ["gold"]
    assert state.relevance["gold"] == 0.9 and state.relevance["attack"] == 0.0
    reasons = {d["id"]: d["reason"] for d in trace.decisions if d["check"] == "judge"}
    assert "source weight 0.00" in reasons["attack"]


def test_without_learned_weights_nothing_changes() -> None:
    candidates = [hit("a", "one.example", None), hit("b", "two.example", None)]
    state = PipelineState("q?")
    assert trust_weighted(candidates, [0.7, 0.3], state) == [0.7, 0.3]


def test_weights_are_relative_to_the_most_trusted_candidate_source_and_applied_once() -> None:
    candidates = [hit("a", "one.example", 0.4), hit("b", "two.example", 0.2)]
    state = PipelineState("q?")
    first = trust_weighted(candidates, [0.8, 0.8], state)
    assert first == pytest.approx([0.8, 0.4])
    # a second judging in the same request reads the weighted scores back: no second weighting
    again = trust_weighted(candidates, [state.relevance["a"], state.relevance["b"]], state)
    assert again == pytest.approx([0.8, 0.4])
