"""The :class:`DataImportance` estimator and the leave-one-out baseline."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragsieve.errors import InputError
from ragsieve.importance import kernels
from ragsieve.importance.checks import check_arrays, check_choice, check_float, check_int
from ragsieve.importance.data import ValidationData
from ragsieve.importance.multilinear import (
    LEVELS,
    UTILITIES,
    Method,
    Utility,
    check_gradient_args,
    montecarlo_samples,
    unchecked_gradient_sums,
)
from ragsieve.io import atomic_write_json

logger = logging.getLogger(__name__)

Level = Literal["source", "item"]
# "mean-gradient": average the item gradients of a source over its items seen in the data, step,
# then clip the source weight; "reference": step and clip every item, then average the clipped
# item weights over every item id of the source (the authors' RAGBooster implementation)
GroupUpdate = Literal["mean-gradient", "reference"]
GROUP_UPDATES: tuple[str, ...] = ("mean-gradient", "reference")


class DataImportance:
    """Learn a weight in [0, 1] per data source by maximising the multilinear extension.

    Projected gradient ascent (Section 2.4 of Lyu et al.): each epoch computes the item
    gradients of the mean validation utility at the current weights and moves the weights by
    ``learning_rate`` times them, keeping every weight in [0, 1]. With ``group_by="item"``
    every item keeps its own weight. With ``group_by="source"`` all items of a source share one
    weight, and ``group_update`` says how a step on the items becomes a step on the source:

    * ``"mean-gradient"`` (default): average the item gradients over the source's items that
      occur in the validation data, move the source weight by ``learning_rate`` times that
      mean, then clip it to [0, 1]. This is projected gradient ascent on the source weights
      themselves; items never retrieved do not dilute the step.
    * ``"reference"``: the rule of the authors' implementation (RAGBooster's
      ``mle_importance``): move every item weight by its own gradient, clip each item to
      [0, 1], then set the source weight to the mean of its clipped item weights over *every*
      item id of the source (``validation.item_source``), retrieved or not. Clipping before
      averaging limits how far one item with a large gradient moves its source, and unseen
      items pull the source towards its previous weight.

    The two agree when no item weight leaves [0, 1] and every item is seen; otherwise they can
    differ (see ``tests/importance/test_estimator.py`` for a hand-computed example).

    Example::

        >>> from ragsieve.importance.data import synthetic
        >>> est = DataImportance(k=5, epochs=5).fit(synthetic(200, n_sources=20))
        >>> len(est.weights_), float(est.weights_.min()) >= 0.0
        (20, True)
    """

    def __init__(
        self,
        k: int = 10,
        epochs: int = 50,
        learning_rate: float = 500.0,
        init_weight: float = 0.5,
        method: Method = "exact",
        epsilon: float = 1e-3,
        delta: float = 0.05,
        utility: Utility = "additive",
        group_by: Level = "source",
        seed: int = 0,
        n_jobs: int | None = None,
        group_update: GroupUpdate = "mean-gradient",
    ) -> None:
        self.k = k
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.init_weight = init_weight
        self.method = method
        self.epsilon = epsilon
        self.delta = delta
        self.utility = utility
        self.group_by = group_by
        self.seed = seed
        self.n_jobs = n_jobs
        self.group_update = group_update

    # ------------------------------------------------------------------ fitting
    def _validate_params(self) -> None:
        check_choice("group_by", self.group_by, LEVELS)
        check_choice("group_update", self.group_update, GROUP_UPDATES)
        check_gradient_args(
            level=self.group_by, k=self.k, method=self.method, epsilon=self.epsilon, delta=self.delta,
            utility=self.utility, seed=self.seed, n_jobs=self.n_jobs,
        )
        check_int("epochs", self.epochs, 0)
        check_float("learning_rate", self.learning_rate, low=0.0, open_low=True)
        check_float("init_weight", self.init_weight, low=0.0, high=1.0)

    def fit(
        self,
        validation: ValidationData,
        client: Any = None,
        callback: Callable[[int, float], None] | None = None,
    ) -> DataImportance:
        """Learn ``weights_`` from validation tuples.

        ``client``: an optional ``dask.distributed.Client``; the tuples are then partitioned
        across its workers and each epoch sums their partial gradients. ``callback(epoch,
        value)`` is called after each epoch (value is nan for Monte Carlo).
        """
        self._validate_params()
        check_arrays(validation)
        if validation.n_tuples == 0:
            raise InputError("the validation set is empty; pass at least one validation tuple")
        start = time.perf_counter()
        level = self.group_by
        reference = level == "source" and self.group_update == "reference"
        n = validation.n_sources if level == "source" else validation.n_items
        w = np.full(n, float(self.init_weight), dtype=np.float64)
        counts = validation.items_per_source().astype(np.float64) if level == "source" else np.ones(n)
        # the reference rule averages over every item id of a source, seen in the tuples or not
        all_items = np.bincount(validation.item_source, minlength=n).astype(np.float64) if reference else counts
        lr = float(self.learning_rate)
        n_tuples = validation.n_tuples
        n_samples = (
            montecarlo_samples(self.epsilon, self.delta, n_tuples) if self.method == "montecarlo" else None
        )
        dist = None
        if client is not None:
            from ragsieve.importance.distributed import DistributedGradients

            dist = DistributedGradients(client, validation)
        grad = np.zeros(n)
        history: list[float] = []
        for epoch in range(self.epochs):
            kwargs: dict[str, Any] = dict(
                level="item" if reference else level, k=int(self.k), method=self.method,
                epsilon=float(self.epsilon), delta=float(self.delta), utility=self.utility,
                seed=int(self.seed) + epoch, n_samples=n_samples,
            )
            if dist is not None:
                sums, value = dist.gradient_sums(w[validation.item_source] if reference else w, **kwargs)
            else:
                # the reference rule's items sit at their source's weight: the kernels read it there
                sums, value = unchecked_gradient_sums(
                    validation, w, n_jobs=self.n_jobs, item_weights_by_source=reference, **kwargs
                )
            history.append(value / n_tuples)
            if reference:
                w, grad = kernels.reference_step(sums, w, validation.item_source, lr, n_tuples, all_items)
            else:
                grad = np.divide(sums / n_tuples, counts, out=np.zeros(n), where=counts > 0)
                w = np.clip(w + lr * grad, 0.0, 1.0)
            if callback is not None:
                callback(epoch, value / n_tuples)
        self.weights_ = w
        self.gradients_ = grad
        self.history_ = history
        self.n_iter_ = self.epochs
        self.sources_ = list(validation.sources)
        self.seen_ = counts > 0 if level == "source" else None
        if level == "source":
            self.item_weights_ = w[validation.item_source]
        else:
            self.item_weights_ = w
        self.item_ids_ = list(validation.item_ids) if validation.item_ids is not None else None
        self.fit_seconds_ = time.perf_counter() - start
        logger.info("fitted %d weights in %.2fs over %d epochs", n, self.fit_seconds_, self.epochs)
        return self

    # ------------------------------------------------------------------ results
    def _check_fitted(self) -> None:
        if not hasattr(self, "weights_"):
            raise InputError("this DataImportance is not fitted yet; call fit(validation) first")

    def source_weights(self) -> dict[str, float]:
        """``{source: weight}``; for ``group_by="item"`` the mean weight of the source's items."""
        self._check_fitted()
        if self.group_by == "source":
            seen = getattr(self, "seen_", None)
            return {
                s: float(x)
                for i, (s, x) in enumerate(zip(self.sources_, self.weights_, strict=True))
                if seen is None or seen[i]
            }
        raise InputError("source_weights() needs group_by='source'; use item_weights_ for item-level weights")

    def get_params(self) -> dict[str, Any]:
        return {
            "k": self.k, "epochs": self.epochs, "learning_rate": self.learning_rate,
            "init_weight": self.init_weight, "method": self.method, "epsilon": self.epsilon,
            "delta": self.delta, "utility": self.utility, "group_by": self.group_by,
            "seed": self.seed, "n_jobs": self.n_jobs, "group_update": self.group_update,
        }

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"params": self.get_params()}
        if hasattr(self, "weights_"):
            out["fitted"] = {
                "weights": self.weights_.tolist(), "gradients": self.gradients_.tolist(),
                "history": self.history_, "sources": self.sources_,
                "seen": None if self.seen_ is None else self.seen_.tolist(),
            }
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataImportance:
        est = cls(**data.get("params", {}))
        fitted = data.get("fitted")
        if fitted:
            est.weights_ = np.asarray(fitted["weights"], dtype=np.float64)
            est.gradients_ = np.asarray(fitted["gradients"], dtype=np.float64)
            est.history_ = list(fitted["history"])
            est.sources_ = list(fitted["sources"])
            est.n_iter_ = est.epochs
            est.seen_ = None if fitted.get("seen") is None else np.asarray(fitted["seen"], dtype=bool)
        return est

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> DataImportance:
        p = Path(path)
        if not p.is_file():
            raise InputError(f"model file {p} does not exist; fit and save a DataImportance first")
        return cls.from_dict(json.loads(p.read_text(encoding="utf-8")))


def leave_one_out(
    validation: ValidationData, k: int = 10, utility: Utility = "additive", n_jobs: int | None = None
) -> np.ndarray:
    """Leave-one-out importance per source: mean over tuples of ``U(all) - U(all but source)``.

    The baseline of the paper's Table 1b (``cal_loo`` there sums over tuples; the mean only
    rescales). ``utility="majority"`` needs ``validation.answer``.
    """
    from ragsieve.importance.multilinear import _threads

    check_choice("utility", utility, UTILITIES)
    check_int("k", k, 1)
    check_int("n_jobs", n_jobs, None, optional=True)
    check_arrays(validation)
    if utility == "majority" and validation.answer is None:
        raise InputError("the majority-vote utility needs an answer per item ('answer' field)")
    labels = validation.answer
    if labels is None:
        labels = np.zeros(validation.n_positions, np.int32)
    with _threads(n_jobs, validation.n_positions):
        sums = kernels.leave_one_out_sums(
            validation.offsets, validation.source, validation.utility, labels, validation.n_sources, k,
            utility == "majority", max(validation.max_len, 1), int(labels.max(initial=0)),
        )
    return np.asarray(sums / max(validation.n_tuples, 1))
