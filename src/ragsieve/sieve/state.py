"""What every stage shares: the per-request :class:`PipelineState`, the :class:`Stage`
protocol, the presets (stage lists), and :class:`Ref`, the box through which a stage reaches a
resource the pipeline opens or loads later (the index, the LLM, a judge).

A stage gets its resources and its config section when it is built and never sees the
pipeline: ``ragsieve.sieve.pipeline`` is the one module that knows every stage.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from ragsieve.config import SIEVE_STAGES, PipelineConfig
from ragsieve.errors import ConfigError, StageContractError
from ragsieve.options import preset_name as preset_name
from ragsieve.records import ConflictRecord, DecideRecord, PoisonRecord
from ragsieve.signals import DECLARED, how_to_declare, undeclared
from ragsieve.text.readings import Readings
from ragsieve.types import ClaimVerdict, SearchHit, Trace

if TYPE_CHECKING:  # annotations only: the stage records name these types
    from ragsieve.conflict import ConflictReport
    from ragsieve.tasks.labels import TaskLabel

T = TypeVar("T")

# Receives the answer's text as the LLM generates it: ``sink(piece, attempt)``, where ``attempt``
# names the generation (``"generate"``, or ``"regenerate_generate"`` for the verify stage's
# second answer). Streamed text is provisional: checks after generation may replace it.
TokenSink = Callable[[str, str], None]

PRESETS: dict[str, tuple[str, ...]] = {
    "plain": ("route", "retrieve", "select", "generate"),
    "task-adaptive": ("need", "retrieve", "judge", "generate"),
    "sieve": SIEVE_STAGES,
}


# What every run does after its preset's stages, in this order, abstention or not
# (ragsieve.sieve.closing): not in a preset, not removed by ``config.ablate``.
CLOSING_STAGES: tuple[str, ...] = ("confidence", "calibration", "settle_citations")


def switched_off(config: PipelineConfig) -> set[str]:
    """The stages ``config`` switches off: ``config.ablate``, and the stages whose own section
    turns them off (``stages.injection.action = "off"``)."""
    off = set(config.ablate)
    if config.stages.injection.action == "off":
        off.add("injection")
    return off


def preset_stages(config: PipelineConfig) -> list[str]:
    """The stage names ``config`` runs: its preset's list minus :func:`switched_off`."""
    off = switched_off(config)
    return [s for s in PRESETS[preset_name(config.pipeline)] if s not in off]


# What the caller of ``ask`` sets before any stage runs: every stage may read these.
REQUEST_FIELDS: frozenset[str] = frozenset(
    {"question", "k", "route", "where", "task", "retrieve", "forced_no_retrieval", "token_sink"}
)
# What every stage may read without declaring it: the request, the runner's abstention (``None``
# while the preset's stages run; a closing stage may run after one) and the request's readings
# (filled as the stages ask, never replaced).
SHARED_FIELDS: frozenset[str] = REQUEST_FIELDS | {"abstain", "readings"}


