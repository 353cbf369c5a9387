"""uvicorn settings that keep slow or stalled clients from holding the service.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) and answers 503 past
``limit_concurrency``, but a client that connects and sends half a request line or half its
headers is kept open forever. :func:`guarded_protocol` adds what is missing on top of uvicorn's
own HTTP protocol class (httptools or h11, whichever uvicorn would pick):

- a **header timeout**: a connection whose request headers are not complete ``header_timeout_s``
  after it opened (or after its first byte following a finished response) is closed, however
  steadily it drips: the limit is on the total time, not on a pause;
- a **connection cap**: connections beyond ``max_connections`` are closed as soon as they open;
- a **per-client cap**: a client address holding ``max_connections_per_client`` connections has
  its next ones closed as soon as they open, so one slow or hostile client cannot take every
  slot of the global cap (behind a reverse proxy on the same host every client shares the
  proxy's address: raise the cap, or set it to 0 for none).

Each refusal and each timeout is counted in :class:`ConnectionStats` (``/v1/health`` and
``/metrics`` show the counts). The body's total read time and size limit are ASGI middleware
(:class:`ragsieve.serve.guard.BodyLimitMiddleware`).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ConnectionLimits:
    """Per-connection limits of ``ragsieve serve``."""

    header_timeout_s: float = 10.0
    max_connections: int = 512
    keep_alive_s: int = 30
    # 0: no per-client cap.
    max_connections_per_client: int = 64


@dataclass
class ConnectionStats:
    """Connections open now, and those refused or timed out since the start (by reason)."""

    open: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    timed_out: Counter[str] = field(default_factory=Counter)
    per_client: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def admit(self, client: str, cap: int) -> bool:
        """Count a new connection from ``client``; False (not counted) when it already holds ``cap``."""
        with self._lock:
            if cap > 0 and self.per_client[client] >= cap:
                return False
            self.per_client[client] += 1
            self.open += 1
            return True

    def leave(self, client: str) -> None:
        with self._lock:
            self.open -= 1
            self.per_client[client] -= 1
            if self.per_client[client] <= 0:
                del self.per_client[client]

    def refuse(self, reason: str) -> None:
        with self._lock:
            self.refused[reason] += 1

    def time_out(self, reason: str) -> None:
        with self._lock:
            self.timed_out[reason] += 1

    def summary(self) -> dict[str, Any]:
        """JSON-ready counts (no client addresses: health is public)."""
        with self._lock:
            return {
                "open": self.open,
                "clients": len(self.per_client),
                "refused": dict(self.refused),
                "timed_out": dict(self.timed_out),
            }


def _base_protocol() -> type[Any]:
    try:
        import httptools  # noqa: F401  (the protocol needs it at run time)
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol


def _client_of(transport: Any) -> str:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple | list) and peer:
        return str(peer[0])
    return str(peer or "")


def guarded_protocol(
    limits: ConnectionLimits, base: type[Any] | None = None, stats: ConnectionStats | None = None
) -> type[Any]:
    """uvicorn's HTTP protocol class with a header timeout, a connection cap and a per-client
    cap, counting what it refuses and times out in ``stats``."""
    parent = base or _base_protocol()
    counts = stats if stats is not None else ConnectionStats()

    class GuardedProtocol(parent):  # type: ignore[misc, valid-type]
        _header_timer: asyncio.TimerHandle | None = None
        _client: str | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                # Over the cap: refuse at once rather than hold a socket and buffers for it.
                counts.refuse("max_connections")
                transport.close()
                return
            client = _client_of(transport)
            if not counts.admit(client, limits.max_connections_per_client):
                counts.refuse("max_connections_per_client")
                transport.close()
                return
            self._client = client
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
                counts.time_out("headers")
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
            client, self._client = self._client, None
            if client is not None:
                counts.leave(client)
            super().connection_lost(exc)

    GuardedProtocol.__name__ = GuardedProtocol.__qualname__ = f"Guarded{parent.__name__}"
    return GuardedProtocol


def uvicorn_config(app: Any, *, host: str, port: int, limits: ConnectionLimits, graceful_s: int, **extra: Any) -> Any:
    """A ``uvicorn.Config`` for ``app`` with the limits applied."""
    import uvicorn

    # The app's counters (create_app makes them), so health and metrics see the refusals.
    stats = getattr(getattr(app, "state", None), "connections", None)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=extra.pop("log_level", "warning"),
        http=guarded_protocol(limits, stats=stats if isinstance(stats, ConnectionStats) else None),
        # In-flight requests get up to one deadline to finish after SIGTERM/Ctrl-C.
        timeout_graceful_shutdown=graceful_s,
        # Longer than a client's usual pause (a 429's Retry-After): a keep-alive connection closed
        # by the server just as the client reuses it fails that request.
        timeout_keep_alive=limits.keep_alive_s,
        # At the cap, new requests get 503 from uvicorn itself.
        limit_concurrency=limits.max_connections,
        **extra,
    )
