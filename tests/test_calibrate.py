"""Abstention-threshold calibration: the finite-sample guarantee, infeasibility, edge cases."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from ragsieve.calibrate import (
    CalibrationResult,
    ThresholdCalibrator,
    abstains,
    answer_mask,
    binomial_p_value,
    calibrate_threshold,
    clopper_pearson_upper,
    held_out_report,
    hoeffding_bentkus_p_value,
    simulate_splits,
)
from ragsieve.errors import InputError


def synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Confidences uniform on [0, 1] with P(right | c) = c: selective risk at threshold t is (1 - t) / 2."""
    rng = np.random.default_rng(seed)
    conf = rng.uniform(size=n)
    return conf, rng.uniform(size=n) < conf


def population_risk(threshold: float) -> float:
    return (1.0 - threshold) / 2.0


# ------------------------------------------------------------------ the guarantee
@pytest.mark.parametrize("method", ["ltt-binomial", "ltt-hb"])
def test_guarantee_holds_over_fresh_calibration_sets(method: str) -> None:
    """Over 500 independent calibration sets, the chosen threshold's *population* risk (known in
    closed form) exceeds alpha in at most delta of them, up to the binomial sampling slack."""
    alpha, delta, draws = 0.15, 0.1, 500
    exceeded = feasible = 0
    for seed in range(draws):
        conf, correct = synthetic(600, seed)
        res = calibrate_threshold(conf, correct, alpha, delta, method=method)
        if res.feasible:
            feasible += 1
            assert res.threshold is not None
            exceeded += population_risk(res.threshold) > alpha
    slack = 3 * math.sqrt(delta * (1 - delta) / draws)
    assert exceeded / draws <= delta + slack
    # the guarantee must not be bought by never answering
    assert feasible > draws / 2


def test_split_simulation_exceeds_alpha_at_most_delta() -> None:
    """The simulation the CLI reports: realised held-out risk > alpha in at most delta of the splits
    (a test split large enough that its own noise is small next to the calibration's)."""
    conf, correct = synthetic(20000, 7)
    sim = simulate_splits(conf, correct, risk=0.15, delta=0.1, n_splits=500, cal_frac=0.1, seed=3)
    assert sim.n_splits == 500 and len(sim.test_risks) == 500
    slack = 3 * math.sqrt(0.1 * 0.9 / 500)
    assert sim.exceed_rate <= 0.1 + slack
    assert sim.pool_exceed_rate <= 0.1 + slack
    assert sim.exceed_interval[0] <= sim.exceed_rate <= sim.exceed_interval[1]
    assert sim.mean_coverage > 0.1  # it answers something
    assert sim.infeasible < 250


def test_pool_risk_is_what_the_guarantee_bounds_on_small_pools() -> None:
    """On a small pool split in half, the held-out risk is noisy, but the chosen threshold's risk on
    the pool the splits come from still exceeds alpha in at most delta of the splits."""
    conf, correct = synthetic(4000, 7)
    sim = simulate_splits(conf, correct, risk=0.15, delta=0.1, n_splits=500, cal_frac=0.5, seed=3)
    assert sim.pool_exceed_rate <= 0.1 + 3 * math.sqrt(0.1 * 0.9 / 500)


def test_naive_empirical_threshold_would_fail_the_same_check() -> None:
    """The check has teeth: choosing the lowest threshold whose *empirical* risk is <= alpha
    exceeds alpha on held-out data in about half the splits."""
    conf, correct = synthetic(4000, 7)
    rng = np.random.default_rng(3)
    exceeded = 0
    for _ in range(200):
        perm = rng.permutation(len(conf))
        cal, test = perm[:2000], perm[2000:]
        order = np.argsort(-conf[cal])
        emp = np.cumsum(~correct[cal][order]) / np.arange(1, 2001)
        thr = conf[cal][order][np.flatnonzero(emp <= 0.15)[-1]]
        ans = conf[test] >= thr
        exceeded += (~correct[test] & ans).sum() / ans.sum() > 0.15
    assert exceeded / 200 > 0.25


