"""Building a stage list: the resources the stages of one pipeline share
(:class:`StageResources`: the index and LLM boxes, one memoised embedder, the judge, the
search, the selectors, the generator) and :func:`build_stages`, the one place a stage is built
with its resources and config section. The pipeline and the candidate checks both build here;
neither a stage nor this module knows the pipeline."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from ragsieve.config import PipelineConfig
from ragsieve.decision import DecisionModel
from ragsieve.errors import ConfigError
from ragsieve.index import Index
from ragsieve.llm.base import LLM
from ragsieve.select import Selector
from ragsieve.sieve.adaptive import IndexRetriever, TaskAdaptiveParts, task_adaptive_stages
from ragsieve.sieve.conflict import ConflictStage
from ragsieve.sieve.decide import DecideStage
from ragsieve.sieve.filter import FilterStage
from ragsieve.sieve.generate import GenerateStage, Generator
from ragsieve.sieve.injection import InjectionStage
from ragsieve.sieve.judge import Judge, JudgeStage, RelevanceScores, build_judge
from ragsieve.sieve.need import NeedStage
from ragsieve.sieve.poison import PoisonStage
from ragsieve.sieve.prior import AuditPrior
from ragsieve.sieve.retrieve import CandidateSearch, RetrieveStage
from ragsieve.sieve.route import RouteStage
from ragsieve.sieve.select import Selectors, SelectStage
from ragsieve.sieve.state import Ref, Stage, WhenLoaded, check_wiring, preset_name
from ragsieve.sieve.verify import VerifyStage
from ragsieve.store.protocol import Store
from ragsieve.text.readings import shared_reader
from ragsieve.types import SearchHit


def open_configured_index(config: PipelineConfig, *, wait_for_embedder: bool = True) -> Index | Store:
    """The index (or store) ``config`` names, with its embedder (still loading on its worker
    thread when ``wait_for_embedder`` is false and it loads that way)."""
    from ragsieve.embed import load_embedder
    from ragsieve.store.open import open_index

    return open_index(config, load_embedder(config.embedder), wait_for_embedder=wait_for_embedder)


class SharedEmbedder:
    """The open index's embedder behind one :class:`ragsieve.embed.MemoEmbedder` for all the
    stages of a built preset, so a text one check embedded is not embedded again by the next
    (the judge, ScopeCoE, the verifier and the poison check embed the same passages and
    sentences), and the candidates' vectors and their sentences' come from the index's stored
    rows (:meth:`remember_hits`) rather than a pass of the model. Calling it gives the memo,
    or ``None`` while no index (or no embedder) is open.

    The index's embedder may still be loading on its worker thread: the index owns that load
    (:meth:`ragsieve.index.Index.ready_embedder` waits for it), so a stage's warm-up does not
    wait for it through the memo; the first embedding does."""

    def __init__(
        self, index: Ref[Index | Store], max_items: int = 4096, inner: Callable[[], Any] | None = None
    ) -> None:
        self.index = index
        self.max_items = max_items
        # where the embedder comes from when there is no index (SieveChecks: the given one)
        self.inner = inner
        self.memo: Any = None

    def __call__(self) -> Any:
        opened = self.index.value
        if self.inner is not None:
            inner = self.inner()
        else:
            inner = getattr(opened, "embedder", None) if opened is not None else None
        if inner is None:
            return None
        if self.memo is None or self.memo.inner is not inner:
            from ragsieve.embed.base import MemoEmbedder

            self.memo = MemoEmbedder(inner, self.max_items, wait_in_warm_up=self.inner is not None)
        return self.memo

    def remember_hits(self, hits: Sequence[SearchHit]) -> None:
        """Hand the memo the index's stored vectors of ``hits`` (those whose text is the indexed
        chunk's: candidates from another retriever may reuse an id)."""
        opened = self.index.value
        stored = getattr(opened, "index", opened)  # a FolderStore keeps its Index there
        rows_of = getattr(stored, "row", None)
        vectors = getattr(stored, "embeddings", None)
        chunks = getattr(stored, "chunks", None)
        memo = self()
        if memo is None or rows_of is None or vectors is None or chunks is None:
            return
        # stored rows stand in for the embedder's own output only when both are unit vectors (an
        # index built with normalize=False may be opened by a normalising embedder, and back)
        if not getattr(stored, "normalized", False) or not getattr(memo.inner, "normalize", True):
            return
        texts: list[str] = []
        rows: list[int] = []
        for hit in hits:
            try:
                row = rows_of(hit.chunk.id)
            except KeyError:
                continue
            if chunks[row].text == hit.chunk.text:
                texts.append(hit.chunk.text)
                rows.append(row)
        if rows and vectors.shape[1] == memo.dim:
            memo.remember(texts, np.asarray(vectors[rows], dtype=np.float32))
            # and their sentences' vectors, stored at ingest: the checks embed each sentence
            sentence_vectors = getattr(stored, "sentence_vectors", None)
            if sentence_vectors is not None:
                sentences, sentence_rows = sentence_vectors(rows)
                if sentences:
                    memo.remember(sentences, sentence_rows)