@dataclass
class PipelineState:
    """What stages tell each other beyond the candidates (one per ``ask``).

    Every field is typed; a stage names the fields it reads (``reads``: an earlier stage must
    produce them; ``uses``: read when present) and those it writes (``writes``), and
    :func:`check_wiring` checks those names when a pipeline is built. There is no untyped
    side channel: a new message between stages is a new typed field here."""

    # the request (REQUEST_FIELDS)
    question: str
    k: int | None = None
    route: str | None = None
    where: dict[str, object] | None = None
    task: TaskLabel | None = None  # a task forced by the caller (task-adaptive)
    retrieve: bool = True  # False: answer without retrieval (need stage or --no-retrieval)
    forced_no_retrieval: bool = False
    # Set by Pipeline.stream (and the service's streams); None: generate in one call.
    token_sink: TokenSink | None = None
    # route
    domains: list[str] | None = None
    # need
    probe: list[SearchHit] | None = None  # hits the need stage already retrieved
    # need, judge
    relevance: dict[str, float] = field(default_factory=dict)  # judge score per chunk id
    relevance_labels: dict[str, str] = field(default_factory=dict)
    trust_weighted: set[str] = field(default_factory=set)  # chunk ids the source weight already scaled
    # poison: near-duplicate clusters (chunk id -> cluster id), each cluster one source
    same_source: dict[str, str] = field(default_factory=dict)
    # poison: what it dropped and the coordinated voices it found (the trace's ``poison`` record)
    poison_record: PoisonRecord | None = None
    # conflict: chunk ids selection must keep (one passage of every answer group, so a minimal
    # cover cannot drop one side of a disagreement) and the disagreement itself
    must_keep: list[str] = field(default_factory=list)
    conflict_report: ConflictReport | None = None
    # conflict: its verdict as a typed record (the fields of the trace's ``conflict`` record)
    conflict_record: ConflictRecord | None = None
    # the disagreement statement, put before the verified answer
    conflict_message: str | None = None
    # task-adaptive: the task router's label and the retrieval evaluator's verdict
    task_label: TaskLabel | None = None
    evaluator_verdict: str | None = None
    # generate
    evidence: list[SearchHit] = field(default_factory=list)  # what the generator was shown
    text: str = ""
    cited: list[str] = field(default_factory=list)
    opened_with_label: bool | None = None  # the raw reply opened with an evidence label
    answer_logprob: float | None = None  # mean token log-probability of the generated answer
    # verify
    claims: list[ClaimVerdict] = field(default_factory=list)
    confidence: float | None = None
    # decide: what it concluded (the trace's ``decide`` record)
    decide_record: DecideRecord | None = None
    # every check's graded signals (name -> value in [0, 1]; flags are 0 or 1), whatever it decided
    signals: dict[str, float] = field(default_factory=dict)
    # a check asked to withdraw the draft but has no veto: the decide stage weighs it
    withdrawal: Abstain | None = None
    # the abstention that ended the run (set by the runner)
    abstain: Abstain | None = None
    # the request's readings of the question and of each passage (ragsieve.text.readings), filled
    # as the stages ask: every stage may read through it, and it is never replaced, so no stage
    # writes it
    readings: Readings = field(default_factory=Readings)

    @property
    def abstained(self) -> bool:
        return self.abstain is not None

    @property
    def abstain_reason(self) -> str | None:
        return self.abstain.reason if self.abstain is not None else None

    def signal(self, name: str, value: float | bool | None) -> None:
        """Record one graded signal (clipped to [0, 1]; ``None``: the check had nothing to say).

        ``name`` must be declared in :data:`ragsieve.signals.DECLARED` (else
        :class:`~ragsieve.errors.StageContractError`), so no signal is left that the decision
        model and the docs do not know about."""
        if name not in DECLARED:
            raise StageContractError(f"signal {name!r} is not declared; {how_to_declare([name])}")
        if value is None:
            return
        v = float(value)
        if math.isfinite(v):
            self.signals[name] = round(min(max(v, 0.0), 1.0), 6)


@dataclass(frozen=True)
class Abstain:
    """What a stage returns instead of the candidates to end the run without an answer.

    ``check`` names the stage (or check) that withdrew, ``reason`` says why in one line (the
    answer's ``abstain_reason``), ``text`` is what the reader is told instead of an answer and
    ``confidence`` the answer's confidence, when the check measured one. The runner
    (:func:`ragsieve.sieve.runner.run_stages`) is the one place an abstention becomes an
    :class:`~ragsieve.types.Answer`."""

    check: str
    reason: str
    text: str
    confidence: float | None = 0.0


StageResult = list[SearchHit] | Abstain


@runtime_checkable
class Stage(Protocol):
    """One step of a pipeline. ``name`` is its entry in ``SIEVE_STAGES`` (what
    ``config.ablate`` removes) and its key in ``trace.timings_ms``.

    ``reads`` are the :class:`PipelineState` fields it needs an earlier stage (or the request)
    to have produced, ``uses`` those it reads when present, ``writes`` those it produces;
    ``emits`` the graded signals it leaves with :meth:`PipelineState.signal` (each declared in
    :data:`ragsieve.signals.DECLARED`; a stage that emits any writes ``signals``).
    :func:`check_wiring` checks them when the pipeline is built, and the runner checks at run
    time that a stage changed only the fields it writes and left only the signals it emits
    (:func:`check_writes`)."""

    name: str
    reads: tuple[str, ...]
    uses: tuple[str, ...]
    writes: tuple[str, ...]
    emits: tuple[str, ...]

    def warm_up(self) -> None: ...

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> StageResult: ...



STATE_FIELDS: frozenset[str] = frozenset(f.name for f in fields(PipelineState))


