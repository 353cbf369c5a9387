"""One question-answering pipeline: builds a preset's stages, warms them up, runs them in
order and assembles the :class:`~ragsieve.types.Answer`.

A stage (:class:`~ragsieve.sieve.state.Stage`) takes the question, the current candidates, the
trace and a small shared :class:`~ragsieve.sieve.state.PipelineState`; it returns the
candidates for the next stage (or an :class:`~ragsieve.types.Answer`, which ends the run: an
abstention) and records its decisions in the trace (``trace.record`` per stage,
``trace.decide`` per candidate a check keeps, drops or flags). Stages get their resources
(index, LLM, judges, config sections) when they are built here; none of them knows the pipeline.

The presets are stage lists of the same :class:`Pipeline` (``config.pipeline``):

* ``plain`` (alias ``direct``): route → retrieve → select → generate (hybrid top-k RAG);
* ``task-adaptive``: the task router, HyDE retrieval, the CRAG-style evaluator and its actions,
  generation with reflection (:mod:`ragsieve.sieve.adaptive`);
* ``sieve`` (the default): route → need → retrieve → judge → poison → filter → conflict →
  select → generate → verify, then accept, regenerate once with only the supported evidence,
  or abstain.

``config.ablate`` removes stages by name (:data:`ragsieve.config.SIEVE_STAGES`); every
remaining list still answers (without ``verify`` the answer is unverified, without ``need``
the pipeline always retrieves, without ``judge`` every candidate is kept, without ``select``
the top-k are used).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ragsieve.cancel import CancelToken, cancel_scope, current_token
from ragsieve.citations import settle_answer
from ragsieve.config import PipelineConfig
from ragsieve.errors import ConfigError, InputError
from ragsieve.index import Index
from ragsieve.llm.base import LLM
from ragsieve.select import Selector
from ragsieve.sieve.adaptive import IndexRetriever, TaskAdaptiveParts, task_adaptive_stages
from ragsieve.sieve.conflict import ConflictStage
from ragsieve.sieve.events import Final, PipelineEvent, Retracted, StageFinished, StageStarted, Token
from ragsieve.sieve.filter import FilterStage
from ragsieve.sieve.generate import GenerateStage, Generator
from ragsieve.sieve.judge import Judge, JudgeStage, RelevanceScores, build_judge
from ragsieve.sieve.need import NeedStage
from ragsieve.sieve.poison import PoisonStage
from ragsieve.sieve.retrieve import CandidateSearch, RetrieveStage
from ragsieve.sieve.route import RouteStage, resolve_domains
from ragsieve.sieve.select import Selectors, SelectStage, build_selector
from ragsieve.sieve.state import PipelineState, Ref, Stage, preset_name, preset_stages
from ragsieve.sieve.verify import EXTRACTED, EXTRACTED_ATTEMPT, VerifyStage, answer_confidence
from ragsieve.store.protocol import Store
from ragsieve.telemetry import set_attributes, span
from ragsieve.types import Answer, SearchHit, Trace

logger = logging.getLogger(__name__)


def open_configured_index(config: PipelineConfig) -> Index | Store:
    """The index (or store) ``config`` names, with its embedder."""
    from ragsieve.embed import load_embedder
    from ragsieve.store.open import open_index

    return open_index(config, load_embedder(config.embedder))


def embedder_of(index: Ref[Index | Store]) -> Callable[[], Any]:
    """The open index's embedder, or ``None`` while no index is open."""

    def embedder() -> Any:
        return index.value.embedder if index.value is not None else None

    return embedder


class SharedEmbedder:
    """The open index's embedder behind one :class:`ragsieve.embed.MemoEmbedder` for all the
    stages of a built preset, so a text one check embedded is not embedded again by the next
    (the judge, ScopeCoE, the verifier and the poison check embed the same passages and
    sentences), and the candidates' vectors come from the index's stored rows
    (:meth:`remember_hits`) rather than a second pass of the model. Calling it gives the memo,
    or ``None`` while no index (or no embedder) is open."""

    def __init__(self, index: Ref[Index | Store], max_items: int = 4096) -> None:
        self.index = index
        self.max_items = max_items
        self.memo: Any = None

    def __call__(self) -> Any:
        opened = self.index.value
        inner = getattr(opened, "embedder", None) if opened is not None else None
        if inner is None:
            return None
        if self.memo is None or self.memo.inner is not inner:
            from ragsieve.embed.base import MemoEmbedder

            self.memo = MemoEmbedder(inner, self.max_items)
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


