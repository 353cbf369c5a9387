"""ASGI guards in front of the service: Host allow-list, request-body limit and read timeout,
and security headers. Plain ASGI (no BaseHTTPMiddleware) so streamed responses pass untouched.

- **Host allow-list** (DNS rebinding): a page on ``attacker.example`` whose name is re-pointed at
  127.0.0.1 is same-origin with the service as far as the browser knows, but its requests still
  carry ``Host: attacker.example``. Only the names in the allow-list are answered; others get 421.
- **Body limit**: the body is counted while it streams in and the request is refused with 413 as
  soon as it passes the limit (or at once when ``Content-Length`` says it will), so a huge body is
  never held in memory. A body not complete ``body_timeout_s`` after the request's headers gets
  408 and the connection is closed: the limit is on the whole body, so a client dripping a byte
  just often enough to never pause for long still cannot hold a connection open.
- **Security headers** on every answer: ``X-Content-Type-Options: nosniff``, no framing
  (``X-Frame-Options`` and CSP ``frame-ancestors 'none'``), no referrer; the page gets a strict
  Content-Security-Policy allowing only its own inline script and style (by hash) and calls to
  its own origin.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the core install (no serve extra) can import this module
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
# What a request without the right key is told, by the service and by the MCP server alike.
API_KEY_MISSING = "missing or wrong API key; send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'"
_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)


def _error(status: int, message: str, type_: str, close: bool = False) -> tuple[Message, Message]:
    """An error answer. ``close`` ends the connection after it (a stalled or malformed request);
    otherwise uvicorn reads and discards the rest of an unread body, so the client is not reset
    before it has read the answer."""
    body = json.dumps({"error": {"message": message, "type": type_, "code": None, "param": None}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    return (
        {"type": "http.response.start", "status": status, "headers": headers},
        {"type": "http.response.body", "body": body, "more_body": False},
    )


def normalise_host(host: str) -> str:
    """The host part of a ``Host`` header or a bind address, lower-case, without port or brackets."""
    value = host.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    # A fully-qualified name's trailing dot ("localhost." or "localhost.:8000") names the same host.
    return value.rstrip(".")


def allowed_hosts_for(bind_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The names a loopback-bound service answers to: the bound address, ``localhost``,
    ``127.0.0.1``, ``::1`` and any ``extra`` (``--allowed-host``)."""
    return frozenset(normalise_host(h) for h in (bind_host, *LOOPBACK_NAMES, *extra) if h.strip())


class HostAllowListMiddleware:
    """Answer only requests whose ``Host`` names one of ``allowed`` (421 otherwise, 400 without one)."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str]) -> None:
        self.app = app
        self.allowed = frozenset(normalise_host(h) for h in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hosts = [value for name, value in scope.get("headers", []) if name == b"host"]
        if len(hosts) != 1:
            start, body = _error(400, "the request needs exactly one Host header", "invalid_request_error", close=True)
        else:
            host = normalise_host(hosts[0].decode("latin-1"))
            if host in self.allowed:
                await self.app(scope, receive, send)
                return
            start, body = _error(
                421,
                "this server does not answer to that Host name (a DNS-rebinding guard); use "
                + ", ".join(sorted(self.allowed))
                + ", or start the server with --allowed-host NAME",
                "invalid_request_error",
            )
        await send(start)
        await send(body)


class BodyLimitMiddleware:
    """Refuse request bodies over ``max_bytes`` while they stream in, before anything parses them."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, body_timeout_s: float, on_timeout: Callable[[str], None] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.body_timeout_s = body_timeout_s
        self.on_timeout = on_timeout

    def _too_large(self) -> tuple[Message, Message]:
        return _error(
            413,
            f"the request body exceeds the server's limit of {self.max_bytes} bytes; send a smaller body "
            "(the server's --max-body-bytes sets the limit)",
            "invalid_request_error",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared < 0:
                    start, body = _error(
                        400, "the Content-Length header is not a number", "invalid_request_error", close=True
                    )
                    await send(start)
                    await send(body)
                    return
                if declared > self.max_bytes:
                    for message in self._too_large():
                        await send(message)
                    return
        # Read the whole body here, counting as it comes: at most max_bytes is ever held.
        chunks: list[bytes] = []
        size = 0
        more = True
        disconnected: Message | None = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout_s
        while more:
            try:
                message = await asyncio.wait_for(receive(), timeout=max(deadline - loop.time(), 0.0))
            except asyncio.TimeoutError:
                if self.on_timeout is not None:
                    self.on_timeout("body")
                start, body = _error(
                    408, f"the request body did not arrive in full within {self.body_timeout_s:g} s; "
                    "send it at once (a client on a slow link can ask the operator to raise --body-timeout)",
                    "timeout_error", close=True,
                )
                await send(start)
                await send(body)
                return
            if message["type"] == "http.disconnect":
                disconnected = message
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                chunks.clear()
                for reply in self._too_large():
                    await send(reply)
                return
            if chunk:
                chunks.append(chunk)
            more = bool(message.get("more_body", False))
        if disconnected is not None:
            return  # nobody is left to answer
        buffered: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]
        chunks.clear()

        async def replay() -> Message:
            if buffered:
                return buffered.pop()
            return await receive()

        await self.app(scope, replay, send)


@lru_cache(maxsize=4)
def page_csp(page: str) -> str:
    """A Content-Security-Policy for ``page`` that allows exactly its inline scripts and styles."""
    hashes: dict[str, list[str]] = {"script": [], "style": []}
    for kind, content in _INLINE.findall(page):
        digest = base64.b64encode(hashlib.sha256(content.encode("utf-8")).digest()).decode()
        hashes[kind].append(f"'sha256-{digest}'")
    return (
        "default-src 'none'; "
        f"script-src {' '.join(hashes['script']) or chr(39) + 'none' + chr(39)}; "
        f"style-src {' '.join(hashes['style']) or chr(39) + 'none' + chr(39)}; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )


API_CSP = "default-src 'none'; frame-ancestors 'none'"
# The API docs page (/docs, /redoc) loads its scripts from a CDN, so it gets no CSP beyond framing.
_DOCS_CSP = "frame-ancestors 'none'"


class SecurityHeadersMiddleware:
    """Add nosniff, no-framing and no-referrer headers to every answer, and a CSP to those
    that set none themselves (the page sets its own)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        docs = scope.get("path", "") in ("/docs", "/redoc", "/docs/oauth2-redirect")

        async def _send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                extra = [
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"no-referrer"),
                ]
                if b"content-security-policy" not in names:
                    extra.append((b"content-security-policy", (_DOCS_CSP if docs else API_CSP).encode()))
                headers.extend(item for item in extra if item[0] not in names)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, _send)
