"""Selective-prediction metrics: risk–coverage curves, AURC, matched-coverage accuracy, bootstrap.

Every item has an *outcome* (``True`` when the pipeline's behaviour on it was right: a correct
answer to an answerable question, or an abstention on an unanswerable one) and a *rank score*:
the answer's confidence, with abstentions ranked below every answer (the pipeline itself said
not to trust them). Moving the abstention threshold down the ranking traces the risk–coverage
curve: at coverage ``k/n`` the risk is the error rate among the ``k`` best-ranked items.

Ties (equal confidence, or no confidence at all) are resolved by expectation over a random
order: a pipeline that gives every answer the same confidence cannot rank, and its selective
accuracy at any coverage is its overall accuracy, not whatever the input order happens to be.

Example:
    >>> from ragsieve.eval.selective import aurc, selective_accuracy
    >>> outcomes, scores = [True, False, True, False], [0.9, 0.8, 0.7, None]
    >>> selective_accuracy(outcomes, scores, 0.5)
    0.5
    >>> round(aurc(outcomes, scores), 4)
    0.3333
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ragsieve.calibrate import wilson_interval  # noqa: F401  (re-exported: the eval reports use it)

__all__ = [
    "NO_CONFIDENCE",
    "abstention_at",
    "aurc",
    "bootstrap_interval",
    "expected_correct_at",
    "paired_bootstrap_interval",
    "rank_scores",
    "risk_coverage_curve",
    "selective_accuracy",
    "wilson_interval",
]

# Rank of an answer without a confidence: below every real confidence in [0, 1], above abstentions.
NO_CONFIDENCE = -1.0
ABSTAINED = -math.inf


def rank_scores(confidences: Sequence[float | None], abstained: Sequence[bool]) -> list[float]:
    """Ranking scores: confidence for answers (``NO_CONFIDENCE`` if missing), ``-inf`` for abstentions."""
    return [
        ABSTAINED if a else (NO_CONFIDENCE if c is None else float(c))
        for c, a in zip(confidences, abstained, strict=True)
    ]


def _groups(outcomes: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sizes and correct counts of tie groups, best score first."""
    order = np.argsort(-scores, kind="stable")
    s, o = scores[order], outcomes[order]
    bounds = np.flatnonzero(np.r_[True, s[1:] != s[:-1], True])
    sizes = np.diff(bounds)
    correct = np.add.reduceat(o.astype(float), bounds[:-1]) if len(o) else np.zeros(0)
    return sizes, correct


def _as_arrays(outcomes: Sequence[bool], scores: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray]:
    o = np.asarray(outcomes, dtype=bool)
    s = np.asarray([NO_CONFIDENCE if x is None else x for x in scores], dtype=float)
    if o.shape != s.shape:
        raise ValueError(f"{len(o)} outcomes but {len(s)} scores; pass one score per outcome")
    return o, s


def expected_correct_at(outcomes: Sequence[bool], scores: Sequence[float | None]) -> np.ndarray:
    """``E[correct among the k best-ranked]`` for k = 0..n, ties broken uniformly at random."""
    o, s = _as_arrays(outcomes, scores)
    sizes, correct = _groups(o, s)
    out = np.zeros(len(o) + 1)
    k = 0
    done = 0.0
    for size, corr in zip(sizes, correct, strict=True):
        steps = np.arange(1, size + 1)
        out[k + 1 : k + size + 1] = done + steps * (corr / size)
        k += int(size)
        done += float(corr)
    return out


def _answered_at(n: int, coverage: float) -> int:
    """How many of ``n`` best-ranked items a ``coverage`` share answers (at least one)."""
    return min(n, max(1, round(coverage * n)))


def abstention_at(answerable: Sequence[bool], scores: Sequence[float | None], coverage: float) -> dict[str, float]:
    """Expected abstention on the unanswerable and on the answerable items when only the best-ranked
    ``coverage`` share is answered (ties broken uniformly at random, as in
    :func:`selective_accuracy`): how a confidence's abstentions fall between the two kinds of
    question at a given coverage. A kind with no items gets NaN."""
    flags = np.asarray(answerable, dtype=bool)
    n = len(flags)
    if n == 0:
        return {"unanswerable": float("nan"), "answerable": float("nan")}
    k = _answered_at(n, coverage)
    kept_answerable = float(expected_correct_at(list(flags), scores)[k])
    n_answerable = int(flags.sum())
    n_unanswerable = n - n_answerable
    kept_unanswerable = k - kept_answerable
    return {
        "unanswerable": 1.0 - kept_unanswerable / n_unanswerable if n_unanswerable else float("nan"),
        "answerable": 1.0 - kept_answerable / n_answerable if n_answerable else float("nan"),
    }


def risk_coverage_curve(outcomes: Sequence[bool], scores: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray]:
    """Coverage ``k/n`` and risk (expected error rate among the top k) for k = 1..n."""
    n = len(outcomes)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    correct = expected_correct_at(outcomes, scores)[1:]
    k = np.arange(1, n + 1)
    return k / n, 1.0 - correct / k


def aurc(outcomes: Sequence[bool], scores: Sequence[float | None]) -> float:
    """Area under the risk–coverage curve (mean risk over k = 1..n); lower is better."""
    _, risk = risk_coverage_curve(outcomes, scores)
    return float(risk.mean()) if len(risk) else float("nan")


def selective_accuracy(outcomes: Sequence[bool], scores: Sequence[float | None], coverage: float) -> float:
    """Expected accuracy among the best-ranked ``coverage`` share of items (at least one item)."""
    n = len(outcomes)
    if n == 0:
        return float("nan")
    k = _answered_at(n, coverage)
    return float(expected_correct_at(outcomes, scores)[k] / k)


def bootstrap_interval(
    n: int, statistic: Callable[[np.ndarray], float], n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of ``statistic(indices)`` over item resamples (NaN resamples skipped)."""
    if n == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    values = np.array([statistic(rng.integers(0, n, n)) for _ in range(n_boot)], dtype=float)
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return float("nan"), float("nan")
    alpha = (1.0 - level) / 2
    return float(np.quantile(values, alpha)), float(np.quantile(values, 1 - alpha))


def paired_bootstrap_interval(
    n: int,
    statistic_a: Callable[[np.ndarray], float],
    statistic_b: Callable[[np.ndarray], float],
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Interval of ``a - b`` where both statistics see the same resampled items each round."""
    return bootstrap_interval(n, lambda idx: statistic_a(idx) - statistic_b(idx), n_boot, seed, level)


