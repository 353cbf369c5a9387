"""Fair baseline confidences (real retrieval scores, log-probs from a fake LLM) and the fitted combiner."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from tests.helpers import HashEmbedder, copy_corpus

from ragsieve.config import PipelineConfig
from ragsieve.errors import InputError, LLMOutputError
from ragsieve.eval.baselines import (
    BaselineScorer,
    answer_logprob,
    baseline_rows,
    best_baseline,
    normalised_top_score,
)
from ragsieve.eval.confidence import (
    ConfidenceCombiner,
    answer_signals,
    paired_selective_difference,
    signal_report,
)
from ragsieve.index import Index
from ragsieve.llm.base import ContinuationScore
from ragsieve.types import Answer, Chunk, ClaimVerdict, SearchHit, Trace


class LogprobLLM:
    """Scores a continuation with a known log-probability: -0.25 per word; records the prompts."""

    model_name = "fake-logprob"

    def __init__(self, fail: bool = False) -> None:
        self.prompts: list[Any] = []
        self.fail = fail

    def warm_up(self) -> None:
        pass

    def continuation_logprobs(self, prompt: Any, continuations: list[str]) -> list[ContinuationScore]:
        if self.fail:
            raise LLMOutputError("this server returns no prompt log-probabilities; use llama.cpp")
        self.prompts.append(prompt)
        return [ContinuationScore(-0.25 * len(c.split()) - 1.0, len(c.split())) for c in continuations]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("baselines")
    return Index.build(copy_corpus(root), root / "idx", embedder=HashEmbedder())


def hit(scores: dict[str, float], score: float, rank: int = 1) -> SearchHit:
    return SearchHit(Chunk(f"c{rank}", "text", "d", "s"), score, rank, scores)


# ------------------------------------------------------------------ retrieval normalisation
def test_rrf_score_is_divided_by_its_maximum() -> None:
    first_everywhere = hit({"fused": 2 / 61}, 2 / 61)
    first_and_third = hit({"fused": 1 / 61 + 1 / 63}, 1 / 61 + 1 / 63)
    assert normalised_top_score([first_everywhere], "hybrid", "rrf", 60) == pytest.approx(1.0)
    assert normalised_top_score([first_and_third], "hybrid", "rrf", 60) == pytest.approx((1 / 61 + 1 / 63) * 61 / 2)
    one_list_only = hit({"fused": 1 / 61}, 1 / 61)
    assert normalised_top_score([one_list_only], "hybrid", "rrf", 60) == pytest.approx(0.5)


def test_dense_sparse_and_weighted_normalisation() -> None:
    assert normalised_top_score([hit({"dense": 0.62}, 0.62)], "dense") == pytest.approx(0.62)
    assert normalised_top_score([hit({"dense": -0.2}, -0.2)], "dense") == 0.0
    assert normalised_top_score([hit({"sparse": 3.0}, 3.0)], "sparse") == pytest.approx(0.75)
    assert normalised_top_score([hit({"fused": 0.8}, 0.8)], "hybrid", "weighted") == pytest.approx(0.8)
    assert normalised_top_score([], "dense") is None
    # the top-ranked hit counts, whatever the list order
    assert normalised_top_score([hit({"dense": 0.1}, 0.1, 2), hit({"dense": 0.9}, 0.9, 1)], "dense") == 0.9


# ------------------------------------------------------------------ scorer on a real index
def test_scorer_uses_real_retrieval_scores_and_llm_logprobs(index: Index) -> None:
    cfg = PipelineConfig(pipeline="plain", index_dir="unused")
    llm = LogprobLLM()
    scorer = BaselineScorer(cfg, index=index, llm=llm)
    question = "What do mitochondria produce?"
    hits = index.search(question, k=cfg.retrieval.k, mode=cfg.retrieval.mode, retrieval=cfg.retrieval)
    record = {
        "question": question,
        "answer": "Mitochondria produce ATP [1].",
        "abstained": False,
        "evidence_ids": [h.chunk.id for h in hits[:2]],
    }
    signals = scorer.signals(record)
    assert signals["retrieval"] == pytest.approx(hits[0].scores["fused"] * (cfg.retrieval.rrf_k + 1) / 2)
    assert 0.0 < signals["retrieval"] <= 1.0
    assert signals["logprob"] == pytest.approx((-0.25 * 4 - 1.0) / 4)
    # scored under the prompt it was generated from: the two recorded evidence passages, in order
    user = llm.prompts[-1][-1]["content"]
    assert hits[0].chunk.text[:40] in user and hits[1].chunk.text[:40] in user
    assert "[3]" not in user
    # an abstention has no answer to score; its retrieval score is still there
    assert scorer.signals({**record, "abstained": True})["logprob"] is None


def test_no_retrieval_answer_is_scored_closed_book_and_backend_failures_give_none() -> None:
    llm = LogprobLLM()
    assert answer_logprob(llm, "Who?", "Ada Lovelace", []) == pytest.approx((-0.5 - 1.0) / 2)
    assert "Evidence:" not in llm.prompts[-1][-1]["content"]
    assert answer_logprob(llm, "Who?", "   ", []) is None
    assert answer_logprob(LogprobLLM(fail=True), "Who?", "Ada", []) is None


# ------------------------------------------------------------------ baseline rows
def synthetic_signals(n: int, seed: int) -> tuple[list[dict[str, float | None]], np.ndarray]:
    rng = np.random.default_rng(seed)
    quality = rng.uniform(size=n)
    correct = rng.uniform(size=n) < quality
    rows: list[dict[str, float | None]] = [
        {"retrieval": float(np.clip(q + rng.normal(0, 0.15), 0, 1)), "logprob": float(rng.normal(-1.0, 0.5))}
        for q in quality
    ]
    return rows, correct


def test_baseline_rows_and_best_baseline_use_only_the_calibration_split() -> None:
    rows, correct = synthetic_signals(400, 0)
    rows[5]["logprob"] = None
    records = [{"answer": "x", "abstained": i == 7, "confidence": None} for i in range(400)]
    cal = np.arange(200)
    out, combiner = baseline_rows(records, rows, correct, cal)
    assert set(out) == {"plain+retrieval", "plain+logprob", "plain+combined"}
    assert out["plain+logprob"][0]["confidence"] == pytest.approx(np.exp(rows[0]["logprob"]))
    assert out["plain+logprob"][5]["confidence"] is None
    assert out["plain+retrieval"][3]["confidence"] == rows[3]["retrieval"]
    assert out["plain+combined"][7]["abstained"]
    assert combiner is not None and combiner.feature_names_ == ["retrieval", "logprob"]
    # labels outside the calibration split do not change the fit
    flipped = correct.copy()
    flipped[200:] = ~flipped[200:]
    again, _ = baseline_rows(records, rows, flipped, cal)
    assert [r["confidence"] for r in again["plain+combined"]] == [r["confidence"] for r in out["plain+combined"]]
    outcomes = correct & ~np.array([r["abstained"] for r in records])
    assert best_baseline(outcomes, out, cal) in ("plain+retrieval", "plain+combined")
    with pytest.raises(InputError):
        best_baseline(outcomes, {}, cal)
    # rows of two systems, each with its own outcomes: a row whose system is always right wins
    always = {"other+retrieval": out["plain+logprob"]}
    mixed = {**out, **always}
    per_row = {name: outcomes for name in out} | {"other+retrieval": np.ones(400, bool)}
    assert best_baseline(per_row, mixed, cal) == "other+retrieval"


# ------------------------------------------------------------------ combiner
def test_combiner_matches_sklearn_and_round_trips_as_plain_arrays() -> None:
    from sklearn.linear_model import LogisticRegression

    rows, correct = synthetic_signals(300, 1)
    model = ConfidenceCombiner(features=["retrieval", "logprob"]).fit(rows, correct)
    x = np.array([[r["retrieval"], r["logprob"]] for r in rows])
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    reference = LogisticRegression(max_iter=1000).fit(z, correct).predict_proba(z)[:, 1]
    np.testing.assert_allclose(model.predict_proba(rows), reference, atol=1e-6)
    data = json.loads(json.dumps(model.to_dict()))
    again = ConfidenceCombiner.from_dict(data)
    np.testing.assert_allclose(again.predict_proba(rows), model.predict_proba(rows))
    assert model.coef_[0] > 0  # the informative signal carries positive weight


def test_combiner_skips_missing_features() -> None:
    rows = [{"support": s, "judge": None} for s in np.linspace(0, 1, 40)]
    correct = np.linspace(0, 1, 40) > 0.5
    model = ConfidenceCombiner(features=["support", "judge", "agreement"]).fit(rows, correct)
    assert model.feature_names_ == ["support"]
    p = model.predict_proba([{"support": 0.9}, {"support": 0.1, "agreement": 0.3}, {}])
    assert p[0] > 0.5 > p[1]
    assert p[2] == pytest.approx(1 / (1 + np.exp(-model.intercept_)))  # nothing known: the mean's score
    with pytest.raises(InputError, match="both kinds"):
        ConfidenceCombiner().fit(rows, np.ones(40, bool))
    with pytest.raises(InputError, match="not fitted"):
        ConfidenceCombiner().predict_proba(rows)
    with pytest.raises(InputError, match="no signal"):
        ConfidenceCombiner(features=["x"]).fit(rows, correct)


def test_signal_report_ranks_the_informative_signals_first() -> None:
    rows, correct = synthetic_signals(400, 2)
    model = ConfidenceCombiner().fit(rows[:200], correct[:200])
    report = signal_report(
        correct[200:],
        {
            "retrieval": [r["retrieval"] for r in rows[200:]],
            "logprob": [r["logprob"] for r in rows[200:]],
            "combined": list(model.predict_proba(rows[200:])),
        },
        n_boot=200,
    )
    assert list(report)[-1] == "logprob"  # pure noise ranks worst
    assert report["retrieval"]["aurc"] < report["logprob"]["aurc"]
    lo, hi = report["combined"]["interval"]
    assert lo <= report["combined"]["aurc"] <= hi
    # a missing (None) log-prob ranks below every observed one, not at -1
    ranked = signal_report([True, False, True], {"logprob": [-3.0, None, -0.5]}, n_boot=10)
    assert ranked["logprob"]["observed"] == 2 and ranked["logprob"]["aurc"] < 0.34


def test_paired_selective_difference_detects_a_better_ranking() -> None:
    rows, correct = synthetic_signals(600, 3)
    informative = [r["retrieval"] for r in rows]
    noise = [r["logprob"] for r in rows]
    diff = paired_selective_difference(correct, informative, correct, noise, coverage=0.5, n_boot=300)
    assert diff["difference"] > 0 and diff["interval"][0] > 0
    same = paired_selective_difference(correct, informative, correct, informative, coverage=0.5, n_boot=50)
    assert same["difference"] == 0 and same["interval"] == [0.0, 0.0]


def test_answer_signals_read_the_trace_and_claims() -> None:
    trace = Trace("q")
    trace.decide("judge", "a", "kept", "relevant", 0.8)
    trace.decide("judge", "b", "kept", "relevant", 0.6)
    trace.decide("judge", "z", "dropped", "irrelevant", 0.95)  # not cited
    trace.record("agreement", score=0.7)
    claims = [ClaimVerdict("s1", ["a"], True, 0.9, "lex"), ClaimVerdict("s2", ["b"], False, 0.3, "lex")]
    answer = Answer("q", "s1 s2", [], ["a", "b"], trace, claims=claims)
    signals = answer_signals(answer, logprob=-0.4, retrieval=0.5)
    assert signals == {"judge": 0.8, "support": pytest.approx(0.6), "agreement": 0.7, "logprob": -0.4, "retrieval": 0.5}
    bare = answer_signals(Answer("q", "x", [], [], Trace("q")))
    assert bare == {}