def test_crc_controls_joint_risk_in_expectation() -> None:
    conf, correct = synthetic(3000, 11)
    sim = simulate_splits(conf, correct, risk=0.1, delta=0.1, n_splits=300, seed=1, method="crc")
    assert sim.mean_test_risk <= 0.1 + 0.005
    assert sim.mean_coverage > 0.3


# ------------------------------------------------------------------ result contents
def test_feasible_result_reports_threshold_coverage_and_bound() -> None:
    conf, correct = synthetic(2000, 0)
    res = calibrate_threshold(conf, correct, 0.1, 0.1)
    assert res.feasible and res.threshold is not None
    answered = conf >= res.threshold
    assert res.n_answered == int(answered.sum())
    assert res.coverage == pytest.approx(answered.mean())
    assert res.empirical_risk == pytest.approx((~correct[answered]).mean())
    assert res.empirical_risk is not None and res.bound is not None
    assert res.empirical_risk <= res.bound <= 0.1
    assert "answer when confidence >=" in res.message
    assert CalibrationResult.from_dict(res.to_dict()) == res


def test_infeasible_reports_best_achievable_risk() -> None:
    conf, correct = synthetic(1000, 4)
    res = calibrate_threshold(conf, correct, risk=0.01, delta=0.1)
    assert not res.feasible and res.threshold is None
    assert res.n_answered == 0 and res.coverage == 0.0
    assert res.best_risk is not None and res.best_bound is not None
    assert res.best_risk <= res.best_bound
    assert res.best_bound > 0.01
    assert "best achievable risk" in res.message and f"{res.best_bound:.3f}" in res.message
    # asking for the reported best bound (a little above) is then feasible at that threshold's level
    again = calibrate_threshold(conf, correct, risk=min(0.99, res.best_bound + 0.02), delta=0.1)
    assert again.feasible


def test_all_wrong_is_infeasible_and_all_right_answers_everything() -> None:
    conf = np.linspace(0.0, 1.0, 200)
    wrong = calibrate_threshold(conf, np.zeros(200, bool), 0.1, 0.1)
    assert not wrong.feasible and wrong.best_risk == 1.0
    right = calibrate_threshold(conf, np.ones(200, bool), 0.1, 0.1)
    assert right.feasible and right.threshold == 0.0 and right.coverage == 1.0
    assert right.empirical_risk == 0.0


def test_tiny_n_cannot_certify_anything() -> None:
    res = calibrate_threshold([0.9, 0.8, 0.7], [True, True, True], 0.1, 0.1)
    assert not res.feasible
    assert "too few" in res.message and res.tested == 0
    # 22 straight right answers are the fewest that certify 10% at delta = 0.1: 0.9**22 < 0.1 < 0.9**21
    conf = np.linspace(1.0, 0.5, 22)
    assert calibrate_threshold(conf, np.ones(22, bool), 0.1, 0.1).feasible
    assert not calibrate_threshold(conf[:21], np.ones(21, bool), 0.1, 0.1).feasible


def test_ties_are_answered_or_abstained_together() -> None:
    conf = np.array([0.9] * 50 + [0.5] * 50)
    correct = np.array([True] * 50 + [True] * 45 + [False] * 5)
    res = calibrate_threshold(conf, correct, 0.2, 0.1)
    assert res.threshold in (0.9, 0.5)
    assert res.n_answered in (50, 100)
    assert res.threshold == 0.5 and res.n_answered == 100


def test_missing_confidences_are_never_answered() -> None:
    conf: list[float | None] = [None] * 10 + list(np.linspace(1, 0.5, 40))
    correct = [False] * 10 + [True] * 40
    res = calibrate_threshold(conf, correct, 0.1, 0.1)
    assert res.feasible and res.n_answered == 40 and res.empirical_risk == 0.0
    assert answer_mask(conf, res.threshold).sum() == 40
    assert not answer_mask([None, float("nan"), 0.2], 0.1)[:2].any()


