"""Gradients partitioned across a Dask LocalCluster equal the single-process ones."""

from __future__ import annotations

import numpy as np
import pytest

from ragsieve.importance import DataImportance, synthetic
from ragsieve.importance.distributed import DistributedGradients
from ragsieve.importance.multilinear import gradient_sums


@pytest.mark.slow
def test_local_cluster_matches_single_process() -> None:
    distributed = pytest.importorskip("distributed")
    data = synthetic(400, list_len=30, n_sources=40, seed=5, utility_dtype=np.float64)
    w = np.random.default_rng(1).random(40)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster) as client:
        dist = DistributedGradients(client, data)
        assert len(dist.parts) == 2
        got, got_v = dist.gradient_sums(w, level="source", k=10)
        want, want_v = gradient_sums(data, w, level="source", k=10)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
        assert got_v == pytest.approx(want_v, rel=1e-12)
        est = DataImportance(k=10, epochs=2).fit(data, client=client)
    single = DataImportance(k=10, epochs=2).fit(data)
    np.testing.assert_allclose(est.weights_, single.weights_, rtol=1e-12, atol=1e-14)


def test_partitions_add_up_including_monte_carlo_draws() -> None:
    """What each Dask worker computes: sums over a slice of tuples, with the global tuple offset."""
    data = synthetic(90, list_len=20, n_sources=12, seed=6, utility_dtype=np.float64)
    w = np.random.default_rng(2).random(12)
    for method in ("exact", "approx", "montecarlo"):
        kw = dict(level="source", k=5, method=method, epsilon=0.05, n_samples=40, seed=9)
        whole, _ = gradient_sums(data, w, **kw)
        parts = sum(
            gradient_sums(data.subset(np.arange(a, b)), w, tuple_offset=a, **kw)[0]
            for a, b in ((0, 31), (31, 60), (60, 90))
        )
        np.testing.assert_allclose(parts, whole, rtol=1e-12, atol=1e-14)
