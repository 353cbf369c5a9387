"""JSON over HTTP with retries, shared by the OpenAI-compatible LLM and embedding clients.

What a caller can rely on:

- every attempt ends within ``timeout_s`` of wall-clock time, however slowly the server sends
  (httpx's own timeout is per read, so a server dripping a byte a second is never cut off by it);
- the API key (and any ``Bearer`` token) never appears in an error message or a log line, even
  when the server echoes it back;
- ``Retry-After`` is honoured only within ``[0, MAX_RETRY_AFTER_S]``; a negative, non-finite or
  unparsable value falls back to exponential backoff, and no retry follows the previous one
  sooner than ``backoff_s`` (never back-to-back);
- one call, retries included, ends within ``max(TOTAL_DEADLINE_S, timeout_s)`` (2 minutes by
  default): a hung server costs one bounded wait, not ``(max_retries + 1) * timeout_s``;
- a cancelled LLM job (:mod:`ragsieve.cancel`: its request timed out or its client left)
  stops retrying and raises ``GenerationCancelledError`` within about 0.05 s, whatever state the
  request is in (connecting, waiting for the response headers, reading the body or the stream):
  the connection to the server is shut down at once (one still connecting is closed the moment
  it connects), so the server sees the client go and can stop generating;
- replies can be validated against a pydantic model with :func:`parse_reply`, whose error names
  the server and the field, never the value.
"""

from __future__ import annotations

import contextlib
import contextvars
import email.utils
import json
import logging
import math
import os
import queue
import random
import re
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any, TypeVar

from ragsieve.cancel import CancelToken, current_token
from ragsieve.errors import ConfigError, ModelError

logger = logging.getLogger(__name__)

MAX_RETRY_AFTER_S = 60.0
# The wall-clock budget of one post_json call across all its retries (one attempt always gets its
# full timeout_s even when that is longer).
TOTAL_DEADLINE_S = 120.0
MAX_BODY_BYTES = 256 * 1024 * 1024
REDACTED = "[REDACTED]"
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',;]+")
# keys shorter than this are not redacted as bare substrings (they would mangle ordinary text)
_MIN_SECRET_LEN = 4

T = TypeVar("T")


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every secret and every ``Bearer <token>`` value replaced by ``[REDACTED]``."""
    for secret in secrets:
        if secret and len(secret) >= _MIN_SECRET_LEN:
            text = text.replace(secret, REDACTED)
    return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)


def client_secrets(client: Any) -> list[str]:
    """The bearer token a client sends (what must never be echoed into errors or logs)."""
    auth = str(getattr(client, "headers", {}).get("authorization", "") or "")
    token = auth.split(None, 1)[1].strip() if " " in auth else auth.strip()
    return [token] if token else []


class HTTPStatusError(Exception):
    """A 4xx answer (other than 429) the caller may handle, e.g. an unsupported parameter.

    ``body`` is already redacted."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status
        self.body = body


class _DeadlineError(Exception):
    """One attempt ran past its wall-clock deadline."""


# ---------------------------------------------------------------------- abortable exchanges
# httpx's sync client blocks its thread in a socket call until the server answers: closing the
# response object from elsewhere only works once the response headers have arrived. Every request
# therefore runs on a worker thread inside an :class:`Exchange`, and the client's connections are
# made by a network backend that tells the exchange which socket its request is using, so that
# another thread can shut that socket down in any state (a blocked read or write then returns at
# once and the server sees the connection go).
_LOCAL = threading.local()
# How often a waiting caller looks at its cancel token and deadline.
POLL_S = 0.05