def test_monotone_in_alpha_and_delta() -> None:
    conf, correct = synthetic(3000, 5)
    thresholds = [calibrate_threshold(conf, correct, a, 0.1).threshold for a in (0.08, 0.12, 0.2, 0.3)]
    assert all(t is not None for t in thresholds)
    assert thresholds == sorted(thresholds, reverse=True)  # a looser target answers more
    loose = calibrate_threshold(conf, correct, 0.15, 0.3).coverage
    strict = calibrate_threshold(conf, correct, 0.15, 0.01).coverage
    assert loose >= strict


def test_explicit_grid_and_multiple_starts() -> None:
    conf, correct = synthetic(2000, 9)
    grid = np.linspace(0, 1, 101)
    res = calibrate_threshold(conf, correct, 0.1, 0.1, thresholds=grid)
    assert res.feasible and res.threshold is not None and res.threshold in grid
    multi = calibrate_threshold(conf, correct, 0.1, 0.1, starts=3)
    assert multi.details["level_per_start"] == pytest.approx(0.1 / 3)
    assert len(multi.details["starts"]) == 3


def test_bad_inputs_name_the_fix() -> None:
    with pytest.raises(InputError, match="target risk"):
        calibrate_threshold([0.5], [True], risk=1.5)
    with pytest.raises(InputError, match="delta"):
        calibrate_threshold([0.5], [True], delta=0.0)
    with pytest.raises(InputError, match="one label per confidence"):
        calibrate_threshold([0.5, 0.2], [True])
    with pytest.raises(InputError, match="unknown calibration method"):
        calibrate_threshold([0.5], [True], method="magic")
    with pytest.raises(InputError, match="no calibration items"):
        calibrate_threshold([], [])


# ------------------------------------------------------------------ p-values and bounds
def test_p_values_and_clopper_pearson_agree() -> None:
    for e, n in [(0, 30), (3, 50), (10, 200)]:
        bound = clopper_pearson_upper(e, n, 0.1)
        assert binomial_p_value(e, n, bound + 1e-6) <= 0.1 + 1e-9
        assert binomial_p_value(e, n, bound - 1e-4) > 0.1
        assert binomial_p_value(e, n, 0.1) == pytest.approx(stats.binom.cdf(e, n, 0.1))
        # Hoeffding-Bentkus is valid for any bounded loss, so it is never smaller than e * exact tail / e
        assert hoeffding_bentkus_p_value(e / n, n, 0.1) >= binomial_p_value(e, n, 0.1) - 1e-12
    assert clopper_pearson_upper(5, 5, 0.1) == 1.0 and binomial_p_value(0, 0, 0.1) == 1.0


# ------------------------------------------------------------------ estimator
def test_calibrator_round_trip_and_predict() -> None:
    conf, correct = synthetic(1500, 2)
    cal = ThresholdCalibrator(risk=0.15, delta=0.1).fit(conf, correct)
    assert cal.threshold_ == cal.result_.threshold and cal.feasible_
    again = ThresholdCalibrator.from_dict(cal.to_dict())
    assert again.threshold_ == cal.threshold_ and again.get_params() == cal.get_params()
    np.testing.assert_array_equal(again.predict(conf), conf >= cal.threshold_)
    with pytest.raises(InputError, match="not fitted"):
        ThresholdCalibrator().predict([0.5])
    unfitted = ThresholdCalibrator.from_dict(ThresholdCalibrator(0.2).to_dict())
    assert unfitted.risk == 0.2 and not hasattr(unfitted, "threshold_")


def test_held_out_report_for_eval() -> None:
    conf, correct = synthetic(3000, 12)
    rep = held_out_report(conf, correct, risk=0.15, delta=0.1, n_splits=50, seed=4)
    assert rep["n_calibration"] == 1500 and rep["n_test"] == 1500
    thr = rep["calibration"]["threshold"]
    assert thr is not None
    assert 0 < rep["test_coverage"] < 1
    lo, hi = rep["test_risk_interval"]
    assert lo <= rep["test_risk"] <= hi
    assert population_risk(thr) <= 0.15 + 0.02
    assert rep["simulation"]["n_splits"] == 50 and "test_risks" not in rep["simulation"]
    json.dumps(rep)  # goes into eval --json as it is
    none_answered = held_out_report([0.5] * 10, [False] * 10, n_splits=0)
    assert none_answered["test_risk"] is None and none_answered["simulation"] is None


