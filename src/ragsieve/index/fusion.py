"""Rank fusion of several retrievers' result lists (pure functions).

Each input is a ranked list of ``(item_id, score)``; the output maps item ids to a fused
score, higher is better.
"""

from __future__ import annotations

from collections.abc import Sequence


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[tuple[int, float]]], k: int = 60, weights: Sequence[float] | None = None
) -> dict[int, float]:
    """RRF (Cormack et al. 2009): sum over lists of w / (k + rank), rank starting at 1."""
    weights = weights or [1.0] * len(rankings)
    fused: dict[int, float] = {}
    for w, ranking in zip(weights, rankings, strict=True):
        for rank, (item, _score) in enumerate(ranking, 1):
            fused[item] = fused.get(item, 0.0) + w / (k + rank)
    return fused


def min_max(scores: Sequence[float]) -> list[float]:
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi - lo <= 1e-12:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def weighted_score_fusion(
    rankings: Sequence[Sequence[tuple[int, float]]], weights: Sequence[float]
) -> dict[int, float]:
    """Sum of min-max normalised scores times each retriever's weight; an item missing
    from a list contributes 0 for that retriever."""
    fused: dict[int, float] = {}
    for w, ranking in zip(weights, rankings, strict=True):
        normed = min_max([s for _, s in ranking])
        for (item, _), s in zip(ranking, normed, strict=True):
            fused[item] = fused.get(item, 0.0) + w * s
    return fused


def top_k(fused: dict[int, float], k: int) -> list[tuple[int, float]]:
    """Highest fused scores first; ties broken by item id for determinism."""
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
