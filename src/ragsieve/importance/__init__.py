"""Data importance of the retrieval corpus (Lyu et al., multilinear extension).

Learn a weight in [0, 1] per data source from validation tuples (ranked retrieved items
with a utility each), then prune or reweight the corpus with it at query time.

Example::

    >>> from ragsieve.importance import DataImportance, from_lists
    >>> data = from_lists([[{"id": "a", "source": "good.org", "utility": 1.0},
    ...                     {"id": "b", "source": "bad.org", "utility": 0.0}]])
    >>> est = DataImportance(k=1, epochs=10, learning_rate=1.0).fit(data)
    >>> est.source_weights()["good.org"] > est.source_weights()["bad.org"]
    True
"""

from __future__ import annotations

import importlib
from typing import Any

# Lazy exports: ``ragsieve.importance.apply`` (used at query time) must not pull in numba.
_EXPORTS = {
    "WEIGHTS_FILE": "apply",
    "PruneResult": "apply",
    "apply_source_weights": "apply",
    "load_prune_threshold": "apply",
    "load_source_weights": "apply",
    "masked_scores": "apply",
    "reweight_scores": "apply",
    "save_source_weights": "apply",
    "tune_prune_threshold": "apply",
    "ValidationData": "data",
    "from_lists": "data",
    "load_jsonl": "data",
    "synthetic": "data",
    "DataImportance": "estimator",
    "leave_one_out": "estimator",
    "Gradients": "multilinear",
    "gradient_sums": "multilinear",
    "gradients": "multilinear",
    "montecarlo_samples": "multilinear",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ragsieve.importance' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ragsieve.importance.{module}"), name)