class _Shared:
    """What the stages of one built preset share (built with the stages)."""

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
    ) -> None:
        embedder = self.embedder = SharedEmbedder(index)
        self.judge: Ref[Judge] = Ref(judge, make=lambda: build_judge(config.sieve, embedder()))
        self.relevance = RelevanceScores(self.judge, config.sieve, remember=embedder.remember_hits)
        self.search = CandidateSearch(index, config.retrieval, sieve=sieve, wide=config.select != "top-k" and not sieve)
        self.selectors = Selectors(config, lambda: llm.value, embedder, sieve=sieve, fixed=selector)
        self.generator = Generator(llm, config.generation, embedder)

        def build_claim() -> Any:
            from ragsieve.verify import build_claim_judge

            return build_claim_judge(config.sieve.claim_judge, llm=llm.value, embedder=embedder())

        self.claim_judge: Ref[Any] = Ref(claim_judge, make=build_claim)


class Pipeline:
    """Run the stage list ``config.pipeline`` names (minus ``config.ablate``), recording every
    decision in a :class:`Trace`.

    Example:
        >>> from ragsieve.config import PipelineConfig
        >>> from ragsieve import Pipeline
        >>> pipe = Pipeline.from_config(PipelineConfig(index_dir="demo-index"))  # doctest: +SKIP
        >>> answer = pipe.ask("What is graphene?")                                # doctest: +SKIP
        >>> answer.abstained, answer.confidence, [c.supported for c in answer.claims]  # doctest: +SKIP
    """

    def __init__(
        self,
        config: PipelineConfig,
        index: Index | Store | None = None,
        llm: LLM | None = None,
        selector: Selector | None = None,
        *,
        judge: Judge | None = None,
        claim_judge: Any = None,
        stages: Sequence[Stage] | None = None,
        task_parts: TaskAdaptiveParts | None = None,
        callbacks: Sequence[Any] = (),
    ) -> None:
        self.config = config
        # Objects with on_stage_start / on_stage_end / on_token (ragsieve.sieve.events.PipelineCallbacks).
        self.callbacks: list[Any] = list(callbacks)
        self._index: Ref[Index | Store] = Ref(
            index, missing="the pipeline has no index; call warm_up() or pass --index DIR"
        )
        self._llm: Ref[LLM] = Ref(llm, missing="the pipeline has no LLM; call warm_up() first")
        self._selector_given = selector
        self._judge_given = judge
        self._claim_judge_given = claim_judge
        self._task_parts: Ref[TaskAdaptiveParts] = Ref(
            task_parts, make=task_parts_maker(config, self._index, self._llm)
        )
        self._stages: list[Stage] | None = list(stages) if stages is not None else None
        self._parts: _Shared | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(cls, config: PipelineConfig) -> Pipeline:
        return cls(config)

    @classmethod
    def task_adaptive(cls, parts: TaskAdaptiveParts, ablate: Sequence[str] = ()) -> Pipeline:
        """The task-adaptive preset with its components given (tests, benchmarks with in-memory
        retrievers; swap ``parts.retriever`` per question).

        Example::

            parts = TaskAdaptiveParts(llm, embedder, ListRetriever(chunks, embedder), TaskAdaptiveConfig())
            Pipeline.task_adaptive(parts).ask("Write a short note on our remote-work policy")
        """
        cfg = PipelineConfig.model_validate(
            {
                "pipeline": "task-adaptive",
                "ablate": list(ablate),
                "retrieval": {"k": parts.k},
                "generation": {"max_tokens": parts.max_tokens, "max_evidence_chars": parts.max_evidence_chars},
                "stages": {"tasks": parts.config.model_dump(mode="json")},
            }
        )
        return cls(cfg, llm=parts.llm, task_parts=parts)

    def to_dict(self) -> dict[str, Any]:
        return self.config.to_dict()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pipeline:
        from ragsieve.config import validate_config

        return cls(validate_config(data))

    # ------------------------------------------------------------------ resources
    @property
    def index(self) -> Index | Store | None:
        return self._index.value

    @index.setter
    def index(self, index: Index | Store | None) -> None:
        self._index.value = index

    @property
    def llm(self) -> LLM | None:
        return self._llm.value

    @llm.setter
    def llm(self, llm: LLM | None) -> None:
        self._llm.value = llm

    @property
    def selector(self) -> Selector | None:
        return self._parts.selectors.fixed if self._parts is not None else self._selector_given

    @property
    def judge(self) -> Judge | None:
        return self._parts.judge.value if self._parts is not None else self._judge_given

    @property
    def claim_judge(self) -> Any:
        return self._parts.claim_judge.value if self._parts is not None else self._claim_judge_given

    @property
    def preset(self) -> str:
        return preset_name(self.config.pipeline)

    @property
    def is_sieve(self) -> bool:
        return self.preset == "sieve"

    def embedder(self) -> Any:
        index = self._index.value
        return index.embedder if index is not None else None

    def ready_index(self) -> Index | Store:
        return self._index()

    def ready_llm(self) -> LLM:
        return self._llm()

    def task_parts(self) -> TaskAdaptiveParts:
        """The task-adaptive preset's components (:class:`ragsieve.sieve.adaptive.TaskAdaptiveParts`)."""
        return self._task_parts()

    # ------------------------------------------------------------------ stages
    @property
    def stages(self) -> list[Stage]:
        if self._stages is None:
            self._stages = self.build_stages()
        return self._stages

    def _shared(self) -> _Shared:
        if self._parts is None:
            self._parts = _Shared(
                self.config,
                self._index,
                self._llm,
                sieve=self.is_sieve,
                judge=self._judge_given,
                selector=self._selector_given,
                claim_judge=self._claim_judge_given,
            )
        return self._parts

    def build_stages(self) -> list[Stage]:
        """The preset's stages, minus the ablated ones."""
        names = preset_stages(self.config)
        if self.preset == "task-adaptive":
            return task_adaptive_stages(self._task_parts, names)
        config, sc, sieve = self.config, self.config.sieve, self.is_sieve
        shared = self._shared()
        factories: dict[str, Callable[[], Stage]] = {
            "route": lambda: RouteStage(
                self._index,
                (config.route if config.route != "all" else sc.route) if sieve else config.route,
                sc.route_close_margin if sieve else None,
                config.stages.get("route", {}),
            ),
            "need": lambda: NeedStage(sc, shared.search, shared.relevance),
            "retrieve": lambda: RetrieveStage(shared.search, sc.candidates if sieve else None),
            "judge": lambda: JudgeStage(shared.relevance, sc),
            "poison": lambda: PoisonStage(sc, config.stages.get("poison", {}), shared.embedder),
            "filter": lambda: FilterStage(config.stages.get("filtering", {}), self._llm, shared.embedder),
            "conflict": lambda: ConflictStage(
                sc,
                config.stages.get("conflict", {}),
                self._index,
                lambda: self._llm.value,
                lambda: shared.relevance.thresholds()[1],
            ),
            "select": lambda: SelectStage(
                shared.selectors, sc.select if sieve else config.select, config.retrieval.k, sieve=sieve
            ),
            "generate": lambda: GenerateStage(shared.generator, announce_conflict="verify" not in names),
            "verify": lambda: VerifyStage(
                shared.claim_judge, shared.generator, sc, config.stages.get("responsive", {})
            ),
        }
        stages = [factories[n]() for n in names]
        if "generate" not in names:
            raise ConfigError("ablate cannot remove 'generate': a pipeline must answer; remove it from ablate")
        if "select" not in names and "retrieve" in names:
            # Without a selection step the generator still gets only the top k.
            stages.insert(
                names.index("generate"), SelectStage(shared.selectors, "top-k", config.retrieval.k, sieve=sieve)
            )
        return stages

    # ------------------------------------------------------------------ warm-up
    def warm_up_index(self) -> Index | Store:
        """Open the index and its embedder (idempotent); enough for search."""
        if self._index.value is None:
            self._index.value = open_configured_index(self.config)
        return self._index.value

    def warm_up(self, need_index: bool = True) -> None:
        """Open the index, load the models and every stage's own state (idempotent)."""
        if need_index or self.index is not None:
            self.warm_up_index()
        if self._llm.value is None:
            from ragsieve.llm import load_llm

            self._llm.value = load_llm(self.config.llm)
        self._llm.value.warm_up()
        selectors = self._shared().selectors
        if selectors.fixed is None and not self.is_sieve:
            selectors.fixed = build_selector(self.config, self.llm, self.index)
        for stage in self.stages:
            stage.warm_up()

    # ------------------------------------------------------------------ building blocks
    def resolve_domains(
        self, question: str, trace: Trace, route: str | None = None, close_margin: float | None = None
    ) -> list[str] | None:
        """Which partitions to search: ``None`` means the global index."""
        index = self.ready_index()
        return resolve_domains(
            index, question, trace, route or self.config.route, self.config.stages.get("route", {}), close_margin
        )

    def retrieve(
        self,
        question: str,
        trace: Trace,
        k: int | None = None,
        domains: list[str] | None = None,
        where: dict[str, Any] | None = None,
    ) -> list[SearchHit]:
        """Candidates for selection (:class:`ragsieve.sieve.retrieve.CandidateSearch`)."""
        sieve = self.is_sieve
        search = CandidateSearch(
            self._index, self.config.retrieval, sieve=sieve, wide=self.config.select != "top-k" and not sieve
        )
        return search(question, trace, k=k, domains=domains, where=where)

    def ready_judge(self) -> Judge:
        """The relevance judge (the one given, else the one ``sieve.judge`` names)."""
        return self._shared().judge()

    def judge_thresholds(self) -> tuple[float, float]:
        """The judge's (upper, lower) thresholds after ``sieve.upper``/``sieve.lower``."""
        return self._shared().relevance.thresholds()

    def ready_claim_judge(self) -> Any:
        """The claim judge of the verify stage (the one given, else ``sieve.claim_judge``'s)."""
        return self._shared().claim_judge()

    def ready_selector(self, method: str) -> Selector:
        """The selector for ``method``; a selector passed to the constructor wins in plain RAG."""
        return self._shared().selectors(method)

    def judge_scores(self, question: str, hits: Sequence[SearchHit], state: PipelineState) -> list[float]:
        """Judge scores of ``hits``, scoring only those not judged earlier in this request."""
        return self._shared().relevance.scores(question, hits, state)

    def generate(
        self, question: str, evidence: list[SearchHit], trace: Trace, record_as: str = "generate"
    ) -> tuple[str, list[str]]:
        """Answer from ``evidence`` and return the text with the cited chunk ids."""
        return self._shared().generator(question, evidence, trace, record_as=record_as)

    def answer_likelihood(self, question: str, text: str) -> float | None:
        """exp(mean token log-prob) of a closed-book answer under the model (one scoring pass)."""
        return self._shared().generator.answer_likelihood(question, text)

    # ------------------------------------------------------------------ entry point
    def ask(
        self,
        question: str,
        *,
        no_retrieval: bool = False,
        k: int | None = None,
        route: str | None = None,
        where: dict[str, Any] | None = None,
        task: str | None = None,
    ) -> Answer:
        """Run the stages on ``question``; ``task`` forces the task-adaptive path."""
        return self.ask_with_events(
            question, None, no_retrieval=no_retrieval, k=k, route=route, where=where, task=task
        )

    def ask_with_events(
        self,
        question: str,
        on_event: Callable[[PipelineEvent], None] | None,
        *,
        no_retrieval: bool = False,
        k: int | None = None,
        route: str | None = None,
        where: dict[str, Any] | None = None,
        task: str | None = None,
    ) -> Answer:
        """:meth:`ask`, calling ``on_event`` on this thread with each
        :mod:`ragsieve.sieve.events` event as it happens (stages, tokens, retractions, the final
        answer). ``on_event=None`` (and no ``on_token`` callback) generates in one call, as ``ask``."""
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
        relay = _EventRelay(on_event, self.callbacks, trace, question)
        with span("ragsieve.ask", preset=self.preset):
            with relay.stage("warm_up"):
                self.warm_up(need_index=not no_retrieval and self.preset != "task-adaptive")
            state = PipelineState(
                question=question,
                k=k,
                route=route,
                where=where,
                task=task,
                retrieve=not no_retrieval,
                forced_no_retrieval=no_retrieval,
                token_sink=relay.token if relay.streams_tokens else None,
            )
            trace.record(
                "pipeline", preset=self.preset, stages=[s.name for s in self.stages], ablated=self.config.ablate
            )
            candidates: list[SearchHit] = []
            for stage in self.stages:
                with relay.stage(stage.name, candidates) as result:
                    out = stage.run(question, candidates, trace, state)
                    result["out"] = out
                if isinstance(out, Answer):
                    relay.finish(out)
                    return out
                candidates = out
            answer = self._assemble_answer(question, trace, state)
        relay.finish(answer)
        return answer

    def _assemble_answer(self, question: str, trace: Trace, state: PipelineState) -> Answer:
        """The :class:`Answer` from what the stages left in ``state``."""
        if state.confidence is None and self.is_sieve and state.relevance:
            # verify switched off: the evidence's relevance alone orders the answers.
            state.confidence = answer_confidence(
                [], max((state.relevance.get(h.chunk.id, 0.0) for h in state.evidence), default=None)
            )
        apply_calibrated_abstention(state, trace, self.config.calibration.abstain_below)
        state.text, state.cited = settle_answer(state.text, state.evidence, state.cited, trace, state.abstained)
        return Answer(
            question=question,
            text=state.text,
            evidence=state.evidence,
            cited_ids=state.cited,
            trace=trace,
            abstained=state.abstained,
            abstain_reason=state.abstain_reason,
            confidence=state.confidence,
            claims=state.claims,
        )

    # ------------------------------------------------------------------ streaming and async
    def stream(
        self,
        question: str,
        *,
        no_retrieval: bool = False,
        k: int | None = None,
        route: str | None = None,
        where: dict[str, Any] | None = None,
        task: str | None = None,
    ) -> Iterator[PipelineEvent]:
        """Answer ``question``, yielding :mod:`ragsieve.sieve.events` as they happen: each stage as it
        starts and finishes, the answer's tokens as the LLM generates them, a ``Retracted`` event
        when streamed text stops being the answer (regenerated, trimmed or abstained), and a
        ``Final`` event whose ``answer`` is what :meth:`ask` returns.

        The stages run on a worker thread. Closing the iterator early (``break``) cancels the
        LLM call in progress (:mod:`ragsieve.cancel`) and waits for the worker to stop; a job
        cancelled around the caller (the service's deadline) is passed on the same way.

        Example:
            >>> for event in pipe.stream("What is graphene?"):  # doctest: +SKIP
            ...     if event.kind == "token":
            ...         print(event.text, end="", flush=True)
            ...     elif event.kind == "answer":
            ...         print("\nverified:", event.answer.text)
        """
        options: dict[str, Any] = {"no_retrieval": no_retrieval, "k": k, "route": route, "where": where, "task": task}
        events: queue.Queue[Any] = queue.Queue()
        token = CancelToken()
        outer = current_token()

        def work() -> None:
            try:
                with cancel_scope(token):
                    self.ask_with_events(question, events.put, **options)
            except BaseException as exc:  # handed to the consumer's thread
                events.put(_Failure(exc))
            finally:
                events.put(_DONE)

        worker = threading.Thread(
            target=contextvars.copy_context().run, args=(work,), name="ragsieve-stream", daemon=True
        )
        worker.start()
        try:
            while True:
                try:
                    item = events.get(timeout=0.05)
                except queue.Empty:
                    if outer is not None and outer.cancelled:
                        token.cancel(outer.reason or "the caller's job was cancelled")
                    continue
                if item is _DONE:
                    return
                if isinstance(item, _Failure):
                    raise item.error
                yield item
        finally:
            if worker.is_alive():
                token.cancel("the stream's reader stopped reading")
                worker.join()

    async def aask(
        self,
        question: str,
        *,
        no_retrieval: bool = False,
        k: int | None = None,
        route: str | None = None,
        where: dict[str, Any] | None = None,
        task: str | None = None,
    ) -> Answer:
        """:meth:`ask` on a worker thread, for ``await``. Cancelling the awaiting task cancels the
        LLM call in progress (it stops at its next check) and raises ``CancelledError`` at once.

        Example:
            >>> answer = await pipe.aask("What is graphene?")  # doctest: +SKIP
        """
        token = CancelToken()

        def work() -> Answer:
            with cancel_scope(token):
                return self.ask(question, no_retrieval=no_retrieval, k=k, route=route, where=where, task=task)

        future = asyncio.get_running_loop().run_in_executor(None, contextvars.copy_context().run, work)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            token.cancel("the awaiting task was cancelled")
            raise

    async def astream(
        self,
        question: str,
        *,
        no_retrieval: bool = False,
        k: int | None = None,
        route: str | None = None,
        where: dict[str, Any] | None = None,
        task: str | None = None,
    ) -> AsyncIterator[PipelineEvent]:
        """:meth:`stream` for ``async for``: the stages run on a worker thread and their events
        cross to the event loop through an asyncio queue. Cancelling the consuming task, or
        leaving the loop early, cancels the LLM call in progress.

        Example:
            >>> async for event in pipe.astream("What is graphene?"):  # doctest: +SKIP
            ...     print(event.kind)
        """
        options: dict[str, Any] = {"no_retrieval": no_retrieval, "k": k, "route": route, "where": where, "task": task}
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[Any] = asyncio.Queue()
        token = CancelToken()

        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(events.put_nowait, item)
            except RuntimeError:  # the loop closed: nobody is listening, stop generating
                token.cancel("the event loop closed")

        def work() -> None:
            try:
                with cancel_scope(token):
                    self.ask_with_events(question, put, **options)
            except BaseException as exc:  # handed to the event loop
                put(_Failure(exc))
            finally:
                put(_DONE)

        future = loop.run_in_executor(None, contextvars.copy_context().run, work)
        try:
            while True:
                item = await events.get()
                if item is _DONE:
                    break
                if isinstance(item, _Failure):
                    raise item.error
                yield item
        finally:
            if not future.done():
                token.cancel("the stream's reader stopped reading")


