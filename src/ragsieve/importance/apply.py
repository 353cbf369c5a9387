"""Using learned source weights: prune, reweight, store them with an index, apply at query time.

* **prune**: drop every source whose weight is below a threshold. :func:`tune_prune_threshold`
  picks the threshold on the validation set the way the paper does: remove the lowest-weighted
  sources covering 0 %, 10 %, ..., 90 % of the retrieved results and keep the best rate.
* **reweight**: sample a sub-corpus in which each source is present with probability equal to
  its weight, and average the predictions' utilities over several samples (32 in the paper).

At query time :func:`apply_source_weights` filters a list of search hits; the weights live in
``<index_dir>/source_weights.json`` (:func:`save_source_weights` / :func:`load_source_weights`).
Sources without a learned weight (never seen on the validation set) are kept.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from ragsieve.errors import IndexStoreError, InputError
from ragsieve.importance.checks import check_arrays, check_choice, check_float, check_int
from ragsieve.importance.data import ValidationData
from ragsieve.io import atomic_write_json
from ragsieve.types import SearchHit

WEIGHTS_FILE = "source_weights.json"
Mode = Literal["off", "prune", "reweight"]
EvalUtility = Literal["additive", "majority"]
_EVAL_UTILITIES = ("additive", "majority")


def _source_weights(weights: np.ndarray, n_sources: int, probabilities: bool) -> np.ndarray:
    """One finite score per source; in [0, 1] when they are sampling probabilities."""
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"weights must be {n_sources} numbers, one per source") from exc
    if w.shape != (n_sources,):
        raise InputError(f"expected {n_sources} source weights, got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise InputError("source weights must be finite numbers; replace NaN/inf values")
    if probabilities and (np.any(w < 0) or np.any(w > 1)):
        raise InputError("source weights are sampling probabilities here: every weight must lie in [0, 1]")
    return w


def _known(known: np.ndarray | None, n_sources: int) -> np.ndarray:
    mask = np.ones(n_sources, dtype=bool) if known is None else np.asarray(known, dtype=bool)
    if mask.shape != (n_sources,):
        raise InputError(f"known must have one flag per source ({n_sources}), got shape {mask.shape}")
    return mask


# --------------------------------------------------------------------------- evaluation helpers


def masked_scores(
    data: ValidationData, keep: np.ndarray, k: int = 10, utility: EvalUtility = "majority"
) -> np.ndarray:
    """Utility of each tuple's top-K prediction from the kept sources; ``keep`` is
    ``(n_sources,)`` or ``(n_samples, n_sources)`` booleans; returns ``(n_samples, n_tuples)``."""
    check_int("k", k, 1)
    check_choice("utility", utility, _EVAL_UTILITIES)
    check_arrays(data)
    keep2 = np.atleast_2d(np.asarray(keep, dtype=np.bool_))
    if keep2.ndim != 2 or keep2.shape[1] != data.n_sources:
        raise InputError(f"keep mask has {keep2.shape[1]} sources, the data has {data.n_sources}")
    if utility == "majority" and data.answer is None:
        raise InputError("the majority-vote utility needs an answer per item ('answer' field)")
    from ragsieve.importance import kernels
    from ragsieve.importance.multilinear import _threads

    labels = data.answer if data.answer is not None else np.zeros(data.n_positions, dtype=np.int32)
    with _threads(None, data.n_positions * len(keep2)):
        scores = kernels.masked_topk_utilities(
            data.offsets, data.source, data.utility, labels, keep2, k, utility == "majority",
            int(labels.max(initial=0)),
        )
    return np.asarray(scores)


class PruneResult(NamedTuple):
    threshold: float  # keep sources with weight >= threshold
    removal_rate: float  # share of validation results the lowest-weighted sources cover
    validation_score: float
    pruned_sources: int


def _threshold_for_rate(order: np.ndarray, weights: np.ndarray, counts: np.ndarray, rate: float) -> float:
    """Smallest weight kept after removing the lowest-weighted sources that cover ``rate`` of results."""
    total = counts.sum()
    removed = 0
    for idx in order:
        if removed >= rate * total:
            return float(weights[idx])
        removed += counts[idx]
    return float(np.nextafter(weights[order[-1]], np.inf)) if len(order) else 0.0


def tune_prune_threshold(
    validation: ValidationData,
    weights: np.ndarray,
    k: int = 10,
    utility: EvalUtility = "majority",
    rates: Sequence[float] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    known: np.ndarray | None = None,
) -> PruneResult:
    """Pick the pruning threshold with the best validation score (ties: the smaller rate).

    ``weights`` per source (aligned with ``validation.sources``); ``known`` marks the sources
    that have a weight (others are always kept). Sources are removed in order of weight until
    they cover each ``rate`` of the validation results, as in the paper's experiments.
    """
    w = _source_weights(weights, validation.n_sources, probabilities=False)
    known = _known(known, len(w))
    for rate in rates:
        check_float("removal rate", rate, low=0.0, high=1.0, open_high=True)
    counts = np.bincount(validation.source, minlength=validation.n_sources)
    cand = np.flatnonzero(known & (counts > 0))
    order = cand[np.argsort(w[cand], kind="stable")]
    best: PruneResult | None = None
    for rate in rates:
        # rate 0: the smallest weight, so every source is kept (finite, unlike -inf, for JSON)
        thr = _threshold_for_rate(order, w, counts, rate) if rate > 0 else float(w.min(initial=0.0))
        keep = ~known | (w >= thr)
        score = float(masked_scores(validation, keep, k, utility).mean())
        if best is None or score > best.validation_score:
            best = PruneResult(float(thr), float(rate), score, int((~keep).sum()))
    if best is None:
        raise InputError("rates is empty; pass at least one removal rate")
    return best


def reweight_scores(
    data: ValidationData,
    weights: np.ndarray,
    k: int = 10,
    utility: EvalUtility = "majority",
    n_samples: int = 32,
    seed: int = 0,
    known: np.ndarray | None = None,
) -> np.ndarray:
    """Per tuple, the utility averaged over ``n_samples`` sub-corpora sampled by weight."""
    check_int("n_samples", n_samples, 1)
    check_int("seed", seed, 0)
    w = _source_weights(weights, data.n_sources, probabilities=True)
    rng = np.random.default_rng(int(seed))
    keep = rng.random((int(n_samples), len(w))) < w
    if known is not None:
        keep |= ~_known(known, len(w))
    return masked_scores(data, keep, k, utility).mean(axis=0)


# --------------------------------------------------------------------------- storage + query time


def save_source_weights(
    index_dir: str | Path,
    weights: Mapping[str, float],
    threshold: float | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``source_weights.json`` into an index directory (atomically)."""
    bad = [s for s, x in weights.items() if not 0.0 <= float(x) <= 1.0]
    if bad:
        raise InputError(f"source weights must lie in [0, 1]; {bad[:3]} do not")
    path = Path(index_dir) / WEIGHTS_FILE
    payload: dict[str, Any] = {
        "weights": {str(s): float(x) for s, x in weights.items()},
        "metadata": dict(metadata or {}),
    }
    if threshold is not None:  # absent, readers fall back to 0.5
        payload["threshold"] = float(threshold)
    atomic_write_json(path, payload)
    return path


