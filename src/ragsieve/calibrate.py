"""Choose an abstention threshold on a confidence score with a finite-sample risk guarantee.

The rule being calibrated: **answer when** ``confidence >= threshold``, **abstain otherwise**
(an answer without a confidence, or one the pipeline already abstained on, is never answered).
Its *selective risk* is ``R(t) = P(wrong | confidence >= t)``, the error rate a user sees among
the answers they get.

Method ``"ltt-binomial"`` (default) and ``"ltt-hb"``: Learn then Test (Angelopoulos, Bates,
Candès, Jordan and Lei, "Learn then Test: Calibrating Predictive Algorithms to Achieve Risk
Control", 2021). Each candidate threshold ``t`` is a null hypothesis ``H_t: R(t) > alpha``. On
``n_t`` labelled calibration answers with ``e_t`` errors the p-value is the binomial lower tail
``P(Binomial(n_t, alpha) <= e_t)`` (exact for 0/1 losses; conditionally on the confidences the
errors are a Poisson-binomial sum, whose lower tail the binomial one bounds, Hoeffding 1956) or,
for ``"ltt-hb"``, the Hoeffding-Bentkus p-value of the paper (more conservative, valid for any
loss in [0, 1]). The thresholds are tested by *fixed-sequence testing* from the most conservative
(highest) to the least, stopping at the first one not rejected; the lowest rejected threshold is
returned. This controls the family-wise error rate, so with probability at least ``1 - delta``
over the calibration set the chosen threshold has selective risk at most ``alpha``.

Thresholds whose calibration answers are too few for any outcome to reject (fewer than
``ceil(log(delta) / log(1 - alpha))``: even zero errors would not be significant) are skipped
rather than ending the sequence: whether a threshold is skipped depends on the confidences only,
never on which answers were right, so the order of the tested hypotheses is fixed given the
confidences and the guarantee holds conditionally on them.

Method ``"crc"``: conformal risk control (Angelopoulos, Bates, Fisch, Lei and Schuster,
"Conformal Risk Control", 2022). It controls a loss that is monotone in the threshold in
*expectation*; the selective risk is a ratio and not monotone, so CRC controls the joint risk
``P(answered and wrong) <= alpha`` instead (``delta`` is not used; the guarantee is
``E[risk] <= alpha`` over calibration sets). Use it when the promise is about all questions
rather than about the answered ones.

Example:
    >>> import numpy as np
    >>> from ragsieve.calibrate import calibrate_threshold
    >>> rng = np.random.default_rng(0)
    >>> conf = rng.uniform(size=2000)
    >>> correct = rng.uniform(size=2000) < conf  # P(right | c) = c
    >>> result = calibrate_threshold(conf, correct, risk=0.1, delta=0.1)
    >>> result.feasible, 0.75 < result.threshold < 0.9
    (True, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from scipy import stats

from ragsieve.errors import InputError

__all__ = [
    "METHODS",
    "CalibrationResult",
    "SimulationResult",
    "ThresholdCalibrator",
    "abstains",
    "answer_mask",
    "binomial_p_value",
    "calibrate_threshold",
    "clopper_pearson_upper",
    "held_out_report",
    "hoeffding_bentkus_p_value",
    "simulate_splits",
]

Method = Literal["ltt-binomial", "ltt-hb", "crc"]
METHODS: tuple[str, ...] = ("ltt-binomial", "ltt-hb", "crc")


# ---------------------------------------------------------------------------- p-values and bounds
def binomial_p_value(errors: int, n: int, risk: float) -> float:
    """``P(Binomial(n, risk) <= errors)``: small when ``errors/n`` is well below ``risk``."""
    if n <= 0:
        return 1.0
    return float(stats.binom.cdf(errors, n, risk))


def _kl_bernoulli(a: float, b: float) -> float:
    """KL divergence between Bernoulli(a) and Bernoulli(b)."""
    a = min(max(a, 1e-12), 1 - 1e-12)
    b = min(max(b, 1e-12), 1 - 1e-12)
    return a * math.log(a / b) + (1 - a) * math.log((1 - a) / (1 - b))


def hoeffding_bentkus_p_value(mean_loss: float, n: int, risk: float) -> float:
    """Hoeffding-Bentkus p-value of ``H: E[loss] > risk`` from ``n`` losses in [0, 1] with mean
    ``mean_loss`` (Learn then Test, Proposition 3)."""
    if n <= 0:
        return 1.0
    hoeffding = math.exp(-n * _kl_bernoulli(min(mean_loss, risk), risk))
    bentkus = math.e * float(stats.binom.cdf(math.ceil(n * mean_loss), n, risk))
    return min(1.0, hoeffding, bentkus)


def clopper_pearson_upper(errors: int, n: int, delta: float) -> float:
    """One-sided ``1 - delta`` upper confidence bound on an error rate (exact binomial).

    ``binomial_p_value(errors, n, a) <= delta`` exactly when this bound is at most ``a``.
    """
    if n <= 0:
        return 1.0
    if errors >= n:
        return 1.0
    return float(stats.beta.ppf(1.0 - delta, errors + 1, n - errors))


def answer_mask(confidences: Sequence[float | None] | np.ndarray, threshold: float | None) -> np.ndarray:
    """Which items are answered under the rule ``confidence >= threshold`` (``None``/NaN: never)."""
    conf = _confidences(confidences)
    if threshold is None:
        return np.zeros(len(conf), dtype=bool)
    return conf >= threshold


def abstains(confidence: float | None, threshold: float | None) -> str | None:
    """The calibrated abstention rule for one answer: the reason to abstain, or ``None`` to answer.

    Abstain when a threshold is set and the confidence is missing or below it
    (``confidence < threshold``; equal answers). No threshold: never abstains.
    """
    if threshold is None:
        return None
    if confidence is None or math.isnan(confidence):
        return f"calibration: no confidence to compare with the threshold {threshold:.4g}"
    if confidence < threshold:
        return f"calibration: confidence {confidence:.4g} < threshold {threshold:.4g}"
    return None


# ---------------------------------------------------------------------------- results
@dataclass
class CalibrationResult:
    """The chosen threshold and what it buys on the calibration data.

    ``threshold`` is ``None`` when no threshold reaches the target (``feasible`` is then false and
    ``message`` says what the best achievable risk is); the safe rule is then to abstain always.
    ``bound`` is the ``1 - delta`` upper confidence bound on the selective risk at the threshold
    (for ``crc``: the conformal bound on the joint risk). ``best_risk`` / ``best_bound``: the
    lowest empirical risk and the lowest upper bound of any threshold with enough answers to test,
    and ``best_threshold`` the threshold with the lowest bound.
    """

    threshold: float | None
    feasible: bool
    risk: float
    delta: float
    method: str
    n: int
    n_answered: int
    coverage: float
    empirical_risk: float | None
    bound: float | None
    best_risk: float | None
    best_bound: float | None
    best_threshold: float | None
    tested: int
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CalibrationResult:
        return cls(**data)


def _confidences(values: Sequence[float | None] | np.ndarray) -> np.ndarray:
    """Float array with ``None`` and NaN as ``-inf`` (never answered)."""
    conf = np.array([-np.inf if v is None else float(v) for v in values], dtype=float)
    conf[np.isnan(conf)] = -np.inf
    return conf


def _check(
    confidences: Sequence[float | None] | np.ndarray, correct: Sequence[bool] | np.ndarray, risk: float, delta: float
) -> tuple[np.ndarray, np.ndarray]:
    if not 0.0 < risk < 1.0:
        raise InputError(f"target risk must be in (0, 1), got {risk}; pass e.g. --risk 0.1 for 10% wrong answers")
    if not 0.0 < delta < 1.0:
        raise InputError(f"delta must be in (0, 1), got {delta}; pass e.g. --delta 0.1 for 90% confidence")
    conf = _confidences(confidences)
    right = np.asarray(correct, dtype=bool)
    if conf.shape != right.shape:
        raise InputError(f"{len(conf)} confidences but {len(right)} correctness labels; pass one label per confidence")
    if len(conf) == 0:
        raise InputError("no calibration items; pass at least one labelled answer")
    return conf, right


def _sorted_counts(conf: np.ndarray, wrong: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct finite confidences (descending) with the answered count and error count at each."""
    finite = np.isfinite(conf)
    c, w = conf[finite], wrong[finite]
    order = np.argsort(-c, kind="stable")
    c, w = c[order], w[order]
    if len(c) == 0:
        return np.zeros(0), np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    # last position of each tie group: answering at threshold c answers every item >= c
    ends = np.flatnonzero(np.r_[c[1:] != c[:-1], True])
    n_at = ends + 1
    e_at = np.cumsum(w)[ends]
    return c[ends], n_at.astype(int), e_at.astype(int)


