"""The audit's neighbour table: exact up to a size, an HNSW graph above it. The graph must agree
with the exact search on nearly every neighbour, find every member of a tight cluster (what the
coordinated-voice check groups), and give the same table on every run (findings that change
from one run to the next would make ``--fail-on`` flaky in CI)."""

from __future__ import annotations

import numpy as np

from ragsieve.audit.corpus import Corpus
from ragsieve.types import Chunk

N, DIM, K = 3000, 48, 10


def _corpus(seed: int = 0) -> tuple[Corpus, list[list[int]]]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((N, DIM)).astype(np.float32)
    clusters: list[list[int]] = []
    for _ in range(20):  # 20 planted voices of 5 near-copies each, scattered through the corpus
        rows = [int(r) for r in rng.choice(N, size=5, replace=False) if not any(r in m for m in clusters)]
        centre = rng.standard_normal(DIM).astype(np.float32)
        for r in rows:
            vectors[r] = centre + 0.05 * rng.standard_normal(DIM).astype(np.float32)
        clusters.append(rows)
    chunks = [Chunk(f"c{i}", f"passage {i}", f"doc{i}", f"site{i}") for i in range(N)]
    return Corpus.of(chunks, vectors), clusters


def test_the_graph_agrees_with_the_exact_search_and_finds_every_cluster_member() -> None:
    corpus, clusters = _corpus()
    exact_ids, exact_sims = corpus.neighbours(K)
    graph_ids, graph_sims = corpus.neighbours(K, exact_up_to=100)
    assert graph_ids.shape == exact_ids.shape == (N, K)
    assert not (graph_ids == np.arange(N)[:, None]).any(), "a passage is never its own neighbour"
    agreement = np.mean([len(set(a) & set(b)) / K for a, b in zip(exact_ids.tolist(), graph_ids.tolist(), strict=True)])
    assert agreement >= 0.9, agreement
    for rows in clusters:
        for r in rows:
            assert set(rows) - {r} <= set(graph_ids[r].tolist()), f"cluster member {r} lost a neighbour"
    # the cosines are the true ones for the rows found
    unit = corpus.vectors
    expected = np.einsum("nd,nkd->nk", unit, unit[graph_ids])
    np.testing.assert_allclose(graph_sims, expected, atol=1e-4)
    assert exact_sims.shape == graph_sims.shape


def test_the_graph_gives_the_same_table_on_every_run() -> None:
    corpus, _ = _corpus(seed=1)
    first = corpus.neighbours(K, exact_up_to=100)
    second = corpus.neighbours(K, exact_up_to=100)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