class Exchange:
    """One HTTP request that another thread can abort at any point.

    The worker thread that sends the request installs it with :func:`exchange_scope`; the
    client's tracked connections attach themselves to it on every read and write. ``abort()``
    shuts the attached socket down (a connection still being made is closed as soon as it is
    made); ``finish()`` detaches, so a connection handed back to the pool is never touched."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stream: _TrackedStream | None = None
        self.aborted = False
        self.finished = False

    def attach(self, stream: _TrackedStream) -> bool:
        """Record ``stream`` as this request's connection; False once the request was aborted."""
        with self._lock:
            if self.aborted:
                return False
            if not self.finished:
                self._stream = stream
            return True

    def abort(self) -> None:
        with self._lock:
            if self.aborted or self.finished:
                return
            self.aborted = True
            stream, self._stream = self._stream, None
            if stream is not None:
                stream.shutdown()

    def finish(self) -> None:
        with self._lock:
            self.finished = True
            self._stream = None


@contextlib.contextmanager
def exchange_scope(exchange: Exchange) -> Iterator[Exchange]:
    """Make ``exchange`` the one this thread's requests attach their connections to."""
    previous = getattr(_LOCAL, "exchange", None)
    _LOCAL.exchange = exchange
    try:
        yield exchange
    finally:
        _LOCAL.exchange = previous
        exchange.finish()


def _cancelled_connection() -> Exception:
    import httpcore

    return httpcore.ConnectError("the request was cancelled")


class _TrackedStream:
    """An httpcore network stream that attaches itself to the current thread's :class:`Exchange`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self._closed = False

    def _claim(self) -> None:
        exchange: Exchange | None = getattr(_LOCAL, "exchange", None)
        if exchange is not None and not exchange.attach(self):
            raise _cancelled_connection()

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._claim()
        data: bytes = self._inner.read(max_bytes, timeout)
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._claim()
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        # Under the lock: shutdown() never touches a socket whose descriptor was already reused.
        with self._lock:
            self._closed = True
            self._inner.close()

    def shutdown(self) -> None:
        """End the connection now, from any thread: a blocked read or write returns at once."""
        with self._lock:
            if self._closed:
                return
            sock = self._inner.get_extra_info("socket")
            if isinstance(sock, socket.socket):
                with contextlib.suppress(OSError):
                    # The plain socket's shutdown, also for a TLS socket (whose own shutdown
                    # would tear down its SSL state under a thread still reading it).
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        self._claim()
        return _TrackedStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _TrackingBackend:
    """httpcore's network backend, with each connection tracked by the request that opens it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> _TrackedStream:
        exchange: Exchange | None = getattr(_LOCAL, "exchange", None)
        if exchange is not None and exchange.aborted:
            raise _cancelled_connection()
        stream = _TrackedStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))
        try:
            stream._claim()  # aborted while connecting: close the new connection at once
        except BaseException:
            stream.close()
            raise
        return stream

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        stream = _TrackedStream(self._inner.connect_unix_socket(path, timeout, socket_options))
        try:
            stream._claim()
        except BaseException:
            stream.close()
            raise
        return stream

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def track_connections(client: Any) -> bool:
    """Make ``client`` (an ``httpx.Client``) open tracked connections, so an :class:`Exchange`
    can abort its requests in any state; idempotent. False where the client's transport has no
    httpcore pool to hook (a custom or mounted transport): its requests are then abandoned on
    cancellation rather than shut down, and end at their own timeout."""
    transports = [getattr(client, "_transport", None), *getattr(client, "_mounts", {}).values()]
    hooked = False
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if pool is None or backend is None:
            continue
        if not isinstance(backend, _TrackingBackend):
            pool._network_backend = _TrackingBackend(backend)
        hooked = True
    return hooked


