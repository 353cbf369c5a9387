"""The question's path: one module per stage, in stage order.

``route`` → ``need`` → ``retrieve`` → ``judge`` → ``poison`` → ``filter`` → ``conflict`` →
``select`` → ``generate`` → ``verify`` (:mod:`ragsieve.sieve.adaptive` holds the task-adaptive preset's
stages), :mod:`ragsieve.sieve.state` the state, the stage protocol and the presets, and
:mod:`ragsieve.sieve.pipeline` the one module that builds a preset's stages and runs them.
Names load lazily so importing one stage does not import the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "Pipeline": "ragsieve.sieve.pipeline",
    "build_pipeline": "ragsieve.sieve.pipeline",
    "PipelineState": "ragsieve.sieve.state",
    "Stage": "ragsieve.sieve.state",
    "PRESETS": "ragsieve.sieve.state",
    "preset_stages": "ragsieve.sieve.state",
    "Judge": "ragsieve.sieve.judge",
    "EvaluatorJudge": "ragsieve.sieve.judge",
    "CrossEncoderJudge": "ragsieve.sieve.judge",
    "PoisonJudge": "ragsieve.sieve.poison",
    "TaskAdaptiveParts": "ragsieve.sieve.adaptive",
}

if TYPE_CHECKING:
    from ragsieve.sieve.adaptive import TaskAdaptiveParts
    from ragsieve.sieve.judge import CrossEncoderJudge, EvaluatorJudge, Judge
    from ragsieve.sieve.pipeline import Pipeline, build_pipeline
    from ragsieve.sieve.poison import PoisonJudge
    from ragsieve.sieve.state import PRESETS, PipelineState, Stage, preset_stages

__all__ = [
    "PRESETS",
    "CrossEncoderJudge",
    "EvaluatorJudge",
    "Judge",
    "Pipeline",
    "PipelineState",
    "PoisonJudge",
    "Stage",
    "TaskAdaptiveParts",
    "build_pipeline",
    "preset_stages",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ragsieve.sieve' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
