"""Risk–coverage metrics computed by hand, including ties and abstentions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsieve.eval.selective import (
    abstention_at,
    aurc,
    bootstrap_interval,
    expected_correct_at,
    paired_bootstrap_interval,
    rank_scores,
    risk_coverage_curve,
    selective_accuracy,
)


def test_perfect_ranking_has_the_smallest_area() -> None:
    # Right answers ranked first: risks 0, 0, 1/3, 1/2.
    assert aurc([True, True, False, False], [0.9, 0.8, 0.2, 0.1]) == pytest.approx((0 + 0 + 1 / 3 + 0.5) / 4)
    # Wrong answers first: risks 1, 1, 2/3, 1/2.
    assert aurc([True, True, False, False], [0.1, 0.2, 0.8, 0.9]) == pytest.approx((1 + 1 + 2 / 3 + 0.5) / 4)


def test_ties_count_in_expectation() -> None:
    # One tie group of 4 with 1 right: expected right among the first k is k/4.
    np.testing.assert_allclose(expected_correct_at([True, False, False, False], [None] * 4), [0, 0.25, 0.5, 0.75, 1])
    cov, risk = risk_coverage_curve([True, False, False, False], [0.5] * 4)
    np.testing.assert_allclose(cov, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(risk, [0.75] * 4)
    # The input order cannot change a tied ranking's score.
    assert aurc([False, False, False, True], [0.5] * 4) == pytest.approx(0.75)


def test_selective_accuracy_at_a_coverage() -> None:
    outcomes, scores = [True, False, True, False], [0.9, 0.8, 0.7, None]
    assert selective_accuracy(outcomes, scores, 0.25) == 1.0
    assert selective_accuracy(outcomes, scores, 0.5) == 0.5
    assert selective_accuracy(outcomes, scores, 0.75) == pytest.approx(2 / 3)
    assert selective_accuracy(outcomes, scores, 0.0) == 1.0  # at least one item
    assert math.isnan(selective_accuracy([], [], 0.5))


def test_abstentions_rank_after_answers_without_confidence() -> None:
    scores = rank_scores([0.3, None, 0.9], [False, False, True])
    assert scores[0] == 0.3 and scores[1] < 0 and scores[2] == -math.inf


def test_bootstrap_intervals_cover_the_estimate_and_pairing_cancels_shared_noise() -> None:
    values = np.array([1.0, 0.0] * 50)
    lo, hi = bootstrap_interval(len(values), lambda idx: float(values[idx].mean()), n_boot=300)
    assert lo < 0.5 < hi
    # a is b plus 0.1 on every item: the paired difference has no spread.
    a, b = values + 0.1, values
    lo, hi = paired_bootstrap_interval(len(a), lambda idx: float(a[idx].mean()), lambda idx: float(b[idx].mean()))
    assert lo == pytest.approx(0.1) and hi == pytest.approx(0.1)


def test_mismatched_lengths_raise() -> None:
    with pytest.raises(ValueError, match="one score per outcome"):
        aurc([True, False], [0.1])


def test_abstention_at_a_coverage_splits_by_kind_of_question() -> None:
    answerable = [True, True, False, False]
    # a ranking that puts both answerable questions first abstains only on the unanswerable ones at 50%
    assert abstention_at(answerable, [0.9, 0.8, 0.2, 0.1], 0.5) == {"unanswerable": 1.0, "answerable": 0.0}
    # the reverse ranking abstains on the answerable ones
    assert abstention_at(answerable, [0.1, 0.2, 0.8, 0.9], 0.5) == {"unanswerable": 0.0, "answerable": 1.0}
    # one tie over all four: each kind keeps half of its questions in expectation
    tied = abstention_at(answerable, [0.5] * 4, 0.5)
    assert tied["unanswerable"] == pytest.approx(0.5) and tied["answerable"] == pytest.approx(0.5)
    # no unanswerable question: that side is NaN, not zero
    assert math.isnan(abstention_at([True, True], [0.3, 0.4], 0.5)["unanswerable"])