def make_client(base_url: str, api_key_env: str, timeout_s: float) -> Any:
    """An ``httpx.Client`` for ``base_url``, with a bearer token from ``api_key_env`` when it is set."""
    import httpx

    if not (isinstance(timeout_s, int | float) and math.isfinite(timeout_s) and timeout_s > 0):
        raise ConfigError(f"timeout_s must be a finite number of seconds > 0, not {timeout_s!r}")
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(api_key_env)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)
    track_connections(client)
    return client


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """The server's ``Retry-After`` in seconds, clamped to ``[0, MAX_RETRY_AFTER_S]``; ``None``
    when absent or unusable (the caller then uses its own backoff)."""
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
        # A date already past means "now"; the caller's backoff floor still spaces the retry.
        return min(max(seconds, 0.0), MAX_RETRY_AFTER_S) if math.isfinite(seconds) else None
    if not math.isfinite(seconds) or seconds < 0:
        # A negative delay is a broken header: fall back to the caller's backoff rather than
        # retrying back-to-back.
        return None
    return min(seconds, MAX_RETRY_AFTER_S)


_QUESTION_DEADLINE: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "ragsieve_question_deadline", default=None
)


@contextlib.contextmanager
def question_deadline(seconds: float = TOTAL_DEADLINE_S) -> Iterator[None]:
    """Bound every HTTP call made inside the block (one question's LLM and embedding calls) by
    one shared wall-clock deadline of ``seconds``; past it, calls raise :class:`ModelError`.

    Example:
        >>> with question_deadline(120):  # doctest: +SKIP
        ...     answer = pipeline.ask("What is graphene?")
    """
    token = _QUESTION_DEADLINE.set((time.monotonic() + float(seconds), float(seconds)))
    try:
        yield
    finally:
        _QUESTION_DEADLINE.reset(token)


def _timeout_of(client: Any) -> float:
    timeout = getattr(client, "timeout", None)
    values = [getattr(timeout, name, None) for name in ("read", "connect", "write", "pool")]
    finite = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v) and v > 0]
    return max(finite) if finite else 60.0


def _attempt(
    client: Any, path: str, payload: dict[str, Any], deadline: float, token: CancelToken | None = None,
    box: dict[str, Any] | None = None,
) -> tuple[int, Any, bytes]:
    """One POST, its body read in chunks so the wall-clock ``deadline`` (and a cancellation) is
    checked as bytes arrive. The open response is put in ``box["response"]`` so another thread
    can close it."""
    import httpx

    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _DeadlineError
    with client.stream("POST", path, json=payload, timeout=httpx.Timeout(remaining)) as resp:
        if box is not None:
            box["response"] = resp
        chunks: list[bytes] = []
        size = 0
        for chunk in resp.iter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if token is not None:
                token.check()
            if time.monotonic() > deadline:
                raise _DeadlineError
            if size > MAX_BODY_BYTES:
                raise ModelError(
                    f"the reply from {client.base_url} exceeds {MAX_BODY_BYTES // (1024 * 1024)} MiB; "
                    "check that base_url points at an OpenAI-compatible API"
                )
        return resp.status_code, resp.headers, b"".join(chunks)


def _attempt_within(
    client: Any, path: str, payload: dict[str, Any], timeout_s: float, token: CancelToken | None = None
) -> tuple[int, Any, bytes]:
    """:func:`_attempt` on a daemon thread inside an :class:`Exchange`, so that neither a server
    dripping its *headers* (which httpx reads before any body chunk) nor one that never answers
    can hold the caller past ``timeout_s``. A cancelled ``token`` or the deadline shuts the
    connection down at once, in whatever state the request is, and the worker thread ends with
    it; a cancellation raises ``GenerationCancelledError``."""
    track_connections(client)
    deadline = time.monotonic() + timeout_s
    box: dict[str, Any] = {}
    exchange = Exchange()

    def run() -> None:
        with exchange_scope(exchange):
            try:
                box["result"] = _attempt(client, path, payload, deadline, None, box)
            except BaseException as exc:  # handed to the caller's thread below
                box["error"] = exc

    worker = threading.Thread(target=run, name="ragsieve-http", daemon=True)
    worker.start()
    end = deadline + POLL_S
    try:
        while worker.is_alive() and time.monotonic() < end:
            if token is not None and token.cancelled:
                _abort(exchange, box)
                token.check()
            worker.join(min(POLL_S, max(end - time.monotonic(), 0.0)))
        if worker.is_alive():
            _abort(exchange, box)
            raise _DeadlineError
    except BaseException:
        _abort(exchange, box)
        raise
    if "error" in box:
        if token is not None:
            token.check()  # the stream broke because the job was cancelled meanwhile
        raise box["error"]
    result: tuple[int, Any, bytes] = box["result"]
    return result


