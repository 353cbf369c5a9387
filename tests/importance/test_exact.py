"""Exact, approximate and Monte Carlo gradients against brute-force enumeration of 2^M subsets."""

from __future__ import annotations

import numpy as np
import pytest

from ragsieve.errors import InputError
from ragsieve.importance import kernels
from ragsieve.importance.data import ValidationData, from_lists, synthetic
from ragsieve.importance.multilinear import gradient_sums, gradients, montecarlo_samples

from .bruteforce import additive_topk, brute_force, majority_topk

VALUE_SETS = {
    "binary": [0.0, 1.0],
    "three": [0.0, 0.5, 1.0],
    "odd": [-0.7, 0.123, 0.1234],  # closer than 0.01 and negative: any values work
}


def random_case(rng: np.random.Generator, m: int, n_tuples: int, values: list[float], answers: int = 0):
    lists = []
    for _ in range(n_tuples):
        length = int(rng.integers(0, m + 1))
        items = rng.permutation(m)[:length]
        lists.append([
            (int(i), float(rng.choice(values)), int(rng.integers(0, answers)) if answers else None)
            for i in items
        ])
    return lists


def to_data(lists, n_sources: int | None = None) -> tuple[ValidationData, np.ndarray]:
    """ValidationData whose item order may differ from the brute force's; returns the map."""
    rows = []
    for ranked in lists:
        row = []
        for i, u, a in ranked:
            entry = {"id": str(i), "source": f"s{i % n_sources}" if n_sources else f"s{i}", "utility": u}
            if a is not None:
                entry["answer"] = str(a)
            row.append(entry)
        rows.append(row)
    data = from_lists(rows)
    order = np.array([int(x) for x in data.item_ids or []], dtype=np.int64)
    return data, order


@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("values", list(VALUE_SETS))
@pytest.mark.parametrize("m", [3, 7, 12])
def test_exact_matches_brute_force(k: int, values: str, m: int) -> None:
    rng = np.random.default_rng(1000 * k + m + len(values))
    lists = random_case(rng, m, n_tuples=3 if m == 12 else 5, values=VALUE_SETS[values])
    lists[0] = [(i, float(rng.choice(VALUE_SETS[values])), None) for i in rng.permutation(m)]  # a full list
    weights = rng.random(m) * 0.98 + 0.01
    expected, expected_value = brute_force(lists, weights, additive_topk(k))
    data, order = to_data(lists)
    got = gradients(data, weights[order], level="item", k=k)
    np.testing.assert_allclose(got.gradient, expected[order], atol=1e-9, rtol=0)
    assert got.value == pytest.approx(expected_value, abs=1e-9)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_source_gradient_is_mean_of_item_gradients(k: int) -> None:
    rng = np.random.default_rng(k)
    m, n_sources = 10, 3
    lists = random_case(rng, m, 6, VALUE_SETS["three"])
    src_w = rng.random(n_sources)
    item_w = src_w[np.arange(m) % n_sources]
    expected_items, _ = brute_force(lists, item_w, additive_topk(k))
    data, order = to_data(lists, n_sources=n_sources)
    src_index = [int(s[1:]) for s in data.sources]
    got = gradients(data, src_w[src_index], level="source", k=k).gradient
    for j, s in enumerate(src_index):
        members = [i for i in set(order.tolist()) if i % n_sources == s]
        assert got[j] == pytest.approx(np.mean(expected_items[members]), abs=1e-9)