def check_wiring(stages: Sequence[Stage]) -> None:
    """Raise :class:`ConfigError` naming the stage and the field when a stage reads a state field
    no earlier stage (nor the request) produces, or declares a field the state does not have.

    It also raises when a stage ``emits`` a signal :data:`ragsieve.signals.DECLARED` does not
    declare, or emits signals without writing ``signals``.

    A stage that declares nothing (a user's own stage written before the contracts) reads only
    the candidates and the request, and writes and emits nothing."""
    produced: set[str] = set(REQUEST_FIELDS)
    for position, stage in enumerate(stages):
        reads = tuple(getattr(stage, "reads", ()))
        writes = tuple(getattr(stage, "writes", ()))
        declared = (*reads, *getattr(stage, "uses", ()), *writes)
        unknown = sorted(set(declared) - STATE_FIELDS)
        if unknown:
            raise ConfigError(
                f"stage {stage.name!r} declares {', '.join(unknown)}, which PipelineState does not have; "
                f"name fields of ragsieve.sieve.state.PipelineState ({', '.join(sorted(STATE_FIELDS))})"
            )
        emits = tuple(getattr(stage, "emits", ()))
        unknown_signals = undeclared(emits)
        if unknown_signals:
            raise ConfigError(
                f"stage {stage.name!r} emits {', '.join(unknown_signals)}, which is not a declared signal; "
                + how_to_declare(unknown_signals)
            )
        if emits and "signals" not in writes:
            raise ConfigError(f"stage {stage.name!r} emits signals but does not write 'signals'; add it to `writes`")
        missing = [f for f in reads if f not in produced]
        if missing:
            before = ", ".join(s.name for s in stages[:position]) or "none"
            raise ConfigError(
                f"stage {stage.name!r} reads {', '.join(missing)}, which no stage before it produces "
                f"(stages before it: {before}); put a stage that writes it earlier, or leave {stage.name!r} out"
            )
        produced.update(getattr(stage, "writes", ()))


# a field's value and, for a dict, list or set, its items (a dict's keys and values, in turn)
StateSnapshot = dict[str, tuple[object, tuple[object, ...] | None]]


def state_snapshot(state: PipelineState) -> StateSnapshot:
    """What :func:`check_writes` compares after a stage: each field's value and, for a list,
    dict or set, its items (so a change in place shows). Holds references only (no copies of
    the items): cheap enough to take around every stage."""
    snap: StateSnapshot = {}
    for name in STATE_FIELDS:
        value = getattr(state, name)
        snap[name] = (value, _items(value) if isinstance(value, dict | list | set) else None)
    return snap


def _same(before: tuple[object, tuple[object, ...] | None], now: object) -> bool:
    old, items = before
    if old is not now:
        return False
    if items is None or not isinstance(now, dict | list | set):
        return True
    held = _items(now)
    # identity, not equality: an item put back (even an equal one) is a write, and no item's
    # own == runs (an array's is not a bool)
    return len(held) == len(items) and all(a is b for a, b in zip(held, items, strict=True))


def _items(value: dict[object, object] | list[object] | set[object]) -> tuple[object, ...]:
    if isinstance(value, dict):
        return tuple(x for kv in value.items() for x in kv)
    return tuple(value)


def check_writes(stage: Stage, before: StateSnapshot, state: PipelineState) -> None:
    """Raise :class:`~ragsieve.errors.StageContractError` naming the stage and the field when
    ``stage`` changed a :class:`PipelineState` field it does not declare in ``writes``, or left
    a signal it does not list in ``emits`` (``before``: :func:`state_snapshot` taken before it
    ran). The runner calls it after every stage. A stage that declares no ``writes`` at all (a
    user's own stage written before the contracts) is not checked; one without ``emits`` has
    its signals left unchecked (``state.signal`` still refuses an undeclared one)."""
    if not hasattr(stage, "writes"):
        return
    writes = set(stage.writes)
    changed = sorted(n for n in STATE_FIELDS if not _same(before[n], getattr(state, n)))
    stray = [n for n in changed if n not in writes]
    if stray:
        raise StageContractError(
            f"stage {stage.name!r} wrote {', '.join(stray)}, which it does not declare; add "
            f"{', '.join(repr(n) for n in stray)} to its `writes` (it declares: {', '.join(sorted(writes)) or 'none'})"
        )
    if "signals" in changed and hasattr(stage, "emits"):
        items = before["signals"][1] or ()
        held = dict(zip(items[::2], items[1::2], strict=True))
        # a signal added, or set again (even to an equal value)
        emitted = {name for name, value in state.signals.items() if name not in held or held[name] is not value}
        unlisted = sorted(emitted - set(getattr(stage, "emits", ())))
        if unlisted:
            raise StageContractError(
                f"stage {stage.name!r} emitted {', '.join(unlisted)}, which it does not list; add "
                f"{', '.join(repr(n) for n in unlisted)} to its `emits`"
            )


