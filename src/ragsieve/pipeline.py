"""Compose the stages into a question-answering pipeline from a typed config.

``Pipeline`` is direct RAG with pluggable routing (which partitions to search), selection
(which candidates reach the generator) and source weights (importance stage). The
task-adaptive pipeline (``ragsieve.tasks.pipeline``) reuses its building blocks.
"""

from __future__ import annotations

import logging
from typing import Any

from ragsieve.config import PipelineConfig
from ragsieve.errors import ConfigError, InputError
from ragsieve.generate.answer import build_answer_messages, cite_evidence
from ragsieve.index import Index
from ragsieve.llm.base import LLM
from ragsieve.select import Selector, TopKSelector
from ragsieve.types import Answer, SearchHit, Trace

logger = logging.getLogger(__name__)


class Pipeline:
    """Retrieve, select and answer, recording every decision in a :class:`Trace`.

    Example:
        >>> from ragsieve.config import PipelineConfig
        >>> from ragsieve.pipeline import Pipeline
        >>> pipe = Pipeline.from_config(PipelineConfig(index_dir="demo-index"))  # doctest: +SKIP
        >>> answer = pipe.ask("What is graphene?")                                # doctest: +SKIP
        >>> answer.cited_ids                                                      # doctest: +SKIP
    """

    def __init__(
        self,
        config: PipelineConfig,
        index: Index | None = None,
        llm: LLM | None = None,
        selector: Selector | None = None,
    ) -> None:
        self.config = config
        self.index = index
        self.llm = llm
        self.selector = selector

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(cls, config: PipelineConfig) -> Pipeline:
        return cls(config)

    def to_dict(self) -> dict[str, Any]:
        return self.config.to_dict()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pipeline:
        from ragsieve.config import validate_config

        return cls(validate_config(data))

    def warm_up_index(self) -> Index:
        """Open the index and its embedder (idempotent); enough for search."""
        if self.index is None:
            if not self.config.index_dir:
                raise ConfigError("no index configured; pass --index DIR or set index_dir in the config")
            from ragsieve.embed import load_embedder

            self.index = Index.open(self.config.index_dir, embedder=load_embedder(self.config.embedder))
            self.index.warm_up()
        return self.index

    def warm_up(self, need_index: bool = True) -> None:
        """Open the index and load the models (idempotent)."""
        if need_index or self.index is not None:
            self.warm_up_index()
        if self.llm is None:
            from ragsieve.llm import load_llm

            self.llm = load_llm(self.config.llm)
        self.llm.warm_up()
        if self.selector is None:
            self.selector = build_selector(self.config, self.llm, self.index)

    def _ready_index(self) -> Index:
        if self.index is None:
            raise ConfigError("the pipeline has no index; call warm_up() or pass --index DIR")
        return self.index

    def _ready_llm(self) -> LLM:
        if self.llm is None:
            raise ConfigError("the pipeline has no LLM; call warm_up() first")
        return self.llm

    # ------------------------------------------------------------------ stages
    def resolve_domains(self, question: str, trace: Trace, route: str | None = None) -> list[str] | None:
        """Which partitions to search: ``None`` means the global index."""
        index = self._ready_index()
        route = route or self.config.route
        if route == "all":
            trace.record("route", mode="all", searched=["<global>"])
            return None
        if route == "auto":
            from ragsieve.route import route_query

            decision = route_query(index, question, self.config.stages.get("route", {}))
            routed = None if decision.fallback else list(decision.domains or [])
            trace.record("route", mode="auto", searched=routed or ["<global>"], **decision.to_dict())
            return routed
        if route not in index.domains:
            raise InputError(f"unknown domain {route!r} for --route; this index has {', '.join(index.domains)}")
        trace.record("route", mode="fixed", searched=[route])
        return [route]

    def retrieve(
        self,
        question: str,
        trace: Trace,
        k: int | None = None,
        domains: list[str] | None = None,
        where: dict[str, Any] | None = None,
    ) -> list[SearchHit]:
        """Candidates for selection: ``retrieval.candidates`` hits, or ``k`` if larger."""
        index = self._ready_index()
        rc = self.config.retrieval
        n = max(k or rc.k, rc.k)
        prune = None
        if rc.use_source_weights == "prune":
            if index.source_weights is None:
                raise ConfigError(
                    "retrieval.use_source_weights=prune but the index has no source_weights.json; "
                    "run `ragsieve importance apply` first"
                )
            prune = source_weight_threshold(index)
        with trace.timed("retrieve"):
            hits = index.search(
                question,
                k=max(n, rc.candidates if self.config.select != "top-k" else n),
                mode=rc.mode,
                where=where,
                domains=domains,
                retrieval=rc,
                prune_threshold=prune,
            )
            if rc.use_source_weights == "reweight":
                hits = reweight_hits(index, hits)
        trace.record(
            "retrieve",
            mode=rc.mode,
            fusion=rc.fusion,
            domains=domains,
            where=where,
            source_weights=rc.use_source_weights,
            candidates=[h.to_dict() for h in hits],
        )
        return hits

    def generate(self, question: str, evidence: list[SearchHit], trace: Trace) -> tuple[str, list[str]]:
        """Answer from ``evidence`` and return the text with the cited chunk ids."""
        llm = self._ready_llm()
        gc = self.config.generation
        messages = build_answer_messages(question, evidence, gc.max_evidence_chars)
        with trace.timed("generate"):
            out = llm.generate(messages, max_tokens=gc.max_tokens, temperature=gc.temperature)
        trace.count_llm(out.prompt_tokens, out.completion_tokens)
        text = out.text.strip()
        with trace.timed("attribute"):
            cited, method, similarities = cite_evidence(
                text, evidence, self.index.embedder if self.index is not None else None
            )
        trace.record(
            "generate",
            prompt_tokens=out.prompt_tokens,
            completion_tokens=out.completion_tokens,
            finish_reason=out.finish_reason,
            citation_method=method,
            attribution=[{"id": cid, "similarity": round(s, 4)} for cid, s in similarities],
            cited=cited,
        )
        return text, cited

    # ------------------------------------------------------------------ entry point
    def ask(
        self,
        question: str,
        *,
        no_retrieval: bool = False,
        k: int | None = None,
        route: str | None = None,
        where: dict[str, Any] | None = None,
    ) -> Answer:
        max_chars = self.config.retrieval.max_query_chars
        if not isinstance(question, str) or not question.strip():
            raise InputError("the question is empty; pass a question to ask")
        if len(question) > max_chars:
            raise InputError(
                f"the question has {len(question)} characters, over the limit of {max_chars}; "
                "shorten it or raise retrieval.max_query_chars"
            )
        question = question.strip()
        trace = Trace(query=question)
        with trace.timed("warm_up"):
            self.warm_up(need_index=not no_retrieval)
        evidence: list[SearchHit] = []
        if not no_retrieval:
            domains = self.resolve_domains(question, trace, route)
            hits = self.retrieve(question, trace, k=k, domains=domains, where=where)
            with trace.timed("select"):
                selector = self.selector or TopKSelector(self.config.retrieval.k)
                if k is not None and isinstance(selector, TopKSelector):
                    selector = TopKSelector(k)
                evidence = selector.select(question, hits, trace)
        else:
            trace.record("retrieve", skipped=True, reason="--no-retrieval")
        text, cited = self.generate(question, evidence, trace)
        return Answer(question=question, text=text, evidence=evidence, cited_ids=cited, trace=trace)