class _Failure:
    """An exception raised by the worker thread of a stream, carried to its reader."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


_DONE = object()


class _EventRelay:
    """Turns one run's stage boundaries and LLM pieces into events for ``on_event``, the
    callbacks and OpenTelemetry spans; tracks what was streamed so it can say when that text
    stops being the answer."""

    def __init__(
        self, on_event: Callable[[PipelineEvent], None] | None, callbacks: Sequence[Any], trace: Trace, question: str
    ) -> None:
        self.on_event = on_event
        self.callbacks = callbacks
        self.trace = trace
        self.question = question
        self.attempt: str | None = None
        self.streamed: list[str] = []
        self.token_callbacks = [cb for cb in callbacks if callable(getattr(cb, "on_token", None))]

    @property
    def streams_tokens(self) -> bool:
        return self.on_event is not None or bool(self.token_callbacks)

    def emit(self, event: PipelineEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def _callback(self, method: str, *args: Any) -> None:
        for cb in self.callbacks:
            fn = getattr(cb, method, None)
            if callable(fn):
                try:
                    fn(*args)
                except Exception:  # a monitoring hook must never fail the question
                    logger.exception("pipeline callback %s.%s failed", type(cb).__name__, method)

    def stage(self, name: str, candidates: Sequence[SearchHit] | None = None) -> Any:
        return _StageScope(self, name, candidates)

    def token(self, piece: str, attempt: str) -> None:
        if self.attempt is not None and attempt != self.attempt and self.streamed:
            self.emit(
                Retracted(
                    reason=self._replacing(attempt),
                    text="".join(self.streamed),
                    attempt=self.attempt,
                    replacement="regenerated",
                )
            )
            self.streamed = []
        self.attempt = attempt
        self.streamed.append(piece)
        self.emit(Token(piece, attempt))
        self._callback("on_token", piece, attempt)

    def _replacing(self, attempt: str) -> str:
        """Why streamed text gives way to generation ``attempt``."""
        if attempt == EXTRACTED_ATTEMPT:
            extracted = [e for e in self.trace.stage("responsive") if e.get("attempt") == EXTRACTED]
            where = f" [{extracted[-1]['position']}]" if extracted and "position" in extracted[-1] else ""
            return f"the reply pasted a passage; the answer extracted from the pasted passage{where} follows"
        regen = self.trace.stage("regenerate")
        reason = str(regen[-1].get("reason", "")) if regen else ""
        return f"regenerating with only the supported evidence ({reason})" if reason else "regenerating"

    def finish(self, answer: Answer) -> None:
        streamed = "".join(self.streamed).strip()
        same = bool(streamed) and streamed == answer.text.strip()
        if streamed and not same:
            if answer.abstained:
                reason = answer.abstain_reason or "the checks found no supported answer"
                replacement: Any = "abstained"
            else:
                reason = "the checks changed the generated text (unsupported sentences removed or text cleaned)"
                replacement = "checked"
            self.emit(Retracted(reason=reason, text=streamed, attempt=self.attempt or "generate",
                                replacement=replacement))
        self.emit(Final(answer=answer, streamed_is_final=same))


class _StageScope:
    """One stage's span, timing, callbacks and start/finish events."""

    def __init__(self, relay: _EventRelay, name: str, candidates: Sequence[SearchHit] | None) -> None:
        self.relay, self.name = relay, name
        self.n_in = len(candidates) if candidates is not None else None
        self.result: dict[str, Any] = {}

    def __enter__(self) -> dict[str, Any]:
        relay = self.relay
        self.n_events, self.n_decisions = len(relay.trace.events), len(relay.trace.decisions)
        relay._callback("on_stage_start", self.name, relay.question)
        relay.emit(StageStarted(self.name))
        self.span_cm = span(f"ragsieve.stage.{self.name}", stage=self.name, candidates_in=self.n_in)
        self.span = self.span_cm.__enter__()
        self.timer = relay.trace.timed(self.name)
        self.timer.__enter__()
        self.before = relay.trace.timings_ms.get(self.name, 0.0)
        return self.result

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        relay = self.relay
        self.timer.__exit__(exc_type, exc, tb)
        duration = relay.trace.timings_ms.get(self.name, 0.0) - self.before
        out = self.result.get("out")
        n_out = len(out) if isinstance(out, list) else None
        set_attributes(self.span, candidates_out=n_out, duration_ms=round(duration, 3))
        self.span_cm.__exit__(exc_type, exc, tb)
        if exc_type is not None:
            return
        records = relay.trace.events[self.n_events :]
        relay._callback("on_stage_end", self.name, duration, records)
        relay.emit(
            StageFinished(
                self.name, duration, list(records), list(relay.trace.decisions[self.n_decisions :]), n_out
            )
        )


