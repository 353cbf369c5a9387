"""Cooperative cancellation of LLM work.

The service runs every LLM call on one worker thread. When the request that started a call times
out or its client disconnects, the call must stop so the next request can have the model. A
:class:`CancelToken` is installed for the duration of a job with :func:`cancel_scope`; the
backends check it where they can stop cleanly (llama.cpp between generated tokens and between
decoded batches, the HTTP client between received chunks and between retries, closing the
stream) and raise :class:`GenerationCancelledError`.

Example:
    >>> token = CancelToken()
    >>> with cancel_scope(token):
    ...     token.cancel("client went away")
    ...     is_cancelled()
    True
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator

from ragsieve.errors import RagsieveError


class GenerationCancelledError(RagsieveError):
    """The LLM call was cancelled because its request gave up (deadline or client gone)."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"the LLM call was cancelled ({reason}); retry the request, or raise the deadline if it keeps timing out"
        )
        self.reason = reason


class CancelToken:
    """A flag another thread sets to ask the running LLM call to stop."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self.reason = ""

    def cancel(self, reason: str) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (on the cancelling thread) when the token is cancelled, at once if it
        already is: for work that cannot poll, such as a native call. Returns its remover."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)

                def remove() -> None:
                    with self._lock, contextlib.suppress(ValueError):
                        self._callbacks.remove(callback)

                return remove
        callback()
        return lambda: None

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True (early) when cancelled meanwhile."""
        return self._event.wait(max(seconds, 0.0))

    def check(self) -> None:
        """Raise :class:`GenerationCancelledError` when cancelled."""
        if self._event.is_set():
            raise GenerationCancelledError(self.reason or "cancelled")


_CURRENT: contextvars.ContextVar[CancelToken | None] = contextvars.ContextVar("ragsieve_cancel", default=None)


@contextlib.contextmanager
def cancel_scope(token: CancelToken) -> Iterator[CancelToken]:
    """Make ``token`` the current thread's token while the block runs."""
    reset = _CURRENT.set(token)
    try:
        yield token
    finally:
        _CURRENT.reset(reset)


def current_token() -> CancelToken | None:
    """The token of the running job, if any."""
    return _CURRENT.get()


def is_cancelled() -> bool:
    token = _CURRENT.get()
    return token is not None and token.cancelled


def check_cancelled() -> None:
    """Raise :class:`GenerationCancelledError` if the running job was cancelled."""
    token = _CURRENT.get()
    if token is not None:
        token.check()


class DeadlinePassedError(GenerationCancelledError):
    """Work run under :func:`time_limit` went past its bound and was stopped."""

    def __init__(self, what: str, seconds: float, elapsed: float, fix: str) -> None:
        RagsieveError.__init__(
            self, f"{what} ran past its {seconds:g} s time limit and was stopped after {elapsed:.0f} s; {fix}"
        )
        self.reason = f"past the {seconds:g} s time limit"


@contextlib.contextmanager
def time_limit(seconds: float, what: str, fix: str) -> Iterator[CancelToken]:
    """Run the block under a token that is cancelled ``seconds`` after it starts, so the work in it
    stops at its next check (an LLM call between tokens, the pipeline between stages); the
    cancellation then surfaces as :class:`DeadlinePassedError`, naming ``what`` and ``fix``.
    A token already around the block (a service job's) still cancels it.

    Example:
        >>> with time_limit(120, "the question", "ask again later"):  # doctest: +SKIP
        ...     answer = pipeline.ask("What is graphene?")
    """
    token = CancelToken()
    outer = current_token()
    start = time.monotonic()
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        token.cancel(f"past the {seconds:g} s time limit")

    timer = threading.Timer(max(float(seconds), 0.0), expire)
    timer.daemon = True
    remove = outer.on_cancel(lambda: token.cancel(outer.reason or "cancelled")) if outer is not None else None
    timer.start()
    try:
        with cancel_scope(token):
            yield token
    except GenerationCancelledError as exc:
        if expired.is_set() and not isinstance(exc, DeadlinePassedError):
            raise DeadlinePassedError(what, seconds, time.monotonic() - start, fix) from None
        raise
    finally:
        timer.cancel()
        if remove is not None:
            remove()


__all__ = ["CancelToken", "DeadlinePassedError", "GenerationCancelledError", "cancel_scope", "check_cancelled",
           "current_token", "is_cancelled", "time_limit"]
