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
from ragsieve.filtering.tasks import TaskSpec, resolve_task
from ragsieve.generate.classify import LabelClassifier, TaskPreset

PRESET_FOR_TASK: dict[str, TaskPreset] = {
    "sst-2": "sentiment",
    "mr": "sentiment",
    "sst-5": "sentiment-5",
    "trec": "question-category",
    "cola": "acceptability",
}


def scorer_for_task(task: TaskSpec, **kwargs: Any) -> LabelClassifier:
    """The calibrated ``LabelClassifier`` for a dataset's task, or for a custom task.

    A custom task (a :class:`TaskTemplate` or its fields) scores its own labels and verbalizers
    with its own template, or with its instruction before the text when it has none.
    """
    if isinstance(task, str):
        try:
            preset = PRESET_FOR_TASK[task]
        except KeyError:
            raise InputError(
                f"no classifier preset for task {task!r}; choose one of {sorted(PRESET_FOR_TASK)} "
                "or pass a custom task (labels, instruction, template)"
            ) from None
        return LabelClassifier.from_preset(preset, **kwargs)
    t = resolve_task(task)
    if t.builtin:
        return scorer_for_task(t.name, **kwargs)
    instruction = t.instruction.replace("{", "{{").replace("}", "}}")
    default = f"{instruction} Answer with one word ({{options}}).\n\n{t.text_name}: {{text}}\n{{knowledge}}Answer:"
    template = t.template or default
    kwargs.setdefault("verbalizers", dict(t.verbalizers))
    kwargs.setdefault("template", template)
    return LabelClassifier(list(t.labels), **kwargs)
