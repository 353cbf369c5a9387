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

from ragsieve.importance.apply import (
    WEIGHTS_FILE,
    PruneResult,
    apply_source_weights,
    load_prune_threshold,
    load_source_weights,
    masked_scores,
    reweight_scores,
    save_source_weights,
    tune_prune_threshold,
)
from ragsieve.importance.data import ValidationData, from_lists, load_jsonl, synthetic
from ragsieve.importance.estimator import DataImportance, leave_one_out
from ragsieve.importance.multilinear import Gradients, gradient_sums, gradients, montecarlo_samples

__all__ = [
    "WEIGHTS_FILE",
    "DataImportance",
    "Gradients",
    "PruneResult",
    "ValidationData",
    "apply_source_weights",
    "from_lists",
    "gradient_sums",
    "gradients",
    "leave_one_out",
    "load_jsonl",
    "load_prune_threshold",
    "load_source_weights",
    "masked_scores",
    "montecarlo_samples",
    "reweight_scores",
    "save_source_weights",
    "synthetic",
    "tune_prune_threshold",
]
