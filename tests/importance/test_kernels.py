"""The compiled epoch kernels: any K, any chunking, the fused group rule, against plain definitions."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ragsieve.importance import kernels
from ragsieve.importance.data import synthetic
from ragsieve.importance.multilinear import gradients, unchecked_gradient_sums

from .bruteforce import additive_topk, brute_force
from .test_exact import VALUE_SETS, random_case, to_data


@pytest.mark.parametrize("k", [3, 7, 9])
def test_k_up_to_and_beyond_the_list_length_matches_brute_force(k: int) -> None:
    # k >= the list length: every present item is in the top-K and nothing is ever expelled
    rng = np.random.default_rng(50 + k)
    m = 7
    lists = random_case(rng, m, n_tuples=4, values=VALUE_SETS["odd"])
    lists[0] = [(i, float(rng.choice(VALUE_SETS["odd"])), None) for i in rng.permutation(m)]
    weights = rng.random(m) * 0.98 + 0.01
    expected, expected_value = brute_force(lists, weights, additive_topk(k))
    data, order = to_data(lists)
    got = gradients(data, weights[order], level="item", k=k)
    np.testing.assert_allclose(got.gradient, expected[order], atol=1e-12, rtol=0)
    assert got.value == pytest.approx(expected_value, abs=1e-12)


@pytest.mark.parametrize("epsilon", [0.0, 1e-3])
def test_the_number_of_chunks_does_not_change_the_sums(epsilon: float) -> None:
    data = synthetic(97, list_len=23, n_sources=13, seed=4, utility_dtype=np.float64)
    w = np.random.default_rng(4).uniform(0.05, 0.95, 13)
    one, v1 = kernels.grouped_gradient_sums(data.offsets, data.source, data.utility, w, 6, epsilon, 1, 23)
    for n_chunks in (2, 7, 97):
        many, v = kernels.grouped_gradient_sums(data.offsets, data.source, data.utility, w, 6, epsilon, n_chunks, 23)
        np.testing.assert_allclose(many, one, rtol=1e-12, atol=1e-15)
        assert v == pytest.approx(v1, rel=1e-12)
    out = np.empty(data.n_positions)
    value = kernels.position_gradients(data.offsets, data.source, data.utility, w, 6, epsilon, out, 23)
    np.testing.assert_allclose(np.bincount(data.source, weights=out, minlength=13), one, rtol=1e-12, atol=1e-15)
    assert value == pytest.approx(v1, rel=1e-12)


def test_item_weights_over_a_large_corpus_take_one_row_per_thread() -> None:
    # more items than the per-chunk accumulator limit of four rows per thread allows
    data = synthetic(1400, list_len=50, n_sources=30, seed=8, utility_dtype=np.float64)
    assert data.n_items > 1 << 16
    w = np.random.default_rng(8).uniform(0.1, 0.9, data.n_items)
    out = np.empty(data.n_positions)
    want_value = kernels.position_gradients(data.offsets, data.item, data.utility, w, 10, 0.0, out, 50)
    want = np.bincount(data.item, weights=out, minlength=data.n_items)
    for n_jobs in (1, 2):
        got, value = unchecked_gradient_sums(data, w, level="item", k=10, n_jobs=n_jobs)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
        assert value == pytest.approx(want_value, rel=1e-12)


def test_the_fused_group_rule_equals_clip_then_bincount() -> None:
    rng = np.random.default_rng(3)
    n_sources, n_items, n_tuples, lr = 9, 200, 17, 40.0
    item_source = rng.integers(0, n_sources - 1, n_items).astype(np.int32)  # the last source has no items
    sums = rng.normal(0.0, 0.3, n_items)
    sums[rng.random(n_items) < 0.3] = 0.0  # items never retrieved
    weights = rng.random(n_sources)
    all_items = np.bincount(item_source, minlength=n_sources).astype(np.float64)
    at = weights[item_source]
    item_w = np.clip(at + lr * (sums / n_tuples), 0.0, 1.0)
    assert (item_w == 0.0).any() and (item_w == 1.0).any()  # the step clips both ways
    want_w = np.divide(np.bincount(item_source, weights=item_w, minlength=n_sources), all_items,
                       out=weights.copy(), where=all_items > 0)
    want_g = np.divide(np.bincount(item_source, weights=sums / n_tuples, minlength=n_sources), all_items,
                       out=np.zeros(n_sources), where=all_items > 0)
    got_w, got_g = kernels.reference_step(sums, weights, item_source, lr, n_tuples, all_items)
    np.testing.assert_array_equal(got_w, want_w)
    np.testing.assert_array_equal(got_g, want_g)
    assert got_w[-1] == weights[-1]  # a source without items keeps its weight


@pytest.mark.parametrize("method", ["exact", "approx", "montecarlo"])
def test_item_gradients_read_through_the_source_equal_those_at_copied_item_weights(method: str) -> None:
    data = synthetic(60, list_len=15, n_sources=7, seed=12, utility_dtype=np.float64)
    w = np.random.default_rng(12).uniform(0.1, 0.9, 7)
    kw = dict(level="item", k=4, method=method, epsilon=0.05, n_samples=30, seed=2, n_jobs=1)
    want, want_v = unchecked_gradient_sums(data, w[data.item_source], **kw)  # type: ignore[arg-type]
    got, got_v = unchecked_gradient_sums(data, w, item_weights_by_source=True, **kw)  # type: ignore[arg-type]
    np.testing.assert_array_equal(got, want)
    assert got_v == want_v or (np.isnan(got_v) and np.isnan(want_v))


def test_the_thread_count_does_not_change_a_bit_of_the_gradients() -> None:
    # the chunks of tuples depend on the data alone and their rows are added in chunk order,
    # whichever thread took which chunk: one thread and two give the same bits
    numba = pytest.importorskip("numba", reason="thread counts exist only for the compiled kernels (fast-kernels)")
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba runs one thread here")
    data = synthetic(1001, list_len=20, n_sources=40, seed=9, utility_dtype=np.float64)  # five chunks
    rng = np.random.default_rng(9)
    for level, n in (("source", data.n_sources), ("item", data.n_items)):
        w = rng.uniform(0.05, 0.95, n)
        for method in ("exact", "approx"):
            one = unchecked_gradient_sums(data, w, level=level, k=7, method=method, epsilon=1e-3, n_jobs=1)  # type: ignore[arg-type]
            two = unchecked_gradient_sums(data, w, level=level, k=7, method=method, epsilon=1e-3, n_jobs=2)  # type: ignore[arg-type]
            np.testing.assert_array_equal(two[0], one[0])
            assert two[1] == one[1]
    w = rng.uniform(0.05, 0.95, data.n_sources)
    outs, values = [], []
    for n_jobs in (1, 2):
        numba.set_num_threads(n_jobs)
        out = np.empty(data.n_positions)
        values.append(kernels.position_gradients(data.offsets, data.source, data.utility, w, 7, 0.0, out, 20))
        outs.append(out)
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    np.testing.assert_array_equal(outs[1], outs[0])
    assert values[1] == values[0]


def test_every_chunk_is_summed_once_whatever_the_threads_and_chunks() -> None:
    # the threads take chunks from a shared counter: fewer chunks than threads, one chunk,
    # and a chunk per tuple all give the sums of one pass over the tuples
    data = synthetic(37, list_len=9, n_sources=5, seed=5, utility_dtype=np.float64)
    w = np.random.default_rng(5).uniform(0.1, 0.9, 5)
    out = np.empty(data.n_positions)
    want_value = kernels.position_gradients(data.offsets, data.source, data.utility, w, 3, 0.0, out, 9)
    want = np.bincount(data.source, weights=out, minlength=5)
    for n_chunks in (1, 2, 3, 37):
        got, value = kernels.grouped_gradient_sums(data.offsets, data.source, data.utility, w, 3, 0.0, n_chunks, 9)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
        assert value == pytest.approx(want_value, rel=1e-12)


def test_the_interpreted_kernels_give_the_compiled_numbers(tmp_path) -> None:
    # without numba the same kernel code runs in the interpreter (its chunk counter a plain
    # increment); run it in a process where numba cannot be imported
    pytest.importorskip("numba", reason="compares against the compiled kernels (fast-kernels)")
    import json
    import subprocess
    import sys
    from pathlib import Path

    import ragsieve

    script = (
        "import sys, json\n"
        "sys.modules['numba'] = None\n"
        "import numpy as np\n"
        "from ragsieve.importance import kernels\n"
        "from ragsieve.importance.data import synthetic\n"
        "assert not kernels.COMPILED\n"
        "d = synthetic(23, list_len=8, n_sources=6, seed=3, utility_dtype=np.float64)\n"
        "w = np.linspace(0.1, 0.9, 6)\n"
        "g, v = kernels.grouped_gradient_sums(d.offsets, d.source, d.utility, w, 3, 0.0, 5, 8)\n"
        "out = np.empty(d.n_positions)\n"
        "pv = kernels.position_gradients(d.offsets, d.source, d.utility, w, 3, 0.0, out, 8)\n"
        "print(json.dumps([g.tolist(), v, out.tolist(), pv]))\n"
    )
    src = str(Path(ragsieve.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": src}
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, check=True
    )
    g, v, out, pv = json.loads(run.stdout)
    data = synthetic(23, list_len=8, n_sources=6, seed=3, utility_dtype=np.float64)
    w = np.linspace(0.1, 0.9, 6)
    want_g, want_v = kernels.grouped_gradient_sums(data.offsets, data.source, data.utility, w, 3, 0.0, 5, 8)
    want_out = np.empty(data.n_positions)
    want_pv = kernels.position_gradients(data.offsets, data.source, data.utility, w, 3, 0.0, want_out, 8)
    np.testing.assert_allclose(g, want_g, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(out, want_out, rtol=1e-12, atol=1e-15)
    assert v == pytest.approx(want_v, rel=1e-12) and pv == pytest.approx(want_pv, rel=1e-12)