def _min_testable(risk: float, delta: float) -> int:
    """Fewest answers for which zero errors reject ``R > risk`` at level ``delta``."""
    return max(1, math.ceil(math.log(delta) / math.log1p(-risk)))


def _binomial_p_values(e_at: np.ndarray, n_at: np.ndarray, risk: float) -> np.ndarray:
    out = np.ones(len(n_at))
    ok = n_at > 0
    out[ok] = stats.binom.cdf(e_at[ok], n_at[ok], risk)
    return out


def _hb_p_values(emp: np.ndarray, n_at: np.ndarray, risk: float) -> np.ndarray:
    out = np.ones(len(n_at))
    ok = n_at > 0
    m, r = n_at[ok].astype(float), emp[ok]
    a = np.clip(np.minimum(r, risk), 1e-12, 1 - 1e-12)
    b = min(max(risk, 1e-12), 1 - 1e-12)
    kl = a * np.log(a / b) + (1 - a) * np.log((1 - a) / (1 - b))
    hoeffding = np.exp(-m * kl)
    bentkus = math.e * stats.binom.cdf(np.ceil(m * r - 1e-9), m, risk)
    out[ok] = np.minimum(1.0, np.minimum(hoeffding, bentkus))
    return out


def _cp_upper(e_at: np.ndarray, n_at: np.ndarray, delta: float) -> np.ndarray:
    out = np.ones(len(n_at))
    ok = (n_at > 0) & (e_at < n_at)
    out[ok] = stats.beta.ppf(1.0 - delta, e_at[ok] + 1, n_at[ok] - e_at[ok])
    return out