def test_abstention_rule_matches_the_answer_mask() -> None:
    assert abstains(0.7, None) is None and abstains(None, None) is None
    assert abstains(0.5, 0.5) is None  # equal answers
    reason = abstains(0.49, 0.5)
    assert reason is not None and "0.49 < threshold 0.5" in reason
    assert abstains(None, 0.5) is not None and abstains(float("nan"), 0.5) is not None
    conf: list[float | None] = [0.2, 0.5, None, 0.9]
    mask = answer_mask(conf, 0.5)
    assert [abstains(c, 0.5) is None for c in conf] == mask.tolist()


# ------------------------------------------------------------- both errors bounded
def population_withdrawn(threshold: float) -> float:
    """Share of right answers below ``threshold`` when c is uniform and P(right | c) = c: t**2."""
    return threshold**2


def test_withdrawn_and_risk_hold_together_over_fresh_calibration_sets() -> None:
    """With ``withdrawn`` set, the chosen threshold's population selective risk is at most alpha
    *and* its population share of right answers withdrawn at most ``withdrawn``, jointly, in at
    least 1 - delta of fresh calibration sets; the region is narrow (t in [0.4, 0.5])."""
    alpha, withdrawn, delta, draws = 0.3, 0.25, 0.1, 300
    failed = feasible = 0
    for seed in range(draws):
        conf, correct = synthetic(3000, seed)
        res = calibrate_threshold(conf, correct, alpha, delta, withdrawn=withdrawn)
        if res.feasible:
            feasible += 1
            assert res.threshold is not None
            t = res.threshold
            failed += population_risk(t) > alpha or population_withdrawn(t) > withdrawn
    slack = 3 * math.sqrt(delta * (1 - delta) / draws)
    assert failed / draws <= delta + slack
    assert feasible > draws / 2


def test_withdrawn_bound_reported_and_contradictory_targets_are_infeasible() -> None:
    conf, correct = synthetic(3000, 1)
    res = calibrate_threshold(conf, correct, 0.3, 0.1, withdrawn=0.25)
    assert res.feasible and res.threshold is not None
    right = correct & np.isfinite(conf)
    k = int((right & (conf < res.threshold)).sum())
    assert res.details["withdrawn"] == k
    assert res.details["right_with_confidence"] == int(right.sum())
    assert k / int(right.sum()) <= res.details["withdrawn_bound"]
    assert "withdrawn" in res.message
    # risk 0.1 needs t >= 0.8, withdrawing 64 % of right answers: no threshold keeps both promises
    bad = calibrate_threshold(conf, correct, 0.1, 0.1, withdrawn=0.25)
    assert not bad.feasible and "withdrawn" in bad.message
    # alone, the same risk is certified: the second promise is what fails
    assert calibrate_threshold(conf, correct, 0.1, 0.1).feasible


def test_withdrawn_is_checked_and_round_trips() -> None:
    conf, correct = synthetic(500, 2)
    with pytest.raises(InputError, match="withdrawn"):
        calibrate_threshold(conf, correct, 0.2, 0.1, withdrawn=1.5)
    with pytest.raises(InputError, match="crc"):
        calibrate_threshold(conf, correct, 0.2, 0.1, method="crc", withdrawn=0.05)
    cal = ThresholdCalibrator(risk=0.3, delta=0.1, withdrawn=0.25).fit(conf, correct)
    again = ThresholdCalibrator.from_dict(json.loads(json.dumps(cal.to_dict())))
    assert again.get_params() == cal.get_params() and again.threshold_ == cal.threshold_
