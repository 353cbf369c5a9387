"""Prediction fusion: a weighted sum of per-knowledge label distributions.

For each kept knowledge piece k_i with label distribution p(y | q, k_i):

    λ_i = α · sim(q, k_i) + (1 − α) · P_harmless(q, k_i)      (clipped at 0)
    w_i = λ_i / Σ_j λ_j                                        (uniform if Σ λ = 0)
    p(y | q) = Σ_i w_i · p(y | q, k_i)

With no kept knowledge the prediction without retrieval is returned.

Example:
    >>> import numpy as np
    >>> r = fuse(np.array([[0.9, 0.1], [0.2, 0.8]]), [1.0, 0.0], [1.0, 0.0], alpha=0.5,
    ...          fallback=np.array([0.5, 0.5]))
    >>> [round(x, 2) for x in r.proba]
    [0.9, 0.1]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ragsieve.errors import InputError


class FusionResult(NamedTuple):
    proba: np.ndarray  # (n_labels,)
    weights: np.ndarray  # (n_kept,) normalised fusion weights; empty when the fallback was used
    used_fallback: bool


def fusion_weights(similarities: Sequence[float], p_harmless: Sequence[float], alpha: float) -> np.ndarray:
    """Normalised λ weights; uniform when every λ is 0."""
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"fusion alpha must be in [0, 1], got {alpha}")
    sims = np.asarray(similarities, dtype=float)
    ph = np.asarray(p_harmless, dtype=float)
    if sims.shape != ph.shape:
        raise InputError(f"{sims.shape[0]} similarities but {ph.shape[0]} P_harmless values; pass one per piece")
    lam = np.clip(alpha * sims + (1.0 - alpha) * ph, 0.0, None)
    total = lam.sum()
    if lam.size == 0:
        return lam
    if total <= 0.0:
        return np.full(lam.shape, 1.0 / lam.size)
    return lam / total


def fuse(
    dists: np.ndarray,
    similarities: Sequence[float],
    p_harmless: Sequence[float],
    alpha: float,
    fallback: np.ndarray,
) -> FusionResult:
    """Fuse per-knowledge label distributions (rows of ``dists``)."""
    dists = np.asarray(dists, dtype=float)
    fallback = np.asarray(fallback, dtype=float)
    if dists.size == 0 or dists.shape[0] == 0:
        return FusionResult(fallback / fallback.sum(), np.zeros(0), True)
    if dists.ndim != 2 or dists.shape[1] != fallback.shape[0]:
        raise InputError(f"label distributions of shape {dists.shape} do not match {fallback.shape[0]} labels")
    w = fusion_weights(similarities, p_harmless, alpha)
    if w.shape[0] != dists.shape[0]:
        raise InputError(f"{dists.shape[0]} distributions but {w.shape[0]} weights; pass one per piece")
    p = w @ dists
    return FusionResult(p / p.sum(), w, False)
