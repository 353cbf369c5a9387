"""Minimal covering sets of knowledge snippets (pure functions over a coverage matrix).

``covered[i, j]`` is True when snippet ``i`` covers feature ``j``. Features are typed by
``kinds[j]`` in {"intent", "keyword", "relation"}. Features that no snippet covers cannot
be covered by any set; both searches then return the smallest set covering every
*coverable* feature, which is the set covering the most features (the paper's fallback).

* :func:`greedy_cover` is the paper's Algorithm 1: take a snippet with the intent, then
  add snippets for still-uncovered relations, then for still-uncovered keywords. Within a
  phase it takes the snippet covering the most uncovered features of that phase (ties:
  most uncovered features overall, then retrieval order). The fixed phase order can pick
  redundant snippets.
* :func:`exact_cover` finds a set of minimum size (an integer program, ties broken towards
  earlier-ranked snippets): searched directly over the sets of each size in turn, and solved
  by HiGHS through :func:`scipy.optimize.milp` when a size has too many sets to try;
  meant for at most ~30 candidates.

Example:
    >>> import numpy as np
    >>> cov = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=bool)
    >>> greedy_cover(cov, ["intent", "keyword", "keyword"]).selected
    [0, 1]
    >>> exact_cover(cov, ["intent", "keyword", "keyword"]).selected
    [0, 1]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np

from ragsieve.errors import InputError

__all__ = ["CoverResult", "FeatureKind", "cover", "exact_cover", "greedy_cover"]

logger = logging.getLogger(__name__)

FeatureKind = Literal["intent", "keyword", "relation"]
_PHASES: tuple[FeatureKind, ...] = ("intent", "relation", "keyword")


class CoverResult(NamedTuple):
    """Selected snippet indices (sorted), which features they cover, and whether every
    feature is covered (``full``: the knowledge set contains a chain of evidence)."""

    selected: list[int]
    covered_features: list[int]
    uncoverable_features: list[int]
    full: bool
    method: str


def _check(covered: np.ndarray, kinds: Sequence[str]) -> np.ndarray:
    cov = np.asarray(covered, dtype=bool)
    if cov.ndim != 2:
        raise InputError(f"coverage matrix must be 2-D (snippets x features), got shape {cov.shape}")
    if cov.shape[1] != len(kinds):
        raise InputError(
            f"coverage matrix has {cov.shape[1]} feature columns but {len(kinds)} feature kinds were given"
        )
    bad = sorted({k for k in kinds if k not in _PHASES})
    if bad:
        raise InputError(f"unknown feature kinds {bad}; use 'intent', 'keyword' or 'relation'")
    return cov


def _result(cov: np.ndarray, selected: list[int], method: str) -> CoverResult:
    coverable = cov.any(axis=0)
    got = cov[selected].any(axis=0) if selected else np.zeros(cov.shape[1], dtype=bool)
    return CoverResult(
        selected=sorted(selected),
        covered_features=[int(j) for j in np.flatnonzero(got)],
        uncoverable_features=[int(j) for j in np.flatnonzero(~coverable)],
        full=bool(got.all()) if cov.shape[1] else True,
        method=method,
    )


def greedy_cover(covered: np.ndarray, kinds: Sequence[str]) -> CoverResult:
    """The paper's Algorithm 1 (intent, then relations, then keywords)."""
    cov = _check(covered, kinds)
    n, _ = cov.shape
    kind_arr = np.array(list(kinds), dtype=object)
    have = np.zeros(cov.shape[1], dtype=bool)
    selected: list[int] = []
    for phase in _PHASES:
        phase_mask = kind_arr == phase
        while True:
            need = phase_mask & ~have & cov.any(axis=0)
            if not need.any():
                break
            gain_phase = cov[:, need].sum(axis=1)
            gain_all = cov[:, ~have].sum(axis=1)
            # lexicographic: phase gain, overall gain, earlier rank
            order = sorted(range(n), key=lambda i: (-gain_phase[i], -gain_all[i], i))
            best = order[0]
            if gain_phase[best] == 0:  # pragma: no cover - need implies some snippet covers it
                break
            selected.append(best)
            have |= cov[best]
    return _result(cov, selected, "greedy")


# Sets of one size the direct search tries before it hands the problem to the integer program
# (a question's cover takes a few of its candidates, so the search ends long before this).
_SEARCH_LIMIT = 20_000


def _smallest_cover(cov: np.ndarray) -> list[int] | None:
    """The integer program's answer found directly, without importing its solver (scipy.optimize
    costs a cold question about half a second): the sets of 1, 2, ... snippets in turn, the first
    size with a cover wins, and among its covers the one with the smallest sum of ranks (the
    program's tie-break; two covers with the same sum: the earlier in lexicographic order).
    None when one size has more than ``_SEARCH_LIMIT`` sets to try."""
    from itertools import combinations
    from math import comb

    n = cov.shape[0]
    # one bit per feature: a set covers them all when the OR of its rows is every bit
    rows = [int("".join("1" if b else "0" for b in row[::-1]) or "0", 2) for row in cov]
    every = (1 << cov.shape[1]) - 1
    for size in range(1, n + 1):
        if comb(n, size) > _SEARCH_LIMIT:
            return None
        best: tuple[int, ...] | None = None
        for chosen in combinations(range(n), size):
            got = 0
            for i in chosen:
                got |= rows[i]
            if got == every and (best is None or sum(chosen) < sum(best)):
                best = chosen
        if best is not None:
            return list(best)
    return None  # pragma: no cover - all n snippets cover every coverable feature


def exact_cover(covered: np.ndarray, kinds: Sequence[str], max_candidates: int = 30) -> CoverResult:
    """A minimum-size set covering every coverable feature (integer program)."""
    cov = _check(covered, kinds)
    n, f = cov.shape
    if n > max_candidates:
        raise InputError(
            f"exact cover is limited to {max_candidates} candidates, got {n}; "
            "use the greedy cover or fewer candidates"
        )
    coverable = cov.any(axis=0)
    if n == 0 or not coverable.any():
        return _result(cov, [], "exact")
    found = _smallest_cover(cov[:, coverable])
    if found is not None:
        return _result(cov, found, "exact")
    from scipy.optimize import Bounds, LinearConstraint, milp

    a = cov[:, coverable].T.astype(float)  # (features, snippets)
    # Minimise the set size; a tie-break far below 1 prefers earlier-ranked snippets.
    c = np.ones(n) + np.arange(n) / (n * (n + 1.0))
    res = milp(
        c,
        constraints=LinearConstraint(a, lb=np.ones(a.shape[0]), ub=np.inf),
        integrality=np.ones(n),
        bounds=Bounds(0, 1),
    )
    if res.x is None:  # pragma: no cover - always feasible: every row has a 1
        logger.warning("exact cover solver failed (%s); falling back to greedy", res.message)
        return greedy_cover(cov, kinds)
    selected = [int(i) for i in np.flatnonzero(res.x > 0.5)]
    return _result(cov, selected, "exact")


def cover(
    covered: np.ndarray,
    kinds: Sequence[str],
    method: Literal["greedy", "exact", "auto"] = "auto",
    max_exact: int = 30,
) -> CoverResult:
    """Dispatch: ``auto`` uses the exact search up to ``max_exact`` candidates, else greedy."""
    if method == "greedy":
        return greedy_cover(covered, kinds)
    if method == "exact":
        return exact_cover(covered, kinds, max_candidates=max_exact)
    n = np.asarray(covered).shape[0]
    return exact_cover(covered, kinds, max_exact) if n <= max_exact else greedy_cover(covered, kinds)
