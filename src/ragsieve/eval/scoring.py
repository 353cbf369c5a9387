"""Score cached evaluation records: accuracy, coverage, risk–coverage, faithfulness, citations, cost.

Definitions (per configuration, over the items every configuration answered):

- ``accuracy``: share of answerable questions answered with a gold answer contained in the
  answer (normalised containment); an abstention on an answerable question counts as wrong.
  ``exact_match`` and ``token_f1`` likewise (abstention scores 0).
- ``coverage``: share of all questions not abstained on. ``answered_accuracy``: containment
  accuracy on the answerable questions that were answered.
- outcome: right when an answerable question is answered correctly or an unanswerable one is
  abstained on. ``aurc`` is the area under the risk–coverage curve of the outcomes ranked by
  confidence (abstentions last; see :mod:`ragsieve.eval.selective`).
- ``selective_accuracy_matched``: selective accuracy at the coverage ``min(own, baseline's)``,
  for this configuration and for the baseline, so configurations that abstain are compared with
  the baseline at the same coverage; the paired bootstrap interval of the difference uses the
  same resampled items for both.
- ``faithfulness``: over answered questions, the mean share of answer sentences the fixed judge
  finds supported by the evidence they cite; an answer given without evidence (closed book)
  scores 0. ``faithfulness_grounded``: the same over answers that used evidence only.
- citation precision/recall (only when gold evidence ids are given): cited chunks whose id or
  document id is gold, over cited chunks; gold ids cited, over gold ids.
- cost: LLM calls, prompt + completion tokens and seconds per question (model loading excluded).

Intervals are 95% percentile bootstrap intervals over questions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ragsieve.answers import contains_answer, exact_match, token_f1
from ragsieve.eval.data import QAItem
from ragsieve.eval.selective import (
    aurc,
    bootstrap_interval,
    paired_bootstrap_interval,
    rank_scores,
    risk_coverage_curve,
    selective_accuracy,
)
from ragsieve.verify.claims import strip_markers

__all__ = ["ItemScores", "score_all", "score_records"]

Stat = Callable[[np.ndarray], float]


class ItemScores:
    """Per-question vectors of one configuration, aligned with the item list."""

    def __init__(self, items: Sequence[QAItem], records: Sequence[dict[str, Any]]) -> None:
        if len(items) != len(records):
            raise ValueError(f"{len(items)} items but {len(records)} records; pass one record per item")
        n = len(items)
        self.n = n
        self.answerable = np.array([i.answerable for i in items], dtype=bool)
        self.abstained = np.array([bool(r["abstained"]) for r in records], dtype=bool)
        answered = ~self.abstained
        # Citation markers are not part of the answer's wording.
        texts = [strip_markers(r["answer"]) for r in records]
        self.contains = np.array(
            [bool(i.answers) and contains_answer(t, i.answers) for i, t in zip(items, texts, strict=True)]
        )
        self.em = np.array(
            [bool(i.references) and exact_match(t, i.references) for i, t in zip(items, texts, strict=True)]
        )
        self.f1 = np.array(
            [token_f1(t, i.references) if i.references else 0.0 for i, t in zip(items, texts, strict=True)]
        )
        self.correct = answered & self.contains
        self.outcome = np.where(self.answerable, self.correct, self.abstained)
        self.scores = np.array(rank_scores([r["confidence"] for r in records], list(self.abstained)), dtype=float)
        faith = np.full(n, np.nan)
        grounded = np.full(n, np.nan)
        for j, r in enumerate(records):
            if r["abstained"] or r.get("error"):
                continue
            rows = r.get("faithfulness")
            if rows:
                faith[j] = grounded[j] = float(np.mean([bool(x["supported"]) for x in rows]))
            elif not r.get("evidence_ids"):
                # Answered without evidence (closed book): no sentence is supported by cited evidence.
                faith[j] = 0.0
        self.faithfulness = faith
        self.faithfulness_grounded = grounded
        prec, rec = np.full(n, np.nan), np.full(n, np.nan)
        for j, (item, r) in enumerate(zip(items, records, strict=True)):
            if not item.gold_ids or r["abstained"]:
                continue
            gold = set(item.gold_ids)
            cited = list(r["cited_ids"])
            docs = list(r.get("cited_doc_ids", [])) + [""] * (len(cited) - len(r.get("cited_doc_ids", [])))
            if cited:
                prec[j] = sum(c in gold or d in gold for c, d in zip(cited, docs, strict=True)) / len(cited)
            found = set(cited) | set(docs)
            rec[j] = sum(g in found for g in gold) / len(gold)
        self.citation_precision, self.citation_recall = prec, rec
        self.llm_calls = np.array([r["llm_calls"] for r in records], dtype=float)
        self.tokens = np.array([r["prompt_tokens"] + r["completion_tokens"] for r in records], dtype=float)
        self.seconds = np.array([r["seconds"] for r in records], dtype=float)
        self.errors = sum(1 for r in records if r.get("error"))

    # ------------------------------------------------------------------ statistics over an index sample
    @staticmethod
    def _mean(values: np.ndarray, mask: np.ndarray | None = None) -> Stat:
        def stat(idx: np.ndarray) -> float:
            v = values[idx]
            if mask is not None:
                v = v[mask[idx]]
            v = v[~np.isnan(v)] if v.dtype.kind == "f" else v
            return float(np.mean(v)) if len(v) else float("nan")

        return stat

    def stats(self) -> dict[str, Stat]:
        answered = ~self.abstained
        return {
            "accuracy": self._mean(self.correct.astype(float), self.answerable),
            "exact_match": self._mean((answered & self.em).astype(float), self.answerable),
            "token_f1": self._mean(np.where(answered, self.f1, 0.0), self.answerable),
            "coverage": self._mean(answered.astype(float)),
            "answered_accuracy": self._mean(self.contains.astype(float), self.answerable & answered),
            "abstain_answerable": self._mean(self.abstained.astype(float), self.answerable),
            "abstain_unanswerable": self._mean(self.abstained.astype(float), ~self.answerable),
            "aurc": lambda idx: aurc(list(self.outcome[idx]), list(self.scores[idx])),
            "faithfulness": self._mean(self.faithfulness),
            "faithfulness_grounded": self._mean(self.faithfulness_grounded),
            "citation_precision": self._mean(self.citation_precision),
            "citation_recall": self._mean(self.citation_recall),
            "llm_calls_per_question": self._mean(self.llm_calls),
            "tokens_per_question": self._mean(self.tokens),
            "seconds_per_question": self._mean(self.seconds),
        }

    def selective_at(self, coverage: float) -> Stat:
        return lambda idx: selective_accuracy(list(self.outcome[idx]), list(self.scores[idx]), coverage)


def _clean(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)


def score_records(
    items: Sequence[QAItem],
    records: Sequence[dict[str, Any]],
    baseline: Sequence[dict[str, Any]] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Every metric of one configuration with 95% intervals, and paired differences vs ``baseline``."""
    own = ItemScores(items, records)
    everything = np.arange(own.n)
    out: dict[str, Any] = {"n": own.n, "n_answerable": int(own.answerable.sum()), "errors": own.errors}
    intervals: dict[str, list[float | None]] = {}
    for name, stat in own.stats().items():
        out[name] = _clean(stat(everything))
        if out[name] is None:
            continue
        lo, hi = bootstrap_interval(own.n, stat, n_boot, seed)
        intervals[name] = [_clean(lo), _clean(hi)]
    out["intervals"] = intervals
    cov, risk = risk_coverage_curve(list(own.outcome), list(own.scores))
    out["risk_coverage"] = {"coverage": [round(float(c), 4) for c in cov], "risk": [round(float(r), 4) for r in risk]}
    if baseline is not None:
        base = ItemScores(items, baseline)
        own_cov = float((~own.abstained).mean()) if own.n else 0.0
        base_cov = float((~base.abstained).mean()) if own.n else 0.0
        matched = max(min(own_cov, base_cov), 1.0 / max(own.n, 1))
        sel_own, sel_base = own.selective_at(matched), base.selective_at(matched)
        lo, hi = paired_bootstrap_interval(own.n, sel_own, sel_base, n_boot, seed)
        diffs: dict[str, Any] = {
            "selective_accuracy_matched": {
                "coverage": round(matched, 4),
                "value": _clean(sel_own(everything)),
                "baseline": _clean(sel_base(everything)),
                "difference": _clean(sel_own(everything) - sel_base(everything)),
                "interval": [_clean(lo), _clean(hi)],
            }
        }
        own_stats, base_stats = own.stats(), base.stats()
        for name in (
            "accuracy", "answered_accuracy", "aurc", "faithfulness", "faithfulness_grounded", "seconds_per_question"
        ):
            a, b = own_stats[name](everything), base_stats[name](everything)
            if math.isnan(a) or math.isnan(b):
                continue
            lo, hi = paired_bootstrap_interval(own.n, own_stats[name], base_stats[name], n_boot, seed)
            diffs[name] = {"difference": _clean(a - b), "interval": [_clean(lo), _clean(hi)]}
        out["vs_baseline"] = diffs
        out["selective_accuracy_matched"] = diffs["selective_accuracy_matched"]["value"]
    return out


def score_all(
    items: Sequence[QAItem],
    records: dict[str, list[dict[str, Any]]],
    baseline: str | None = "plain",
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """Scores of every configuration; paired differences against ``baseline`` when it was run."""
    base = records.get(baseline) if baseline else None
    return {
        name: score_records(items, recs, None if name == baseline else base, n_boot, seed)
        for name, recs in records.items()
    }
