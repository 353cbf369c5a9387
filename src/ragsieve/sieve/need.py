"""Stage ``need``: does the question need retrieval? The task router first, then the judge's
best score over a probe retrieval (long-tail entities read like general questions)."""

from __future__ import annotations

from typing import Any

from ragsieve.config import NeedConfig
from ragsieve.sieve.judge import RelevanceScores
from ragsieve.sieve.retrieve import CandidateSearch
from ragsieve.sieve.state import PipelineState
from ragsieve.types import SearchHit, Trace


class NeedStage:
    """Is retrieval needed? The task router first; when it says "answer directly", the judge's
    best score over a probe retrieval decides instead, so questions about long-tail entities
    (which read like general questions) still retrieve when the index knows them.

    Why the retrieval signal rather than the model's own answer confidence: the probe reuses the
    retrieval the question needs anyway (its hits and judge scores go on to the judge stage), so
    it costs no LLM call, while a confidence signal needs a closed-book draft first. Which of
    the two separates "needs retrieval" from "does not" better has not been measured yet on
    held-out questions; the closed-book path records the model's answer likelihood as its
    confidence, so both signals are in the trace for that comparison.

    Reads ``state.forced_no_retrieval``, ``state.domains`` and ``state.where``; writes
    ``state.retrieve``, ``state.probe`` (the probe's hits, which the retrieve stage reuses),
    ``state.relevance`` (their judge scores) and a ``need`` record. Set by ``stages.need``
    (``mode``, ``threshold``, ``closed_book``); the probe retrieves ``stages.retrieve.candidates``.
    """

    name = "need"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ("domains",)
    writes: tuple[str, ...] = ("retrieve", "probe", "relevance", "signals")
    emits: tuple[str, ...] = ("need.closed_book_task", "need.best_relevance")

    def __init__(
        self, config: NeedConfig, candidates: int, search: CandidateSearch, relevance: RelevanceScores
    ) -> None:
        self.config = config
        self.candidates = candidates
        self.search = search
        self.relevance = relevance
        self.classifier: Any = None

    def warm_up(self) -> None:
        if self.classifier is None and self.config.mode == "auto":
            from ragsieve.tasks.classifier import TfidfTaskClassifier

            # the shipped fit of the bundled training split: the same arrays ``fit`` on that split
            # returns (its fingerprint check), without reading and hashing the split on a cold ask
            self.classifier = TfidfTaskClassifier.load_bundled()

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        sc = self.config
        if state.forced_no_retrieval:
            trace.record("need", retrieve=False, reason="--no-retrieval")
            return candidates
        if sc.mode == "always":
            trace.record("need", retrieve=True, reason="stages.need.mode=always")
            return candidates
        self.warm_up()
        pred = self.classifier.classify(question)
        if pred.label != "general_qa":
            trace.record("need", retrieve=True, task=pred.label, reason=f"task router: {pred.label}")
            return candidates
        probe = self.search(question, trace, k=self.candidates, domains=state.domains, where=state.where)
        scores = self.relevance.scores(question, probe, state) if probe else []
        best = max(scores, default=0.0)
        state.probe = probe
        # the retrieval-need check's graded signals: the router asked to answer directly, and how
        # relevant the best probed passage is
        state.signal("need.closed_book_task", True)
        state.signal("need.best_relevance", best)
        if best >= sc.threshold:
            trace.record(
                "need",
                retrieve=True,
                task=pred.label,
                signal="retrieval",
                best_relevance=round(best, 4),
                reason=f"task router says answer directly, but the index has a relevant passage "
                f"({best:.2f} >= {sc.threshold})",
            )
            return candidates
        if sc.closed_book == "never":
            trace.record(
                "need",
                retrieve=True,
                task=pred.label,
                signal="retrieval",
                best_relevance=round(best, 4),
                reason=f"task router says answer directly and no passage is relevant ({best:.2f} < "
                # the wording is pinned by the recorded traces: it names the option's earlier key,
                # now stages.need.closed_book
                f"{sc.threshold}), but the sieve answers from evidence only (sieve.closed_book=never): "
                "the judge decides",
            )
            return candidates
        state.retrieve = False
        state.probe = None
        trace.record(
            "need",
            retrieve=False,
            task=pred.label,
            signal="retrieval",
            best_relevance=round(best, 4),
            reason=f"task router says answer directly and no passage is relevant ({best:.2f} < {sc.threshold})",
        )
        return []