def test_recorded_reference_case() -> None:
    """Hand-derived case of the reference semantics: additive utility over the top-K present items.

    K=2, one list a(u=1), b(u=0), c(u=1), every weight 1/2, N=1. Adding a: it always enters the
    top-2 and expels the 2nd present of (b, c) when it exists; E[gain] = (1 - E[u of 2nd present of
    b,c]) / 2 = (1 - 1/4) / 2 = 3/8. b: enters when fewer than 2 of (a) before it (always), expels
    the (2-j)-th present after it: j=0 (a absent, 1/2) -> 2nd of (c) never exists, gain 0;
    j=1 -> 1st of (c) = 1 w.p. 1/2, gain (0 - 1/2)/2: G_b = 1/2 * (-1/4) = -1/8. c: enters when
    fewer than 2 of (a, b) present (3/4), nothing after it: G_c = 3/4 * 1/2 = 3/8.
    E[U] = (1/2*1 + 1/2*P(fewer than 2 of a,b)*1 ... ) computed: a contributes 1/2 * 1/2,
    c contributes 1/2 * 3/4 * 1/2; total 1/4 + 3/16 = 7/16.
    """
    data = from_lists([[
        {"id": "a", "source": "x", "utility": 1},
        {"id": "b", "source": "y", "utility": 0},
        {"id": "c", "source": "z", "utility": 1},
    ]])
    got = gradients(data, np.full(3, 0.5), level="item", k=2)
    np.testing.assert_allclose(got.gradient, [3 / 8, -1 / 8, 3 / 8], atol=1e-12)
    assert got.value == pytest.approx(7 / 16, abs=1e-12)


def test_items_outside_every_list_and_below_certain_topk_get_zero() -> None:
    # item 3 belongs to the corpus but is in no list; items ranked after K certain items get 0
    data = ValidationData(
        offsets=np.array([0, 3]), item=np.array([0, 1, 2], np.int32), source=np.array([0, 1, 2], np.int32),
        utility=np.array([1.0, 0.0, 1.0]), item_source=np.array([0, 1, 2, 0], np.int32),
        sources=["a", "b", "c"],
    )
    g = gradients(data, np.array([1.0, 1.0, 0.3, 0.6]), level="item", k=2).gradient
    assert g[2] == 0.0 and g[3] == 0.0


def test_empty_lists_contribute_nothing() -> None:
    rng = np.random.default_rng(3)
    lists = random_case(rng, 6, 4, VALUE_SETS["binary"])
    rows = [[{"id": str(i), "source": "s", "utility": u} for i, u, _ in ranked] for ranked in lists]
    base = from_lists(rows)
    padded = from_lists([[], *rows[:2], [], *rows[2:], []])
    w = np.full(1, 0.4)
    s1, v1 = gradient_sums(base, w, k=3)
    s2, v2 = gradient_sums(padded, w, k=3)
    np.testing.assert_allclose(s1, s2, atol=1e-15)
    assert v1 == pytest.approx(v2)
    only_empty = from_lists([[], []])
    assert gradients(only_empty, np.zeros(0), k=3).gradient.shape == (0,)


def test_repeated_item_is_rejected_or_merged() -> None:
    rows = [[{"id": "a", "source": "s", "utility": 1}, {"id": "a", "source": "s", "utility": 0}]]
    with pytest.raises(InputError, match="appears twice"):
        from_lists(rows)
    merged = from_lists(rows, on_duplicate="first")
    assert merged.n_positions == 1 and merged.utility[0] == 1.0
    with pytest.raises(InputError, match="two sources"):
        from_lists([[{"id": "a", "source": "s", "utility": 1}], [{"id": "a", "source": "t", "utility": 1}]])


@pytest.mark.parametrize("k", [1, 2, 5, 10])
@pytest.mark.parametrize("eps", [1e-1, 1e-2, 1e-3])
def test_approximation_within_epsilon(k: int, eps: float) -> None:
    rng = np.random.default_rng(int(eps * 1e4) + k)
    n, length = 80, 50
    offsets = np.arange(0, n * length + 1, length)
    util = rng.choice([0.0, 1.0, 2.0], size=n * length)
    w = rng.uniform(0.05, 1.0, size=n * length)
    group = np.arange(n * length, dtype=np.int32)
    exact, approx = np.empty(n * length), np.empty(n * length)
    kernels.position_gradients(offsets, group, util, w, k, 0.0, exact, length)
    kernels.position_gradients(offsets, group, util, w, k, eps, approx, length)
    assert np.abs(exact - approx).max() <= eps * np.abs(util).max()
    assert (approx == 0).sum() > (exact == 0).sum()  # the truncation did cut something