def _chain_starts(n_at: np.ndarray, risk: float, delta: float, starts: int) -> list[int]:
    """Grid positions where the fixed-sequence chains begin, chosen from the answered counts only.

    A single chain from the most conservative threshold stops at its first failure, and the first
    testable thresholds answer few items, so one unlucky error there would end the search. The
    chains therefore start where the answered count first reaches ``m, 2m, 4m, ...`` (``m`` the
    fewest answers that can be significant at level ``delta / starts``); ``starts`` chains are
    Bonferroni-combined. The count of chains is fixed before the level is, by the geometric
    spacing at level ``delta`` (a fixed point reached in two rounds).
    """
    total = int(n_at[-1]) if len(n_at) else 0
    if total == 0:
        return []
    if starts < 1:
        raise InputError(f"starts must be at least 1, got {starts}")
    m = _min_testable(risk, delta / starts)
    positions: list[int] = []
    for i in range(starts):
        target = m * 2**i
        j = int(np.searchsorted(n_at, target, side="left"))
        if j >= len(n_at):
            j = len(n_at) - 1
        if j not in positions:
            positions.append(j)
    return positions


def _describe(thr: float | None, n_ans: int, n: int, emp: float | None, bound: float | None) -> str:
    if thr is None or emp is None or bound is None:
        return "none"
    return f"threshold {thr:.4g}: answers {n_ans} of {n} ({n_ans / n:.0%}), empirical risk {emp:.3f}, bound {bound:.3f}"