class Ref(Generic[T]):
    """A resource a stage uses but the pipeline provides (possibly later): ``ref()`` returns it,
    built by ``make`` on first use when there is one, else it raises ``ConfigError(missing)``.
    ``ref.value`` is what it holds now (``None`` before it is set or built).

    :meth:`load_in_background` loads the resource on a worker thread while the caller goes on
    (the LLM loads while retrieval and the checks run); the first ``ref.value`` or ``ref()``
    waits for it, re-raises the load's own error, and gives up with
    ``GenerationCancelledError`` when the waiting job is cancelled (:mod:`ragsieve.cancel`)."""

    def __init__(
        self, value: T | None = None, make: Callable[[], T] | None = None, missing: str = "not available"
    ) -> None:
        self._value = value
        self.make = make
        self.missing = missing
        self._loading: Future[T] | None = None
        self._loaded = False  # the value came from a background load that succeeded
        self._lock = threading.Lock()

    @property
    def value(self) -> T | None:
        loading = self._loading
        if loading is not None:
            self._finish(loading)
        return self._value

    @value.setter
    def value(self, value: T | None) -> None:
        with self._lock:
            self._loading, self._loaded, self._value = None, False, value

    def loading(self) -> bool:
        """Whether a background load was started and its result not yet taken."""
        return self._loading is not None

    def held(self) -> T | None:
        """What it holds now, without waiting for a background load."""
        return self._value

    def load_in_background(self, load: Callable[[T | None], T]) -> None:
        """Start ``load(held)`` on a worker thread unless a load is running or one has already
        succeeded since the value was last set (a failed load is tried again)."""
        with self._lock:
            loading = self._loading
            if self._loaded or (loading is not None and not (loading.done() and loading.exception() is not None)):
                return
            held = self._value
            # one short-lived worker per load: nothing shared between pipelines, and
            # shutdown(wait=False) lets this thread go on at once
            worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragsieve-load")
            try:
                self._loading = worker.submit(load, held)
            finally:
                worker.shutdown(wait=False)

    def _finish(self, loading: Future[T]) -> None:
        from ragsieve.cancel import check_cancelled

        while not loading.done():
            check_cancelled()
            futures_wait([loading], timeout=0.05)
        value = loading.result()  # the load's own error, with its own message
        with self._lock:
            if self._loading is loading:
                self._loading, self._loaded, self._value = None, True, value

    def __call__(self) -> T:
        value = self.value
        if value is None:
            if self.make is None:
                raise ConfigError(self.missing)
            value = self.value = self.make()
        return value


class WhenLoaded:
    """Stands in for the object a :class:`Ref` is loading in the background, for a component
    that keeps a model it may never call (ScopeCoE with rule features keeps the LLM):
    ``warm_up()`` returns at once (the pipeline owns the load) and any other attribute waits for
    the load and comes from the loaded object."""

    def __init__(self, ref: Ref[Any]) -> None:
        self._ref = ref

    def warm_up(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ref(), name)


def first_sentence(text: str, limit: int = 160) -> str:
    """The first sentence of ``text`` (clipped to ``limit`` characters), quoted by abstentions."""
    from ragsieve.ingest import split_sentences

    first = (split_sentences(text) or [text])[0].strip()
    return first if len(first) <= limit else first[: limit - 1].rsplit(" ", 1)[0] + "…"


def compare(score: float, threshold: float, op: str = "<", digits: int = 2) -> str:
    """``"score op threshold"`` printed with enough decimals that the two numbers differ, so a
    comparison never reads ``best 0.41 < 0.41``.

    >>> compare(0.4061, 0.41), compare(0.25, 0.41), compare(0.41, 0.41, ">=")
    ('0.406 < 0.410', '0.25 < 0.41', '0.41 >= 0.41')
    """
    for d in range(digits, 7):
        a, b = f"{score:.{d}f}", f"{threshold:.{d}f}"
        if a != b:
            return f"{a} {op} {b}"
    return f"{score:.{digits}f} {op} {threshold:.{digits}f}"
