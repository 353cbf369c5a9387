"""A fault-injecting HTTP server on 127.0.0.1 (random port) for testing HTTP clients.

Each request takes the next scripted :class:`Fault` (the last one repeats): a normal JSON reply,
a status with headers, a raw body, a hang, a body or headers dripped byte by byte, or a reply
that echoes the request's ``Authorization`` header. Loopback only; every slow behaviour stops
when the server closes, so a test never outlives its fixture.

Use it through the ``fault_server`` fixture in ``tests/conftest.py``::

    def test_retry(fault_server):
        fault_server.script(Fault.error(503), Fault.json({"ok": True}))
        post_json(httpx.Client(base_url=fault_server.url), ...)
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Fault:
    """What the server does with one request."""

    kind: str  # "reply" | "hang" | "drip" | "drip-headers" | "echo-auth"
    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    interval_s: float = 0.2  # pause between dripped bytes

    @classmethod
    def json(cls, obj: Any, status: int = 200, **headers: str) -> Fault:
        return cls("reply", status, json.dumps(obj).encode(), (("Content-Type", "application/json"), *headers.items()))

    @classmethod
    def raw(cls, body: bytes | str, status: int = 200, **headers: str) -> Fault:
        data = body.encode() if isinstance(body, str) else body
        return cls("reply", status, data, tuple(headers.items()))

    @classmethod
    def error(cls, status: int, retry_after: str | None = None, body: str = "") -> Fault:
        headers = (("Retry-After", retry_after),) if retry_after is not None else ()
        return cls("reply", status, body.encode(), headers)

    @classmethod
    def hang(cls) -> Fault:
        """Read the request, then send nothing (not even the status line) until the server
        closes or the client goes away; the time it went is appended to ``FaultServer.closed``."""
        return cls("hang")

    @classmethod
    def drip(cls, obj: Any, interval_s: float = 0.2) -> Fault:
        """Headers at once, then the JSON body one byte every ``interval_s``."""
        return cls("drip", 200, json.dumps(obj).encode(), interval_s=interval_s)

    @classmethod
    def drip_headers(cls, interval_s: float = 0.2) -> Fault:
        """The status line and headers one byte every ``interval_s`` (never finishing)."""
        return cls("drip-headers", interval_s=interval_s)

    @classmethod
    def echo_auth(cls, status: int = 401) -> Fault:
        """A JSON error whose message repeats the request's Authorization header verbatim."""
        return cls("echo-auth", status)


@dataclass
class FaultServer:
    url: str
    faults: list[Fault] = field(default_factory=lambda: [Fault.json({})])
    requests: list[tuple[str, dict[str, Any], dict[str, str]]] = field(default_factory=list)
    # time.monotonic() at which the client of a hanging request closed its connection
    closed: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, *faults: Fault) -> FaultServer:
        """Answer the next requests with ``faults`` in order; the last one repeats."""
        with self._lock:
            self.faults = list(faults)
        return self

    def next_fault(self) -> Fault:
        with self._lock:
            return self.faults.pop(0) if len(self.faults) > 1 else self.faults[0]


def _handler(server: FaultServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _drip(self, data: bytes, interval_s: float) -> None:
            for i in range(len(data)):
                if server.stop.wait(interval_s):
                    return
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()

        def _wait_for_the_client_to_leave(self) -> None:
            sock = self.connection
            while not server.stop.wait(0.02):
                readable, _, _ = select.select([sock], [], [], 0)
                if not readable:
                    continue
                try:
                    gone = sock.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    gone = True
                if gone:
                    server.closed.append(time.monotonic())
                    return
                sock.recv(65536)  # a pipelined byte: not a close

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                payload = json.loads(raw) if raw else {}
            except ValueError:
                payload = {"<raw>": raw.decode(errors="replace")}
            server.requests.append((self.path, payload, dict(self.headers)))
            fault = server.next_fault()
            # the client giving up mid-reply is what most faults test
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._answer(fault)

        def _answer(self, fault: Fault) -> None:
            if fault.kind == "hang":
                self._wait_for_the_client_to_leave()
                return
            if fault.kind == "drip-headers":
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b"X-Slow: y" * 1000
                self._drip(head, fault.interval_s)
                return
            body, status, headers = fault.body, fault.status, list(fault.headers)
            if fault.kind == "echo-auth":
                auth = self.headers.get("Authorization", "")
                body = json.dumps({"error": {"message": f"invalid key in header '{auth}'"}}).encode()
                headers.append(("Content-Type", "application/json"))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if fault.kind == "drip":
                self._drip(body, fault.interval_s)
            else:
                self.wfile.write(body)

    return Handler


@contextmanager
def serve_faults() -> Iterator[FaultServer]:
    """Run a :class:`FaultServer` on 127.0.0.1 with an OS-chosen port for the ``with`` block."""
    state = FaultServer(url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


__all__ = ["Fault", "FaultServer", "serve_faults"]
