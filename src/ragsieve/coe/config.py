"""Typed configuration of the chain-of-evidence stage (``PipelineConfig.stages.coe``).

The section is declared with the other config sections (:class:`ragsieve.config.CoEConfig`) and
its choices in :mod:`ragsieve.options`, so a config file is checked whole when it is read; this
module keeps the names ScopeCoE's code imports.
"""

from __future__ import annotations

from typing import Any

from ragsieve.config import CoEConfig
from ragsieve.options import IntentJudgeKind, KeywordJudgeKind, RelationJudgeKind

__all__ = ["CoEConfig", "IntentJudgeKind", "KeywordJudgeKind", "RelationJudgeKind", "load_coe_config"]


def load_coe_config(data: CoEConfig | dict[str, Any] | None) -> CoEConfig:
    """``data`` as ScopeCoE's options (:meth:`CoEConfig.parse`): a bad key or value raises
    :class:`ragsieve.config.InvalidConfigError` naming ``stages.coe.<key>``."""
    return CoEConfig.parse(data)
