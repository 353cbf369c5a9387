"""Public importance API: unknown options, bad numbers and bad arrays are clear errors; the
reference (RAGBooster) group update on a hand-computed example."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsieve.errors import ConfigError, InputError
from ragsieve.importance import (
    DataImportance,
    gradient_sums,
    gradients,
    leave_one_out,
    masked_scores,
    reweight_scores,
    tune_prune_threshold,
)
from ragsieve.importance.data import ValidationData, from_lists, synthetic


def small() -> ValidationData:
    return synthetic(6, list_len=5, n_sources=3, seed=2, utility_dtype=np.float64)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "Exact"}, "method must be one of 'exact', 'approx', 'montecarlo', got 'Exact'"),
        ({"level": "items"}, "level must be one of 'item', 'source', got 'items'"),
        ({"utility": "sum"}, "utility must be one of"),
        ({"k": 2.5}, r"k must be an integer >= 1, got 2\.5"),
        ({"k": 0}, "k must be an integer >= 1"),
        ({"k": True}, "k must be an integer"),
        ({"k": "3"}, "k must be an integer"),
        ({"seed": -1}, "seed must be an integer >= 0"),
        ({"seed": 1.5}, "seed must be an integer"),
        ({"n_jobs": 1.5}, "n_jobs must be an integer"),
        ({"method": "approx", "epsilon": math.nan}, "epsilon must be a finite number in"),
        ({"method": "approx", "epsilon": 1.0}, "epsilon must be a finite number in"),
        ({"method": "montecarlo", "delta": math.inf, "utility": "additive"}, "delta must be a finite number"),
        ({"method": "montecarlo", "n_samples": 0}, "n_samples must be an integer >= 1"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"utility": "majority"}, "not additive; use method='montecarlo'"),
    ],
)
def test_gradients_reject_bad_parameters(kwargs: dict, match: str) -> None:
    data = small()
    n = data.n_items if kwargs.get("level") == "item" else data.n_sources
    with pytest.raises(ConfigError, match=match):
        gradients(data, np.full(n, 0.5), **kwargs)
    with pytest.raises(ConfigError, match=match):
        gradient_sums(data, np.full(n, 0.5), **kwargs)


def test_integer_like_numpy_values_are_accepted() -> None:
    data = small()
    a = gradients(data, np.full(3, 0.5), k=np.int64(2), seed=np.int32(1)).gradient
    b = gradients(data, np.full(3, 0.5), k=2, seed=1).gradient
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"learning_rate": math.nan}, "learning_rate must be a finite number"),
        ({"learning_rate": math.inf}, "learning_rate must be a finite number"),
        ({"learning_rate": 0.0}, "learning_rate must be a finite number in \\(0"),
        ({"learning_rate": -5.0}, "learning_rate"),
        ({"k": 2.5}, "k must be an integer"),
        ({"epochs": 1.5}, "epochs must be an integer"),
        ({"epochs": -1}, "epochs must be an integer >= 0"),
        ({"init_weight": math.nan}, "init_weight"),
        ({"init_weight": 1.5}, "init_weight"),
        ({"method": "Exact"}, "method must be one of"),
        ({"group_by": "sources"}, "group_by must be one of 'item', 'source'"),
        ({"group_update": "authors"}, "group_update must be one of 'mean-gradient', 'reference'"),
        ({"seed": -3}, "seed"),
    ],
)
def test_estimator_rejects_bad_parameters(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        DataImportance(**{"epochs": 1, **kwargs}).fit(small())


def test_a_nan_learning_rate_never_yields_nan_weights() -> None:
    with pytest.raises(ConfigError):
        DataImportance(learning_rate=float("nan"), epochs=1).fit(small())


def _data(**changes: np.ndarray) -> ValidationData:
    base = dict(
        offsets=np.array([0, 2], np.int64),
        item=np.array([0, 1], np.int32),
        source=np.array([0, 1], np.int32),
        utility=np.array([1.0, 0.0]),
        item_source=np.array([0, 1], np.int32),
        sources=["a", "b"],
    )
    return ValidationData(**{**base, **changes})


@pytest.mark.parametrize(
    "changes",
    [
        {"item": np.array([0, 7], np.int32)},
        {"item": np.array([0, -1], np.int32)},
        {"source": np.array([0, 5], np.int32)},
        {"item_source": np.array([0, 9], np.int32)},
        {"offsets": np.array([0, 5], np.int64)},
        {"offsets": np.array([1, 2], np.int64)},
        {"item": np.array([0.0, 1.0])},
        {"source": np.array([0.0, 1.0])},
        {"offsets": np.array([0.0, 2.0])},
        {"utility": np.array([1, 0], np.int64)},
        {"utility": np.array([1.0, np.inf])},
        {"item": [0, 1]},
    ],
)
def test_gradient_sums_checks_ids_and_dtypes(changes: dict) -> None:
    """Out-of-range ids once read past the end of the weights (garbage or a segfault)."""
    with pytest.raises(InputError):
        gradient_sums(_data(**changes), np.full(2, 0.5), k=1)


def test_gradient_sums_checks_weights() -> None:
    for bad in (np.full(3, 0.5), np.array([0.5, np.nan]), np.array([0.5, 1.5]), "ab"):
        with pytest.raises(InputError):
            gradient_sums(_data(), bad, k=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="tuple_offset"):
        gradient_sums(_data(), np.full(2, 0.5), k=1, tuple_offset=-1)


def test_the_unchecked_kernel_is_not_exported_and_matches_the_checked_one() -> None:
    import ragsieve.importance as imp
    from ragsieve.importance import multilinear

    assert "unchecked_gradient_sums" not in imp.__all__ and hasattr(multilinear, "unchecked_gradient_sums")
    sums, value = gradient_sums(_data(), np.full(2, 0.5), k=1)
    want, want_v = multilinear.unchecked_gradient_sums(_data(), np.full(2, 0.5), k=1)
    np.testing.assert_array_equal(sums, want)
    assert value == want_v


def test_evaluation_helpers_check_their_inputs() -> None:
    data = from_lists([[{"id": "x", "source": "s", "utility": 1.0, "answer": "a"}]])
    with pytest.raises(ConfigError, match="k must be an integer"):
        masked_scores(data, np.ones(1, bool), k=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="utility"):
        masked_scores(data, np.ones(1, bool), utility="vote")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="probabilities"):
        reweight_scores(data, np.array([1.5]))
    with pytest.raises(ConfigError, match="n_samples"):
        reweight_scores(data, np.array([0.5]), n_samples=0)
    with pytest.raises(InputError, match="finite"):
        tune_prune_threshold(data, np.array([np.nan]))
    with pytest.raises(ConfigError, match="removal rate"):
        tune_prune_threshold(data, np.array([0.5]), rates=(0.0, 1.5))
    with pytest.raises(ConfigError, match="k must be"):
        leave_one_out(data, k=0)


# --------------------------------------------------------------------------- group update rules
def _two_sources_with_an_unseen_item() -> ValidationData:
    """Tuple 1: a (S, u=1), b (T, u=0). Tuple 2: c (S, u=0), d (T, u=1). Item e (S) never retrieved."""
    return ValidationData(
        offsets=np.array([0, 2, 4], np.int64),
        item=np.array([0, 1, 2, 3], np.int32),
        source=np.array([0, 1, 0, 1], np.int32),
        utility=np.array([1.0, 0.0, 0.0, 1.0]),
        item_source=np.array([0, 1, 0, 1, 0], np.int32),  # a, b, c, d, e
        sources=["S", "T"],
    )


def test_reference_group_update_clips_items_then_averages_over_every_id() -> None:
    """Hand computation with K=1, all weights 0.5, learning rate 4.

    Item gradients (1/N sum over tuples of P(nothing present before i) * (u_i - E[next present u])):
    a: (1 - 0.5*0)/2 = 0.5, b: 0.5*(0 - 0)/2 = 0, c: (0 - 0.5*1)/2 = -0.25, d: 0.5*(1 - 0)/2 = 0.25, e: 0.

    reference, epoch 1: a -> clip(0.5 + 2) = 1, c -> clip(0.5 - 1) = 0, e -> 0.5: S = (1 + 0 + 0.5) / 3 = 0.5;
                        b -> 0.5, d -> clip(0.5 + 1) = 1: T = 0.75.
    reference, epoch 2 (a, c, e at 0.5; b, d at 0.75): gradients a 0.5, b 0, c (0 - 0.75)/2 = -0.375, d 0.25:
                        S = (1 + 0 + 0.5) / 3 = 0.5, T = (0.75 + 1) / 2 = 0.875.
    mean-gradient, epoch 1: S steps by 4 * (0.5 - 0.25) / 2 = 0.5 -> 1.0; T by 4 * (0 + 0.25) / 2 = 0.5 -> 1.0.
    """
    data = _two_sources_with_an_unseen_item()
    ref1 = DataImportance(k=1, epochs=1, learning_rate=4.0, group_update="reference").fit(data)
    np.testing.assert_allclose(ref1.weights_, [0.5, 0.75], atol=1e-12)
    ref2 = DataImportance(k=1, epochs=2, learning_rate=4.0, group_update="reference").fit(data)
    np.testing.assert_allclose(ref2.weights_, [0.5, 0.875], atol=1e-12)
    np.testing.assert_allclose(ref2.item_weights_, [0.5, 0.875, 0.5, 0.875, 0.5], atol=1e-12)
    mean1 = DataImportance(k=1, epochs=1, learning_rate=4.0).fit(data)
    np.testing.assert_allclose(mean1.weights_, [1.0, 1.0], atol=1e-12)
    assert mean1.get_params()["group_update"] == "mean-gradient"


def _ragbooster_rule(data: ValidationData, k: int, lr: float, epochs: int) -> np.ndarray:
    """The authors' loop written out: item gradients, per-item step + clip, mean over each group."""
    from ragsieve.importance.multilinear import gradients

    v = np.full(data.n_items, 0.5)
    for _ in range(epochs):
        g = gradients(data, v, level="item", k=k).gradient
        v = np.clip(v + lr * g, 0.0, 1.0)
        sums = np.bincount(data.item_source, weights=v, minlength=data.n_sources)
        v = (sums / np.bincount(data.item_source, minlength=data.n_sources))[data.item_source]
    return np.bincount(data.item_source, weights=v) / np.bincount(data.item_source)


@pytest.mark.parametrize("seed", [0, 1])
def test_reference_rule_matches_the_authors_loop_on_random_data(seed: int) -> None:
    data = synthetic(40, list_len=8, n_sources=6, seed=seed, utility_dtype=np.float64)
    est = DataImportance(k=3, epochs=4, learning_rate=20.0, group_update="reference").fit(data)
    np.testing.assert_allclose(est.weights_, _ragbooster_rule(data, 3, 20.0, 4), atol=1e-12)


def test_both_rules_agree_when_nothing_is_clipped_and_every_item_is_seen() -> None:
    data = synthetic(40, list_len=8, n_sources=6, seed=3, utility_dtype=np.float64)
    a = DataImportance(k=3, epochs=3, learning_rate=0.01).fit(data).weights_
    b = DataImportance(k=3, epochs=3, learning_rate=0.01, group_update="reference").fit(data).weights_
    np.testing.assert_allclose(a, b, atol=1e-12)
