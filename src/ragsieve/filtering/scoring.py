"""Label scoring for the filtering stage: the core's :class:`~ragsieve.generate.LabelClassifier`.

Each task template maps to a ``LabelClassifier`` preset (instruction and text first, the
knowledge last, so llama.cpp reuses the shared prefix across knowledge pieces in
``predict_proba_many``), with contextual calibration.

Example:
    >>> clf = scorer_for_task("trec")
    >>> clf.labels[:2]
    ['abbreviation', 'entity']
"""

from __future__ import annotations

from typing import Any

from ragsieve.errors import InputError
from ragsieve.generate.classify import LabelClassifier, TaskPreset

PRESET_FOR_TASK: dict[str, TaskPreset] = {
    "sst-2": "sentiment",
    "mr": "sentiment",
    "sst-5": "sentiment-5",
    "trec": "question-category",
    "cola": "acceptability",
}


def scorer_for_task(task: str, **kwargs: Any) -> LabelClassifier:
    """The calibrated ``LabelClassifier`` preset for a dataset's task."""
    try:
        preset = PRESET_FOR_TASK[task]
    except KeyError:
        raise InputError(f"no classifier preset for task {task!r}; choose one of {sorted(PRESET_FOR_TASK)}") from None
    return LabelClassifier.from_preset(preset, **kwargs)