@pytest.mark.parametrize("k", [2, 5])
def test_montecarlo_within_bound_additive(k: int) -> None:
    rng = np.random.default_rng(k)
    n, length, eps, delta = 20, 20, 0.1, 0.05
    data = synthetic(n, list_len=length, n_sources=5, seed=k, utility_dtype=np.float64)
    w = rng.uniform(0.1, 0.9, size=data.n_items)
    t = montecarlo_samples(eps, delta, n)
    exact, mc = np.empty(data.n_positions), np.empty(data.n_positions)
    kernels.position_gradients(data.offsets, data.item, data.utility, w, k, 0.0, exact, length)
    labels = np.zeros(data.n_positions, np.int32)
    kernels.montecarlo_gradient_sums(
        data.offsets, data.item, data.utility, labels, w, k, 0.0, t, np.uint64(7), False, mc, length, 0, 0
    )
    # G is the gain of U = sum/K, in [-1/K, 1/K]; the Hoeffding bound is stated for [-1, 1]
    assert np.abs(exact - mc).max() * k <= eps


def test_montecarlo_majority_vote_matches_brute_force() -> None:
    rng = np.random.default_rng(11)
    m, k, eps, delta = 8, 3, 0.1, 0.05
    lists = random_case(rng, m, 4, VALUE_SETS["binary"], answers=3)
    # correctness is a property of the answer: make utilities consistent per (tuple, answer)
    lists = [[(i, float(a == 0), a) for i, _, a in ranked] for ranked in lists]
    weights = rng.random(m) * 0.9 + 0.05
    expected, _ = brute_force(lists, weights, majority_topk(k))
    data, order = to_data(lists)
    got = gradients(data, weights[order], level="item", k=k, method="montecarlo", utility="majority",
                    epsilon=eps, delta=delta, seed=3)
    # per tuple within eps w.p. 1 - delta; the item gradient averages over tuples (1/N each)
    assert np.abs(got.gradient - expected[order]).max() <= eps


def test_threads_and_kernels_agree() -> None:
    numba = pytest.importorskip("numba", reason="thread counts exist only for the compiled kernels (fast-kernels)")

    data = synthetic(500, n_sources=50, seed=2, utility_dtype=np.float64)
    w = np.random.default_rng(0).random(50)
    one = gradient_sums(data, w, k=10, n_jobs=1)[0]
    two = gradient_sums(data, w, k=10, n_jobs=min(2, numba.config.NUMBA_NUM_THREADS))[0]
    out = np.empty(data.n_positions)
    kernels.position_gradients(data.offsets, data.source, data.utility, w, 10, 0.0, out, 50)
    np.testing.assert_allclose(one, two, rtol=1e-12, atol=1e-15)
    by_source = np.bincount(data.source, weights=out, minlength=50)
    np.testing.assert_allclose(one, by_source, rtol=1e-12, atol=1e-15)


def test_inconsistent_arrays_are_rejected_before_the_kernels() -> None:
    good = dict(offsets=np.array([0, 2]), item=np.array([0, 1], np.int32), source=np.array([0, 1], np.int32),
                utility=np.array([1.0, 0.0]), item_source=np.array([0, 1], np.int32), sources=["a", "b"])
    gradients(ValidationData(**good), np.full(2, 0.5), k=1)
    for bad in (dict(sources=["a"]), dict(source=np.array([0, 0], np.int32)), dict(offsets=np.array([0, 3])),
                dict(utility=np.array([1.0, np.nan]))):
        with pytest.raises(InputError):
            gradients(ValidationData(**{**good, **bad}), np.full(2, 0.5), k=1)
