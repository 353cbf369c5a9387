"""The independent faithfulness judges: typed values against cited evidence, gold in cited, LLM yes/no."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ragsieve.config import PipelineConfig
from ragsieve.eval.faithfulness import (
    GoldEvidenceJudge,
    LLMAnswerJudge,
    extract_values,
    faithfulness_summary,
    independence_note,
)

EVIDENCE = ["The Eiffel Tower was opened on 31 March 1889 in Paris. It is 330 metres tall and cost 7,799,401 francs."]


def test_extract_values_by_type() -> None:
    v = extract_values(
        "The tower in Paris [1] opened on 31 March 1889; Gustave Eiffel and Maurice Koechlin "
        "built it for 2.5% of 1,000 francs."
    )
    assert v["dates"] == ["31 March 1889"]
    assert v["numbers"] == ["2.5%", "1,000"]  # the date's numbers are not counted twice; [1] is a marker
    assert v["names"] == ["Paris", "Gustave Eiffel", "Maurice Koechlin"]
    assert extract_values("It is tall. However, it is old.") == {"numbers": [], "dates": [], "names": []}


@pytest.mark.parametrize(
    ("answer", "values_cited"),
    [
        ("It opened on 31 March 1889 in Paris [1].", True),
        ("It opened on March 31st, 1889.", True),  # same date, other format
        ("It cost 7799401 francs and is 330 metres tall.", True),  # same numbers, other format
        ("It opened in 1890.", False),  # a year the evidence does not state
        ("It is 300 metres tall.", False),
        ("It opened in Lyon.", False),  # a name the evidence does not state
        ("It opened on 30 March 1889.", False),
    ],
)
def test_values_must_be_in_the_cited_evidence(answer: str, values_cited: bool) -> None:
    verdict = GoldEvidenceJudge().judge(answer, EVIDENCE)
    assert verdict["values_cited"] is values_cited
    assert verdict["faithful"] is values_cited
    assert bool(verdict["missing"]) is not values_cited


def test_gold_answer_in_cited_evidence() -> None:
    judge = GoldEvidenceJudge()
    assert judge.judge("It opened in 1889.", EVIDENCE, ["1889"])["cited_has_gold"] is True
    wrong_evidence = judge.judge("It opened in 1889.", ["Built for 1889 fair."], ["Gustave Eiffel"])
    assert wrong_evidence["cited_has_gold"] is False and wrong_evidence["faithful"] is False
    nothing_cited = judge.judge("It opened in 1889.", [], ["1889"])
    assert nothing_cited["faithful"] is False
    unchecked = judge.judge("It is tall.", EVIDENCE)
    assert unchecked["values_cited"] is None and unchecked["faithful"] is None


class YesNoLLM:
    """Log-probabilities of Yes and No fixed by whether the answer's words are all in the evidence."""

    model_name = "fake-judge"

    def __init__(self) -> None:
        self.prompts: list[Any] = []

    def next_token_logprobs(self, prompt: Any, candidates: list[str]) -> list[float]:
        self.prompts.append(prompt)
        user = prompt[-1]["content"]
        evidence, answer = user.split("Answer:")[0].lower(), user.split("Answer:")[1].split("\n")[0]
        supported = all(w.strip(".,").lower() in evidence for w in answer.split())
        assert candidates == ["Yes", "No"]
        return [math.log(0.9), math.log(0.1)] if supported else [math.log(0.2), math.log(0.6)]


def test_llm_judge_reads_yes_no_logprobs() -> None:
    llm = YesNoLLM()
    judge = LLMAnswerJudge(llm)
    assert judge.support("Opened in Paris [1].", EVIDENCE) == pytest.approx(0.9)
    assert "[1]" not in llm.prompts[-1][-1]["content"]
    assert judge.support("Opened in Lyon.", EVIDENCE) == pytest.approx(0.25)
    assert judge.judge("Opened in Lyon.", EVIDENCE)["faithful"] is False
    assert judge.judge("Opened in Paris.", [])["score"] == 0.0  # nothing cited: not faithful, no call
    assert len(llm.prompts) == 3


def test_independence_note_flags_a_self_judge() -> None:
    sieve_llm_verifier = PipelineConfig.model_validate({"sieve": {"claim_judge": "llm-logprob"}})
    assert independence_note(sieve_llm_verifier, None) is not None
    assert independence_note(sieve_llm_verifier, "qwen2.5-7b") is None
    assert independence_note(PipelineConfig(), None) is None


def test_summary_counts_only_applicable_checks() -> None:
    judge = GoldEvidenceJudge()
    verdicts = [
        judge.judge("Opened in 1889.", EVIDENCE, ["1889"]),
        judge.judge("Opened in 1890.", EVIDENCE, ["1889"]),
        judge.judge("It is tall.", EVIDENCE),
    ]
    s = faithfulness_summary(verdicts)
    assert s["faithful"] == {"share": 0.5, "n": 2}
    assert s["values_cited"] == {"share": 0.5, "n": 2}
    assert s["cited_has_gold"] == {"share": 1.0, "n": 2}
    assert s["judge"].startswith("independent")