def _abort(exchange: Exchange, box: dict[str, Any]) -> None:
    """Shut the request's connection down; close its response too (a transport that is not
    tracked can only be stopped there, once the headers have arrived)."""
    exchange.abort()
    response = box.get("response")
    if response is not None:
        with contextlib.suppress(Exception):
            response.close()


def post_json(
    client: Any,
    path: str,
    payload: dict[str, Any],
    *,
    service: str,
    max_retries: int,
    backoff_s: float,
    timeout_s: float | None = None,
    total_s: float | None = None,
) -> dict[str, Any]:
    """POST ``payload`` and return the JSON answer (a JSON object).

    Each attempt has a wall-clock deadline of ``timeout_s`` (default: the client's timeout).
    Connection errors, timeouts, 429 and 5xx are retried with exponential backoff
    (``backoff_s * 2**attempt`` with 10% jitter, or the server's clamped ``Retry-After``); when
    retries run out a :class:`ModelError` names ``service``, the URL and the fix. Other 4xx
    answers raise :class:`HTTPStatusError` at once. Nothing raised or logged contains the key.
    The whole call, retries included, ends within ``max(total_s, timeout_s)`` (``total_s``
    default :data:`TOTAL_DEADLINE_S`).
    """
    import httpx

    secrets = client_secrets(client)
    limit = _timeout_of(client) if timeout_s is None else float(timeout_s)
    budget = max(TOTAL_DEADLINE_S if total_s is None else float(total_s), limit)
    give_up_at = time.monotonic() + budget
    question = _QUESTION_DEADLINE.get()
    if question is not None and question[0] < give_up_at:
        give_up_at, budget = question[0], question[1]
        if give_up_at - time.monotonic() <= 0:
            raise ModelError(
                f"the question's {budget:g} s deadline passed before {service} at "
                f"{str(client.base_url).rstrip('/')} was called; raise the deadline or check the server"
            )
    token = current_token()
    url = str(client.base_url).rstrip("/") + "/" + path.lstrip("/")
    last = ""

    def sleep(seconds: float) -> None:
        if token is not None:
            token.wait(seconds)
            token.check()
        else:
            time.sleep(seconds)

    for attempt in range(max_retries + 1):
        if token is not None:
            token.check()
        wait = backoff_s * (2**attempt) * (1.0 + 0.1 * random.random())
        left = give_up_at - time.monotonic()
        if attempt > 0 and left <= 0:
            raise ModelError(
                f"{service} at {url} gave no usable reply within the {budget:g} s total deadline "
                f"({attempt} attempts; last: {last}); check the server, or raise timeout_s"
            )
        try:
            status, headers, raw = _attempt_within(client, path, payload, min(limit, max(left, 0.001)), token)
        except (httpx.TimeoutException, _DeadlineError) as exc:
            last = f"no complete reply within the {limit:g} s timeout"
            if attempt < max_retries:
                logger.warning("%s %s: %s; retry %d in %.2fs", service, url, last, attempt + 1, wait)
                sleep(min(wait, max(give_up_at - time.monotonic(), 0.0)))
                continue
            raise ModelError(
                f"{service} at {url} sent no complete reply within timeout_s={limit:g} s "
                f"({attempt + 1} attempts); raise timeout_s or check the server"
            ) from (exc if isinstance(exc, httpx.TimeoutException) else None)
        except (httpx.TransportError, httpx.StreamError) as exc:
            last = redact(f"{type(exc).__name__}: {exc}", secrets)
            if attempt < max_retries:
                logger.warning("%s %s: %s; retry %d in %.2fs", service, url, last, attempt + 1, wait)
                sleep(min(wait, max(give_up_at - time.monotonic(), 0.0)))
                continue
            raise ModelError(
                f"could not reach {service} at {url} after {attempt + 1} attempts ({last}); start it or fix base_url"
            ) from None
        text = redact(raw.decode("utf-8", errors="replace"), secrets)
        if status == 429 or status >= 500:
            last = f"HTTP {status}: {text[:200]}"
            if attempt < max_retries:
                server_wait = retry_after_seconds(headers.get("Retry-After"))
                if server_wait is not None:
                    wait = max(server_wait, backoff_s)
                logger.warning("%s %s: %s; retry %d in %.2fs", service, url, last, attempt + 1, wait)
                sleep(min(wait, max(give_up_at - time.monotonic(), 0.0)))
                continue
            raise ModelError(
                f"{service} at {url} kept failing ({last}) after {attempt + 1} attempts; "
                "check the server logs or lower the request rate"
            )
        if status >= 400:
            raise HTTPStatusError(status, text)
        try:
            data = json.loads(raw)
        except ValueError:
            raise ModelError(
                f"{service} at {url} returned non-JSON ({text[:200]!r}); "
                "check that base_url points at an OpenAI-compatible API"
            ) from None
        if not isinstance(data, dict):
            raise ModelError(
                f"{service} at {url} returned a JSON {type(data).__name__}, not an object; "
                "check that base_url points at an OpenAI-compatible API"
            )
        return data
    raise ModelError(f"could not reach {service} at {url}; start it or fix base_url")  # pragma: no cover


