"""Stage ``select``: the evidence the generator sees (ScopeCoE's minimal cover or the top k).

Passages the poisoning check found to speak as one (near-duplicate copies, and with
``stages.poison.coordination`` on the members of a coordinated voice: ``state.same_source``)
enter the selection as one: the best-ranked member stands for its voice and the others are
dropped before the cover or the top k is chosen, so five paraphrases of one planted claim
cannot fill the evidence and push an independent page out. Passages that only share a host
stay apart: they are usually chunks of one document, which the generator needs together."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ragsieve.config import PipelineConfig
from ragsieve.index import Index
from ragsieve.llm.base import LLM
from ragsieve.select import Selector, TopKSelector
from ragsieve.sieve.state import PipelineState
from ragsieve.store.protocol import Store
from ragsieve.text.readings import Readings
from ragsieve.types import SearchHit, Trace
from ragsieve.voices import one_per_voice

if TYPE_CHECKING:
    from ragsieve.text.reader import ExtractiveReader

# With the extractive reader on, the passage holding its best answer is kept when the reader's
# answer probability reaches this (0.5: the reader's own no-answer threshold, chosen on its
# validation part; nothing is tuned here). Below it on every candidate, the rules choose.
SELECT_READER_PROBABILITY = 0.5


def build_selector(config: PipelineConfig, llm: LLM | None, index: Index | Store | None) -> Selector:
    """The selector ``stages.select.method`` names (unset: the preset's own)."""
    if config.stages.select.method_for(config.pipeline) == "scope-coe":
        from ragsieve.coe import ScopeCoESelector

        return ScopeCoESelector.from_config(config, llm=llm, embedder=index.embedder if index else None)
    return TopKSelector(config.retrieval.k)


def scope_coe_selector(config: PipelineConfig, llm: LLM | None, embedder: Any, features: str) -> Selector:
    """ScopeCoE over the judged candidates; ``features="rules"`` extracts the question's intent
    and keywords without the LLM (ScopeCoE's own rule fallback), keeping the cover step cheap."""
    from ragsieve.coe import ScopeCoESelector

    if features == "llm":
        return ScopeCoESelector.from_config(config, llm=llm, embedder=embedder)
    from ragsieve.coe.features import EvidenceFeatures, fallback_features

    class RuleFeatureScopeCoE(ScopeCoESelector):
        def extract(self, query: str) -> EvidenceFeatures:
            return fallback_features(" ".join(query.split()))

    return RuleFeatureScopeCoE.from_config(config, llm=llm, embedder=embedder)


class Selectors:
    """The selector for a method name, built once per method. ``fixed`` (a selector given to the
    pipeline, or the one ``stages.select.method`` names in plain RAG) wins outside the sieve."""

    def __init__(
        self,
        config: PipelineConfig,
        llm: Callable[[], LLM | None],
        embedder: Callable[[], Any],
        *,
        sieve: bool,
        fixed: Selector | None = None,
    ) -> None:
        self.config = config
        self.llm = llm
        self.embedder = embedder
        self.sieve = sieve
        self.fixed = fixed
        self.built: dict[str, Selector] = {}

    def __call__(self, method: str) -> Selector:
        if self.fixed is not None and not self.sieve:
            return self.fixed
        if method not in self.built:
            if method == "scope-coe":
                self.built[method] = scope_coe_selector(
                    self.config, self.llm(), self.embedder(), self.config.stages.select.coe_features
                )
            else:
                self.built[method] = TopKSelector(self.config.retrieval.k)
        return self.built[method]


def answer_stating(
    question: str,
    candidates: Sequence[SearchHit],
    readings: Readings | None = None,
    reader: ExtractiveReader | None = None,
) -> SearchHit | None:
    """The best-ranked candidate that answers the question: one that states, near the question's
    terms, a value of the kind asked for (:func:`ragsieve.text.passage.passage_answer`), or, for a
    question that asks for a description (no single value: the kind the classifier also gives
    when it cannot tell a measurement question, "What is the belt tension?"), one with a sentence
    that answers it on its own (:func:`ragsieve.text.passage.answering_sentence`); ``None`` for a
    yes/no question or when none does. With the extractive ``reader``: the candidate holding the
    reader's best answer (the highest answer probability, at least
    :data:`SELECT_READER_PROBABILITY`; for a question asking for a value, a span stating one of
    the asked kind), the rules' choice when no candidate has one. ``readings``: the request's
    readings (a fresh set when none is given)."""
    readings = readings if readings is not None else Readings()
    asked = readings.question(question)
    kind = asked.kind
    if kind == "yes/no":
        return None
    if reader is not None:
        chosen = reader_choice(question, candidates, readings, reader)
        if chosen is not None:
            return chosen
    for hit in candidates:
        reading = readings.passage(question, hit)  # one at a time: the first that answers ends the search
        if kind == "description":
            if reading.open_sentence is not None:
                return hit
        elif reading.answer.value is not None:
            return hit
    return None


def reader_choice(
    question: str, candidates: Sequence[SearchHit], readings: Readings, reader: ExtractiveReader
) -> SearchHit | None:
    """The candidate holding the extractive reader's best answer (see :func:`answer_stating`),
    ``None`` when none has one; every candidate not read yet is read in one batch."""
    from ragsieve.text.passage import ReaderBar

    asked = readings.question(question)
    if asked.kind == "yes/no" or not candidates:
        return None
    bar = ReaderBar(SELECT_READER_PROBABILITY)
    best: tuple[float, SearchHit] | None = None
    for hit, reading in zip(candidates, readings.passages(question, candidates, reader), strict=True):
        found = reading.reader_answer(asked, bar)
        if found is None or not found.confident or not reading.span.strip():
            continue
        if asked.kind != "description" and found.value is None:
            continue  # a value is asked for and the span states none of its kind
        if best is None or (found.probability or 0.0) > best[0]:
            best = (found.probability or 0.0, hit)
    return best[1] if best is not None else None


class SelectStage:
    """The evidence the generator sees: ScopeCoE's minimal cover, or the top k.

    Reads the candidates, ``state.retrieve``, ``state.k``, ``state.same_source`` (one passage
    per voice enters the selection: :func:`ragsieve.voices.one_per_voice`) and ``state.must_keep`` (passages that
    join the selection whatever the selector chose); writes one ``select`` decision per
    candidate (in the sieve) and whatever the selector records. Set by ``stages.select.method``
    (unset: the preset's own), ``stages.select.coe_features`` (sieve), ``retrieval.k`` and
    ``stages.coe``."""

    name = "select"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ("must_keep", "same_source", "readings")
    writes: tuple[str, ...] = ()
    emits: tuple[str, ...] = ()

    def __init__(
        self,
        selectors: Selectors,
        method: str,
        default_k: int,
        *,
        sieve: bool,
        reader: ExtractiveReader | None = None,
    ) -> None:
        self.selectors = selectors
        self.method = method
        self.default_k = default_k
        self.sieve = sieve
        # the extractive reader ([reading] reader = "minilm"): the passage holding its best
        # answer stays (:func:`answer_stating`); None: the rules choose
        self.reader = reader

    def warm_up(self) -> None:
        if self.reader is not None and self.method == "scope-coe":
            self.reader.warm_up()

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        if not state.retrieve:
            return []
        k = state.k or self.default_k
        selector: Selector = self.selectors(self.method)
        if state.k is not None and isinstance(selector, TopKSelector):
            selector = TopKSelector(state.k)
        # one passage per voice: a cluster's other members never reach the selector, so neither
        # the cover nor the top k fills the evidence with them
        voiced, stands_for = one_per_voice(candidates, state.same_source)
        chosen = list(selector.select(question, voiced, trace))
        # the conflict stage's must-keep passages (one of every answer group) join the
        # selection, so a minimal cover cannot drop one side of a disagreement
        chosen_ids = {h.chunk.id for h in chosen}
        added = [h for h in voiced if h.chunk.id in set(state.must_keep) and h.chunk.id not in chosen_ids]
        chosen += added
        # a minimal cover judges coverage of the question's terms, not whether a passage holds
        # the answer: the best-ranked passage that states a value of the kind asked for stays
        stating = answer_stating(question, voiced, state.readings, self.reader) if self.method == "scope-coe" else None
        if stating is not None and stating.chunk.id in {h.chunk.id for h in chosen}:
            stating = None  # the cover kept it already
        if stating is not None:
            # in the candidates' (the judge's) order, so the answer's [n] numbering follows rank
            ids = {h.chunk.id for h in chosen} | {stating.chunk.id}
            chosen = [h for h in candidates if h.chunk.id in ids]
        if self.sieve:
            kept_ids = {h.chunk.id for h in chosen}
            for h in candidates:
                if h in added:
                    trace.decide("select", h.chunk.id, "kept", "one side of a disagreement between sources")
                elif h is stating:
                    trace.decide(
                        "select", h.chunk.id, "kept",
                        (
                            "the passage holding the reader's best answer, stating the kind of value asked for"
                            if self.reader is not None
                            and reader_choice(question, voiced, state.readings, self.reader) is h
                            else "the best-ranked passage stating the kind of value asked for (or, for an open "
                            "question, a sentence that answers it)"
                        ),
                    )
                elif h.chunk.id in kept_ids:
                    trace.decide("select", h.chunk.id, "kept", f"in the {self.method} selection")
                elif h.chunk.id in stands_for:
                    trace.decide(
                        "select", h.chunk.id, "dropped",
                        f"one voice with {stands_for[h.chunk.id]}, which stands for it (one passage per voice)",
                    )
                else:
                    why = "not needed for the minimal cover" if self.method == "scope-coe" else f"beyond the top {k}"
                    trace.decide("select", h.chunk.id, "dropped", why)
        return chosen