def task_parts_maker(
    config: PipelineConfig, index: Ref[Index | Store], llm: Ref[LLM]
) -> Callable[[], TaskAdaptiveParts]:
    """Builds the task-adaptive components on first use (opening the index when configured)."""

    def make() -> TaskAdaptiveParts:
        if index.value is None and config.index_dir:
            index.value = open_configured_index(config)
        opened = index.value
        return TaskAdaptiveParts.from_config(
            config,
            retriever=IndexRetriever(opened, config) if opened is not None else None,
            llm=llm(),
            embedder=opened.embedder if opened is not None else None,
        )

    return make


class StageResources:
    """What the stages of one built stage list share: the index and LLM boxes, one memoised
    embedder, the relevance judge and its per-request scores, the candidate search, the selectors,
    the generator and the claim judge (each built on first use)."""

    def __init__(
        self,
        config: PipelineConfig,
        index: Ref[Index | Store],
        llm: Ref[LLM],
        *,
        sieve: bool,
        judge: Judge | None,
        selector: Selector | None,
        claim_judge: Any,
        embedder: Callable[[], Any] | None = None,
        decision_model: DecisionModel | None = None,
    ) -> None:
        self.config, self.index, self.llm, self.sieve = config, index, llm, sieve
        embedder = self.embedder = SharedEmbedder(index, inner=embedder)
        self.judge: Ref[Judge] = Ref(judge, make=lambda: build_judge(config.stages.judge, embedder()))
        self.relevance = RelevanceScores(self.judge, config.stages.judge, remember=embedder.remember_hits)
        retrieve = config.stages.retrieve
        self.search = CandidateSearch(
            index, config.retrieval, sieve=sieve, embedder=embedder,
            wide=not sieve and config.stages.select.method_for(config.pipeline) != "top-k",
            prior=AuditPrior(retrieve.audit_trust) if sieve and retrieve.audit_prior else None,
        )

        def llm_when_used() -> LLM | None:
            # while the LLM loads, a component that keeps it gets a stand-in that waits on use
            return cast(LLM, WhenLoaded(llm)) if llm.loading() else llm.value

        self.selectors = Selectors(config, llm_when_used, embedder, sieve=sieve, fixed=selector)
        self.generator = Generator(llm, config.generation, embedder)

        def build_claim() -> Any:
            from ragsieve.verify import build_claim_judge

            # only the log-prob judge uses the model: the others do not wait for its load
            claim_judge = config.stages.verify.claim_judge
            model = llm.value if claim_judge == "llm-logprob" else None
            return build_claim_judge(claim_judge, llm=model, embedder=embedder())

        self.claim_judge: Ref[Any] = Ref(claim_judge, make=build_claim)
        # the decide stage's model when one is given (else the stage loads decide.model's)
        self.decision_model: Callable[[], DecisionModel] | None = (
            (lambda: decision_model) if decision_model is not None else None
        )


