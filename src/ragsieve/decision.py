"""One calibrated confidence from every check's graded signals: :class:`DecisionModel`.

The sieve's checks (relevance, retrieval need, poisoning, conflict, support, value grounding,
responsiveness) each leave named signals on [0, 1] in the request's state, whatever they
decided; plain RAG's own signals (the top retrieval score, the answer's mean token probability)
sit beside them. The model is a logistic regression over those signals (each with a "present"
flag, a missing one filled with its training mean) that estimates the probability that the
draft answer is right. The ``decide`` stage (:mod:`ragsieve.sieve.decide`) answers, answers
with a caveat or abstains on that probability.

A scikit-learn estimator: hyperparameters in ``__init__``, ``fit`` returns ``self``, learned
attributes end in ``_``; stored as plain arrays with :mod:`ragsieve.array_models` (never
pickle). The default model ships in ``ragsieve/resources/decision_model.npz``;
``benchmarks/train_decision.py`` trains it (its docstring names the training split).

Example:
    >>> model = DecisionModel().fit(
    ...     [{"judge.best": 0.9, "verify.support_mean": 0.8}, {"judge.best": 0.1},
    ...      {"judge.best": 0.8, "verify.support_mean": 0.7}, {"judge.best": 0.2}],
    ...     [True, False, True, False])
    >>> model.confidence({"judge.best": 0.85, "verify.support_mean": 0.9}) > 0.5
    True
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.array_models import load_arrays, save_arrays
from ragsieve.errors import InputError, ModelError
from ragsieve.records import DecisionModelChoice
from ragsieve.signals import SIGNAL_SET

# The decision model's features: every declared signal (ragsieve.signals.SIGNAL_SET, in its order;
# it says which stage emits each, its kind and meaning), so that no signal a stage leaves goes
# unweighed by a model trained on them. A signal a run did not produce (its check ablated or not
# reached) is "absent": its value column gets the training mean and its flag column 0. A model
# trained before a signal was declared lists its own signals in its header and still loads; the
# ones it does not weigh are named wherever it decides (DecisionModel.unweighed, the decide
# record's ``model``).
SIGNALS: tuple[str, ...] = tuple(s.name for s in SIGNAL_SET)

FORMAT = "ragsieve-decision-model/1"
DEFAULT_MODEL = "decision_model.npz"

# The decision model of each generator family, one file each in ragsieve/resources: the family is
# read from the loaded model's name (GENERATOR_FAMILIES); a generator whose name falls in none,
# served over HTTP or not, gets the model-agnostic default ("served": trained on features that do
# not depend on the generator's style). A family whose file does not ship is judged by
# DEFAULT_MODEL, and the decide record says so (choose_decision_model). The file shipped today,
# DEFAULT_MODEL, was trained on SmolLM2 drafts (its header's about.llm).
GENERATOR_FAMILIES: dict[str, re.Pattern[str]] = {
    "smollm2": re.compile(r"smol\W?lm\W?2", re.IGNORECASE),
    "gemma": re.compile(r"gemma", re.IGNORECASE),
}
SERVED = "served"
FAMILY_MODELS: dict[str, str] = {
    "smollm2": DEFAULT_MODEL,
    "gemma": "decision_model_gemma.npz",
    SERVED: "decision_model_served.npz",
}


class DecisionModel:
    """P(the draft answer is right) from the checks' signals (logistic regression).

    ``signals``: the signal names used, in order; ``c``: inverse L2 strength of the fit;
    ``threshold``: the default abstention threshold on the probability; ``None`` learns it in
    ``fit`` with :func:`withdrawn_right_threshold` (a stated rule, not a tuned number) from the
    right training drafts' out-of-fold confidences (``folds`` stratified folds, seeded: each
    draft's confidence from a model fitted without it, so that they are spread as a new draft's
    would be, not as the fitted rows'): the highest threshold that, with probability at least
    ``1 - delta``, withdraws at most ``max_withdrawn_right`` of new right drafts; with too few
    right drafts for that, the highest whose expected share is at most ``max_withdrawn_right``;
    with fewer still, 0 (no draft withdrawn on its confidence). ``threshold_rule_`` (in the
    saved header) says which applied, over how many right drafts and with what bound.
    ``ragsieve calibrate`` sets the threshold a configuration uses
    (``calibration.abstain_below``), which overrides this one.
    """

    # learned by fit() or read by load()
    fill_: np.ndarray
    coef_: np.ndarray
    intercept_: float
    n_train_: int
    threshold_: float
    threshold_rule_: dict[str, Any]
    about_: dict[str, Any]

    def __init__(
        self,
        signals: Sequence[str] = SIGNALS,
        c: float = 1.0,
        threshold: float | None = None,
        max_withdrawn_right: float = 0.05,
        delta: float = 0.05,
        folds: int = 5,
    ) -> None:
        self.signals = signals
        self.c = c
        self.threshold = threshold
        self.max_withdrawn_right = max_withdrawn_right
        self.delta = delta
        self.folds = folds

    # ----------------------------------------------------------------------------- features
    def _matrix(self, rows: Sequence[Mapping[str, float]], fill: np.ndarray) -> np.ndarray:
        names = list(self.signals)
        x = np.zeros((len(rows), 2 * len(names)), dtype=np.float64)
        for r, row in enumerate(rows):
            for j, name in enumerate(names):
                value = row.get(name)
                if value is None or not math.isfinite(float(value)):
                    x[r, j] = fill[j]
                else:
                    x[r, j] = float(value)
                    x[r, len(names) + j] = 1.0
        return x

    def _fit_arrays(self, rows: Sequence[Mapping[str, float]], y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """The fill values (each signal's mean where present), coefficients and intercept of one fit."""
        from sklearn.linear_model import LogisticRegression

        names = list(self.signals)
        fill = np.zeros(len(names))
        for j, name in enumerate(names):
            seen = [float(r[name]) for r in rows if r.get(name) is not None and math.isfinite(float(r[name]))]
            fill[j] = float(np.mean(seen)) if seen else 0.0
        lr = LogisticRegression(C=self.c, max_iter=2000).fit(self._matrix(rows, fill), y)
        return fill, np.asarray(lr.coef_[0], dtype=np.float64), float(lr.intercept_[0])

    def _out_of_fold(self, rows: Sequence[Mapping[str, float]], y: np.ndarray) -> tuple[np.ndarray, int]:
        """P(right) of every row from a model fitted without its fold (stratified ``folds`` folds,
        seed 0; fewer when a kind of draft has fewer rows), and the number of folds used; 0 folds
        (the fitted model's own confidences) when a kind has a single row."""
        from sklearn.model_selection import StratifiedKFold

        k = min(self.folds, int(y.sum()), int((~y).sum()))
        if k < 2:
            return self.predict_proba(rows)[:, 1], 0
        out = np.zeros(len(rows))
        for train, held in StratifiedKFold(n_splits=k, shuffle=True, random_state=0).split(np.zeros(len(y)), y):
            fill, coef, intercept = self._fit_arrays([rows[i] for i in train], y[train])
            z = self._matrix([rows[i] for i in held], fill) @ coef + intercept
            out[held] = 1.0 / (1.0 + np.exp(-z))
        return out, k

    def fit(self, rows: Sequence[Mapping[str, float]], correct: Sequence[bool]) -> DecisionModel:
        """Fit on one signal dict per draft and whether the draft was right."""
        if len(rows) != len(correct):
            raise InputError(f"{len(rows)} signal rows but {len(correct)} labels; pass one label per row")
        y = np.asarray([bool(c) for c in correct])
        if len(set(y.tolist())) < 2:
            raise InputError("the labels are all right or all wrong; the model needs both kinds of draft")
        self.fill_, self.coef_, self.intercept_ = self._fit_arrays(rows, y)
        self.n_train_ = len(rows)
        self.about_ = {}
        if self.threshold is not None:
            self.threshold_ = float(self.threshold)
            self.threshold_rule_ = {"rule": "given"}
        else:
            conf, folds = self._out_of_fold(rows, y)
            self.threshold_, self.threshold_rule_ = withdrawn_right_threshold(
                conf[y], self.max_withdrawn_right, self.delta
            )
            self.threshold_rule_["confidences"] = f"out-of-fold ({folds} folds)" if folds else "in-sample"
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise ModelError("the decision model is not fitted; call fit() or load() first")

    def predict_proba(self, rows: Sequence[Mapping[str, float]]) -> np.ndarray:
        """(n, 2): P(wrong), P(right) per row."""
        self._check_fitted()
        z = self._matrix(rows, self.fill_) @ self.coef_ + self.intercept_
        p = 1.0 / (1.0 + np.exp(-z))
        return np.stack([1.0 - p, p], axis=1)

    def confidence(self, signals: Mapping[str, float]) -> float:
        """P(right) of one draft, rounded to 6 places."""
        return round(float(self.predict_proba([signals])[0, 1]), 6)

    def contributions(self, signals: Mapping[str, float]) -> dict[str, float]:
        """Each present signal's share of the log-odds (coefficient times value), largest first:
        what pushed the confidence up or down, for the trace."""
        self._check_fitted()
        x = self._matrix([signals], self.fill_)[0]
        n = len(self.signals)
        out = {
            name: round(float(self.coef_[j] * x[j] + self.coef_[n + j] * x[n + j]), 4)
            for j, name in enumerate(self.signals)
            if x[n + j]
        }
        return dict(sorted(out.items(), key=lambda kv: -abs(kv[1])))

    # ----------------------------------------------------------------------------- storage
    def to_dict(self) -> dict[str, Any]:
        return {
            "signals": list(self.signals),
            "c": self.c,
            "threshold": self.threshold,
            "max_withdrawn_right": self.max_withdrawn_right,
            "delta": self.delta,
            "folds": self.folds,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecisionModel:
        threshold = data.get("threshold")
        return cls(
            tuple(data.get("signals", SIGNALS)),
            float(data.get("c", 1.0)),
            None if threshold is None else float(threshold),
            float(data.get("max_withdrawn_right", 0.05)),
            float(data.get("delta", 0.05)),
            int(data.get("folds", 5)),
        )

    def save(self, path: str | Path, **about: Any) -> Path:
        """Write the arrays and a JSON header (``about``: where the training data came from)."""
        self._check_fitted()
        header = {
            "format": FORMAT,
            **self.to_dict(),
            "n_train": self.n_train_,
            "threshold_": self.threshold_,
            "threshold_rule": self.threshold_rule_,
            "about": about,
        }
        arrays = {"fill": self.fill_, "coef": self.coef_, "intercept": np.asarray([self.intercept_])}
        return save_arrays(path, header, arrays)

    @classmethod
    def load(cls, path: str | Path) -> DecisionModel:
        retrain = "retrain it with benchmarks/train_decision.py"
        header, arrays = load_arrays(path, retrain)
        if header.get("format") != FORMAT:
            raise ModelError(f"{path} is not a {FORMAT} model (format {header.get('format')!r}); {retrain}")
        model = cls.from_dict(header)
        n = len(model.signals)
        try:
            model.fill_ = np.asarray(arrays["fill"], dtype=np.float64)
            model.coef_ = np.asarray(arrays["coef"], dtype=np.float64)
            model.intercept_ = float(np.asarray(arrays["intercept"]).reshape(-1)[0])
        except (KeyError, ValueError, IndexError) as exc:
            raise ModelError(f"{path} is incomplete ({exc}); {retrain}") from exc
        if model.fill_.shape != (n,) or model.coef_.shape != (2 * n,):
            raise ModelError(f"{path} has arrays of the wrong shape for its {n} signals; {retrain}")
        model.n_train_ = int(header.get("n_train", 0))
        model.threshold_ = float(header.get("threshold_", model.threshold if model.threshold is not None else 0.5))
        # a model saved before the rule was recorded has none
        model.threshold_rule_ = dict(header.get("threshold_rule") or {})
        model.about_ = dict(header.get("about") or {})
        return model

    @classmethod
    def default(cls) -> DecisionModel:
        """The model shipped with ragsieve (``ragsieve/resources/decision_model.npz``)."""
        return cls.load(shipped_model_path(DEFAULT_MODEL))

    def unweighed(self) -> tuple[str, ...]:
        """The declared signals (:data:`SIGNALS`) this model does not weigh: it was trained
        before they were declared, or without them."""
        weighed = set(self.signals)
        return tuple(s for s in SIGNALS if s not in weighed)

    @property
    def trained_on(self) -> str | None:
        """The generator whose drafts it was trained on (its header's ``about.llm``), if it says."""
        llm = getattr(self, "about_", {}).get("llm")
        return None if llm is None else str(llm)


def shipped_model_path(name: str) -> Path:
    """Where the decision model file ``name`` ships (``ragsieve/resources``); it may not exist."""
    return Path(str(resources.files("ragsieve") / "resources" / name))


def generator_family(model_name: str) -> str:
    """The family of the generator named ``model_name`` (a key of :data:`FAMILY_MODELS`): the
    first of :data:`GENERATOR_FAMILIES` its name matches, else :data:`SERVED` (the
    model-agnostic default). The name decides, not the transport: SmolLM2 served over HTTP
    writes as the bundled SmolLM2 does; a model served by name only ("gpt-4o-mini") is "served".

    >>> generator_family("SmolLM2-135M-Instruct-Q4_1"), generator_family("gemma3-270m-q4_k_m")
    ('smollm2', 'gemma')
    >>> generator_family("gpt-4o-mini"), generator_family("my-own-7b")
    ('served', 'served')
    """
    for family, pattern in GENERATOR_FAMILIES.items():
        if pattern.search(model_name or ""):
            return family
    return SERVED


def choose_decision_model(model_name: str) -> tuple[DecisionModel, DecisionModelChoice]:
    """The shipped decision model for the generator ``model_name`` and what was chosen: its
    family's file (:data:`FAMILY_MODELS`) when it ships, else :data:`DEFAULT_MODEL`, with a
    ``fallback`` note that says whose drafts the model deciding instead was trained on."""
    family = generator_family(model_name)
    wanted = FAMILY_MODELS[family]
    path = shipped_model_path(wanted)
    fallback = None
    if not path.is_file():
        path = shipped_model_path(DEFAULT_MODEL)
    model = DecisionModel.load(path)
    if path.name != wanted:
        whose = "model-agnostic" if family == SERVED else family
        fallback = (
            f"no {whose} decision model ships ({wanted}); the shipped {path.name}, trained on "
            f"{model.trained_on or 'another generator'}'s drafts, decides"
        )
    return model, DecisionModelChoice(model_name, family, path.name, model.trained_on, fallback, model.unweighed())


def withdrawn_right_threshold(
    right: Sequence[float] | np.ndarray, max_share: float = 0.05, delta: float = 0.05
) -> tuple[float, dict[str, Any]]:
    """The default threshold from the confidences of ``n`` right drafts, and how it was chosen.

    A draft is withdrawn when its confidence is below the threshold; with the threshold at the
    ``(k+1)``-th lowest of the ``n`` confidences, ``k`` of them are withdrawn. Rule, in order:

    * ``"upper bound"``: the largest ``k`` whose one-sided ``1 - delta`` Clopper-Pearson upper
      bound on the share of right drafts withdrawn (``k`` of ``n``) is at most ``max_share``.
      For right drafts exchangeable with these, the share of new right drafts below that
      threshold is then at most ``max_share`` with probability at least ``1 - delta`` (the
      share below the ``(k+1)``-th order statistic is Beta(k+1, n-k) distributed, and
      ``P(Beta(k+1, n-k) > a) = P(Binomial(n, a) <= k)``, the bound's own test). It needs
      ``(1 - max_share) ** n <= delta`` (59 right drafts at 5 % and 0.05).
    * ``"expected"``, with fewer right drafts: the largest ``k`` with ``(k+1)/(n+1) <=
      max_share``: a new right draft falls below the ``(k+1)``-th lowest with probability
      ``(k+1)/(n+1)`` (its rank among ``n + 1`` is uniform), a bound on the expected share
      only. It needs ``n + 1 >= 1 / max_share`` (19 right drafts at 5 %).
    * ``"none"``, with fewer still: 0, no draft withdrawn on its confidence.

    Example:
        >>> withdrawn_right_threshold([0.1 * i for i in range(1, 11)])[1]["rule"]
        'none'
        >>> t, how = withdrawn_right_threshold([i / 100 for i in range(1, 26)])
        >>> t, how["rule"], how["withdrawn_right"]
        (0.01, 'expected', 0)
    """
    from ragsieve.calibrate import binomial_p_value, clopper_pearson_upper

    conf = np.sort(np.asarray(right, dtype=np.float64))
    n = len(conf)
    how: dict[str, Any] = {"right_drafts": n, "max_withdrawn_right": max_share, "delta": delta}
    # binomial_p_value(k, n, a) <= delta exactly when the upper bound on k/n is at most a; it
    # grows with k, so the feasible k are 0..k_max
    k = -1
    while k + 1 < n and binomial_p_value(k + 1, n, max_share) <= delta:
        k += 1
    if k >= 0:
        how |= {"rule": "upper bound", "withdrawn_right": k, "bound": round(clopper_pearson_upper(k, n, delta), 4)}
    else:
        k = math.floor(max_share * (n + 1) + 1e-9) - 1
        if k < 0:
            return 0.0, how | {"rule": "none", "withdrawn_right": 0}
        how |= {"rule": "expected", "withdrawn_right": k, "bound": round((k + 1) / (n + 1), 4)}
    # six places (as confidences are given), never above the k+1-th lowest: it is not withdrawn
    threshold = round(float(conf[k]), 6)
    if threshold > conf[k]:
        threshold = round(threshold - 1e-6, 6)
    return threshold, how


__all__ = [
    "DEFAULT_MODEL", "FAMILY_MODELS", "GENERATOR_FAMILIES", "SERVED", "SIGNALS", "DecisionModel",
    "choose_decision_model", "generator_family", "shipped_model_path", "withdrawn_right_threshold",
]
