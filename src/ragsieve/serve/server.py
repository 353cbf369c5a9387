"""uvicorn settings that keep slow or stalled clients from holding the service.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) and answers 503 past
``limit_concurrency``, but a client that connects and sends half a request line or half its
headers is kept open forever. :func:`guarded_protocol` adds what is missing on top of uvicorn's
own HTTP protocol class (httptools or h11, whichever uvicorn would pick):

- a **header timeout**: a connection whose request headers are not complete ``header_timeout_s``
  after it opened (or after its first byte following a finished response) is closed;
- a **connection cap**: connections beyond ``max_connections`` are closed as soon as they open.

The body read timeout and the body size limit are ASGI middleware
(:class:`ragsieve.serve.guard.BodyLimitMiddleware`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ConnectionLimits:
    """Per-connection limits of ``ragsieve serve``."""

    header_timeout_s: float = 10.0
    max_connections: int = 512
    keep_alive_s: int = 30


def _base_protocol() -> type[Any]:
    try:
        import httptools  # noqa: F401  (the protocol needs it at run time)
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol


def guarded_protocol(limits: ConnectionLimits, base: type[Any] | None = None) -> type[Any]:
    """uvicorn's HTTP protocol class with a header timeout and a connection cap."""
    parent = base or _base_protocol()

    class GuardedProtocol(parent):  # type: ignore[misc, valid-type]
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                # Over the cap: refuse at once rather than hold a socket and buffers for it.
                transport.close()
                return
            self._arm_header_timer()

        def _arm_header_timer(self) -> None:
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(
                    limits.header_timeout_s, self._headers_overdue, self.cycle
                )

        def _disarm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_overdue(self, cycle_then: Any) -> None:
            self._header_timer = None
            if self.cycle is cycle_then and not self.transport.is_closing():
                # No request's headers completed since the timer started: a stalled client.
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            if self.cycle is None or self.cycle.response_complete:
                self._arm_header_timer()  # the start of a new request: its headers are due
            super().data_received(data)

        def on_response_complete(self) -> None:
            self._disarm_header_timer()
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_header_timer()
            super().connection_lost(exc)

    GuardedProtocol.__name__ = GuardedProtocol.__qualname__ = f"Guarded{parent.__name__}"
    return GuardedProtocol


def uvicorn_config(app: Any, *, host: str, port: int, limits: ConnectionLimits, graceful_s: int, **extra: Any) -> Any:
    """A ``uvicorn.Config`` for ``app`` with the limits applied."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=extra.pop("log_level", "warning"),
        http=guarded_protocol(limits),
        # In-flight requests get up to one deadline to finish after SIGTERM/Ctrl-C.
        timeout_graceful_shutdown=graceful_s,
        # Longer than a client's usual pause (a 429's Retry-After): a keep-alive connection closed
        # by the server just as the client reuses it fails that request.
        timeout_keep_alive=limits.keep_alive_s,
        # At the cap, new requests get 503 from uvicorn itself.
        limit_concurrency=limits.max_connections,
        **extra,
    )