def build_stages(
    config: PipelineConfig,
    names: Sequence[str],
    resources: StageResources,
    task_parts: Callable[[], TaskAdaptiveParts] | None = None,
) -> list[Stage]:
    """The stages ``names`` lists, in that order, built with ``resources`` and their config
    sections: the one place stages are built (:class:`~ragsieve.sieve.pipeline.Pipeline` and
    :class:`~ragsieve.sieve.checks.SieveChecks` call it). ``task_parts``: the task-adaptive
    preset's components (its stages replace the sieve's)."""
    if preset_name(config.pipeline) == "task-adaptive":
        if task_parts is None:
            raise ConfigError("the task-adaptive preset needs its components; build it with Pipeline")
        return task_adaptive_stages(task_parts, names)
    # each stage gets its own section (config.stages.<stage>); where a section leaves route or
    # select unset, the preset's own applies (plain RAG stays plain: ragsieve.options.PRESET_ROUTE)
    st, sieve, shared = config.stages, resources.sieve, resources
    preset = "sieve" if sieve else "plain"
    index, llm = resources.index, resources.llm
    # the extractive reader ([reading] reader = "minilm"), one per process, shared by the checks
    # that read passages (conflict, select, verify); None: they read by the rules
    reader = shared_reader() if config.reading.reader == "minilm" else None
    factories: dict[str, Callable[[], Stage]] = {
        "route": lambda: RouteStage(
            index,
            st.route.domain_for(preset),
            st.route.close_margin if sieve else None,  # plain RAG searches the routed domains only
            st.route,
        ),
        "need": lambda: NeedStage(st.need, st.retrieve.candidates, shared.search, shared.relevance),
        "retrieve": lambda: RetrieveStage(shared.search, st.retrieve.candidates if sieve else None),
        "judge": lambda: JudgeStage(shared.relevance, st.judge),
        "poison": lambda: PoisonStage(st.poison, shared.embedder),
        "injection": lambda: InjectionStage(st.injection, shared.embedder),
        "filter": lambda: FilterStage(st.filter, llm, shared.embedder),
        "conflict": lambda: ConflictStage(
            st.conflict,
            index,
            lambda: llm.value,
            lambda: shared.relevance.thresholds()[1],
            shared.embedder,
            reader=reader,
        ),
        "select": lambda: SelectStage(
            shared.selectors, st.select.method_for(preset), config.retrieval.k, sieve=sieve,
            reader=reader,
        ),
        "generate": lambda: GenerateStage(shared.generator, announce_conflict="verify" not in names),
        "verify": lambda: VerifyStage(
            shared.claim_judge,
            shared.generator,
            st.verify,
            # observe mode collects every draft: no veto ends its runs
            vetoes=(config.decide.vetoes if config.decide.mode == "decide" else []) if "decide" in names else None,
            reader=reader,
        ),
        "decide": lambda: DecideStage(config.decide, config.calibration, shared.generator, resources.decision_model),
    }
    unknown = [n for n in names if n not in factories]
    if unknown:
        raise ConfigError(f"no stage is named {unknown[0]!r}; stages: {', '.join(factories)}")
    if "decide" in names and "coordinated" in config.decide.vetoes and not st.poison.coordination:
        # a veto that can never fire is a configuration mistake, not a choice
        raise ConfigError(
            "decide.vetoes lists 'coordinated', but stages.poison.coordination is off, so no "
            "coordinated voice is ever found; set stages.poison.coordination = true or remove "
            "the veto"
        )
    stages = [factories[n]() for n in names]
    if "select" not in names and "retrieve" in names and "generate" in names:
        # Without a selection step the generator still gets only the top k.
        stages.insert(
            list(names).index("generate"),
            SelectStage(shared.selectors, "top-k", config.retrieval.k, sieve=sieve),
        )
    check_wiring(stages)
    return stages
