"""The service's guards: body limit, Host allow-list, security headers, paths kept out of the
public health answer, escaped Sources, slow and stalled clients, and the LLM lane's cancellation."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from tests.serve.fakes import ServerThread, fake_engine, write_index_dir

from ragsieve.cancel import GenerationCancelledError, check_cancelled
from ragsieve.serve.app import ServeSettings, answer_content, create_app
from ragsieve.serve.cli import host_allow_list
from ragsieve.serve.guard import allowed_hosts_for
from ragsieve.serve.queue import DeadlineExceededError, LLMQueue
from ragsieve.serve.server import ConnectionLimits, guarded_protocol


@pytest.fixture()
def index_dir(tmp_path: Path) -> Path:
    return write_index_dir(tmp_path / "idx")


def _client(index_dir: Path, **settings: Any) -> TestClient:
    return TestClient(create_app(fake_engine(index_dir), ServeSettings(**settings)))


# ---------------------------------------------------------------------- body limit
def test_a_body_over_the_limit_gets_413_naming_the_limit(index_dir: Path) -> None:
    body = b'{"query": "' + b"x" * 5000 + b'"}'
    with _client(index_dir, max_body_bytes=2048) as client:
        declared = client.post("/v1/search", content=body, headers={"Content-Type": "application/json"})

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted while it streams
            for i in range(0, len(body), 512):
                yield body[i : i + 512]

        streamed = client.post("/v1/search", content=chunks(), headers={"Content-Type": "application/json"})
        small = client.post("/v1/search", json={"query": "graphene"})
    for resp in (declared, streamed):
        assert resp.status_code == 413, resp.text
        assert "2048 bytes" in resp.json()["error"]["message"]
    assert small.status_code == 200


def test_a_stalled_body_gets_408(index_dir: Path) -> None:
    app = create_app(fake_engine(index_dir), ServeSettings(body_timeout_s=0.5))
    with ServerThread(app) as server, socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{\"query\""
        )
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 408"), reply[:80]


# ---------------------------------------------------------------------- Host allow-list
def test_a_rebound_host_name_is_refused(index_dir: Path) -> None:
    allowed = host_allow_list("127.0.0.1", ["my-box.lan"])
    assert allowed is not None
    with _client(index_dir, allowed_hosts=allowed) as client:
        attacker = client.post("/v1/search", json={"query": "x", "k": 100}, headers={"Host": "attacker.example:8000"})
        answers = {
            host: client.post("/v1/search", json={"query": "carbon"}, headers={"Host": host}).status_code
            for host in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000", "LOCALHOST", "my-box.lan:8000")
        }
        health = client.get("/v1/health", headers={"Host": "attacker.example"})
    assert attacker.status_code == 421 and "--allowed-host" in attacker.json()["error"]["message"]
    assert "hits" not in attacker.text
    assert set(answers.values()) == {200}, answers
    assert health.status_code == 421


def test_the_allow_list_is_on_by_default_for_loopback_binds_only() -> None:
    assert host_allow_list("127.0.0.1", []) == frozenset({"127.0.0.1", "localhost", "::1"})
    assert host_allow_list("::1", []) == frozenset({"127.0.0.1", "localhost", "::1"})
    assert host_allow_list("0.0.0.0", []) is None  # exposed binds need an API key instead
    assert "example.org" in (host_allow_list("0.0.0.0", ["example.org"]) or ())
    assert allowed_hosts_for("127.0.0.2", ["A.example."]) >= {"127.0.0.2", "a.example"}


# ---------------------------------------------------------------------- headers, paths, sources
def test_the_page_is_served_with_csp_nosniff_and_no_framing(index_dir: Path) -> None:
    with _client(index_dir) as client:
        page = client.get("/")
        api = client.get("/v1/health")
    csp = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
    # no image from another site: an answer's outside image could carry the question away
    assert "img-src 'self' data:;" in csp and "img-src *" not in csp and "https:" not in csp
    script = re.search(r"<script>(.*?)</script>", page.text, re.DOTALL)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    assert f"'sha256-{digest}'" in csp  # the page's own script runs, nothing else
    for resp in (page, api):
        assert resp.headers["x-content-type-options"] == "nosniff"
        assert resp.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in api.headers["content-security-policy"]


def test_health_names_no_file_system_path(tmp_path: Path) -> None:
    index_dir = write_index_dir(tmp_path / "secret-place" / "idx")
    engine = fake_engine(index_dir)
    with TestClient(create_app(engine, ServeSettings())) as client:
        client.post("/v1/search", json={"query": "carbon"})
        engine.problem = f"reloading failed (index file {index_dir}/generations/g1/dense.faiss is corrupt)"
        body = client.get("/v1/health").json()
    assert "index_dir" not in body
    assert str(tmp_path) not in str(body) and "secret-place" not in str(body)
    assert body["problem"] and "dense.faiss" in body["problem"]


def test_document_controlled_text_is_inert_in_the_sources_list() -> None:
    answer = {
        "answer": "It is carbon [1].",
        "cited_ids": ["a"],
        "evidence": [
            {"id": "a", "title": "[click](javascript:alert(1)) <img src=x onerror=alert(1)>\n\nSources: fake",
             "source": "evil<script>.md"},
        ],
    }
    text = answer_content(answer)
    sources = text.split("Sources:\n", 1)[1]
    assert sources.count("\n") == 0  # one line per source: a title cannot forge more entries
    assert "<" not in sources and ">" not in sources
    assert "](" not in sources  # no live Markdown link


# ---------------------------------------------------------------------- slow clients
def _base(name: str) -> Any:
    if name == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol
    pytest.importorskip("httptools")
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    return HttpToolsProtocol


def _serve_guarded(app: Any, limits: ConnectionLimits, base: str = "httptools") -> ServerThread:
    server = ServerThread(app)
    server.server.config.http = guarded_protocol(limits, _base(base))
    server.server.config.limit_concurrency = limits.max_connections
    return server


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1024) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("base", ["httptools", "h11"])
def test_stalled_clients_are_dropped_and_the_service_keeps_answering(index_dir: Path, base: str) -> None:
    app = create_app(fake_engine(index_dir), ServeSettings())
    limits = ConnectionLimits(header_timeout_s=1.0, max_connections=64)
    with _serve_guarded(app, limits, base) as server:
        stalled = []
        for i in range(40):  # half a request line, half the headers, or nothing at all
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall([b"", b"POST /v1/sea", b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-"][i % 3])
            stalled.append(sock)
        start = time.monotonic()
        health = httpx.get(f"{server.url}/v1/health", timeout=5)
        closed = [_closed_within(sock, max(0.1, 4.0 - (time.monotonic() - start))) for sock in stalled]
        elapsed = time.monotonic() - start
        for sock in stalled:
            sock.close()
        after = httpx.get(f"{server.url}/v1/health", timeout=5)
    assert health.status_code == 200 and after.status_code == 200
    assert all(closed), f"{closed.count(False)} stalled connections still open after {elapsed:.1f} s"


def test_connections_over_the_cap_are_refused(index_dir: Path) -> None:
    app = create_app(fake_engine(index_dir), ServeSettings())
    with _serve_guarded(app, ConnectionLimits(header_timeout_s=30.0, max_connections=4)) as server:
        socks = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(10)]
        time.sleep(0.3)
        closed = [_closed_within(sock, 0.5) for sock in socks]
        for sock in socks:
            sock.close()
    assert closed.count(True) >= 6, closed
    assert closed[:4] == [False] * 4


# ---------------------------------------------------------------------- the LLM lane
def _cooperative_job(seen: dict[str, Any], limit_s: float = 5.0) -> Any:
    def job() -> str:
        end = time.monotonic() + limit_s
        try:
            while time.monotonic() < end:  # a generation loop: one "token" per 10 ms
                check_cancelled()
                time.sleep(0.01)
        except GenerationCancelledError as exc:
            seen["cancelled_at"] = time.monotonic()
            seen["reason"] = exc.reason
            raise
        return "finished"

    return job


def test_a_timed_out_request_cancels_its_llm_call_and_frees_the_lane() -> None:
    async def scenario() -> tuple[dict[str, Any], float, str]:
        queue = LLMQueue(capacity=4)
        seen: dict[str, Any] = {}
        start = time.monotonic()
        with pytest.raises(DeadlineExceededError):
            await queue.run(_cooperative_job(seen), deadline=time.monotonic() + 0.3, deadline_s=0.3)
        nxt = await queue.run(lambda: "next", deadline=time.monotonic() + 2.0, deadline_s=2.0)
        return seen, time.monotonic() - start, nxt

    seen, elapsed, nxt = asyncio.run(scenario())
    assert nxt == "next"
    assert "deadline" in seen["reason"]
    assert elapsed < 1.5, elapsed  # not the job's full 5 s


def test_a_client_that_leaves_cancels_its_running_llm_call() -> None:
    async def scenario() -> dict[str, Any]:
        queue = LLMQueue(capacity=4)
        seen: dict[str, Any] = {}

        async def gone() -> None:
            await asyncio.sleep(0.2)

        from ragsieve.serve.queue import ClientGoneError

        with pytest.raises(ClientGoneError):
            await queue.run(_cooperative_job(seen), deadline=time.monotonic() + 10, deadline_s=10, disconnected=gone)
        await queue.run(lambda: None, deadline=time.monotonic() + 2.0, deadline_s=2.0)
        return seen

    seen = asyncio.run(scenario())
    assert "disconnected" in seen["reason"]


def test_health_is_degraded_while_the_llm_lane_is_stuck(index_dir: Path) -> None:
    app = create_app(fake_engine(index_dir), ServeSettings(deadline_s=0.3))
    release = threading.Event()
    queue: LLMQueue = app.state.queue
    with TestClient(app) as client:
        for _ in range(100):
            if client.get("/v1/health").json()["status"] == "ok":
                break
            time.sleep(0.01)

        async def hung() -> None:
            with pytest.raises(DeadlineExceededError):
                # a backend that never checks for cancellation
                await queue.run(lambda: release.wait(10), deadline=time.monotonic() + 0.3, deadline_s=0.3)

        client.portal.call(hung)  # type: ignore[union-attr]
        stuck = client.get("/v1/health").json()
        release.set()
        for _ in range(200):
            recovered = client.get("/v1/health").json()
            if recovered["status"] == "ok":
                break
            time.sleep(0.01)
    assert stuck["status"] == "degraded" and "past its deadline" in stuck["problem"]
    assert recovered["status"] == "ok"


def test_an_idle_keep_alive_connection_is_not_cut_but_a_stalled_next_request_is(index_dir: Path) -> None:
    app = create_app(fake_engine(index_dir), ServeSettings())
    request = b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with (
        _serve_guarded(app, ConnectionLimits(header_timeout_s=1.0, keep_alive_s=30)) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock,
    ):
        sock.sendall(request)
        first = sock.recv(65536)
        time.sleep(1.5)  # idle past the header timeout: keep-alive governs an idle connection
        sock.sendall(request)
        second = sock.recv(65536)
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHo")  # then a next request that stalls
        cut = _closed_within(sock, 3.0)
    assert first.startswith(b"HTTP/1.1 200") and second.startswith(b"HTTP/1.1 200")
    assert cut
