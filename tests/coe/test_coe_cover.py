from __future__ import annotations

import itertools

import numpy as np
import pytest

from ragsieve.coe.cover import cover, exact_cover, greedy_cover
from ragsieve.errors import InputError


def brute_min(cov: np.ndarray) -> int:
    target = cov.any(axis=0)
    n = cov.shape[0]
    for size in range(n + 1):
        for combo in itertools.combinations(range(n), size):
            got = cov[list(combo)].any(axis=0) if combo else np.zeros(cov.shape[1], bool)
            if (got == target).all():
                return size
    raise AssertionError("unreachable")


def random_case(rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    n, f = int(rng.integers(1, 9)), int(rng.integers(1, 7))
    kinds = ["intent"] + [str(k) for k in rng.choice(["keyword", "relation"], size=f - 1)]
    cov = rng.random((n, f)) < 0.35
    return cov, kinds


@pytest.mark.parametrize("seed", range(40))
def test_exact_matches_brute_force_and_greedy_covers_the_same(seed):
    cov, kinds = random_case(np.random.default_rng(seed))
    ex, gr = exact_cover(cov, kinds), greedy_cover(cov, kinds)
    assert len(ex.selected) == brute_min(cov)
    coverable = set(np.flatnonzero(cov.any(axis=0)).tolist())
    assert set(ex.covered_features) == coverable == set(gr.covered_features)
    assert len(gr.selected) >= len(ex.selected)
    assert ex.full == gr.full == bool(cov.any(axis=0).all())


def test_greedy_can_be_redundant_exact_is_not():
    # features: intent, R1, R2, K1, K2.  D ranks first and ties B on the intent phase.
    kinds = ["intent", "relation", "relation", "keyword", "keyword"]
    d = [1, 1, 1, 0, 0]
    b = [1, 1, 0, 1, 0]
    c = [0, 0, 1, 0, 1]
    cov = np.array([d, b, c], dtype=bool)
    assert greedy_cover(cov, kinds).selected == [0, 1, 2]
    assert exact_cover(cov, kinds).selected == [1, 2]


def test_greedy_phase_order_intent_first():
    kinds = ["intent", "keyword", "keyword"]
    cov = np.array([[0, 1, 1], [1, 0, 0]], dtype=bool)
    res = greedy_cover(cov, kinds)
    assert res.selected == [0, 1] and res.full


def test_no_full_cover_returns_best_partial():
    kinds = ["intent", "keyword", "keyword", "relation"]
    cov = np.array([[1, 1, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0]], dtype=bool)  # K2, R never covered
    for res in (greedy_cover(cov, kinds), exact_cover(cov, kinds)):
        assert not res.full
        assert res.selected == [0]
        assert res.covered_features == [0, 1]
        assert res.uncoverable_features == [2, 3]


def test_nothing_covered_gives_empty_set():
    cov = np.zeros((3, 2), dtype=bool)
    assert exact_cover(cov, ["intent", "keyword"]).selected == []
    assert greedy_cover(cov, ["intent", "keyword"]).selected == []


def test_exact_prefers_earlier_ranks_on_ties():
    cov = np.array([[1, 1], [1, 1], [1, 1]], dtype=bool)
    assert exact_cover(cov, ["intent", "keyword"]).selected == [0]


def test_input_validation():
    with pytest.raises(InputError, match="feature kinds"):
        greedy_cover(np.ones((2, 2), bool), ["intent"])
    with pytest.raises(InputError, match="unknown feature kinds"):
        greedy_cover(np.ones((2, 1), bool), ["topic"])
    with pytest.raises(InputError, match="exact cover is limited"):
        exact_cover(np.ones((5, 1), bool), ["intent"], max_candidates=4)


def test_auto_dispatch():
    cov = np.eye(4, dtype=bool)
    kinds = ["intent", "keyword", "keyword", "relation"]
    assert cover(cov, kinds, "auto", max_exact=10).method == "exact"
    assert cover(cov, kinds, "auto", max_exact=2).method == "greedy"
    assert cover(cov, kinds, "greedy").method == "greedy"


def test_exact_thirty_candidates_is_fast():
    rng = np.random.default_rng(3)
    cov = rng.random((30, 12)) < 0.15
    kinds = ["intent"] + ["keyword"] * 6 + ["relation"] * 5
    res = exact_cover(cov, kinds)
    assert set(res.covered_features) == set(np.flatnonzero(cov.any(axis=0)).tolist())
    assert len(res.selected) <= len(greedy_cover(cov, kinds).selected)