def calibrate_threshold(
    confidences: Sequence[float | None] | np.ndarray,
    correct: Sequence[bool] | np.ndarray,
    risk: float = 0.1,
    delta: float = 0.1,
    method: Method | str = "ltt-binomial",
    thresholds: Sequence[float] | None = None,
    starts: int = 1,
    withdrawn: float | None = None,
) -> CalibrationResult:
    """The lowest threshold whose selective risk is certified at most ``risk`` w.p. ``1 - delta``.

    ``confidences``: one per calibration item (``None``/NaN for items that will never be answered,
    e.g. the pipeline abstained); ``correct``: whether each item's answer was right (ignored where
    the item is never answered). ``thresholds``: the candidate grid (default: every distinct
    calibration confidence); it must not depend on the labels. ``starts``: how many fixed-sequence
    chains to run, each at level ``delta / starts`` (see :func:`_chain_starts`).

    ``withdrawn``: also bound the other error, right answers withdrawn. A threshold is then
    certified only when both ``P(wrong | answered) <= risk`` and ``W(t) = P(confidence < t |
    right) <= withdrawn`` are (Learn then Test with two risks, Angelopoulos et al. 2021): the
    selective risk's hypotheses are tested as above at level ``delta / 2``, and ``W``'s (binomial
    lower tail of the right answers below ``t``) by one fixed sequence from the lowest threshold
    up at ``delta / 2``, since ``W`` grows with the threshold; so both hold together with
    probability at least ``1 - delta``. Right answers the pipeline already withdrew (no confidence)
    are not counted: no threshold can keep them.
    """
    conf, right = _check(confidences, correct, risk, delta)
    if method not in METHODS:
        raise InputError(f"unknown calibration method {method!r}; use one of {', '.join(METHODS)}")
    if withdrawn is not None and not 0.0 < withdrawn < 1.0:
        raise InputError(f"withdrawn must be in (0, 1), got {withdrawn}; e.g. 0.05 for at most 5 % of right answers")
    if withdrawn is not None and method == "crc":
        raise InputError("withdrawn bounds the selective risk's threshold (ltt-binomial, ltt-hb), not crc's joint risk")
    n = len(conf)
    wrong = ~right
    if thresholds is None:
        grid, n_at, e_at = _sorted_counts(conf, wrong)
    else:
        grid = np.unique(np.asarray(thresholds, dtype=float))[::-1]
        answered = conf[None, :] >= grid[:, None]
        n_at = answered.sum(axis=1).astype(int)
        e_at = (answered & wrong[None, :]).sum(axis=1).astype(int)
    if method == "crc":
        return _crc(conf, wrong, grid, n_at, e_at, n, risk, delta)

    # with right answers withdrawn bounded too, each family of hypotheses gets half of delta
    risk_delta = delta if withdrawn is None else delta / 2
    chains = _chain_starts(n_at, risk, risk_delta, starts)
    level = risk_delta / max(len(chains), 1)
    need = _min_testable(risk, level)
    testable = n_at >= need
    emp = np.where(n_at > 0, e_at / np.maximum(n_at, 1), np.nan)
    binomial = method == "ltt-binomial"
    pvals = _binomial_p_values(e_at, n_at, risk) if binomial else _hb_p_values(emp, n_at, risk)
    bounds = _cp_upper(e_at, n_at, level)

    # Fixed-sequence testing from each start (Bonferroni over the starts: level delta / starts),
    # most conservative first; every rejected threshold is certified, the lowest one is returned.
    rejected = np.zeros(len(grid), dtype=bool)
    tested = np.zeros(len(grid), dtype=bool)
    for start in chains:
        for j in range(start, len(grid)):
            if not testable[j]:
                continue
            tested[j] = True
            if pvals[j] > level:
                break
            rejected[j] = True
    withdrawn_bounds: np.ndarray | None = None
    n_right = int((right & np.isfinite(conf)).sum())
    if withdrawn is not None:
        # The second family, H'_t: W(t) > withdrawn, tested by one fixed sequence in the other
        # direction (W grows with the threshold): from the lowest threshold up, at level delta / 2,
        # stopping at the first not rejected. A threshold rejected in both families is certified
        # for both, together with probability >= 1 - delta (a union bound over the two families).
        k_at = n_right - (n_at - e_at)  # right answers with a confidence below each threshold
        w_pvals = stats.binom.cdf(k_at, n_right, withdrawn) if n_right else np.ones(len(grid))
        withdrawn_bounds = _cp_upper(k_at, np.full(len(grid), n_right), delta / 2)
        kept_right = np.zeros(len(grid), dtype=bool)
        for j in range(len(grid) - 1, -1, -1):
            if w_pvals[j] > delta / 2:
                break
            kept_right[j] = True
        rejected &= kept_right
    chosen = int(np.flatnonzero(rejected)[-1]) if rejected.any() else None

    best_risk = best_bound = best_thr = None
    if testable.any():
        idx = np.flatnonzero(testable)
        best_risk = float(np.nanmin(emp[idx]))
        j_best = int(idx[np.argmin(bounds[idx])])
        best_bound, best_thr = float(bounds[j_best]), float(grid[j_best])
    details: dict[str, Any] = {
        "min_answers_testable": need,
        "starts": [float(grid[j]) for j in chains],
        "level_per_start": level,
        "p_value": None,
    }
    if withdrawn is not None:
        details["withdrawn_target"] = withdrawn
        details["right_with_confidence"] = n_right
    if chosen is not None:
        thr = float(grid[chosen])
        n_ans = int(n_at[chosen])
        details["p_value"] = float(pvals[chosen])
        res_emp, res_bound = float(emp[chosen]), float(bounds[chosen])
        both = ""
        if withdrawn_bounds is not None:
            k = n_right - (n_ans - int(e_at[chosen]))
            details["withdrawn"] = k
            details["withdrawn_bound"] = float(withdrawn_bounds[chosen])
            both = (
                f" and right answers withdrawn <= {withdrawn} ({k} of {n_right} withdrawn, bound "
                f"{float(withdrawn_bounds[chosen]):.3f})"
            )
        msg = (
            f"risk <= {risk}{both} with probability >= {1 - delta:.3g} ({method}): answer when confidence >= "
            f"{thr:.4g}; " + _describe(thr, n_ans, n, res_emp, res_bound)
        )
        return CalibrationResult(
            thr, True, risk, delta, method, n, n_ans, n_ans / n, res_emp, res_bound,
            best_risk, best_bound, best_thr, int(tested.sum()), msg, details,
        )  # fmt: skip
    if best_bound is None:
        msg = (
            f"no threshold reaches risk {risk} with probability >= {1 - delta:.3g}: fewer than {need} "
            f"calibration answers carry a confidence ({int(np.isfinite(conf).sum())} of {n}), too few to "
            "certify any threshold; label more questions or raise --risk/--delta"
        )
    elif withdrawn is not None:
        msg = (
            f"no threshold reaches both risk {risk} and right answers withdrawn <= {withdrawn} with probability "
            f">= {1 - delta:.3g} ({method}); alone, the best certified risk is {best_bound:.3f} "
            f"({_describe(best_thr, int(n_at[grid == best_thr][0]), n, float(emp[grid == best_thr][0]), best_bound)}); "
            "raise --risk or --max-withdrawn, label more questions, or use a better confidence"
        )
    else:
        msg = (
            f"no threshold reaches risk {risk} with probability >= {1 - delta:.3g} ({method}); the best "
            f"achievable risk is {best_risk:.3f} empirically and {best_bound:.3f} certified "
            f"({_describe(best_thr, int(n_at[grid == best_thr][0]), n, float(emp[grid == best_thr][0]), best_bound)}); "
            f"raise --risk to at least {best_bound:.3f}, label more questions, or use a better confidence"
        )
    return CalibrationResult(
        None, False, risk, delta, method, n, 0, 0.0, None, None,
        best_risk, best_bound, best_thr, int(tested.sum()), msg, details,
    )  # fmt: skip


