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
* ``sieve`` (the default): route → need → retrieve → judge → poison → injection → filter →
  conflict → select → generate → verify, then accept, regenerate once with only the supported evidence,
  or abstain.

Every run ends with the closing stages (:mod:`ragsieve.sieve.closing`: the confidence when no
check measured one, the calibrated threshold, citation settling), abstention or not.

``config.ablate`` removes stages by name (:data:`ragsieve.config.SIEVE_STAGES`); every
remaining list still answers (without ``verify`` the answer is unverified, without ``need``
the pipeline always retrieves, without ``judge`` every candidate is kept, without ``select``
the top-k are used).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ragsieve.config import PipelineConfig
from ragsieve.decision import DecisionModel
from ragsieve.errors import ConfigError, InputError, check_question
from ragsieve.index import Index
from ragsieve.llm.base import LLM
from ragsieve.select import Selector
from ragsieve.sieve.adaptive import TaskAdaptiveParts
from ragsieve.sieve.build import StageResources, build_stages, open_configured_index, task_parts_maker
from ragsieve.sieve.closing import closing_stages
from ragsieve.sieve.events import PipelineEvent
from ragsieve.sieve.judge import Judge
from ragsieve.sieve.request import AskOptions, ask_options, takes_ask_options
from ragsieve.sieve.retrieve import CandidateSearch
from ragsieve.sieve.route import resolve_domains
from ragsieve.sieve.runner import answer_of, run_stages
from ragsieve.sieve.select import build_selector
from ragsieve.sieve.state import PipelineState, Ref, Stage, check_wiring, preset_name, preset_stages
from ragsieve.sieve.streaming import EventRelay, StreamingAnswers
from ragsieve.store.protocol import Store
from ragsieve.tasks.labels import TASK_LABELS, TaskLabel
from ragsieve.telemetry import span
from ragsieve.types import Answer, SearchHit, Trace

if TYPE_CHECKING:
    from typing_extensions import Unpack

logger = logging.getLogger(__name__)


