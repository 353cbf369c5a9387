"""Brute-force ground truth: enumerate all 2^M subsets of the corpus."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np


def additive_topk(k: int) -> Callable[[list[float], list[object]], float]:
    def u(utils: list[float], answers: list[object]) -> float:
        return sum(utils[:k]) / k

    return u


def majority_topk(k: int) -> Callable[[list[float], list[object]], float]:
    def u(utils: list[float], answers: list[object]) -> float:
        top_u, top_a = utils[:k], answers[:k]
        if not top_a:
            return 0.0
        counts: dict[object, int] = {}
        for a in top_a:
            counts[a] = counts.get(a, 0) + 1
        best = max(counts.values())
        for a, uu in zip(top_a, top_u, strict=True):
            if counts[a] == best:
                return uu
        raise AssertionError

    return u


def brute_force(
    lists: Sequence[Sequence[tuple[int, float, object]]],
    weights: np.ndarray,
    utility: Callable[[list[float], list[object]], float],
) -> tuple[np.ndarray, float]:
    """Item gradients and value of the multilinear extension by enumerating every subset.

    ``lists``: per tuple, ranked (item index, utility, answer). ``weights``: per item.
    """
    m = len(weights)
    grad = np.zeros(m)
    value = 0.0
    for subset in itertools.product([0, 1], repeat=m):
        present = np.array(subset, dtype=bool)
        prob = float(np.prod(np.where(present, weights, 1.0 - weights)))
        for ranked in lists:
            def u_of(pres: np.ndarray, ranked=ranked) -> float:  # type: ignore[no-untyped-def]
                kept = [(uu, a) for (i, uu, a) in ranked if pres[i]]
                return utility([x[0] for x in kept], [x[1] for x in kept])

            val = u_of(present)
            value += prob * val
            # d/dw_i of the multilinear polynomial: sum_S P[S \ i](U(S+i) - U(S-i));
            # P[S] / w_i or / (1 - w_i) is unstable, so accumulate with the marginal of the others
            for i in range(m):
                if not present[i]:
                    continue
                w_i = weights[i]
                others = prob / w_i if w_i > 0 else 0.0
                if w_i == 0:
                    continue
                with_i = val
                pres = present.copy()
                pres[i] = False
                grad[i] += others * (with_i - u_of(pres))
    n = len(lists)
    return grad / n, value / n
