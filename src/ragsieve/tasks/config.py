"""Configuration of the task-adaptive pipeline (``PipelineConfig.stages.tasks``).

The section is declared with the other config sections
(:class:`ragsieve.config.TaskAdaptiveConfig`) and its choices in :mod:`ragsieve.options`, so a
config file is checked whole when it is read; this module keeps the names the preset imports.
"""

from __future__ import annotations

from ragsieve.config import TaskAdaptiveConfig
from ragsieve.options import TaskClassifierKind as ClassifierKind
from ragsieve.options import TaskEvaluatorKind as EvaluatorKind

__all__ = ["ClassifierKind", "EvaluatorKind", "TaskAdaptiveConfig"]
