"""Checks of the public importance parameters, kept free of numba so query-time code can use them.

The compiled kernels trust their inputs (no bounds checks, no type coercion), so every public
entry point validates here first: a typo in an option, ``k=2.5`` or a NaN learning rate is a
:class:`ConfigError`, an array of the wrong dtype or an out-of-range id an :class:`InputError`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from ragsieve.errors import ConfigError, InputError
from ragsieve.importance.data import ValidationData


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    """Reject a value outside ``choices`` (a typo must not silently select another option)."""
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")


def check_int(name: str, value: object, minimum: int | None, *, optional: bool = False) -> None:
    """Reject anything but an integer >= ``minimum`` (``2.5``, ``True`` and ``"3"`` included)."""
    if optional and value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or (minimum is not None and int(value) < minimum)
    ):
        bound = "" if minimum is None else f" >= {minimum}"
        raise ConfigError(f"{name} must be an integer{bound}, got {value!r}")


def check_float(
    name: str, value: object, *, low: float, high: float = math.inf, open_low: bool = False, open_high: bool = False
) -> None:
    """Reject a non-number, NaN, infinity or a value outside ``[low, high]`` (ends open as asked)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        try:
            x = float(value)  # type: ignore[arg-type]
        except OverflowError:
            x = math.inf
        ok = math.isfinite(x) and (x > low if open_low else x >= low) and (x < high if open_high else x <= high)
    if not ok:
        lo, hi = "(" if open_low else "[", ")" if open_high else "]"
        raise ConfigError(f"{name} must be a finite number in {lo}{low:g}, {high:g}{hi}, got {value!r}")


def check_arrays(data: ValidationData) -> None:
    """Dtypes the compiled kernels are written for, then the index bounds (:meth:`ValidationData.validate`)."""
    for name in ("offsets", "item", "source", "item_source", "answer"):
        arr: Any = getattr(data, name)
        if arr is None and name == "answer":
            continue
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise InputError(f"ValidationData.{name} must be a 1-d integer numpy array; build it with from_lists")
    if not isinstance(data.utility, np.ndarray) or data.utility.ndim != 1 or data.utility.dtype.kind != "f":
        raise InputError("ValidationData.utility must be a 1-d float numpy array; build it with from_lists")
    data.validate()


__all__ = ["check_arrays", "check_choice", "check_float", "check_int"]
