"""Stage ``filter``: the knowledge filter (``ragsieve.filtering``) over the kept candidates."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragsieve.config import FilterConfig
from ragsieve.llm.base import LLM
from ragsieve.sieve.state import PipelineState
from ragsieve.types import SearchHit, Trace, Verdict


class FilterStage:
    """The knowledge filter (``stages.filter``) over the kept candidates. The filters are
    trained for classification tasks; with ``filter = "none"`` (the default) the stage records
    that it does not apply and passes candidates through.

    Reads the candidates; writes one ``filter`` decision per candidate and a ``filter`` record.
    Set by ``stages.filter`` (:class:`ragsieve.config.FilterConfig`)."""

    name = "filter"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    writes: tuple[str, ...] = ("signals",)
    emits: tuple[str, ...] = ("filter.dropped_share",)

    def __init__(self, config: FilterConfig, llm: Callable[[], LLM], embedder: Callable[[], Any]) -> None:
        self.config = config
        self.llm = llm
        self.embedder = embedder
        self.filter: Any = None

    def warm_up(self) -> None:
        cfg = self.config
        if self.filter is None and cfg.filter != "none":
            from ragsieve.filtering.factory import make_filter

            self.filter = make_filter(cfg, self.llm(), self.embedder())

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        cfg = self.config
        if cfg.filter == "none" or not candidates:
            # the reason's text is pinned by the recorded traces (tests/fixtures): it still names
            # the section's earlier name, stages.filtering (now stages.filter)
            trace.record("filter", applied=False, reason="no knowledge filter configured (stages.filtering.filter)")
            return candidates
        self.warm_up()
        from ragsieve.filtering.filters import Candidate, decide

        cands = [Candidate(h.chunk.text, h.rank, score=h.score, id=h.chunk.id) for h in candidates]
        decisions = decide(self.filter, question, cands)
        kept = []
        for h, d in zip(candidates, decisions, strict=True):
            verdict: Verdict = "kept" if d.keep else "dropped"
            reason = f"P(harmless) {d.p_harmless:.2f} {'>=' if d.keep else '<'} {self.filter.threshold:.2f}"
            trace.decide("filter", h.chunk.id, verdict, reason, d.p_harmless, filter=d.source)
            if d.keep:
                kept.append(h)
        trace.record("filter", applied=True, filter=cfg.filter, kept=[h.chunk.id for h in kept])
        state.signal("filter.dropped_share", 1.0 - len(kept) / len(candidates))
        return kept
