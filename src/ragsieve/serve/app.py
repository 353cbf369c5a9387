"""The FastAPI application: routes, error mapping, API-key check, metrics and the page.

Build one with :func:`create_app` (tests pass an :class:`~ragsieve.serve.engine.Engine` over a
fake pipeline); ``ragsieve serve`` runs it with uvicorn.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ragsieve.extras import require

# The service is the serve extra: without it, importing this module names the extra to install.
require("fastapi", "serve", "the ragsieve HTTP service")

import anyio
import anyio.to_thread
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragsieve.cancel import GenerationCancelledError
from ragsieve.errors import ConfigError, IndexStoreError, InputError, LLMOutputError, ModelError, RagsieveError
from ragsieve.index.access import Access
from ragsieve.serve.engine import DEFAULT_MODEL_NAME, PIPELINE_NAMES, Engine, without_paths
from ragsieve.serve.guard import (
    API_KEY_MISSING,
    BodyLimitMiddleware,
    HostAllowListMiddleware,
    SecurityHeadersMiddleware,
    page_csp,
)
from ragsieve.serve.keys import KeyRing, record_access, request_access
from ragsieve.serve.metrics import ServiceMetrics
from ragsieve.serve.page import render_page
from ragsieve.serve.queue import ClientGoneError, DeadlineExceededError, LLMQueue, QueueFullError
from ragsieve.serve.schemas import (
    AskRequest,
    AskResponse,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ClassifyRequest,
    ClassifyResponse,
    ErrorResponse,
    HealthResponse,
    SearchRequest,
    SearchResponse,
)
from ragsieve.serve.server import ConnectionStats

logger = logging.getLogger(__name__)

API_VERSION = "v1"
# Chat histories and classify knowledge lists are text; 4 MiB leaves room for long ones.
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
# Reachable without the API key: liveness for orchestrators, and the page's static shell
# (it holds no data; the page sends the key with every call it makes).
# ``/health`` is the conventional probe path orchestrators and load balancers try first: an alias.
PUBLIC_PATHS = frozenset({"/v1/health", "/health", "/"})
KNOWN_PATHS = frozenset(
    {"/", "/v1/health", "/health", "/v1/ask", "/v1/ask/stream", "/v1/search", "/v1/classify", "/v1/chat/completions",
     "/v1/models",
     "/metrics", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
)
# The cited passage's text and location, by chunk id (the page's citation links open it).
PASSAGES_PATH = "/v1/passages"
_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text}
    for code, text in {
        400: "The request cannot be answered as sent (the message says why).",
        401: "Missing or wrong API key.",
        404: "Unknown model or pipeline.",
        413: "The request body is larger than the server's limit (--max-body-bytes).",
        421: "The Host header is not one this server answers to (--allowed-host).",
        422: "The body does not match the schema.",
        429: "The LLM queue is full; retry after the Retry-After header's seconds.",
        503: "The index or model is not available.",
        504: "The request ran past its deadline.",
    }.items()
}


@dataclass
class ServeSettings:
    """Service knobs (``ragsieve serve`` flags).

    ``api_key`` None disables the key check (allowed on loopback only, enforced by the CLI);
    ``keys`` (``--keys-file``) holds per-key grants and takes ``api_key`` as its all-access key."""

    api_key: str | None = None
    keys: KeyRing | None = None
    queue_size: int = 16
    deadline_s: float = 120.0
    warm_up: bool = True
    # Searches running at once; more wait on the event loop. Beyond the core count, extra threads
    # only contend for the GIL with the event loop that parses requests and writes answers.
    search_threads: int = field(default_factory=lambda: max(2, os.cpu_count() or 2))
    # Request bodies over this many bytes get 413 while they stream in (never held whole).
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    # A body not complete this long after its request's headers gets 408 (a total, not a pause).
    body_timeout_s: float = 30.0
    # Host names answered (DNS-rebinding guard); None answers any Host. `ragsieve serve` sets it
    # for loopback binds (see ragsieve.serve.guard.allowed_hosts_for).
    allowed_hosts: frozenset[str] | None = None


class ServiceError(Exception):
    """An HTTP error the service raises itself, rendered as an :class:`ErrorResponse`."""

    def __init__(
        self, status: int, message: str, type_: str, code: str | None = None, param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type_, code, param
        self.headers = headers or {}


def _error_json(
    status: int, message: str, type_: str, code: str | None = None, param: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    # Every error body goes out through here: no message may reveal where the server's files are.
    body = {"error": {"message": without_paths(message), "type": type_, "code": code, "param": param}}
    return JSONResponse(body, status_code=status, headers=headers)


def error_for(exc: RagsieveError) -> tuple[int, str, dict[str, str]]:
    """HTTP status, error type and headers for a library error."""
    if isinstance(exc, QueueFullError):
        return 429, "rate_limit_error", {"Retry-After": str(exc.retry_after_s)}
    if isinstance(exc, DeadlineExceededError | GenerationCancelledError):
        return 504, "timeout_error", {}
    if isinstance(exc, InputError):
        return 400, "invalid_request_error", {}
    if isinstance(exc, LLMOutputError):
        return 502, "model_output_error", {}
    if isinstance(exc, ModelError | IndexStoreError | ConfigError):
        # The service, not the request, is at fault: the model/index is missing or misconfigured.
        return 503, "service_unavailable", {}
    return 400, "invalid_request_error", {}


# ---------------------------------------------------------------------- middleware
KEYS_FILE_NOT_TAKEN = (
    "the keys file was changed but could not be read; the keys read before stay in force (the server's log says "
    "what is wrong with the file)"
)


def key_ring(settings: ServeSettings) -> KeyRing:
    """The settings' keys: the keys file's ring, else one holding only ``api_key``."""
    if settings.keys is None:
        settings.keys = KeyRing(api_key=settings.api_key)
    return settings.keys


class _GuardMiddleware:
    """API-key check and request metrics, as plain ASGI so streaming responses pass untouched.
    The key's grants go with the request (:func:`ragsieve.serve.keys.record_access`)."""

    def __init__(self, app: ASGIApp, settings: ServeSettings, metrics: ServiceMetrics) -> None:
        self.app = app
        self.keys = key_ring(settings)
        self.metrics = metrics

    def _authorised(self, scope: Scope) -> bool:
        access = self.keys.access_for(scope)
        if access is not None:
            record_access(scope, access)
            return True
        return scope["path"] in PUBLIC_PATHS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        endpoint = path if path in KNOWN_PATHS else PASSAGES_PATH if path.startswith(PASSAGES_PATH + "/") else "other"
        start = time.perf_counter()
        status = 500

        async def _send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            if not self._authorised(scope):
                status = 401
                response = _error_json(
                    401, API_KEY_MISSING,
                    "authentication_error", code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
            await self.app(scope, receive, _send)
        finally:
            self.metrics.observe_request(endpoint, scope.get("method", ""), status, time.perf_counter() - start)


def _until_disconnect(request: Request) -> Callable[[], Awaitable[None]]:
    async def wait() -> None:
        # The body has been read already, so the next message on the channel is the disconnect.
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                return

    return wait


def _question_of(messages: list[Any]) -> str:
    for message in reversed(messages):
        if message.role != "user":
            continue
        content = message.content
        if isinstance(content, str):
            text = content
        elif content is None:
            text = ""
        else:
            kinds = sorted({part.type for part in content if part.type != "text"})
            if kinds:
                raise ServiceError(
                    400, f"message content of type {', '.join(kinds)} is not supported; send text only",
                    "invalid_request_error", param="messages",
                )
            text = "\n".join(part.text or "" for part in content)
        if not text.strip():
            raise ServiceError(400, "the last user message is empty; put the question in it",
                               "invalid_request_error", param="messages")
        return text
    raise ServiceError(400, "no user message; the last message with role 'user' is the question",
                       "invalid_request_error", param="messages")


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
_MARKUP = re.compile(r"([\\`*_{}\[\]()~])")


def plain_label(value: Any, limit: int = 200) -> str:
    """Document-controlled text (a title, a file name) as one inert line for a chat client that
    renders Markdown or HTML: control and bidi characters dropped, whitespace collapsed, markup
    characters backslash-escaped, angle brackets replaced by look-alike quotes (no tag can form
    in any renderer), length capped."""
    text = " ".join(_CONTROL.sub(" ", str(value)).split()).replace("<", "\u2039").replace(">", "\u203a")
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return _MARKUP.sub(r"\\\1", text)


def source_label(hit: dict[str, Any]) -> str:
    """One Sources line's text for a cited hit: its citation as a person reads it (``path:page``,
    ``path#heading``, the record's address; the id when it has no location), after the title
    when it has one the citation does not already say. Every part made inert by :func:`plain_label`."""
    where = str(hit.get("citation") or hit.get("id") or "")
    title = str(hit.get("title") or "").strip()
    if title and title not in where:
        return f"{plain_label(title)} ({plain_label(where, limit=400)})"
    return plain_label(where, limit=400)


def answer_content(answer: dict[str, Any], allow_link_hosts: Sequence[str] = ()) -> str:
    """The chat message, from the answer's presentation (:mod:`ragsieve.present`, what the terminal
    and the page show): the answer text, the decide stage's caveat, the note when a sentence cites no
    source, why it abstained and the draft it withdrew, then the evidence it cites as numbered
    sources. Images and links to addresses outside the corpus are inert in it, as in the
    presentation (``allow_link_hosts``: the operator's hosts, ``present.allow_link_hosts``)."""
    from ragsieve.present import present_answer

    view = present_answer(answer, allow_link_hosts=allow_link_hosts)
    text = view.text.strip()
    if view.caveat:
        text += f"\n\n(caveat: {view.caveat})"
    if view.citation_note:
        text += f"\n\n({view.citation_note})"
    if view.outcome == "abstained" and view.abstain_reason and (
        view.abstain_reason.rstrip(".").lower() not in " ".join(text.split()).lower()
    ):
        text += f"\n\n(abstained: {view.abstain_reason})"
    for draft in view.withdrawn:
        text += f"\n\n(withdrawn draft: {draft.reason} The draft was: {draft.text})"
    hits = answer.get("evidence") or []
    sources = [f"[{src.n}] {source_label(hits[src.n - 1])}" for src in view.sources if src.cited]
    if sources:
        text += "\n\nSources:\n" + "\n".join(sources)
    return text


_PIECES = re.compile(r"\s*\S+|\s+")


def _chunk_text(text: str) -> Iterator[str]:
    # Text the stream did not get token by token (the sources, a checked or abstaining answer, a
    # pipeline that cannot stream) goes word by word (one word and its leading whitespace per chunk).
    yield from _PIECES.findall(text)


def sse_event(kind: str, data: Any) -> str:
    """One server-sent event: ``event: KIND`` and its JSON on one ``data:`` line."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


def withdrawn_notice(reason: str) -> str:
    """What a chat stream says when text it already sent is not the verified answer (an OpenAI
    chat client cannot take text back): the verified answer follows the notice."""
    return f"\n\n[ragsieve withdrew the text above: {' '.join(reason.split())}. The checked answer follows.]\n\n"


# What can begin a Markdown image or link, an autolink or HTML tag, or a bare address: a stream
# sends no text from the word where one first appears (the checked, inert answer follows at the end).
_LINK_START = re.compile(r"!\[|\]\(|\]\[|\]:|<|://|\bwww\.", re.IGNORECASE)


class ChatContent:
    """The content deltas of a streamed chat completion: LLM tokens as they arrive (whitespace at
    the ends held back, as the answer is stripped, and each word until it is complete), a notice
    when the checks withdraw them, and at the end whatever of the final content the tokens did not
    already send.

    Tokens stop at the first word that could start an image, a link or an address (``![``,
    ``](``, ``<``, ``://``, ``www.``): the model's raw text is never streamed with a live link in
    it; the rest comes at the end from the final content, where every image and link to an
    address outside the corpus is inert (:func:`ragsieve.citations.inert_links`)."""

    def __init__(self) -> None:
        self.sent = ""  # content sent since the last notice
        self.received = ""  # the tokens since the last notice, leading whitespace dropped
        self.held = False  # a link may start: nothing more is sent until the end

    def token(self, text: str) -> str:
        if self.held:
            return ""
        self.received = (self.received + text).lstrip()
        cut = max(self.received.rfind(" "), self.received.rfind("\n"), self.received.rfind("\t"))
        complete = self.received[: cut + 1]  # the words a whitespace has ended
        opener = _LINK_START.search(complete)
        if opener is not None:
            self.held = True
            starts = [complete.rfind(ch, 0, opener.start()) for ch in " \n\t"]
            complete = complete[: max(starts) + 1]
        body = complete.rstrip()
        if not body.startswith(self.sent):  # pragma: no cover - tokens only add to the text
            self.held = True
            return ""
        piece, self.sent = body[len(self.sent):], body
        return piece

    def withdraw(self, reason: str) -> str:
        self.sent, self.received, self.held = "", "", False
        return withdrawn_notice(reason)

    def rest(self, content: str) -> str:
        if content.startswith(self.sent):
            return content[len(self.sent):]
        return withdrawn_notice("the checks changed it") + content


def fast_json(model: type[BaseModel], data: dict[str, Any]) -> Response:
    """``data`` validated by ``model`` and written straight to JSON by pydantic (NaN scores become
    null). FastAPI's own route serialisation goes through Python objects and ``json.dumps``: on a
    k=5 search result that measured 0.96 ms against 0.09 ms for this."""
    return Response(model.model_validate(data).model_dump_json(), media_type="application/json")


def _usage(trace: dict[str, Any]) -> dict[str, int]:
    prompt = int(trace.get("prompt_tokens") or 0)
    completion = int(trace.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


# ---------------------------------------------------------------------- the app
def create_app(engine: Engine, settings: ServeSettings | None = None) -> FastAPI:
    """The service over ``engine``."""
    settings = settings or ServeSettings()
    queue = LLMQueue(capacity=settings.queue_size)
    # Filled by the uvicorn protocol (ragsieve.serve.server.uvicorn_config reads app.state.connections)
    # and by the body-limit middleware.
    connections = ConnectionStats()
    metrics = ServiceMetrics(
        queue_depth=lambda: queue.waiting, llm_busy=lambda: queue.running, connections=connections.summary
    )
    engine.on_reload = metrics.reloads.inc

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        warming: Future[Any] | None = None
        if settings.warm_up:
            # On the LLM thread, so requests arriving meanwhile queue behind the model load.
            warming = queue.submit(engine.warm_up)
            warming.add_done_callback(_log_warm_up)
        yield
        # uvicorn has stopped accepting and waited for in-flight requests; let the LLM thread finish.
        if warming is not None and not warming.done():
            await asyncio.wrap_future(warming)
        await run_in_threadpool(queue.shutdown, True)

    def _log_warm_up(future: Any) -> None:
        exc = future.exception()
        if exc is not None:
            engine.problem = f"warming up failed: {exc}"
            logger.error("warming up failed: %s", exc)

    app = FastAPI(
        title="ragsieve",
        version=API_VERSION,
        summary="Retrieval-augmented answers with a trace of the evidence kept and dropped.",
        lifespan=lifespan,
    )
    app.state.engine, app.state.queue, app.state.metrics, app.state.settings = engine, queue, metrics, settings
    app.state.connections = connections
    # Outermost last: security headers on every answer, then the Host check, then key and
    # metrics, then the body limit right before the routes read the body.
    app.add_middleware(
        BodyLimitMiddleware, max_bytes=settings.max_body_bytes, body_timeout_s=settings.body_timeout_s,
        on_timeout=connections.time_out,
    )
    app.add_middleware(_GuardMiddleware, settings=settings, metrics=metrics)
    if settings.allowed_hosts is not None:
        app.add_middleware(HostAllowListMiddleware, allowed=settings.allowed_hosts)
    app.add_middleware(SecurityHeadersMiddleware)

    # ------------------------------------------------------------------ errors
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        param = None
        for err in exc.errors()[:5]:
            loc = [str(p) for p in err.get("loc", ()) if p != "body"]
            where = ".".join(loc) or "body"
            param = param or where
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        return _error_json(422, "invalid request: " + "; ".join(problems), "invalid_request_error", param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(exc.headers) if exc.headers else None
        return _error_json(exc.status_code, str(exc.detail), "invalid_request_error", headers=headers)

    @app.exception_handler(ServiceError)
    async def _service(request: Request, exc: ServiceError) -> JSONResponse:
        return _error_json(exc.status, exc.message, exc.type, exc.code, exc.param, exc.headers)

    @app.exception_handler(RagsieveError)
    async def _library(request: Request, exc: RagsieveError) -> JSONResponse:
        status, type_, headers = error_for(exc)
        return _error_json(status, str(exc), type_, headers=headers)

    @app.exception_handler(ClientGoneError)
    async def _gone(request: Request, exc: ClientGoneError) -> Response:
        return Response(status_code=499)  # nginx's "client closed request"; nobody reads it

    # ------------------------------------------------------------------ helpers
    async def on_llm(request: Request, fn: Callable[[], Any]) -> Any:
        deadline_s = settings.deadline_s
        return await queue.run(
            fn, deadline=time.monotonic() + deadline_s, deadline_s=deadline_s, disconnected=_until_disconnect(request)
        )

    search_limiter = anyio.CapacityLimiter(settings.search_threads)

    async def in_threadpool(fn: Callable[..., Any], **kwargs: Any) -> Any:
        call = functools.partial(fn, **kwargs)
        try:
            return await asyncio.wait_for(
                anyio.to_thread.run_sync(call, limiter=search_limiter), timeout=settings.deadline_s
            )
        except asyncio.TimeoutError as exc:
            raise DeadlineExceededError(settings.deadline_s, "searching") from exc

    async def run_ask(request: Request, question: str, **options: Any) -> dict[str, Any]:
        engine.chosen_pipeline(options.get("pipeline"))  # fail fast, before queueing
        access = request_access(request.scope)
        answer: dict[str, Any] = await on_llm(request, lambda: engine.ask(question, access=access, **options))
        metrics.observe_trace(answer.get("trace") or {})
        return answer

    async def next_event(
        events: asyncio.Queue[dict[str, Any]], job: asyncio.Future[Any]
    ) -> dict[str, Any] | None:
        """The job's next event; None once it finished (its error, if any, raised here)."""
        if not events.empty():
            return events.get_nowait()
        getter = asyncio.ensure_future(events.get())
        try:
            done, _ = await asyncio.wait({getter, job}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            getter.cancel()
            raise
        if getter in done:
            return getter.result()
        getter.cancel()
        if not events.empty():  # the worker's last events are queued before its job completes
            return events.get_nowait()
        job.result()
        return None

    async def stream_on_llm(request: Request, question: str, **options: Any) -> AsyncIterator[dict[str, Any]]:
        """``engine.ask`` on the LLM lane with its events. Returns once the first event arrived,
        so what fails before the answer starts (an unknown pipeline, a full queue, the deadline
        while waiting) is an HTTP error; the iterator raises what fails later. Leaving the
        iterator early (the client disconnected) cancels the LLM call."""
        engine.chosen_pipeline(options.get("pipeline"))  # fail fast, before queueing
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        def put(event: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(events.put_nowait, event)

        access = request_access(request.scope)
        job = asyncio.ensure_future(
            on_llm(request, lambda: engine.ask(question, on_event=put, access=access, **options))
        )
        try:
            first = await next_event(events, job)
        except BaseException:
            job.cancel()
            raise

        async def relay() -> AsyncIterator[dict[str, Any]]:
            event = first
            try:
                while event is not None:
                    if event.get("kind") == "answer":
                        metrics.observe_trace(event["answer"].get("trace") or {})
                    yield event
                    event = await next_event(events, job)
            finally:
                if not job.done():
                    job.cancel()  # the LLM queue cancels the running call's token

        return relay()

    # ------------------------------------------------------------------ routes
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        html = render_page(None)
        return HTMLResponse(html, headers={"Content-Security-Policy": page_csp(html)})

    @app.get("/v1/health", response_model=HealthResponse, tags=["service"])
    @app.get("/health", response_model=HealthResponse, include_in_schema=False)
    async def health() -> dict[str, Any]:
        """Liveness, the index generation being served and whether the model is loaded
        (``/health`` is the same, for probes that expect that path)."""
        report = engine.health(llm_stuck=queue.stuck())
        if key_ring(settings).problem and report.get("problem") is None:
            # Public: the problem's details (key names, lines) are in the server's log only.
            report.update(status="degraded", problem=KEYS_FILE_NOT_TAKEN)
        return {
            **report, "queue_depth": queue.depth, "queue_capacity": queue.capacity,
            "connections": connections.summary(),
        }

    @app.get("/metrics", tags=["service"], response_class=Response, responses={401: _ERROR_RESPONSES[401]})
    async def prometheus() -> Response:
        """Prometheus text format: requests, errors, 429s, latency per endpoint and stage, queue depth."""
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    @app.get("/v1/models", tags=["openai"], responses={401: _ERROR_RESPONSES[401]})
    async def models() -> dict[str, Any]:
        """The model names the chat endpoint accepts (OpenAI's model list)."""
        names = [DEFAULT_MODEL_NAME, *PIPELINE_NAMES]
        return {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "ragsieve"} for n in names]}

    @app.get("/v1/audit", responses=_ERROR_RESPONSES, tags=["library"])
    async def audit(
        request: Request,
        check: list[str] | None = Query(None, description="finding kinds to look for (default: the label-free ones)"),
    ) -> dict[str, Any]:
        """The corpus audit of the passages the caller may read: the same JSON as ``ragsieve audit
        --json`` (computed once per index generation and caller scope, then served from memory)."""
        result: dict[str, Any] = await in_threadpool(engine.audit, checks=check, access=request_access(request.scope))
        return result

    @app.post("/v1/ask", response_model=AskResponse, responses=_ERROR_RESPONSES, tags=["library"])
    async def ask(body: AskRequest, request: Request) -> Response:
        """Answer a question: the same JSON as ``ragsieve ask --json``."""
        answer = await run_ask(
            request, body.question, pipeline=body.pipeline, k=body.k, route=body.route, no_retrieval=body.no_retrieval
        )
        return fast_json(AskResponse, answer)

    @app.post(
        "/v1/ask/stream",
        responses={**_ERROR_RESPONSES, 200: {"content": {"text/event-stream": {}}}},
        tags=["library"],
    )
    async def ask_stream(body: AskRequest, request: Request) -> StreamingResponse:
        """Answer a question as server-sent events, each ``event: KIND`` with a JSON ``data:`` line:
        ``stage_start`` and ``stage`` per stage as it finishes (its duration, trace records and
        decisions), ``token`` while the answer is generated, ``retracted`` when streamed text is
        not the verified answer, then ``answer`` (the ``/v1/ask`` JSON) and ``done``. A failure
        after the stream began is an ``error`` event (``message``, ``type``, ``status``)."""
        events = await stream_on_llm(
            request, body.question, pipeline=body.pipeline, k=body.k, route=body.route, no_retrieval=body.no_retrieval
        )

        async def sse() -> AsyncIterator[str]:
            try:
                async for event in events:
                    yield sse_event(str(event.get("kind", "event")), event)
            except RagsieveError as exc:
                status, type_, _ = error_for(exc)
                yield sse_event("error", {"message": without_paths(str(exc)), "type": type_, "status": status})
            except ClientGoneError:
                return
            yield sse_event("done", {})

        return StreamingResponse(
            sse(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )

    @app.post("/v1/search", response_model=SearchResponse, responses=_ERROR_RESPONSES, tags=["library"])
    async def search(body: SearchRequest, request: Request) -> Response:
        """Rank chunks for a query with each retriever's score (runs in parallel with other searches)."""
        result: dict[str, Any] = await in_threadpool(
            engine.search, query=body.query, k=body.k, mode=body.mode, route=body.route, where=body.where,
            access=request_access(request.scope),
        )
        metrics.observe_trace(result["trace"])
        return fast_json(SearchResponse, result)

    @app.post("/v1/classify", response_model=ClassifyResponse, responses=_ERROR_RESPONSES, tags=["library"])
    async def classify(body: ClassifyRequest, request: Request) -> dict[str, Any]:
        """A label distribution from the model's next-token log-probabilities."""
        result: dict[str, Any] = await on_llm(
            request,
            lambda: engine.classify(
                body.text, body.labels, template=body.template, knowledge=body.knowledge, calibrate=body.calibrate
            ),
        )
        return result

    @app.post(
        "/v1/chat/completions",
        response_model=ChatCompletionResponse,
        responses={**_ERROR_RESPONSES, 200: {"content": {"text/event-stream": {}}}},
        tags=["openai"],
    )
    async def chat(body: ChatCompletionRequest, request: Request) -> Any:
        """OpenAI-compatible chat: the last user message is the question. ``ragsieve_trace`` holds
        the full answer and trace; with ``stream: true`` it comes in the last chunk before ``[DONE]``."""
        question = _question_of(body.messages)
        try:
            pipeline = engine.chosen_pipeline(body.model)
        except InputError as exc:
            raise ServiceError(404, str(exc), "invalid_request_error", code="model_not_found", param="model") from exc
        ident = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        if body.stream:
            return await stream_chat(request, body, question, pipeline, ident, created)
        answer = await run_ask(request, question, pipeline=pipeline)
        content = answer_content(answer, engine.allow_link_hosts)
        usage = _usage(answer.get("trace") or {})
        return fast_json(ChatCompletionResponse, {
            "id": ident, "object": "chat.completion", "created": created, "model": body.model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": usage, "ragsieve_trace": answer,
        })

    async def stream_chat(
        request: Request, body: ChatCompletionRequest, question: str, pipeline: str, ident: str, created: int
    ) -> StreamingResponse:
        """``stream: true``: the answer's tokens as the model generates them (OpenAI chunks), a
        notice when the checks withdraw streamed text, the rest of the checked content and its
        sources, then a last chunk with usage and ``ragsieve_trace``, and ``[DONE]``. A failure
        after the stream began is an OpenAI-style ``{"error": ...}`` event."""
        events = await stream_on_llm(request, question, pipeline=pipeline)

        def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
            chunk = {
                "id": ident, "object": "chat.completion.chunk", "created": created, "model": body.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra,
            }
            return f"data: {json.dumps(chunk, ensure_ascii=False, default=str)}\n\n"

        async def stream() -> AsyncIterator[str]:
            yield event({"role": "assistant", "content": ""})
            content = ChatContent()
            answer: dict[str, Any] | None = None
            try:
                async for item in events:
                    kind = item.get("kind")
                    if kind == "token":
                        piece = content.token(str(item.get("text", "")))
                        if piece:
                            yield event({"content": piece})
                    elif kind == "retracted" and item.get("replacement") == "regenerated":
                        yield event({"content": content.withdraw(str(item.get("reason", "")))})
                    elif kind == "answer":
                        answer = item["answer"]
            except RagsieveError as exc:
                status, type_, _ = error_for(exc)
                error = {"error": {"message": without_paths(str(exc)), "type": type_, "code": status}}
                yield f"data: {json.dumps(error, ensure_ascii=False)}\n\n"
                return
            except ClientGoneError:
                return
            if answer is None:  # pragma: no cover - engine.ask always ends with its answer
                return
            for piece in _chunk_text(content.rest(answer_content(answer, engine.allow_link_hosts))):
                yield event({"content": piece})
            yield event({}, "stop", usage=_usage(answer.get("trace") or {}), ragsieve_trace=answer)
            yield "data: [DONE]\n\n"

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )

    add_passage_route(app, engine, in_threadpool)
    return app


# ---------------------------------------------------------------------- cited passages
class PassageResponse(BaseModel):
    """A cited passage: its text, where it came from, and a link that opens the source."""

    id: str
    text: str
    citation: str
    source: str = ""
    domain: str = ""
    title: str = ""
    path: str | None = None
    page: int | None = None
    page_label: str | None = None
    heading: list[str] | None = None  # the heading path, outermost first
    char_start: int | None = None
    char_end: int | None = None
    url: str | None = None
    # http(s) for a record with an address; file:// (with #page=N for a PDF page) for a file the
    # user indexed, only to a client on this machine (a file link opens nothing elsewhere, and the
    # indexed folder's absolute path is not sent beyond it).
    link: str | None = None
    index_generation: str | None = None


def _is_local_client(request: Request) -> bool:
    import ipaddress

    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host in {"localhost", "testclient"}  # starlette's TestClient calls itself "testclient"


def passage_of(index: Any, chunk_id: str, local: bool) -> dict[str, Any]:
    """The passage ``chunk_id`` names in ``index``, as :class:`PassageResponse` fields.

    The id is only ever looked up in the index, never used as a path, so no request can read a
    file the index does not hold; an unknown id is a 404.
    """
    from ragsieve.citations import Citation, citation_uri, format_citation

    try:
        chunk = index.get(chunk_id)
    except (InputError, KeyError, IndexError, LookupError) as exc:
        raise ServiceError(
            404, f"no passage with id {chunk_id!r} in the served index; take ids from /v1/search or /v1/ask",
            "invalid_request_error", code="passage_not_found", param="chunk_id",
        ) from exc
    citation = Citation.from_chunk(chunk)
    link = None
    if citation.url or local:
        try:
            root = getattr(index, "corpus_root", None)
        except Exception:  # a store without a folder: no file link
            root = None
        link = citation_uri(citation, root)
        if link and not local and not link.startswith(("http://", "https://")):
            link = None
    return {
        "id": chunk.id, "text": chunk.text, "citation": format_citation(citation),
        "source": chunk.source or "", "domain": chunk.domain or "", "title": chunk.title or "",
        **chunk.location(), "link": link,
    }


def add_passage_route(app: FastAPI, engine: Engine, in_threadpool: Callable[..., Awaitable[Any]]) -> None:
    """``GET /v1/passages/{chunk_id}``: the cited passage (guarded like every data route: API key,
    Host allow-list, read from the snapshot being served)."""

    def lookup(chunk_id: str, local: bool, access: Access) -> dict[str, Any]:
        with engine.using() as snap:
            # A passage the key may not read is not found, exactly as an id the index lacks.
            index = engine.scoped_index(snap, access)
            return {**passage_of(index, chunk_id, local), "index_generation": snap.generation}

    @app.get(
        PASSAGES_PATH + "/{chunk_id:path}", response_model=PassageResponse,
        responses={k: v for k, v in _ERROR_RESPONSES.items() if k in (401, 404, 421, 503)}, tags=["library"],
    )
    async def passage(chunk_id: str, request: Request) -> Response:
        """The text and source location of one passage by chunk id (a citation's target), with a
        link that opens its source: the record's http(s) address, or a ``file://`` link to the
        indexed file for a client on this machine."""
        result: dict[str, Any] = await in_threadpool(
            lookup, chunk_id=chunk_id, local=_is_local_client(request), access=request_access(request.scope)
        )
        return fast_json(PassageResponse, result)