def _crc(
    conf: np.ndarray,
    wrong: np.ndarray,
    grid: np.ndarray,
    n_at: np.ndarray,
    e_at: np.ndarray,
    n: int,
    risk: float,
    delta: float,
) -> CalibrationResult:
    """Conformal risk control of the joint loss ``1{answered and wrong}`` (bounded by 1, and
    non-increasing in the threshold): the lowest ``t`` with ``(e_t + 1) / (n + 1) <= risk`` such
    that every higher threshold also satisfies it."""
    adjusted = (e_at + 1.0) / (n + 1.0)
    ok = adjusted <= risk
    chosen: int | None = None
    for j in range(len(grid)):
        if not ok[j]:
            break
        chosen = j
    best = float(adjusted.min()) if len(adjusted) else None
    details = {"loss": "joint: answered and wrong", "guarantee": "expected risk over calibration sets"}
    if chosen is None:
        msg = (
            f"no threshold reaches joint risk {risk} (crc): even one answer gives (errors + 1)/(n + 1) = "
            f"{(1 / (n + 1)) if best is None else best:.3f}; label more questions or raise --risk"
        )
        return CalibrationResult(
            None, False, risk, delta, "crc", n, 0, 0.0, None, None, best, best, None, 0, msg, details
        )
    thr, n_ans = float(grid[chosen]), int(n_at[chosen])
    emp_sel = float(e_at[chosen] / n_ans) if n_ans else None
    msg = (
        f"P(answered and wrong) <= {risk} in expectation (crc): answer when confidence >= {thr:.4g}; "
        f"answers {n_ans} of {n} ({n_ans / n:.0%}), joint risk bound {adjusted[chosen]:.3f}"
    )
    return CalibrationResult(
        thr, True, risk, delta, "crc", n, n_ans, n_ans / n, emp_sel, float(adjusted[chosen]),
        best, best, None, int(chosen) + 1, msg, details,
    )  # fmt: skip