def build_selector(config: PipelineConfig, llm: LLM | None, index: Index | None) -> Selector:
    """The selector ``config.select`` names."""
    if config.select == "scope-coe":
        from ragsieve.coe import ScopeCoESelector

        return ScopeCoESelector.from_config(config, llm=llm, embedder=index.embedder if index else None)
    return TopKSelector(config.retrieval.k)


def source_weight_threshold(index: Index) -> float:
    import json

    data = json.loads((index.dir / "source_weights.json").read_text(encoding="utf-8"))
    return float(data.get("threshold", 0.5)) if isinstance(data, dict) else 0.5


def reweight_hits(index: Index, hits: list[SearchHit]) -> list[SearchHit]:
    """Scale each hit's score by its source's learned weight and re-rank."""
    weights = index.source_weights
    if weights is None:
        raise ConfigError(
            "retrieval.use_source_weights=reweight but the index has no source_weights.json; "
            "run `ragsieve importance apply` first"
        )
    scored = [
        SearchHit(
            h.chunk,
            h.score * weights.get(h.chunk.source, 1.0),
            0,
            {**h.scores, "source_weight": weights.get(h.chunk.source, 1.0)},
        )
        for h in hits
    ]
    scored.sort(key=lambda h: -h.score)
    return [SearchHit(h.chunk, h.score, r, h.scores) for r, h in enumerate(scored, 1)]


def build_pipeline(config: PipelineConfig) -> Any:
    """The pipeline class ``config.pipeline`` names, built from ``config``."""
    if config.pipeline == "task-adaptive":
        from ragsieve.tasks.pipeline import TaskAdaptivePipeline

        return TaskAdaptivePipeline.from_config(config)
    return Pipeline.from_config(config)