def apply_calibrated_abstention(state: PipelineState, trace: Trace, threshold: float | None) -> None:
    """Abstain when the answer's confidence is missing or below the calibrated ``threshold``.

    ``calibration.abstain_below`` is the threshold ``ragsieve calibrate`` certified for a target
    error rate (rule: :func:`ragsieve.calibrate.abstains`). It applies to every preset and after
    every check, ``sieve.min_confidence`` included: that one is a fixed floor inside the verify
    stage (a sieve answer below it was already replaced by an abstention there), this one is the
    last word on what is answered, so the effective floor is the higher of the two. An answer a
    check already abstained on stays as it is. ``None``: no threshold, nothing changes.
    """
    if threshold is None or state.abstained:
        return
    # imported only with a threshold to apply: ragsieve.calibrate loads scipy.stats (seconds, cold)
    from ragsieve.calibrate import abstains

    reason = abstains(state.confidence, threshold)
    if reason is None:
        return
    state.text = (
        "I can't answer this with the confidence this configuration requires: the answer's confidence is "
        + ("unknown" if state.confidence is None else f"{state.confidence:.2f}")
        + f", below the calibrated threshold {threshold:.2f}."
    )
    state.abstained, state.abstain_reason = True, reason
    trace.record("abstain", check="calibration", reason=reason)


def build_pipeline(config: PipelineConfig) -> Pipeline:
    """The pipeline ``config.pipeline`` names (one class; the preset picks its stage list)."""
    return Pipeline.from_config(config)
