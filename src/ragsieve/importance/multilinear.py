"""Gradients of the multilinear extension: exact, epsilon-approximate and Monte Carlo.

``d U~ / d w_i = 1/N * sum_x G(x, w_i)``. Item-level gradients treat every item's weight as
its own variable; source-level gradients are the mean of the item gradients within each
source when all its items share the source's weight (the projection step of Section 2.4).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal, NamedTuple, get_args

import numpy as np

from ragsieve.errors import ConfigError, InputError
from ragsieve.importance import kernels
from ragsieve.importance.checks import check_arrays, check_choice, check_float, check_int
from ragsieve.importance.data import ValidationData

Method = Literal["exact", "approx", "montecarlo"]
Utility = Literal["additive", "majority"]
Level = Literal["item", "source"]
METHODS: tuple[str, ...] = get_args(Method)
UTILITIES: tuple[str, ...] = get_args(Utility)
LEVELS: tuple[str, ...] = get_args(Level)

_MAX_SAMPLES = 1_000_000
# per-chunk accumulators above this many floats switch to per-position output + bincount
_MAX_ACCUMULATOR = 1 << 24
# above this many groups (a row no longer fits a core's L2 cache) each thread gets one chunk
_SMALL_ACCUMULATOR = 1 << 16
# below it, a chunk of tuples per this many positions (a row's zeroing and sum cost little
# beside them), up to this many chunks, as far as their rows stay within this many floats
_POSITIONS_PER_CHUNK = 4096
_CHUNKS = 64
_ROWS_BUDGET = 1 << 20


class Gradients(NamedTuple):
    """Gradient of the mean validation utility and the utility itself at the given weights."""

    gradient: np.ndarray  # float64, one per weight (item or source)
    value: float  # U~(w) for additive utilities; nan for Monte Carlo


def check_gradient_args(
    *,
    level: object,
    k: object,
    method: object,
    epsilon: object,
    delta: object,
    utility: object,
    seed: object,
    n_jobs: object,
    n_samples: object = None,
) -> None:
    """One validation of the public gradient parameters, shared by every entry point."""
    check_choice("level", level, LEVELS)
    check_choice("method", method, METHODS)
    check_choice("utility", utility, UTILITIES)
    check_int("k", k, 1)
    check_int("seed", seed, 0)
    check_int("n_jobs", n_jobs, None, optional=True)
    check_int("n_samples", n_samples, 1, optional=True)
    if method == "approx":
        check_float("epsilon", epsilon, low=0.0, high=1.0, open_low=True, open_high=True)
    elif method == "montecarlo":
        check_float("epsilon", epsilon, low=0.0, open_low=True)
        check_float("delta", delta, low=0.0, high=1.0, open_low=True, open_high=True)
    else:  # exact ignores them, but a NaN there is still a caller's mistake
        check_float("epsilon", epsilon, low=0.0)
        check_float("delta", delta, low=0.0, high=1.0)
    if utility == "majority" and method != "montecarlo":
        raise ConfigError("the majority-vote utility is not additive; use method='montecarlo'")


def montecarlo_samples(epsilon: float, delta: float, n_tuples: int) -> int:
    """T = ceil(2 / eps^2 * log(2 N / delta)) (Appendix D): every G(x, i) within eps w.p. 1 - delta."""
    if not (epsilon > 0 and 0 < delta < 1):
        raise ConfigError("Monte Carlo needs epsilon > 0 and 0 < delta < 1")
    t = int(math.ceil(2.0 / epsilon**2 * math.log(2.0 * max(n_tuples, 1) / delta)))
    if t > _MAX_SAMPLES:
        raise ConfigError(
            f"Monte Carlo with epsilon={epsilon} needs {t:,} samples per tuple and epoch; "
            "use a larger epsilon (0.05 to 0.1 is typical) or method='exact'/'approx' for additive utilities"
        )
    return t


# below this many positions per thread a parallel launch costs more than it saves
_POSITIONS_PER_THREAD = 100_000


@contextmanager
def _threads(n_jobs: int | None, n_positions: int | None = None) -> Iterator[int]:
    """Run with ``n_jobs`` numba threads; ``None`` or <= 0: all, but one per 100k positions.

    Without numba (the ``fast-kernels`` extra) the kernels run interpreted on one thread.
    """
    if not kernels.COMPILED:
        yield 1
        return
    import numba

    if n_jobs is None or n_jobs <= 0:
        n_jobs = numba.get_num_threads()
        if n_positions is not None:
            n_jobs = max(1, min(n_jobs, n_positions // _POSITIONS_PER_THREAD))
    before = numba.get_num_threads()
    numba.set_num_threads(min(n_jobs, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    try:
        yield numba.get_num_threads()
    finally:
        numba.set_num_threads(before)


def _accumulator_rows(n_tuples: int, n_positions: int, n_groups: int, threads: int) -> int:
    """How many chunks of tuples, each with its own accumulator row, an epoch sums over.

    Up to ``_SMALL_ACCUMULATOR`` groups the count depends on the data alone (one chunk per
    ``_POSITIONS_PER_CHUNK`` positions, at most ``_CHUNKS`` rows within ``_ROWS_BUDGET`` floats),
    so the gradients are the same bits whatever the thread count, and the threads, taking chunks
    as they finish, even out one that a busy machine slows. Beyond, zeroing and adding the rows
    costs more than the kernel's scatter: one per thread.
    """
    if n_groups > _SMALL_ACCUMULATOR:
        return max(1, min(n_tuples, threads))
    by_size = -(-n_positions // _POSITIONS_PER_CHUNK)
    return max(1, min(n_tuples, by_size, _CHUNKS, _ROWS_BUDGET // max(n_groups, 1)))


def _check(data: ValidationData, weights: np.ndarray, n: int, k: int) -> np.ndarray:
    if k < 1:
        raise ConfigError(f"k must be at least 1, got {k}")
    try:
        w = np.ascontiguousarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"weights must be {n} numbers in [0, 1]; got {type(weights).__name__}") from exc
    if w.shape != (n,):
        raise InputError(f"expected {n} weights, got shape {w.shape}")
    if np.any(w < 0) or np.any(w > 1) or not np.all(np.isfinite(w)):
        raise InputError("weights are probabilities: every weight must lie in [0, 1]")
    return w


def unchecked_gradient_sums(
    data: ValidationData,
    weights: np.ndarray,
    *,
    level: Level = "source",
    k: int = 10,
    method: Method = "exact",
    epsilon: float = 1e-3,
    delta: float = 0.05,
    utility: Utility = "additive",
    seed: int = 0,
    n_jobs: int | None = None,
    n_samples: int | None = None,
    n_tuples_total: int | None = None,
    tuple_offset: int = 0,
    item_weights_by_source: bool = False,
) -> tuple[np.ndarray, float]:
    """:func:`gradient_sums` without its checks: ``data`` must already be valid (the compiled
    kernels do not check index bounds) and the parameters checked by the caller, as
    :func:`gradients`, :meth:`DataImportance.fit` and the distributed workers do once.

    The building block of :func:`gradients` and of the distributed version: partial sums over
    disjoint sets of tuples add up. ``weights`` are per item (``level="item"``) or per source.
    ``method="exact"`` ignores ``epsilon``; ``"approx"`` truncates each list at the Chernoff
    boundary; ``"montecarlo"`` samples (``n_samples`` or the Appendix D bound with
    ``n_tuples_total``) and supports the ``"majority"`` utility (needs ``data.answer``);
    its random draws depend on the seed and the global tuple number ``tuple_offset + t``, so a
    partitioned run draws the same samples as a single-process one.

    ``item_weights_by_source`` (with ``level="item"``): ``weights`` are per source and every item
    is at its source's weight, as the authors' group rule evaluates the item gradients; the
    kernels then read each position's weight through its source, with no item-length copy.
    """
    group = data.item if level == "item" else data.source
    n_groups = data.n_items if level == "item" else data.n_sources
    presence = None  # what indexes the weights, where that is not `group`
    if item_weights_by_source and level == "item":
        w = _check(data, weights, data.n_sources, k)
        if method == "montecarlo":
            w = w[data.item_source]  # the sampler reads the weight of each item
        else:
            presence = data.source
    else:
        w = _check(data, weights, n_groups, k)
    if utility == "majority" and method != "montecarlo":
        raise ConfigError("the majority-vote utility is not additive; use method='montecarlo'")
    max_len = max(data.max_len, 1)
    eps = 0.0 if method == "exact" else float(epsilon)
    if method == "approx" and not 0 < eps < 1:
        raise ConfigError(f"method='approx' needs 0 < epsilon < 1, got {epsilon}")
    with _threads(n_jobs, data.n_positions) as threads:
        if method == "montecarlo":
            if utility == "majority" and data.answer is None:
                raise InputError("the majority-vote utility needs an answer per item ('answer' field)")
            labels = data.answer if data.answer is not None else np.zeros(data.n_positions, dtype=np.int32)
            t = n_samples or montecarlo_samples(epsilon, delta, n_tuples_total or data.n_tuples)
            out = np.empty(data.n_positions, dtype=np.float64)
            kernels.montecarlo_gradient_sums(
                data.offsets, group, data.utility, labels, w, k, eps, int(t), np.uint64(seed),
                utility == "majority", out, max_len, int(labels.max(initial=0)), int(tuple_offset),
            )
            sums = np.bincount(group, weights=out, minlength=n_groups)
            return sums, math.nan
        n_chunks = _accumulator_rows(data.n_tuples, data.n_positions, n_groups, threads)
        if n_chunks * n_groups <= _MAX_ACCUMULATOR:
            sums, value = kernels.grouped_gradient_sums(
                data.offsets, group, data.utility, w, k, eps, n_chunks, max_len, presence, n_groups
            )
            return sums, float(value)
        out = np.empty(data.n_positions, dtype=np.float64)
        by = group if presence is None else presence
        value = kernels.position_gradients(data.offsets, by, data.utility, w, k, eps, out, max_len)
        return np.bincount(group, weights=out, minlength=n_groups), float(value)


def gradient_sums(
    data: ValidationData,
    weights: np.ndarray,
    *,
    level: Level = "source",
    k: int = 10,
    method: Method = "exact",
    epsilon: float = 1e-3,
    delta: float = 0.05,
    utility: Utility = "additive",
    seed: int = 0,
    n_jobs: int | None = None,
    n_samples: int | None = None,
    n_tuples_total: int | None = None,
    tuple_offset: int = 0,
) -> tuple[np.ndarray, float]:
    """Sums over the tuples of ``data`` of the position gradients by item or source (not / N).

    Partial sums over disjoint sets of tuples add up (the building block of :func:`gradients`
    and of the distributed version). ``weights`` are per item (``level="item"``) or per source.
    ``method="exact"`` ignores ``epsilon``; ``"approx"`` truncates each list at the Chernoff
    boundary; ``"montecarlo"`` samples (``n_samples`` or the Appendix D bound with
    ``n_tuples_total``) and supports the ``"majority"`` utility (needs ``data.answer``); its
    random draws depend on the seed and the global tuple number ``tuple_offset + t``.

    Every argument is checked first (array dtypes, index bounds, parameter types and ranges),
    so bad input is an :class:`InputError`/:class:`ConfigError`, never a crash in the kernel.
    """
    check_gradient_args(
        level=level, k=k, method=method, epsilon=epsilon, delta=delta, utility=utility, seed=seed,
        n_jobs=n_jobs, n_samples=n_samples,
    )
    check_int("n_tuples_total", n_tuples_total, 1, optional=True)
    check_int("tuple_offset", tuple_offset, 0)
    check_arrays(data)
    return unchecked_gradient_sums(
        data, weights, level=level, k=int(k), method=method, epsilon=float(epsilon), delta=float(delta),
        utility=utility, seed=int(seed), n_jobs=n_jobs, n_samples=n_samples, n_tuples_total=n_tuples_total,
        tuple_offset=int(tuple_offset),
    )


def gradients(
    data: ValidationData,
    weights: np.ndarray,
    *,
    level: Level = "source",
    k: int = 10,
    method: Method = "exact",
    epsilon: float = 1e-3,
    delta: float = 0.05,
    utility: Utility = "additive",
    seed: int = 0,
    n_jobs: int | None = None,
    n_samples: int | None = None,
) -> Gradients:
    """Gradient of ``U~(w) = 1/N sum_x E[U_x(S)]`` with respect to item or source weights.

    For ``level="source"`` the result is the mean item gradient within each source (the
    direction of projected gradient ascent when a source's items share one weight).

    Example::

        >>> from ragsieve.importance.data import synthetic
        >>> data = synthetic(100, n_sources=10)
        >>> g = gradients(data, np.full(10, 0.5), k=10)
        >>> g.gradient.shape
        (10,)
    """
    check_gradient_args(
        level=level, k=k, method=method, epsilon=epsilon, delta=delta, utility=utility, seed=seed,
        n_jobs=n_jobs, n_samples=n_samples,
    )
    check_arrays(data)
    sums, value = unchecked_gradient_sums(
        data, weights, level=level, k=int(k), method=method, epsilon=float(epsilon), delta=float(delta),
        utility=utility, seed=int(seed), n_jobs=n_jobs, n_samples=n_samples,
    )
    n = max(data.n_tuples, 1)
    grad = sums / n
    if level == "source":
        counts = data.items_per_source()
        grad = np.divide(grad, counts, out=np.zeros_like(grad), where=counts > 0)
    return Gradients(grad, value / n)
