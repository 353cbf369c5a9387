"""A confidence worth calibrating: signals that rank right answers above wrong ones, and their fit.

Signals (each in [0, 1] where it comes from the pipeline, higher = more trusted):

- ``judge``: the relevance judge's best score among the evidence the answer cites (the sieve's
  ``judge`` check, read from the trace's decisions);
- ``support``: the verifier's mean support over the answer's sentences (``Answer.claims``);
- ``agreement``: agreement between sources, only when a stage recorded it (a ``conflict`` or
  ``agreement`` trace event with a ``score``); skipped otherwise;
- ``logprob``: the answer's mean token log-probability under the model (natural log, <= 0);
- ``retrieval``: the top retrieval score, normalised (:mod:`ragsieve.eval.baselines`).

:class:`ConfidenceCombiner` is a scikit-learn logistic regression fitted offline on labelled
answers and kept as plain arrays (feature names, per-feature mean and scale, coefficients,
intercept): applying it is numpy arithmetic, saving it is JSON, nothing is unpickled. A feature
missing for an answer (a signal that stage did not compute) is imputed with its training mean,
so it contributes nothing; a feature never observed in training is dropped.

:func:`signal_report` ranks every single signal and the combination by AURC (area under the
risk-coverage curve, :func:`ragsieve.eval.selective.aurc`) with bootstrap intervals;
:func:`paired_selective_difference` compares two confidence rankings at matched coverage.

Example:
    >>> from ragsieve.eval.confidence import ConfidenceCombiner
    >>> rows = [{"support": s, "logprob": -2 + 2 * s} for s in (0.1, 0.2, 0.8, 0.9)]
    >>> model = ConfidenceCombiner().fit(rows, [False, False, True, True])  # doctest: +SKIP
    >>> model.predict_proba([{"support": 0.95}])[0] > 0.5  # doctest: +SKIP
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ragsieve.errors import InputError
from ragsieve.eval.selective import (
    aurc,
    bootstrap_interval,
    paired_bootstrap_interval,
    selective_accuracy,
)

__all__ = [
    "SIGNALS",
    "ConfidenceCombiner",
    "answer_signals",
    "paired_selective_difference",
    "signal_report",
]

SIGNALS: tuple[str, ...] = ("judge", "support", "agreement", "logprob", "retrieval")

Row = Mapping[str, float | None]


def _value(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return None if math.isnan(f) else f


def answer_signals(answer: Any, logprob: float | None = None, retrieval: float | None = None) -> dict[str, float]:
    """The signals an :class:`ragsieve.types.Answer` carries (missing ones left out).

    ``logprob`` and ``retrieval`` come from :mod:`ragsieve.eval.baselines` (they need the model
    and the index); pass them to have every signal in one row.
    """
    out: dict[str, float] = {}
    cited = set(answer.cited_ids) or {h.chunk.id for h in answer.evidence}
    judged = [
        float(d["score"])
        for d in answer.trace.decisions
        if d.get("check") == "judge" and d.get("id") in cited and d.get("score") is not None
    ]
    if judged:
        out["judge"] = max(judged)
    if answer.claims:
        out["support"] = float(np.mean([c.score for c in answer.claims]))
    for event in answer.trace.events:
        if event.get("stage") in ("agreement", "conflict") and event.get("score") is not None:
            out["agreement"] = float(event["score"])
    if logprob is not None:
        out["logprob"] = float(logprob)
    if retrieval is not None:
        out["retrieval"] = float(retrieval)
    return out


class ConfidenceCombiner:
    """Logistic regression over confidence signals, applied with numpy from plain arrays.

    Example:
        >>> rows = [{"a": 0.1}, {"a": 0.3}, {"a": 0.7}, {"a": 0.9}]
        >>> m = ConfidenceCombiner(features=["a", "b"]).fit(rows, [0, 0, 1, 1])  # doctest: +SKIP
        >>> m.feature_names_  # "b" was never observed  # doctest: +SKIP
        ['a']
    """

    def __init__(
        self,
        features: Sequence[str] | None = None,
        C: float = 1.0,  # noqa: N803 - scikit-learn's name for the inverse regularisation strength
        class_weight: str | None = None,
    ) -> None:
        self.features = features
        self.C = C
        self.class_weight = class_weight

    # ------------------------------------------------------------------ matrix building
    def _names(self, rows: Sequence[Row]) -> list[str]:
        if self.features is not None:
            return list(self.features)
        seen: dict[str, None] = {}
        for row in rows:
            for k in row:
                seen.setdefault(k, None)
        return list(seen)

    @staticmethod
    def _matrix(rows: Sequence[Row], names: Sequence[str]) -> np.ndarray:
        x = np.full((len(rows), len(names)), np.nan)
        for i, row in enumerate(rows):
            for j, name in enumerate(names):
                v = _value(row.get(name))
                if v is not None:
                    x[i, j] = v
        return x

    def fit(self, rows: Sequence[Row], correct: Sequence[bool] | np.ndarray) -> ConfidenceCombiner:
        y = np.asarray(correct, dtype=int)
        if len(rows) != len(y):
            raise InputError(f"{len(rows)} signal rows but {len(y)} labels; pass one label per row")
        if len(set(y.tolist())) < 2:
            raise InputError("the labels are all right or all wrong; fit the combiner on answers of both kinds")
        names = self._names(rows)
        x = self._matrix(rows, names)
        observed = ~np.isnan(x)
        keep = [j for j in range(len(names)) if observed[:, j].any()]
        x, names = x[:, keep], [names[j] for j in keep]
        if not names:
            raise InputError("no signal is observed in any row; compute at least one of " + ", ".join(SIGNALS))
        mean = np.nanmean(x, axis=0)
        x = np.where(np.isnan(x), mean, x)
        scale = x.std(axis=0)
        scale[scale < 1e-12] = 1.0
        z = (x - mean) / scale
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=self.C, class_weight=self.class_weight, max_iter=1000).fit(z, y)
        self.feature_names_ = names
        self.mean_ = mean
        self.scale_ = scale
        self.coef_ = model.coef_[0].astype(float)
        self.intercept_ = float(model.intercept_[0])
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise InputError("ConfidenceCombiner is not fitted; call fit(rows, correct) or load one with from_dict")

    def decision_function(self, rows: Sequence[Row]) -> np.ndarray:
        self._check_fitted()
        x = self._matrix(rows, self.feature_names_)
        x = np.where(np.isnan(x), self.mean_, x)
        return ((x - self.mean_) / self.scale_) @ self.coef_ + self.intercept_

    def predict_proba(self, rows: Sequence[Row]) -> np.ndarray:
        """P(right) per row, in [0, 1]: the confidence to rank and calibrate."""
        return 1.0 / (1.0 + np.exp(-self.decision_function(rows)))

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"features": None if self.features is None else list(self.features), "C": self.C,
                "class_weight": self.class_weight}  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": "logistic", "params": self.get_params()}
        if hasattr(self, "coef_"):
            data.update(
                feature_names=list(self.feature_names_),
                mean=self.mean_.tolist(),
                scale=self.scale_.tolist(),
                coef=self.coef_.tolist(),
                intercept=self.intercept_,
            )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConfidenceCombiner:
        model = cls(**data.get("params", {}))
        if "coef" in data:
            names = list(data["feature_names"])
            arrays = [np.asarray(data[k], dtype=float) for k in ("mean", "scale", "coef")]
            if any(a.shape != (len(names),) for a in arrays):
                raise InputError("combiner arrays do not match its feature names; refit it")
            model.feature_names_ = names
            model.mean_, model.scale_, model.coef_ = arrays
            model.intercept_ = float(data["intercept"])
        return model


def _rank(values: Sequence[float | None]) -> list[float | None]:
    """Scores for ranking: a missing one (``None``/NaN) goes below every score, whatever its range
    (a log-probability is negative, so the selective module's ``None`` rank of -1 would not do)."""
    return [-math.inf if v is None or math.isnan(float(v)) else float(v) for v in values]


def _aurc_of(outcomes: np.ndarray, scores: list[float | None]) -> Callable[[np.ndarray], float]:
    return lambda idx: aurc(list(outcomes[idx]), [scores[i] for i in idx])


def signal_report(
    outcomes: Sequence[bool],
    signals: Mapping[str, Sequence[float | None]],
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """AURC (lower is better) of each confidence ranking with a 95% bootstrap interval, and its
    selective accuracy at 50% coverage. ``signals`` maps a name (a single signal or "combined") to
    one score per item; ``None`` ranks below every scored item."""
    o = np.asarray(outcomes, dtype=bool)
    out: dict[str, dict[str, Any]] = {}
    for name, values in signals.items():
        scores = _rank(values)
        if len(scores) != len(o):
            raise InputError(f"signal {name!r} has {len(scores)} scores for {len(o)} outcomes")
        lo, hi = bootstrap_interval(len(o), _aurc_of(o, scores), n_boot, seed)
        out[name] = {
            "aurc": round(aurc(list(o), scores), 4),
            "interval": [round(lo, 4), round(hi, 4)],
            "selective_accuracy_50": round(selective_accuracy(list(o), scores, 0.5), 4),
            "observed": sum(s is not None and math.isfinite(s) for s in scores),
        }
    return dict(sorted(out.items(), key=lambda kv: kv[1]["aurc"]))


def paired_selective_difference(
    outcomes_a: Sequence[bool],
    scores_a: Sequence[float | None],
    outcomes_b: Sequence[bool],
    scores_b: Sequence[float | None],
    coverage: float,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Selective accuracy of ranking A minus ranking B at the same ``coverage``, with the paired
    bootstrap interval (the same resampled questions for both). A and B may be two systems
    (their own outcomes) or two confidences for one system (the same outcomes twice)."""
    oa, ob = np.asarray(outcomes_a, dtype=bool), np.asarray(outcomes_b, dtype=bool)
    sa, sb = _rank(scores_a), _rank(scores_b)
    if not len(oa) == len(ob) == len(sa) == len(sb):
        raise InputError("both rankings need one outcome and one score per question, for the same questions")

    def stat(o: np.ndarray, s: list[float | None]) -> Any:
        return lambda idx: selective_accuracy(list(o[idx]), [s[i] for i in idx], coverage)

    a_all = selective_accuracy(list(oa), sa, coverage)
    b_all = selective_accuracy(list(ob), sb, coverage)
    lo, hi = paired_bootstrap_interval(len(oa), stat(oa, sa), stat(ob, sb), n_boot, seed)
    return {
        "coverage": coverage,
        "a": round(a_all, 4),
        "b": round(b_all, 4),
        "difference": round(a_all - b_all, 4),
        "interval": [round(lo, 4), round(hi, 4)],
    }
