"""Streaming and async answers over any pipeline's ``ask_with_events``: :class:`StreamingAnswers`
(``stream``, ``aask``, ``astream``, mixed into :class:`~ragsieve.sieve.pipeline.Pipeline`) and
:class:`EventRelay`, which turns one run's stage boundaries and LLM pieces into
:mod:`ragsieve.sieve.events`, callbacks and OpenTelemetry spans."""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ragsieve.cancel import CancelToken, cancel_scope, current_token
from ragsieve.sieve.events import Final, PipelineEvent, Retracted, StageFinished, StageStarted, Token
from ragsieve.sieve.request import AskOptions, takes_ask_options
from ragsieve.sieve.verify import EXTRACTED, EXTRACTED_ATTEMPT
from ragsieve.telemetry import set_attributes, span
from ragsieve.types import Answer, SearchHit, Trace

if TYPE_CHECKING:
    from typing_extensions import Unpack

logger = logging.getLogger(__name__)


class StreamingAnswers:
    """``stream``, ``aask`` and ``astream`` for a class with ``ask`` and ``ask_with_events``; each
    takes the question and the per-request options of :class:`~ragsieve.sieve.request.AskOptions`
    (``no_retrieval``, ``k``, ``route``, ``where``, ``task``), declared once there."""

    @takes_ask_options
    def ask(
        self,
        question: str,
        **options: Unpack[AskOptions],
    ) -> Answer:
        raise NotImplementedError

    @takes_ask_options
    def ask_with_events(
        self,
        question: str,
        on_event: Callable[[PipelineEvent], None] | None,
        **options: Unpack[AskOptions],
    ) -> Answer:
        raise NotImplementedError

    @takes_ask_options
    def stream(
        self,
        question: str,
        **options: Unpack[AskOptions],
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

    @takes_ask_options
    async def aask(
        self,
        question: str,
        **options: Unpack[AskOptions],
    ) -> Answer:
        """:meth:`ask` on a worker thread, for ``await``. Cancelling the awaiting task cancels the
        LLM call in progress (it stops at its next check) and raises ``CancelledError`` at once.

        Example:
            >>> answer = await pipe.aask("What is graphene?")  # doctest: +SKIP
        """
        import asyncio  # here: a synchronous ask (the command line's) never loads the event loop's modules

        token = CancelToken()

        def work() -> Answer:
            with cancel_scope(token):
                return self.ask(question, **options)

        future = asyncio.get_running_loop().run_in_executor(None, contextvars.copy_context().run, work)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            token.cancel("the awaiting task was cancelled")
            raise

    @takes_ask_options
    async def astream(
        self,
        question: str,
        **options: Unpack[AskOptions],
    ) -> AsyncIterator[PipelineEvent]:
        """:meth:`stream` for ``async for``: the stages run on a worker thread and their events
        cross to the event loop through an asyncio queue. Cancelling the consuming task, or
        leaving the loop early, cancels the LLM call in progress.

        Example:
            >>> async for event in pipe.astream("What is graphene?"):  # doctest: +SKIP
            ...     print(event.kind)
        """
        import asyncio

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


class EventRelay:
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
        return StageScope(self, name, candidates)

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
        from ragsieve.present import explain_reason

        regen = self.trace.stage("regenerate")
        reason = str(regen[-1].get("reason", "")) if regen else ""
        return explain_reason(f"regenerate: {reason}").text if reason else "regenerating"

    def finish(self, answer: Answer) -> None:
        streamed = "".join(self.streamed).strip()
        same = bool(streamed) and streamed == answer.text.strip()
        if streamed and not same:
            if answer.abstained:
                from ragsieve.present import explain_reason

                # in words, as the terminal and the page give it (the code stays in the answer)
                reason = explain_reason(answer.abstain_reason, answer.trace.events).text
                replacement: Any = "abstained"
            else:
                reason = "the checks changed the generated text (unsupported sentences removed or text cleaned)"
                replacement = "checked"
            self.emit(Retracted(reason=reason, text=streamed, attempt=self.attempt or "generate",
                                replacement=replacement))
        self.emit(Final(answer=answer, streamed_is_final=same))


class StageScope:
    """One stage's span, timing, callbacks and start/finish events."""

    def __init__(self, relay: EventRelay, name: str, candidates: Sequence[SearchHit] | None) -> None:
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
