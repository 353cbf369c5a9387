"""What :meth:`ragsieve.sieve.pipeline.Pipeline.stream` yields while a question is answered.

In order: a :class:`StageStarted` and a :class:`StageFinished` per stage (``warm_up`` first), the
answer's :class:`Token` events while the LLM generates inside the ``generate`` stage (and again
inside ``verify`` when it regenerates, or when it replaces a pasted passage by the answer
extracted from it), a :class:`Retracted` event whenever text already streamed
stops being the answer, and one :class:`Final` event with the verified :class:`~ragsieve.types.Answer`.

Streamed tokens are provisional: the checks after generation may regenerate the answer, remove
unsupported sentences or abstain. A client shows tokens as "being checked" and replaces them
with ``Final.answer.text``; :class:`Retracted` says why text it has shown is withdrawn.
Every event has ``kind`` and ``to_dict()`` (JSON-ready, what the service's SSE sends).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ragsieve.types import Answer


@dataclass(frozen=True)
class StageStarted:
    """A stage began."""

    stage: str
    kind: Literal["stage_start"] = "stage_start"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "stage": self.stage}


@dataclass(frozen=True)
class StageFinished:
    """A stage finished: its duration, the trace records and candidate decisions it made, and
    how many candidates it handed on (``None`` when it ended the run with an answer)."""

    stage: str
    duration_ms: float
    records: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    candidates: int | None = None
    kind: Literal["stage"] = "stage"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "stage": self.stage,
            "duration_ms": round(self.duration_ms, 3),
            "records": self.records,
            "decisions": self.decisions,
            "candidates": self.candidates,
        }


@dataclass(frozen=True)
class Token:
    """A piece of the answer as the LLM generated it; ``attempt`` names the generation
    (``"generate"``, ``"regenerate_generate"`` when verify answers again, or
    ``"responsive_extract"``: the answer verify extracted from a passage the model pasted, sent
    in one piece)."""

    text: str
    attempt: str = "generate"
    kind: Literal["token"] = "token"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "attempt": self.attempt}


@dataclass(frozen=True)
class Retracted:
    """Text streamed so far (``text``, of generation ``attempt``) is no longer the answer:
    ``replacement`` says what replaces it ("regenerated": new tokens follow; "abstained": the
    final answer declines; "checked": the final answer is the checked text)."""

    reason: str
    text: str
    attempt: str
    replacement: Literal["regenerated", "abstained", "checked"]
    kind: Literal["retracted"] = "retracted"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "reason": self.reason,
            "text": self.text,
            "attempt": self.attempt,
            "replacement": self.replacement,
        }


@dataclass(frozen=True)
class Final:
    """The verified answer (the same :class:`Answer` that ``ask`` returns); ``streamed_is_final``
    says whether the tokens streamed last are its text (no retraction was needed)."""

    answer: Answer
    streamed_is_final: bool
    kind: Literal["answer"] = "answer"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "answer": self.answer.to_dict(), "streamed_is_final": self.streamed_is_final}


PipelineEvent = StageStarted | StageFinished | Token | Retracted | Final

__all__ = ["Final", "PipelineEvent", "Retracted", "StageFinished", "StageStarted", "Token"]


class PipelineCallbacks:
    """Hooks a :class:`~ragsieve.sieve.pipeline.Pipeline` calls while it answers
    (``Pipeline(config, callbacks=[...])``). Subclass it and override what you need, or pass any
    object with some of these methods: a missing method is not called. Callbacks run on the
    thread that answers, between stages and between tokens, so keep them quick; an exception in
    one is logged and never fails the question.

    Example:
        >>> class Timings(PipelineCallbacks):
        ...     def on_stage_end(self, stage: str, duration_ms: float, records: list[dict[str, Any]]) -> None:
        ...         print(f"{stage}: {duration_ms:.0f} ms")
    """

    def on_stage_start(self, stage: str, question: str) -> None:
        """``stage`` is about to run on ``question``."""

    def on_stage_end(self, stage: str, duration_ms: float, records: list[dict[str, Any]]) -> None:
        """``stage`` finished after ``duration_ms``, having added ``records`` to the trace."""

    def on_token(self, text: str, attempt: str) -> None:
        """The LLM generated ``text`` (generation ``attempt``); registering this turns on streaming."""


__all__ += ["PipelineCallbacks"]