# ---------------------------------------------------------------------------- estimator
class ThresholdCalibrator:
    """scikit-learn-style estimator of the abstention threshold.

    Example:
        >>> import numpy as np
        >>> cal = ThresholdCalibrator(risk=0.2, delta=0.1).fit(np.linspace(0, 1, 500), np.linspace(0, 1, 500) > 0.3)
        >>> cal.feasible_, cal.predict([0.1, 0.99]).tolist()
        (True, [False, True])
    """

    def __init__(
        self,
        risk: float = 0.1,
        delta: float = 0.1,
        method: str = "ltt-binomial",
        withdrawn: float | None = None,
        starts: int = 1,
    ) -> None:
        self.risk = risk
        self.delta = delta
        self.method = method
        self.withdrawn = withdrawn
        self.starts = starts

    def fit(
        self, confidences: Sequence[float | None] | np.ndarray, correct: Sequence[bool] | np.ndarray
    ) -> ThresholdCalibrator:
        self.result_ = calibrate_threshold(
            confidences, correct, self.risk, self.delta, self.method, starts=self.starts, withdrawn=self.withdrawn
        )
        self.threshold_ = self.result_.threshold
        self.feasible_ = self.result_.feasible
        return self

    def predict(self, confidences: Sequence[float | None] | np.ndarray) -> np.ndarray:
        """True where the item is answered (``confidence >= threshold_``); all False if infeasible."""
        if not hasattr(self, "result_"):
            raise InputError("ThresholdCalibrator is not fitted; call fit(confidences, correct) first")
        return answer_mask(confidences, self.threshold_)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {
            "risk": self.risk,
            "delta": self.delta,
            "method": self.method,
            "withdrawn": self.withdrawn,
            "starts": self.starts,
        }

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"params": self.get_params()}
        if hasattr(self, "result_"):
            data["result"] = self.result_.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ThresholdCalibrator:
        cal = cls(**data["params"])
        if "result" in data:
            cal.result_ = CalibrationResult.from_dict(data["result"])
            cal.threshold_ = cal.result_.threshold
            cal.feasible_ = cal.result_.feasible
        return cal


# ---------------------------------------------------------------------------- simulation
@dataclass
class SimulationResult:
    """How the calibrated rule behaved on held-out items over many random splits.

    ``exceed_rate``: share of splits whose realised held-out risk exceeded ``risk`` (the
    guarantee says at most ``delta``, up to the sampling error ``exceed_interval`` shows).
    Splits where no threshold was feasible abstain on everything: no risk, counted as not
    exceeding (``infeasible`` counts them). Risk is selective (wrong among answered) for the LTT
    methods and joint (answered and wrong among all) for ``crc``.

    The guarantee is about the *population* risk of the chosen threshold; a realised held-out risk
    adds the test set's own sampling noise, and the held-out part of a fixed pool is
    anti-correlated with its calibration part (errors the calibration split did not see are in
    the test split). ``pool_exceed_rate`` is therefore also reported: how often the chosen
    threshold's risk over the whole pool (the population the splits are drawn from) exceeded
    ``risk``, which is what the guarantee bounds by ``delta``. With small test splits expect
    ``exceed_rate`` above ``delta`` even when ``pool_exceed_rate`` is not.
    """

    n_splits: int
    risk: float
    delta: float
    method: str
    exceed_rate: float
    exceed_interval: tuple[float, float]
    mean_test_risk: float
    mean_coverage: float
    infeasible: int
    pool_exceed_rate: float = float("nan")
    test_risks: list[float] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["exceed_interval"] = list(self.exceed_interval)
        return data


def _risk_counts(answered: np.ndarray, right: np.ndarray, method: Method | str) -> tuple[int, int]:
    """Wrong answers and the count the risk divides them by: every question for ``crc`` (it
    controls the joint risk), the answered ones for Learn then Test (the selective risk)."""
    errors = int((answered & ~right).sum())
    return errors, len(answered) if method == "crc" else int(answered.sum())


