"""Router quality as in Ganesh et al. Table 1: accuracy, macro recall and macro precision."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np


class RouterScores(NamedTuple):
    accuracy: float
    macro_recall: float
    macro_precision: float
    n: int


def router_scores(true: Sequence[str], predicted: Sequence[str]) -> RouterScores:
    """Accuracy and macro-averaged recall/precision over the classes in ``true``.

    A class never predicted has precision 0 (scikit-learn's ``zero_division=0``).
    """
    y = np.asarray(true, dtype=object)
    p = np.asarray(predicted, dtype=object)
    if len(y) != len(p):
        raise ValueError(f"{len(y)} labels but {len(p)} predictions")
    if len(y) == 0:
        return RouterScores(0.0, 0.0, 0.0, 0)
    classes = sorted(set(y.tolist()))
    recalls, precisions = [], []
    for c in classes:
        tp = float(np.sum((y == c) & (p == c)))
        recalls.append(tp / float(np.sum(y == c)))
        n_pred = float(np.sum(p == c))
        precisions.append(tp / n_pred if n_pred else 0.0)
    return RouterScores(float(np.mean(y == p)), float(np.mean(recalls)), float(np.mean(precisions)), len(y))