def stream_sse(
    client: Any,
    path: str,
    payload: dict[str, Any],
    *,
    service: str,
    timeout_s: float | None = None,
) -> Iterator[dict[str, Any]]:
    """POST ``payload`` and yield each JSON object of the server-sent-event stream it answers with
    (``data: {...}`` lines, up to ``data: [DONE]``).

    The whole stream ends within ``timeout_s`` of wall-clock time (default: the client's timeout)
    and within the question's deadline (:func:`question_deadline`). The request runs on a worker
    thread inside an :class:`Exchange`: a cancelled LLM job (:mod:`ragsieve.cancel`), the
    deadline, or the caller leaving the loop early shuts the connection down within
    :data:`POLL_S` in any state (connecting, waiting for the response headers, streaming), so
    the server sees the client go and stops generating; a cancellation raises
    ``GenerationCancelledError``. Nothing is retried once the request is sent (a retried stream
    would repeat text already handed on); a 429 or 5xx before the stream starts raises
    :class:`ModelError`, another 4xx :class:`HTTPStatusError`. Nothing raised contains the key."""
    import httpx

    track_connections(client)
    secrets = client_secrets(client)
    limit = _timeout_of(client) if timeout_s is None else float(timeout_s)
    deadline = time.monotonic() + limit
    question = _QUESTION_DEADLINE.get()
    if question is not None and question[0] < deadline:
        deadline = question[0]
    url = str(client.base_url).rstrip("/") + "/" + path.lstrip("/")
    token = current_token()
    if token is not None:
        token.check()

    def expired() -> ModelError:
        return ModelError(
            f"{service} at {url} did not finish streaming within {limit:g} s (or the question's deadline); "
            "raise timeout_s or check the server"
        )

    def events() -> Iterator[dict[str, Any]]:
        remaining = max(deadline - time.monotonic(), 0.001)
        with client.stream("POST", path, json=payload, timeout=httpx.Timeout(remaining)) as resp:
            box["response"] = resp
            if resp.status_code >= 400:
                text = redact(resp.read().decode("utf-8", errors="replace"), secrets)
                if resp.status_code == 429 or resp.status_code >= 500:
                    raise ModelError(
                        f"{service} at {url} refused the stream (HTTP {resp.status_code}: {text[:200]}); "
                        "check the server logs or lower the request rate"
                    )
                raise HTTPStatusError(resp.status_code, text)
            if resp.headers.get("content-type", "").startswith("application/json"):
                # A server that ignores ``stream: true`` answers with the whole completion at once.
                try:
                    whole = json.loads(resp.read())
                except ValueError:
                    whole = None
                if isinstance(whole, dict):
                    yield whole
                    return
                raise ModelError(
                    f"{service} at {url} answered a stream request with JSON that is not an object; "
                    "check that base_url points at an OpenAI-compatible API"
                )
            for line in resp.iter_lines():
                if exchange.aborted:
                    return
                if not line.startswith("data:"):
                    continue  # comments, event names, keep-alives
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                try:
                    event = json.loads(data)
                except ValueError:
                    raise ModelError(
                        f"{service} at {url} sent a stream event that is not JSON ({redact(data, secrets)[:200]!r}); "
                        "check that base_url points at an OpenAI-compatible API"
                    ) from None
                if isinstance(event, dict):
                    yield event

    box: dict[str, Any] = {}
    exchange = Exchange()
    # Unbounded, but the worker stops reading once the caller is gone (the exchange is aborted)
    # and the stream is bounded in time by the deadline.
    received: queue.Queue[tuple[str, Any]] = queue.Queue()

    def run() -> None:
        outcome: tuple[str, Any] = ("end", None)
        try:
            with exchange_scope(exchange):
                for event in events():
                    received.put(("event", event))
        except BaseException as exc:  # handed to the caller's thread below
            outcome = ("error", exc)
        # After the exchange finished, so the caller's closing abort never touches a connection
        # that went back to the pool.
        received.put(outcome)

    worker = threading.Thread(target=run, name="ragsieve-sse", daemon=True)
    worker.start()
    try:
        while True:
            if token is not None and token.cancelled:
                _abort(exchange, box)
                token.check()
            left = deadline - time.monotonic()
            if left <= 0:
                _abort(exchange, box)
                raise expired()
            try:
                kind, value = received.get(timeout=min(POLL_S, left))
            except queue.Empty:
                continue
            if kind == "event":
                yield value
            elif kind == "end":
                return
            elif isinstance(value, httpx.TransportError | httpx.StreamError):
                if token is not None:
                    token.check()  # we shut it down: the job was cancelled
                if time.monotonic() > deadline:
                    raise expired() from None
                broke = redact(f"{type(value).__name__}: {value}", secrets)
                raise ModelError(
                    f"the stream from {service} at {url} broke ({broke}); start the server or fix base_url"
                ) from None
            else:
                raise value
    finally:
        # Normal end: the exchange is finished and this does nothing. The caller left early
        # (a closed generator), was cancelled or timed out: the connection goes now.
        _abort(exchange, box)


def parse_reply(model: type[T], data: dict[str, Any], *, service: str) -> T:
    """``data`` validated as the pydantic ``model``; a mismatch is a :class:`ModelError` naming
    ``service`` and each bad field (``choices.0.message.content: ...``), never the values."""
    from pydantic import BaseModel, ValidationError

    if not (isinstance(model, type) and issubclass(model, BaseModel)):  # pragma: no cover - programming error
        raise TypeError(f"{model!r} is not a pydantic model")
    try:
        parsed: T = model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()[:5]
        )
        raise ModelError(
            f"{service} returned a reply of the wrong shape ({problems}); "
            "check that it is an OpenAI-compatible API and serves this endpoint"
        ) from None
    return parsed


__all__ = [
    "MAX_RETRY_AFTER_S",
    "POLL_S",
    "TOTAL_DEADLINE_S",
    "Exchange",
    "HTTPStatusError",
    "client_secrets",
    "exchange_scope",
    "make_client",
    "parse_reply",
    "post_json",
    "question_deadline",
    "redact",
    "retry_after_seconds",
    "track_connections",
]
