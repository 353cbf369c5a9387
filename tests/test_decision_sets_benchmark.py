"""``benchmarks/decision_sets.py``'s pure parts and the loaders it shares: the SQuAD 2.0 report
set never holds a question the decision model was trained on, and the sieve is compared with
the baseline chosen on the calibration half, at the sieve's own coverage."""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType

import pytest
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parent.parent
NO = -math.inf


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "decision_sets.py", "_decision_sets_under_test")


@pytest.fixture(scope="module")
def calibration(bench: ModuleType) -> ModuleType:
    # decision_sets put benchmarks/ on the path; its loaders are imported as the script imports them
    import calibration as module  # type: ignore[import-not-found]

    return module


@pytest.fixture(scope="module")
def train(bench: ModuleType) -> ModuleType:
    import train_decision as module  # type: ignore[import-not-found]

    return module


def _questions(n_answerable: int, n_unanswerable: int) -> list[dict[str, object]]:
    return [{"id": f"a{i}", "answerable": True} for i in range(n_answerable)] + [
        {"id": f"u{i}", "answerable": False} for i in range(n_unanswerable)
    ]


def test_report_sample_leaves_out_the_training_questions(calibration: ModuleType, train: ModuleType) -> None:
    questions = _questions(60, 50)
    trained_on = train.training_split([q["id"] for q in calibration.squad2_sample(questions, 40, 0)], 0)
    assert len(trained_on) == 20
    report = calibration.squad2_sample(questions, 60, 0, exclude=trained_on)
    ids = [q["id"] for q in report]
    assert not set(ids) & set(trained_on)
    assert len(set(ids)) == 60
    assert sum(q["answerable"] for q in report) == 30


def test_sample_without_exclusion_is_unchanged_by_an_empty_one(calibration: ModuleType) -> None:
    questions = _questions(30, 30)
    assert calibration.squad2_sample(questions, 20, 3) == calibration.squad2_sample(questions, 20, 3, exclude=set())
    assert calibration.squad2_sample(questions, 20, 3) != calibration.squad2_sample(questions, 20, 4)


def test_training_split_is_the_calibration_part_in_sample_order(train: ModuleType) -> None:
    from ragsieve.eval.fair import split_indices

    ids = [f"q{i}" for i in range(10)]
    cal, _ = split_indices(10, 0.5, 7)
    assert train.training_split(ids, 7) == [ids[i] for i in sorted(cal)]


def test_squad2_excluded_refuses_a_model_trained_on_another_split(bench: ModuleType) -> None:
    with pytest.raises(SystemExit, match="--train-n"):
        bench.squad2_excluded({"split": "calibration part of ragsieve.eval.fair.split_indices(100, 0.5, 1)"}, 300, 0)


def test_selective_outcomes_follow_eval(bench: ModuleType) -> None:
    # answerable: right and answered; unanswerable: abstained
    assert bench.selective_outcomes(
        [True, True, True, False, False], [True, True, False, False, False], [True, False, True, True, False]
    ) == [True, False, False, False, True]


def test_matched_coverage_uses_the_sieves_coverage_and_the_baseline_best_on_calibration(bench: ModuleType) -> None:
    cal, test = [0, 1, 2, 3], [4, 5, 6, 7, 8, 9]
    outcomes = [True, False, True, False, True, True, False, False, True, False]
    # "good on cal" ranks the calibration questions perfectly and the test ones backwards;
    # "good on test" the other way round: the comparison must use the first
    baselines = {
        "good on cal": [0.9, 0.1, 0.8, 0.2, 0.1, 0.2, 0.9, 0.8, 0.3, 0.7],
        "good on test": [0.1, 0.9, 0.2, 0.8, 0.9, 0.8, 0.1, 0.2, 0.7, 0.3],
    }
    # the sieve answers three of the six test questions, all right
    sieve_outcomes = [True] * 4 + [True, True, True, True, True, True]
    sieve_scores = [0.5] * 4 + [0.9, 0.8, NO, NO, 0.7, NO]
    res = bench.matched_coverage(sieve_outcomes, sieve_scores, outcomes, baselines, cal, test, n_boot=50)
    assert res["best"] == "good on cal"
    assert res["coverage"] == pytest.approx(0.5)
    assert res["a"] == pytest.approx(1.0)
    # the chosen baseline's three best-ranked test questions (6, 7, 9) hold no right answer
    assert res["b"] == pytest.approx(0.0)
    assert res["difference"] == pytest.approx(1.0)
    lo, hi = res["interval"]
    assert lo <= 1.0 <= hi + 1e-9


def test_calibration_table_reports_an_infeasible_alpha(bench: ModuleType) -> None:
    conf = [0.9, 0.8, None, 0.7] * 5
    right = [False, False, False, True] * 5
    rows = bench.calibration_table(conf, right, list(range(10)), list(range(10, 20)), alphas=(0.1,))
    assert rows[0][0] == "0.1"
    assert rows[0][1].startswith("none")
    assert rows[0][3] == "0.0%"


def test_the_threshold_rule_is_stated_as_the_model_header_records_it(bench: ModuleType) -> None:
    from ragsieve.decision import withdrawn_right_threshold

    _, bound = withdrawn_right_threshold([i / 100 for i in range(1, 101)])
    _, expected = withdrawn_right_threshold([i / 30 for i in range(1, 30)])
    _, none = withdrawn_right_threshold([0.5] * 10)
    text = bench.threshold_rule_text(bound | {"confidences": "out-of-fold (5 folds)"})
    assert "95% upper bound" in text and f"{bound['withdrawn_right']} of the 100 right training drafts" in text
    assert "out-of-fold (5 folds) confidences" in text
    text = bench.threshold_rule_text(expected | {"confidences": "out-of-fold (5 folds)"})
    assert "expected share" in text and "29 right drafts are too few" in text
    assert bench.threshold_rule_text(none).startswith("none: 10 right training drafts")
    assert "in-sample" in bench.threshold_rule_text({})  # a model saved before the rule was recorded
