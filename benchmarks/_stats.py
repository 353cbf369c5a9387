"""The intervals the benchmark scripts report with, defined once.

The Wilson score interval is the package's own (:func:`ragsieve.calibrate.wilson_interval`, also
exported by :mod:`ragsieve.eval.selective`); the helpers here only format it.
"""

from __future__ import annotations

import statistics

import numpy as np

from ragsieve.calibrate import wilson_interval

__all__ = [
    "count_with_interval",
    "mean_bootstrap_interval",
    "mean_t_interval",
    "median_bootstrap_interval",
    "paired_bootstrap_interval",
    "rate_with_interval",
    "wilson_interval",
]


def rate_with_interval(k: int, n: int, digits: int = 1) -> str:
    """``k/n`` in percent with its 95% Wilson interval and the counts, e.g. ``"12.5% [8.2, 18.5]
    (20/160)"`` (``digits`` decimals); ``"n/a"`` when ``n`` is 0."""
    if n == 0:
        return "n/a"
    lo, hi = wilson_interval(k, n)
    return f"{100 * k / n:.{digits}f}% [{100 * lo:.{digits}f}, {100 * hi:.{digits}f}] ({k}/{n})"


def count_with_interval(k: int, n: int) -> str:
    """``k/n`` first, then the rate and its 95% Wilson interval: ``"20/160 = 12.5% [8.2%, 18.5%]"``;
    ``"n = 0"`` when ``n`` is 0."""
    lo, hi = wilson_interval(k, n)
    return f"{k}/{n} = {k / n:.1%} [{lo:.1%}, {hi:.1%}]" if n else "n = 0"


def mean_t_interval(xs: list[float]) -> tuple[float, float]:
    """Mean and the half-width of a 95% t-interval (``nan`` half-width for fewer than 2 values)."""
    from scipy import stats

    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, float("nan")
    return m, float(stats.t.ppf(0.975, len(xs) - 1) * statistics.stdev(xs) / len(xs) ** 0.5)


def paired_bootstrap_interval(
    a: np.ndarray, b: np.ndarray, seed: int = 0, n_boot: int = 5000
) -> tuple[float, float, float]:
    """Mean of ``b - a`` and its paired bootstrap 95% interval."""
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diff), size=(n_boot, len(diff)))
    means = diff[idx].mean(axis=1)
    return float(diff.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def mean_bootstrap_interval(x: np.ndarray, seed: int = 0, n_boot: int = 5000) -> tuple[float, float, float]:
    """Mean of ``x`` and its bootstrap 95% interval (the paired interval against zeros)."""
    return paired_bootstrap_interval(np.zeros(len(x)), x, seed, n_boot)


def median_bootstrap_interval(xs: list[float], seed: int = 0, n_boot: int = 2000) -> tuple[float, float, float]:
    """Median of ``xs`` and its bootstrap 95% interval."""
    a = np.asarray(xs)
    boots = np.median(np.random.default_rng(seed).choice(a, size=(n_boot, len(a))), axis=1)
    return float(np.median(a)), float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))
