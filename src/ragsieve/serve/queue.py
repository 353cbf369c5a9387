"""One local model, many clients: a bounded FIFO queue in front of a single LLM worker thread.

llama.cpp holds one KV cache and is not safe to call from two threads, so every request that
needs the LLM runs on one worker. Waiting requests are bounded (a full queue answers 429 with a
``Retry-After`` estimated from recent service times), carry a deadline, and leave the queue as
soon as their client disconnects. A job that has started runs under a
:class:`~ragsieve.cancel.CancelToken`: past its deadline (504) or when its client disconnects
the token is set, and the backends stop at their next check (llama.cpp between tokens, HTTP
backends between chunks, closing the stream), so the model lane frees up for the next request.
While a job holds the lane past its deadline, :meth:`LLMQueue.stuck` says so (health: degraded).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ragsieve.cancel import CancelToken, cancel_scope
from ragsieve.errors import RagsieveError

logger = logging.getLogger(__name__)

T = TypeVar("T")


class QueueFullError(RagsieveError):
    """The LLM queue is full; the client should retry after ``retry_after_s``."""

    def __init__(self, capacity: int, retry_after_s: int) -> None:
        super().__init__(
            f"the LLM queue is full ({capacity} requests waiting); retry after {retry_after_s} s "
            "or raise --queue-size on the server"
        )
        self.retry_after_s = retry_after_s


class DeadlineExceededError(RagsieveError):
    """A request ran past its deadline (waiting in the queue or running)."""

    def __init__(self, deadline_s: float, where: str) -> None:
        super().__init__(
            f"the request ran past its {deadline_s:g} s deadline while {where}; "
            "retry later, or raise --deadline on the server"
        )


class ClientGoneError(Exception):
    """The client disconnected while its request waited; nobody is left to answer."""


class LLMQueue:
    """Serialise LLM work on one thread with a bounded, deadline-aware, cancellable wait.

    Args:
        capacity: requests allowed to wait (the running one not counted).
        default_service_s: service-time guess for ``Retry-After`` before any job has finished.

    Example:
        >>> q = LLMQueue(capacity=8)
        >>> # await q.run(lambda: llm.generate("hi"), deadline=time.monotonic() + 30)  # doctest: +SKIP
    """

    def __init__(self, capacity: int = 16, default_service_s: float = 2.0) -> None:
        self.capacity = capacity
        self.default_service_s = default_service_s
        self._executor: ThreadPoolExecutor | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.waiting = 0
        self.running = 0
        self._mean_service_s: float | None = None
        # (start time, deadline instant, token) of the running job, for stuck().
        self._current: tuple[float, float, CancelToken] | None = None

    def stuck(self, now: float | None = None) -> str | None:
        """Why the model lane is stuck, or None: a job still running past its deadline (its
        request already got 504 or went away, and the backend has not stopped yet)."""
        current = self._current
        if current is None:
            return None
        started, deadline, token = current
        now = time.monotonic() if now is None else now
        if now <= deadline and not token.cancelled:
            return None
        return (
            f"the LLM has been busy with one request for {now - started:.0f} s, past its deadline"
            + (f" (cancelled: {token.reason})" if token.cancelled else "")
            + "; requests that need the model wait behind it. Check the LLM backend or restart the service"
        )

    def _ensure(self) -> tuple[ThreadPoolExecutor, asyncio.Lock]:
        # Created lazily inside the serving event loop (an asyncio.Lock binds to its loop).
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragsieve-llm")
        loop = asyncio.get_running_loop()
        if self._lock is None or (self._loop is not loop and self.depth == 0):
            # An app driven by successive event loops (test clients) gets a lock per loop.
            self._lock = asyncio.Lock()
            self._loop = loop
        return self._executor, self._lock

    @property
    def depth(self) -> int:
        return self.waiting + self.running

    def retry_after_s(self) -> int:
        mean = self._mean_service_s if self._mean_service_s is not None else self.default_service_s
        return max(1, math.ceil(mean * (self.waiting + 1)))

    def _observe(self, seconds: float) -> None:
        # An exponential average follows load changes without keeping a history.
        prev = self._mean_service_s
        self._mean_service_s = seconds if prev is None else 0.8 * prev + 0.2 * seconds

    async def run(
        self,
        fn: Callable[[], T],
        *,
        deadline: float,
        deadline_s: float,
        disconnected: Callable[[], Awaitable[Any]] | None = None,
    ) -> T:
        """Run ``fn`` on the LLM thread once it is free.

        ``deadline`` is a ``time.monotonic()`` instant; ``disconnected`` an awaitable factory
        that completes when the client goes away (it then cancels the wait).
        """
        executor, lock = self._ensure()
        if lock.locked() or self.waiting:
            if self.waiting >= self.capacity:
                raise QueueFullError(self.capacity, self.retry_after_s())
            self.waiting += 1
            try:
                await self._acquire(lock, deadline, deadline_s, disconnected)
            finally:
                self.waiting -= 1
        else:
            await lock.acquire()  # free: taken at once, without yielding to the loop
        loop = asyncio.get_running_loop()
        self.running += 1
        start = time.perf_counter()
        token = CancelToken()
        self._current = (time.monotonic(), deadline, token)

        def _timed() -> T:
            try:
                with cancel_scope(token):
                    return fn()
            finally:
                self._observe(time.perf_counter() - start)

        future = loop.run_in_executor(executor, _timed)

        def _release(done: asyncio.Future[T]) -> None:
            if not done.cancelled():
                # Read here so that a job whose request already gave up (its error is the
                # expected GenerationCancelledError) is not reported as "never retrieved".
                done.exception()
            self.running -= 1
            self._current = None
            lock.release()

        # The lock is held until the thread returns, even if this request gives up waiting:
        # a second llama.cpp call must never start beside a running one. Cancelling the token
        # makes the thread return soon.
        future.add_done_callback(_release)
        remaining = deadline - time.monotonic()
        watchers: set[asyncio.Future[Any]] = {future}
        gone: asyncio.Future[Any] | None = None
        if disconnected is not None:
            gone = asyncio.ensure_future(disconnected())
            watchers.add(gone)
        try:
            done, _ = await asyncio.wait(
                watchers, timeout=max(remaining, 0.001), return_when=asyncio.FIRST_COMPLETED
            )
            if future in done:
                return future.result()
            if gone is not None and gone in done:
                token.cancel("the client disconnected")
                raise ClientGoneError()
            token.cancel(f"past the {deadline_s:g} s deadline")
            raise DeadlineExceededError(deadline_s, "the model was answering")
        except asyncio.CancelledError:
            token.cancel("the request was cancelled")
            raise
        finally:
            if gone is not None:
                gone.cancel()

    @staticmethod
    async def _acquire(
        lock: asyncio.Lock,
        deadline: float,
        deadline_s: float,
        disconnected: Callable[[], Awaitable[Any]] | None,
    ) -> None:
        acquire = asyncio.ensure_future(lock.acquire())
        watchers: set[asyncio.Future[Any]] = {acquire}
        gone: asyncio.Future[Any] | None = None
        if disconnected is not None:
            gone = asyncio.ensure_future(disconnected())
            watchers.add(gone)
        try:
            remaining = max(deadline - time.monotonic(), 0.001)
            done, _ = await asyncio.wait(watchers, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if acquire in done:
                return
            if gone is not None and gone in done:
                raise ClientGoneError()
            raise DeadlineExceededError(deadline_s, "waiting in the LLM queue")
        except BaseException:
            # Give the lock back if it was granted in the same instant we gave up.
            if acquire.done() and not acquire.cancelled() and acquire.exception() is None:
                lock.release()
            else:
                acquire.cancel()
            raise
        finally:
            if gone is not None:
                gone.cancel()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Start ``fn`` on the LLM thread without waiting for it (the model load at start-up:
        requests that arrive meanwhile run after it)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragsieve-llm")
        return self._executor.submit(fn)

    def shutdown(self, wait: bool = True) -> None:
        """Let the running job finish (graceful shutdown), then stop the worker."""
        if self._executor is not None:
            self._executor.shutdown(wait=wait)
            self._executor = None
