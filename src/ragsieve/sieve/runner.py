"""The run loop every stage list shares (:class:`~ragsieve.sieve.pipeline.Pipeline` and
:class:`~ragsieve.sieve.checks.SieveChecks`): run the stages in order, hand each the previous
stage's candidates, and stop at the first :class:`~ragsieve.sieve.state.Abstain`, which is
recorded here (the one place an abstention is handled) and turned into the
:class:`~ragsieve.types.Answer` by :func:`answer_of`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from ragsieve.cancel import check_cancelled
from ragsieve.sieve.state import Abstain, PipelineState, Stage, check_writes, state_snapshot
from ragsieve.types import Answer, SearchHit, Trace

# Opens the scope one stage runs in (timing, spans, events): ``scope(stage_name, candidates_in)``
# gives a context manager whose value is a dict the runner puts the stage's output in (``out``).
StageScope = Callable[[str, Sequence[SearchHit]], AbstractContextManager[dict[str, object]]]


@dataclass
class StagesRun:
    """What a run of stages ends with: the last candidates, or the abstention that stopped it."""

    candidates: list[SearchHit]
    abstain: Abstain | None = None


def timed_scope(trace: Trace) -> StageScope:
    """A scope that only times each stage into ``trace.timings_ms``."""

    @contextmanager
    def scope(name: str, candidates: Sequence[SearchHit]) -> Iterator[dict[str, object]]:
        with trace.timed(name):
            yield {}

    return scope


def run_stages(
    stages: Sequence[Stage],
    question: str,
    trace: Trace,
    state: PipelineState,
    scope: StageScope,
    candidates: Sequence[SearchHit] = (),
    closing: Sequence[Stage] = (),
) -> StagesRun:
    """Run ``stages`` in order; an :class:`Abstain` ends the run, recorded as an ``abstain``
    trace record inside the stage's scope (so the stage's finish event carries it). Then the
    ``closing`` stages (:mod:`ragsieve.sieve.closing`), abstention or not, each after the last:
    one may abstain too (the calibrated threshold), and those after it still run.

    After each stage the state is compared with a snapshot taken before it
    (:func:`~ragsieve.sieve.state.check_writes`): a stage that changed a field it does not
    declare in ``writes``, or left a signal it does not list in ``emits``, raises
    :class:`~ragsieve.errors.StageContractError`."""
    current = list(candidates)
    for stage in stages:
        check_cancelled()  # a job cancelled or past its time limit stops here, between stages
        with scope(stage.name, current) as result:
            before = state_snapshot(state)
            out = stage.run(question, current, trace, state)
            check_writes(stage, before, state)
            result["out"] = out
            if isinstance(out, Abstain):
                end_with(out, trace, state)
        if isinstance(out, Abstain):
            break
        current = out
    for stage in closing:
        before = state_snapshot(state)
        out = stage.run(question, current, trace, state)
        check_writes(stage, before, state)
        if isinstance(out, Abstain):
            end_with(out, trace, state)
        else:
            current = out
    return StagesRun(current, state.abstain)


def end_with(abstain: Abstain, trace: Trace, state: PipelineState) -> None:
    """End the run with ``abstain``: the one place an abstention is recorded."""
    state.abstain = abstain
    trace.record("abstain", check=abstain.check, reason=abstain.reason)


def answer_of(question: str, trace: Trace, state: PipelineState) -> Answer:
    """The :class:`Answer` from what the stages left in ``state`` (an abstention's text and
    reason when one stopped the run)."""
    abstain = state.abstain
    return Answer(
        question=question,
        text=abstain.text if abstain is not None else state.text,
        evidence=state.evidence,
        cited_ids=state.cited,
        trace=trace,
        abstained=abstain is not None,
        abstain_reason=abstain.reason if abstain is not None else None,
        confidence=abstain.confidence if abstain is not None else state.confidence,
        claims=state.claims,
    )
