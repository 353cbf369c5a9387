"""Build a knowledge filter from typed settings (used by the CLI and the pipeline).

Example:
    >>> cfg = FilteringConfig(filter="direct", task="sst-2")
    >>> cfg.filter
    'direct'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragsieve.errors import ConfigError
from ragsieve.llm.base import LLM

from .annotate import KfDataset
from .filters import DirectFilter, EnsembleFilter, FilterName, ICLFilter, KnowledgeFilter, NoFilter
from .proxy import ProxyFilter


class FilteringConfig(BaseModel):
    """``PipelineConfig.stages["filtering"]``."""

    model_config = ConfigDict(extra="forbid")

    filter: FilterName = "none"
    fusion: bool = False
    # A built-in task name, or a custom task's fields (labels, instruction, template; see resolve_task).
    task: str | dict[str, Any] = "sst-2"
    alpha: float = Field(0.5, ge=0.0, le=1.0)
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    ensemble_theta: float = Field(0.8, ge=0.5, le=1.0)
    top_k: int = Field(30, ge=1)
    max_keep: int = Field(8, ge=1)
    mode: str = "dense"
    proxy_path: str | None = None  # folder written by `ragsieve filters train`
    dkf_path: str | None = None  # D_kf JSONL for in-context demonstrations
    n_demos: int = Field(4, ge=1)
    seed: int = 0


def _direct(cfg: FilteringConfig, llm: LLM, embedder: Any) -> KnowledgeFilter:
    f = DirectFilter(cfg.task, threshold=cfg.threshold)
    f.warm_up(llm)
    return f


def _icl(cfg: FilteringConfig, llm: LLM, embedder: Any) -> KnowledgeFilter:
    if not cfg.dkf_path:
        raise ConfigError(
            "--filter icl needs D_kf for its demonstrations; pass --dkf (from `ragsieve filters annotate`)"
        )
    f = ICLFilter(cfg.task, threshold=cfg.threshold, n_demos=cfg.n_demos, seed=cfg.seed).fit(
        KfDataset.load(cfg.dkf_path)
    )
    f.warm_up(llm)
    return f


def _proxy(cfg: FilteringConfig, llm: LLM, embedder: Any) -> KnowledgeFilter:
    if not cfg.proxy_path:
        raise ConfigError("--filter proxy needs a trained proxy; pass --proxy (from `ragsieve filters train`)")
    p = ProxyFilter.load(cfg.proxy_path)
    p.threshold = cfg.threshold
    return p.warm_up(embedder)


def _ensemble(cfg: FilteringConfig, llm: LLM, embedder: Any) -> KnowledgeFilter:
    return EnsembleFilter(_proxy(cfg, llm, embedder), _icl(cfg, llm, embedder), cfg.ensemble_theta, cfg.threshold)


def _none(cfg: FilteringConfig, llm: LLM, embedder: Any) -> KnowledgeFilter:
    return NoFilter(threshold=cfg.threshold)


FILTER_BUILDERS: dict[str, Callable[[FilteringConfig, Any, Any], KnowledgeFilter]] = {
    "none": _none,
    "direct": _direct,
    "icl": _icl,
    "proxy": _proxy,
    "ensemble": _ensemble,
}


def make_filter(cfg: FilteringConfig, llm: LLM | None, embedder: Any = None) -> KnowledgeFilter:
    return FILTER_BUILDERS[cfg.filter](cfg, llm, embedder)
