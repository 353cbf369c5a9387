"""Property-based: arbitrary validation tuples and parameters give a result or a clear error,
and valid ones give finite gradients and weights in [0, 1]."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ragsieve.errors import ConfigError, InputError
from ragsieve.importance import DataImportance, from_lists, gradient_sums, gradients

SETTINGS = settings(max_examples=120, deadline=None)

utilities = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-3, 3),
    st.sampled_from(["0.5", "x", None, [1]]),
)
entries = st.fixed_dictionaries(
    {"id": st.sampled_from("abcdefg"), "source": st.sampled_from(["s1", "s2", "s3"]), "utility": utilities}
)
tuples = st.lists(st.lists(entries, max_size=6), max_size=5)
# every item id keeps one source (a -> s1, b -> s2, ...), as from_lists requires
finite_tuples = st.lists(
    st.lists(
        st.builds(
            lambda item, u: {"id": item, "source": f"s{ord(item) % 3}", "utility": u},
            st.sampled_from("abcdefg"),
            st.floats(-2, 2),
        ),
        max_size=6,
        unique_by=lambda e: e["id"],
    ),
    min_size=1,
    max_size=5,
)
anything = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 50), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6)
)


@SETTINGS
@given(tuples, st.sampled_from(["error", "first"]))
def test_any_tuples_build_valid_data_or_raise_input_error(lists: list, on_duplicate: str) -> None:
    try:
        data = from_lists(lists, on_duplicate=on_duplicate)  # type: ignore[arg-type]
    except InputError:
        return
    data.validate()
    assert data.n_tuples == len(lists)


@SETTINGS
@given(finite_tuples, st.integers(1, 8), st.data())
def test_gradients_are_finite_and_bounded(lists: list, k: int, draw: st.DataObject) -> None:
    data = from_lists(lists)
    w = np.asarray(draw.draw(st.lists(st.floats(0, 1), min_size=data.n_items, max_size=data.n_items)))
    g = gradients(data, w, level="item", k=k)
    assert g.gradient.shape == (data.n_items,) and np.all(np.isfinite(g.gradient))
    # one item changes a top-k mean by at most max|u| * 2 / k, averaged over tuples
    bound = 2 * max(abs(float(e["utility"])) for row in lists for e in row) / k if data.n_positions else 0.0
    assert np.all(np.abs(g.gradient) <= bound + 1e-9)
    assert math.isfinite(g.value)


@SETTINGS
@given(
    finite_tuples,
    st.fixed_dictionaries(
        {},
        optional={
            "k": anything,
            "method": st.sampled_from(["exact", "approx", "Exact", "montecarlo", ""]),
            "level": st.sampled_from(["item", "source", "items"]),
            "epsilon": anything,
            "seed": anything,
            "n_jobs": anything,
        },
    ),
)
def test_any_gradient_parameters_give_a_result_or_a_config_error(lists: list, params: dict) -> None:
    data = from_lists(lists)
    n = data.n_items if params.get("level") == "item" else data.n_sources
    if params.get("method") == "montecarlo":
        params["n_samples"] = 8
    try:
        sums, _ = gradient_sums(data, np.full(n, 0.5), **params)
    except ConfigError:
        return
    assert np.all(np.isfinite(sums))


@SETTINGS
@given(
    finite_tuples,
    st.fixed_dictionaries(
        {"epochs": st.integers(0, 3)},
        optional={
            "k": anything,
            "learning_rate": anything,
            "init_weight": anything,
            "group_by": st.sampled_from(["source", "item", "sources"]),
            "group_update": st.sampled_from(["mean-gradient", "reference", "ref"]),
        },
    ),
)
def test_fitted_weights_stay_in_the_unit_interval(lists: list, params: dict) -> None:
    data = from_lists(lists)
    try:
        est = DataImportance(**params).fit(data)
    except ConfigError:
        return
    w = est.weights_
    assert np.all(np.isfinite(w)) and np.all((w >= 0.0) & (w <= 1.0))
