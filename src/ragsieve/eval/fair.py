"""What ``ragsieve eval`` reports beyond the per-configuration scores: the sieve against fair baselines.

For the evaluated records of every configuration, :func:`fair_report` computes on one seeded
calibration/test split of the questions (the calibration part is used for every fit and choice,
the test part for every reported figure):

- ``baselines``: plain RAG and no retrieval ranked by the confidences any RAG user can compute
  (:mod:`ragsieve.eval.baselines`: normalised top retrieval score, the answer's mean token
  log-probability under the model, and both combined by a logistic fit on the calibration part),
  each with its AURC on the test part and a 95% bootstrap interval;
- ``best_baseline``: the baseline with the lowest AURC on the calibration part;
- ``vs_best_baseline``: per configuration that has a confidence of its own, its selective
  accuracy minus the best baseline's at the configuration's own coverage on the test part, with
  the paired bootstrap interval;
- ``faithfulness``: every configuration's answers under the independent judge
  (:class:`ragsieve.eval.faithfulness.GoldEvidenceJudge`) and, when given, an LLM judge;
- ``signals``: each confidence signal of the sieve's answers and their fitted combination
  ranked by AURC on the test part (:func:`ragsieve.eval.confidence.signal_report`);
- ``calibration``: the calibrated-abstention held-out report of the sieve's confidence
  (:func:`ragsieve.calibrate.held_out_report`: threshold on the calibration part, realised risk
  with its Wilson interval on the test part, the split simulation).

Example:
    >>> report = fair_report(items, records, config, scorer=BaselineScorer(config))  # doctest: +SKIP
    >>> report["vs_best_baseline"]["sieve"]["difference"]  # doctest: +SKIP
    0.083
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ragsieve.errors import InputError

logger = logging.getLogger(__name__)

__all__ = ["OLD_BASELINE_LABEL", "fair_report", "split_indices"]

# How the per-configuration "vs_baseline" figures of ``eval`` are labelled from now on.
OLD_BASELINE_LABEL = "vs plain RAG without a confidence"
BASELINE_SYSTEMS: tuple[str, ...] = ("plain", "no-retrieval")


def split_indices(n: int, cal_frac: float = 0.5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The seeded calibration and test indices (sorted); the same split as
    :func:`ragsieve.calibrate.held_out_report` with the same ``seed`` and ``cal_frac``."""
    n_cal = int(round(cal_frac * n))
    if n_cal < 1 or n_cal >= n:
        raise InputError(f"{n} questions cannot be split {cal_frac:.2f}/{1 - cal_frac:.2f}; evaluate more questions")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[:n_cal]), np.sort(perm[n_cal:])


def _ranking(records: Sequence[dict[str, Any]], idx: np.ndarray) -> list[float]:
    from ragsieve.eval.selective import rank_scores

    return rank_scores([records[i]["confidence"] for i in idx], [bool(records[i]["abstained"]) for i in idx])


def _aurc_with_interval(outcome: np.ndarray, scores: list[float], n_boot: int, seed: int) -> dict[str, Any]:
    from ragsieve.eval.selective import aurc, bootstrap_interval, risk_coverage_curve

    o = np.asarray(outcome, dtype=bool)
    lo, hi = bootstrap_interval(len(o), lambda idx: aurc(list(o[idx]), [scores[i] for i in idx]), n_boot, seed)
    cov, risk = risk_coverage_curve(list(o), scores)
    return {"aurc": round(aurc(list(o), scores), 4), "aurc_interval": [round(lo, 4), round(hi, 4)],
            "right": round(float(o.mean()), 4) if len(o) else None,
            "risk_coverage": {"coverage": [round(float(c), 4) for c in cov],
                              "risk": [round(float(r), 4) for r in risk]}}  # fmt: skip


def _faithfulness(
    items: Sequence[Any], records: Sequence[dict[str, Any]], judge: Any, text_of: Callable[[str], str]
) -> dict[str, Any]:
    from ragsieve.eval.faithfulness import faithfulness_summary

    verdicts = []
    for item, rec in zip(items, records, strict=True):
        if rec["abstained"] or rec.get("error"):
            continue
        cited = [text_of(c) for c in rec.get("cited_ids") or []]
        verdicts.append(judge.judge(str(rec["answer"]), cited, list(item.answers) if item.answerable else []))
    return faithfulness_summary(verdicts)


