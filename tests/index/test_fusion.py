from __future__ import annotations

import pytest

from ragsieve.index.fusion import min_max, reciprocal_rank_fusion, top_k, weighted_score_fusion


def test_rrf_matches_the_formula():
    dense = [(1, 0.9), (2, 0.8), (3, 0.1)]
    sparse = [(3, 12.0), (1, 5.0)]
    fused = reciprocal_rank_fusion([dense, sparse], k=60)
    assert fused[1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[2] == pytest.approx(1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert [i for i, _ in top_k(fused, 3)] == [1, 3, 2]


def test_weighted_fusion_normalises_each_list():
    dense = [(1, 0.9), (2, 0.5), (3, 0.1)]
    sparse = [(3, 30.0), (2, 10.0)]
    fused = weighted_score_fusion([dense, sparse], [0.7, 0.3])
    assert fused[1] == pytest.approx(0.7 * 1.0)
    assert fused[2] == pytest.approx(0.7 * 0.5 + 0.3 * 0.0)
    assert fused[3] == pytest.approx(0.7 * 0.0 + 0.3 * 1.0)


def test_min_max_of_constant_scores_is_one():
    assert min_max([2.0, 2.0]) == [1.0, 1.0]
    assert min_max([]) == []


def test_top_k_breaks_ties_by_id():
    assert top_k({5: 1.0, 2: 1.0, 9: 0.5}, 2) == [(2, 1.0), (5, 1.0)]
