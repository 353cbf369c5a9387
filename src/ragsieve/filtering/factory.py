"""Build a knowledge filter from typed settings (used by the CLI and the pipeline).

Example:
    >>> cfg = FilteringConfig(filter="direct", task="sst-2")
    >>> cfg.filter
    'direct'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragsieve.config import FilterConfig
from ragsieve.errors import ConfigError
from ragsieve.llm.base import LLM

from .annotate import KfDataset
from .filters import DirectFilter, EnsembleFilter, ICLFilter, KnowledgeFilter, NoFilter
from .proxy import ProxyFilter

# The filter stage's section (``stages.filter``), declared with the other config sections.
FilteringConfig = FilterConfig


def _direct(cfg: FilteringConfig, llm: LLM, embedder: Any) -> KnowledgeFilter:
    f = DirectFilter(cfg.task_spec(), threshold=cfg.threshold)
    f.warm_up(llm)
    return f


def _icl(cfg: FilteringConfig, llm: LLM, embedder: Any) -> KnowledgeFilter:
    if not cfg.dkf_path:
        raise ConfigError(
            "--filter icl needs D_kf for its demonstrations; pass --dkf (from `ragsieve filters annotate`)"
        )
    f = ICLFilter(cfg.task_spec(), threshold=cfg.threshold, n_demos=cfg.n_demos, seed=cfg.seed).fit(
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