def fair_report(
    items: Sequence[Any],
    records: Mapping[str, Sequence[dict[str, Any]]],
    *,
    scorer: Any,
    text_of: Callable[[str], str] | None = None,
    llm_judge: Any = None,
    risk: float = 0.1,
    delta: float = 0.1,
    cal_frac: float = 0.5,
    seed: int = 0,
    n_splits: int = 200,
    n_boot: int = 1000,
) -> dict[str, Any]:
    """The fair comparison of every configuration in ``records`` (see the module docstring).

    ``scorer``: a :class:`ragsieve.eval.baselines.BaselineScorer` (or anything with
    ``signals(record) -> {"retrieval": ..., "logprob": ...}``); ``text_of`` maps a chunk id to its
    text (default: ``scorer.index.get(id).text``). ``risk``/``delta``: the calibration target.
    """
    from ragsieve.calibrate import held_out_report
    from ragsieve.eval.baselines import baseline_rows, best_baseline
    from ragsieve.eval.calibrate_cli import calibration_labels
    from ragsieve.eval.confidence import ConfidenceCombiner, paired_selective_difference, signal_report
    from ragsieve.eval.faithfulness import GoldEvidenceJudge
    from ragsieve.eval.scoring import ItemScores
    from ragsieve.eval.selective import abstention_at

    n = len(items)
    cal, test = split_indices(n, cal_frac, seed)
    if text_of is None:
        text_of = lambda cid: scorer.index.get(cid).text  # noqa: E731 - a one-line default
    out: dict[str, Any] = {
        "split": {"seed": seed, "calibration": len(cal), "test": len(test),
                  "note": "every fit and choice on the calibration part; every figure on the test part"},
    }  # fmt: skip

    # ---------------------------------------------------------------- baselines
    # signals recorded at answer time (``run_eval(..., baseline_signals=True)``) are used as they are
    signals: dict[str, list[dict[str, float | None]]] = {
        name: [r.get("baseline_signals") or scorer.signals(r) for r in recs] for name, recs in records.items()
    }
    rows: dict[str, list[dict[str, Any]]] = {}
    for name in BASELINE_SYSTEMS:
        if name not in records:
            continue
        _, correct = calibration_labels(items, records[name])
        made, _ = baseline_rows(records[name], signals[name], correct, cal, prefix=name)
        rows.update(made)
    outcomes = {name: ItemScores(items, recs).outcome for name, recs in {**records, **rows}.items()}
    baselines: dict[str, Any] = {}
    for name in rows:
        baselines[name] = _aurc_with_interval(outcomes[name][test], _ranking(rows[name], test), n_boot, seed)
    out["baselines"] = baselines
    best = best_baseline({k: outcomes[k] for k in rows}, rows, cal) if rows else None
    out["best_baseline"] = best

    # ---------------------------------------------------------------- vs the best baseline
    vs: dict[str, Any] = {}
    test_answerable = [bool(items[i].answerable) for i in test]
    if best is not None:
        best_scores = _ranking(rows[best], test)
        for name, system in records.items():
            if name in BASELINE_SYSTEMS or all(r.get("confidence") is None for r in system):
                continue
            own_scores = _ranking(system, test)
            coverage = max(float(np.mean([not system[i]["abstained"] for i in test])), 1.0 / len(test))
            diff = paired_selective_difference(
                list(outcomes[name][test]), own_scores, list(outcomes[best][test]), best_scores,
                coverage=coverage, n_boot=n_boot, seed=seed,
            )  # fmt: skip
            vs[name] = {"baseline": best, **diff,
                        **_aurc_with_interval(outcomes[name][test], own_scores, n_boot, seed)}  # fmt: skip
            if any(test_answerable) and not all(test_answerable):
                # where each ranking's abstentions fall at the same coverage: a confidence that
                # tells near misses from answerable questions abstains on the first, not the second
                vs[name]["abstention_at_coverage"] = {
                    name: abstention_at(test_answerable, own_scores, coverage),
                    best: abstention_at(test_answerable, best_scores, coverage),
                    "unanswerable_n": len(test_answerable) - sum(test_answerable),
                    "answerable_n": sum(test_answerable),
                }
    out["vs_best_baseline"] = vs

    # ---------------------------------------------------------------- independent faithfulness
    gold_judge = GoldEvidenceJudge()
    faith: dict[str, Any] = {"independent": {}, "llm_judge": None}
    for name in records:
        faith["independent"][name] = _faithfulness(items, records[name], gold_judge, text_of)
    if llm_judge is not None:
        llm_judge.warm_up()
        faith["llm_judge"] = {name: _faithfulness(items, records[name], llm_judge, text_of) for name in records}
    out["faithfulness"] = faith

    # ---------------------------------------------------------------- the sieve's confidence
    if "sieve" in records:
        sieve = records["sieve"]
        rows_sig = [{**(r.get("signals") or {}), **{k: v for k, v in s.items() if v is not None}}
                    for r, s in zip(sieve, signals["sieve"], strict=True)]  # fmt: skip
        answered = np.array([not r["abstained"] and not r.get("error") for r in sieve])
        conf, correct = calibration_labels(items, sieve)
        named: dict[str, list[float | None]] = {
            "confidence": [c for c in conf],
            **{k: [row.get(k) if answered[i] else None for i, row in enumerate(rows_sig)]
               for k in sorted({k for row in rows_sig for k in row})},
        }  # fmt: skip
        cal_answered = [i for i in cal if answered[i]]
        try:
            combiner = ConfidenceCombiner().fit([rows_sig[i] for i in cal_answered], correct[cal_answered])
            probs = combiner.predict_proba(rows_sig)
            named["combined"] = [float(p) if answered[i] else None for i, p in enumerate(probs)]
            out["combiner"] = combiner.to_dict()
        except InputError as exc:
            logger.info("no combined confidence: %s", exc)
            out["combiner"] = None
        o = outcomes["sieve"][test]
        out["signals"] = signal_report(list(o), {k: [v[i] for i in test] for k, v in named.items()}, n_boot, seed)
        try:
            out["calibration"] = held_out_report(conf, correct, risk, delta, cal_frac, seed, n_splits)
        except InputError as exc:
            out["calibration"] = {"error": str(exc)}
    return out