def simulate_splits(
    confidences: Sequence[float | None] | np.ndarray,
    correct: Sequence[bool] | np.ndarray,
    risk: float = 0.1,
    delta: float = 0.1,
    n_splits: int = 500,
    cal_frac: float = 0.5,
    seed: int = 0,
    method: Method | str = "ltt-binomial",
    withdrawn: float | None = None,
    starts: int = 1,
) -> SimulationResult:
    """Calibrate on a random ``cal_frac`` of the items and measure the risk on the rest, ``n_splits``
    times (``withdrawn`` and ``starts`` as in :func:`calibrate_threshold`)."""
    conf, right = _check(confidences, correct, risk, delta)
    if not 0.0 < cal_frac < 1.0:
        raise InputError(f"cal_frac must be in (0, 1), got {cal_frac}; pass e.g. 0.5")
    if n_splits < 1:
        raise InputError(f"n_splits must be at least 1, got {n_splits}")
    n = len(conf)
    n_cal = int(round(cal_frac * n))
    if n_cal < 1 or n_cal >= n:
        raise InputError(f"{n} items cannot be split {cal_frac:.2f}/{1 - cal_frac:.2f}; label more questions")
    rng = np.random.default_rng(seed)
    exceeded = pool_exceeded = infeasible = 0
    risks: list[float] = []
    coverages: list[float] = []
    for _ in range(n_splits):
        perm = rng.permutation(n)
        cal, test = perm[:n_cal], perm[n_cal:]
        res = calibrate_threshold(conf[cal], right[cal], risk, delta, method, starts=starts, withdrawn=withdrawn)
        ans = answer_mask(conf[test], res.threshold)
        if not res.feasible:
            infeasible += 1
        errors, denominator = _risk_counts(ans, right[test], method)
        realised = errors / denominator if denominator else 0.0
        risks.append(realised)
        coverages.append(int(ans.sum()) / len(test))
        exceeded += realised > risk
        pool_errors, pool_denominator = _risk_counts(answer_mask(conf, res.threshold), right, method)
        pool_exceeded += (pool_errors / pool_denominator if pool_denominator else 0.0) > risk
    return SimulationResult(
        n_splits=n_splits,
        risk=risk,
        delta=delta,
        method=str(method),
        exceed_rate=exceeded / n_splits,
        exceed_interval=wilson_interval(exceeded, n_splits),
        mean_test_risk=float(np.mean(risks)),
        mean_coverage=float(np.mean(coverages)),
        infeasible=infeasible,
        pool_exceed_rate=pool_exceeded / n_splits,
        test_risks=risks,
    )


def held_out_report(
    confidences: Sequence[float | None] | np.ndarray,
    correct: Sequence[bool] | np.ndarray,
    risk: float = 0.1,
    delta: float = 0.1,
    cal_frac: float = 0.5,
    seed: int = 0,
    n_splits: int = 500,
    method: Method | str = "ltt-binomial",
) -> dict[str, Any]:
    """What ``eval --json`` reports about calibrated abstention: calibrate on one seeded
    ``cal_frac`` share of the questions, apply the threshold to the rest (coverage, realised risk
    and its Wilson 95% interval), and the split simulation over ``n_splits`` random splits."""
    conf, right = _check(confidences, correct, risk, delta)
    n = len(conf)
    n_cal = int(round(cal_frac * n))
    if n_cal < 1 or n_cal >= n:
        raise InputError(f"{n} questions cannot be split {cal_frac:.2f}/{1 - cal_frac:.2f}; label more questions")
    perm = np.random.default_rng(seed).permutation(n)
    cal, test = np.sort(perm[:n_cal]), np.sort(perm[n_cal:])
    res = calibrate_threshold(conf[cal], right[cal], risk, delta, method)
    ans = answer_mask(conf[test], res.threshold)
    n_ans = int(ans.sum())
    errors, denominator = _risk_counts(ans, right[test], method)
    lo, hi = wilson_interval(errors, denominator) if denominator else (float("nan"), float("nan"))
    sim = simulate_splits(conf, right, risk, delta, n_splits, cal_frac, seed, method) if n_splits else None
    return {
        "calibration": res.to_dict(),
        "n_calibration": int(n_cal),
        "n_test": int(len(test)),
        "test_coverage": n_ans / len(test),
        "test_risk": errors / denominator if denominator else None,
        "test_risk_interval": [lo, hi] if denominator else None,
        "simulation": None if sim is None else {k: v for k, v in sim.to_dict().items() if k != "test_risks"},
    }


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k/n`` (95% for the default ``z``)."""
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