class Pipeline(StreamingAnswers):
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
        decision_model: DecisionModel | None = None,
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
        self._decision_model_given = decision_model
        self._task_parts: Ref[TaskAdaptiveParts] = Ref(
            task_parts, make=task_parts_maker(config, self._index, self._llm)
        )
        self._stages: list[Stage] | None = None
        self._closing: list[Stage] | None = None
        if stages is not None:
            check_wiring([*stages, *self.closing])
            self._stages = list(stages)
        self._parts: StageResources | None = None

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

    def task_parts(self) -> TaskAdaptiveParts:
        """The task-adaptive preset's components (:class:`ragsieve.sieve.adaptive.TaskAdaptiveParts`)."""
        return self._task_parts()

    # ------------------------------------------------------------------ stages
    @property
    def stages(self) -> list[Stage]:
        if self._stages is None:
            self._stages = self.build_stages()
        return self._stages

    @property
    def closing(self) -> list[Stage]:
        """What every run does after its stages (:mod:`ragsieve.sieve.closing`), built with the
        stages from the configuration."""
        if self._closing is None:
            self._closing = closing_stages(self.config.calibration, sieve=self.is_sieve)
        return self._closing

    def _shared(self) -> StageResources:
        if self._parts is None:
            self._parts = StageResources(
                self.config,
                self._index,
                self._llm,
                sieve=self.is_sieve,
                judge=self._judge_given,
                selector=self._selector_given,
                claim_judge=self._claim_judge_given,
                decision_model=self._decision_model_given,
            )
        return self._parts

    def build_stages(self) -> list[Stage]:
        """The preset's stages, minus the ablated ones (:func:`ragsieve.sieve.build.build_stages`)."""
        names = preset_stages(self.config)
        if "generate" not in names:
            raise ConfigError("ablate cannot remove 'generate': a pipeline must answer; remove it from ablate")
        stages = build_stages(self.config, names, self._shared(), self._task_parts)
        check_wiring([*stages, *self.closing])
        return stages

    # ------------------------------------------------------------------ warm-up
    def warm_up_index(self, *, wait_for_embedder: bool = True) -> Index | Store:
        """Open the index and its embedder (idempotent); enough for search (which waits for an
        embedder still loading when ``wait_for_embedder`` is false)."""
        if self._index.value is None:
            self._index.value = open_configured_index(self.config, wait_for_embedder=wait_for_embedder)
        return self._index.value

    def warm_up(self, need_index: bool = True, *, wait_for_llm: bool = True) -> None:
        """Open the index, load the models and every stage's own state (idempotent).

        The LLM loads on a worker thread while the index, the embedder and the stages warm up
        here; ``wait_for_llm=False`` (what :meth:`ask` does) returns without waiting for it, so
        retrieval and the checks run meanwhile and the first stage that uses the model waits
        (and raises the load's error, if it failed). It does not wait for an embedder loading on
        its own thread either (the stages' warm-ups included): the stages before the first
        embedding (routing, the task router) run meanwhile."""
        self._llm.load_in_background(self._load_llm)
        # pint's unit registry is not preloaded: importing it is Python work that holds the GIL
        # and slowed the index opening beside it by more than it saved; the checks load it on
        # the first word that could be a unit (``ragsieve.values``)
        if need_index or self.index is not None:
            self.warm_up_index(wait_for_embedder=wait_for_llm)
        selectors = self._shared().selectors
        if selectors.fixed is None and not self.is_sieve:
            # only ScopeCoE uses the model: top-k selection does not wait for it
            llm = self.llm if self.config.stages.select.method_for(self.config.pipeline) == "scope-coe" else None
            selectors.fixed = build_selector(self.config, llm, self.index)
        for stage in self.stages:
            stage.warm_up()  # the stages' embedder is the index's, whose load they do not wait for
        if wait_for_llm:
            if isinstance(self.index, Index):
                self.index.ready_embedder()
            self._llm()

    def _load_llm(self, given: LLM | None) -> LLM:
        """The LLM given (else the one ``config.llm`` names), warmed up: runs on a worker thread."""
        if given is None:
            from ragsieve.llm import load_llm

            given = load_llm(self.config.llm)
        given.warm_up()
        return given

    # ------------------------------------------------------------------ building blocks
    def resolve_domains(
        self, question: str, trace: Trace, route: str | None = None, close_margin: float | None = None
    ) -> list[str] | None:
        """Which partitions to search (``route``, else ``stages.route.domain``, else every
        partition: the search alone searches as plain RAG does): ``None`` means the global index."""
        index = self._index()
        default = self.config.stages.route.domain_for("plain")
        return resolve_domains(index, question, trace, route or default, self.config.stages.route, close_margin)

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
        wide = not sieve and self.config.stages.select.method_for(self.config.pipeline) != "top-k"
        search = CandidateSearch(self._index, self.config.retrieval, sieve=sieve, wide=wide)
        return search(question, trace, k=k, domains=domains, where=where)

    def ready_judge(self) -> Judge:
        """The relevance judge (the one given, else the one ``stages.judge.kind`` names)."""
        return self._shared().judge()

    def judge_scores(self, question: str, hits: Sequence[SearchHit], state: PipelineState) -> list[float]:
        """Judge scores of ``hits``, scoring only those not judged earlier in this request."""
        return self._shared().relevance.scores(question, hits, state)

    def answer_likelihood(self, question: str, text: str) -> float | None:
        """exp(mean token log-prob) of a closed-book answer under the model (one scoring pass)."""
        return self._shared().generator.answer_likelihood(question, text)

    # ------------------------------------------------------------------ entry point
    @takes_ask_options
    def ask(
        self,
        question: str,
        **options: Unpack[AskOptions],
    ) -> Answer:
        """Run the stages on ``question``; ``task`` forces the task-adaptive path."""
        return self.ask_with_events(question, None, **options)

    @takes_ask_options
    def ask_with_events(
        self,
        question: str,
        on_event: Callable[[PipelineEvent], None] | None,
        **options: Unpack[AskOptions],
    ) -> Answer:
        """:meth:`ask`, calling ``on_event`` on this thread with each
        :mod:`ragsieve.sieve.events` event as it happens (stages, tokens, retractions, the final
        answer). ``on_event=None`` (and no ``on_token`` callback) generates in one call, as ``ask``."""
        given = ask_options(options)  # every option (its default when left out); TypeError on an unknown one
        no_retrieval: bool = given["no_retrieval"]
        max_chars = self.config.retrieval.max_query_chars
        check_question(question)  # bytes, a number, None or blank: an InputError naming what was passed
        if len(question) > max_chars:
            raise InputError(
                f"the question has {len(question)} characters, over the limit of {max_chars}; "
                "shorten it or raise retrieval.max_query_chars"
            )
        question = question.strip()
        trace = Trace(query=question)
        relay = EventRelay(on_event, self.callbacks, trace, question)
        with span("ragsieve.ask", preset=self.preset):
            with relay.stage("warm_up"):
                self.warm_up(need_index=not no_retrieval and self.preset != "task-adaptive", wait_for_llm=False)
            state = PipelineState(
                question=question,
                k=given["k"],
                route=given["route"],
                where=given["where"],
                task=task_label(given["task"]),
                retrieve=not no_retrieval,
                forced_no_retrieval=no_retrieval,
                token_sink=relay.token if relay.streams_tokens else None,
            )
            trace.record(
                "pipeline", preset=self.preset, stages=[s.name for s in self.stages], ablated=self.config.ablate
            )
            # the preset's stages, then the closing ones (confidence, calibration, citations)
            run_stages(self.stages, question, trace, state, relay.stage, closing=self.closing)
            answer = answer_of(question, trace, state)
        relay.finish(answer)
        return answer


def task_label(task: str | None) -> TaskLabel | None:
    """``task`` as a task label (``ask(task=...)``), or an error naming the labels."""
    if task is None:
        return None
    for label in TASK_LABELS:
        if task == label:
            return label
    raise InputError(f"task {task!r} is not a task; pass one of {', '.join(TASK_LABELS)} or leave it out")


def build_pipeline(config: PipelineConfig) -> Pipeline:
    """The pipeline ``config.pipeline`` names (one class; the preset picks its stage list)."""
    return Pipeline.from_config(config)