def _read(index_dir: str | Path) -> dict[str, Any] | None:
    path = Path(index_dir) / WEIGHTS_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data.get("weights"), dict):
            raise ValueError("no 'weights' object")
        return data
    except (ValueError, AttributeError) as exc:
        raise IndexStoreError(
            f"{path} is not a valid source-weights file ({exc}); re-run `ragsieve importance apply`"
        ) from exc


def load_source_weights(index_dir: str | Path) -> dict[str, float] | None:
    """``{source: weight}`` stored with the index, or ``None`` when there is none."""
    data = _read(index_dir)
    return None if data is None else {str(s): float(x) for s, x in data["weights"].items()}


def load_prune_threshold(index_dir: str | Path) -> float | None:
    """The pruning threshold stored with the weights (tuned on validation), if any."""
    data = _read(index_dir)
    return None if data is None or data.get("threshold") is None else float(data["threshold"])


def apply_source_weights(
    hits: list[SearchHit],
    weights: Mapping[str, float] | None,
    mode: Mode,
    threshold: float | None = None,
    rng: np.random.Generator | None = None,
) -> list[SearchHit]:
    """Filter ranked hits by the learned weight of their ``chunk.source``.

    ``prune``: keep hits whose source weight is ``>= threshold`` (0.5 when ``None``).
    ``reweight``: draw one sub-corpus, each source present with probability equal to its
    weight (one draw per source, shared by its hits), and keep the hits of present sources;
    average answers over several calls to follow the paper's 32-sample procedure. Hits from
    sources without a weight are always kept; order and hit objects are unchanged.
    """
    if mode == "off" or not weights:
        return list(hits)
    if mode == "prune":
        thr = 0.5 if threshold is None else float(threshold)
        return [h for h in hits if weights.get(h.chunk.source, 1.0) >= thr]
    if mode == "reweight":
        gen = rng if rng is not None else np.random.default_rng()
        drawn: dict[str, bool] = {}
        kept = []
        for h in hits:
            src = h.chunk.source
            if src not in weights:
                kept.append(h)
                continue
            if src not in drawn:
                drawn[src] = bool(gen.random() < weights[src])
            if drawn[src]:
                kept.append(h)
        return kept
    raise InputError(f"mode must be 'off', 'prune' or 'reweight', got {mode!r}")
