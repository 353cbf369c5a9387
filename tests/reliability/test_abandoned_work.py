"""Abandoned work stops everywhere: a request whose client left or whose deadline passed frees the
LLM lane and closes its upstream request within 2 s, whatever state the upstream request is in
(connecting, waiting for response headers that never come, streaming), for the OpenAI-compatible
client, through the service, and for the bundled llama.cpp backend."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.fault_server import Fault, FaultServer
from tests.serve.fakes import FakeIndex, ServerThread, write_index_dir

from ragsieve.cancel import CancelToken, GenerationCancelledError, cancel_scope
from ragsieve.config import PipelineConfig
from ragsieve.errors import ModelError
from ragsieve.http import make_client, post_json, stream_sse
from ragsieve.llm.openai_http import OpenAICompatibleLLM
from ragsieve.types import Answer, Trace

# The acceptance bound: lane free and upstream connection closed within this of the disconnect.
BOUND_S = 2.0


def wait_until(condition: Callable[[], Any], timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return bool(condition())


def _llm(server: FaultServer, timeout_s: float = 30.0) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM("m", server.url, api_key_env="RAGSIEVE_NO_KEY", timeout_s=timeout_s, max_retries=0)


def _cancel_once_sent(server: FaultServer, token: CancelToken, at: list[float]) -> threading.Thread:
    """Cancel ``token`` as soon as the upstream has the request (it then waits for headers)."""

    def run() -> None:
        if wait_until(lambda: server.requests, 10.0):
            at.append(time.monotonic())
            token.cancel("the client disconnected")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# ---------------------------------------------------------------------- the HTTP client
@pytest.mark.parametrize("streamed", [False, True], ids=["post_json", "stream_sse"])
def test_a_cancel_before_the_headers_closes_the_upstream_request(fault_server: FaultServer, streamed: bool) -> None:
    fault_server.script(Fault.hang())  # reads the request, never sends a status line
    llm = _llm(fault_server)
    token = CancelToken()
    cancelled_at: list[float] = []
    _cancel_once_sent(fault_server, token, cancelled_at)
    with cancel_scope(token), pytest.raises(GenerationCancelledError, match="client disconnected"):
        if streamed:
            list(llm.generate_stream("hi"))
        else:
            llm.generate("hi")
    returned = time.monotonic()
    assert returned - cancelled_at[0] < BOUND_S, "the call kept the lane after its cancellation"
    assert wait_until(lambda: fault_server.closed, BOUND_S), "the upstream request was left open"
    assert fault_server.closed[0] - cancelled_at[0] < BOUND_S


def test_a_cancel_mid_stream_closes_the_upstream_connection(fault_server: FaultServer) -> None:
    events = b"".join(b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n' for _ in range(400))
    fault_server.script(Fault("drip", 200, events, (("Content-Type", "text/event-stream"),), interval_s=0.01))
    llm = _llm(fault_server)
    token = CancelToken()
    pieces: list[str] = []
    with cancel_scope(token), pytest.raises(GenerationCancelledError):
        for piece in llm.generate_stream("hi"):
            pieces.append(piece)
            if len(pieces) == 2:
                cancelled_at = time.monotonic()
                token.cancel("the client disconnected")
    assert time.monotonic() - cancelled_at < BOUND_S
    assert len(pieces) < 50  # stopped, not read to the end


def test_a_stream_past_its_deadline_closes_the_upstream_request(fault_server: FaultServer) -> None:
    fault_server.script(Fault.hang())
    client = make_client(fault_server.url, "RAGSIEVE_NO_KEY", 0.5)
    start = time.monotonic()
    with pytest.raises(ModelError, match="did not finish streaming"):
        list(stream_sse(client, "/v1/chat/completions", {}, service="test server"))
    assert time.monotonic() - start < 0.5 + BOUND_S
    assert wait_until(lambda: fault_server.closed, BOUND_S)


def test_a_timed_out_post_closes_its_upstream_request(fault_server: FaultServer) -> None:
    fault_server.script(Fault.hang())
    client = make_client(fault_server.url, "RAGSIEVE_NO_KEY", 0.5)
    with pytest.raises(ModelError):
        post_json(client, "/v1/x", {}, service="test server", max_retries=0, backoff_s=0.1)
    timed_out = time.monotonic()
    assert wait_until(lambda: fault_server.closed, BOUND_S), "the abandoned attempt kept its connection"
    assert fault_server.closed[0] - timed_out < BOUND_S


def test_a_cancel_while_connecting_frees_the_caller_and_closes_the_connection_once_made(
    fault_server: FaultServer,
) -> None:
    """A connect that hangs (a server whose accept queue is full) cannot be interrupted, but the
    caller need not wait for it, and the connection is closed the moment it is made."""
    fault_server.script(Fault.json({"choices": [{"message": {"content": "late"}}]}))
    client = make_client(fault_server.url, "RAGSIEVE_NO_KEY", 30.0)
    tracking = client._transport._pool._network_backend
    release = threading.Event()
    made: list[Any] = []

    class StalledConnect:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
            release.wait(10)
            stream = self.inner.connect_tcp(*args, **kwargs)
            made.append(stream)
            return stream

        def sleep(self, seconds: float) -> None:
            time.sleep(seconds)

    tracking._inner = StalledConnect(tracking._inner)
    token = CancelToken()
    threading.Timer(0.2, token.cancel, args=("the client disconnected",)).start()
    start = time.monotonic()
    with cancel_scope(token), pytest.raises(GenerationCancelledError):
        post_json(client, "/v1/chat/completions", {}, service="test server", max_retries=0, backoff_s=0.1)
    assert time.monotonic() - start < 0.2 + BOUND_S
    release.set()
    assert wait_until(lambda: made, BOUND_S)
    sock = made[0].get_extra_info("socket")
    assert wait_until(lambda: sock.fileno() == -1, BOUND_S), "the late connection was not closed"
    assert not fault_server.requests, "the cancelled request was sent anyway"


def test_a_finished_request_leaves_its_pooled_connection_usable(fault_server: FaultServer) -> None:
    fault_server.script(Fault.json({"ok": 1}))
    client = make_client(fault_server.url, "RAGSIEVE_NO_KEY", 5.0)
    for _ in range(3):
        assert post_json(client, "/v1/x", {}, service="test server", max_retries=0, backoff_s=0.1) == {"ok": 1}


# ---------------------------------------------------------------------- through the service
class UpstreamPipeline:
    """A pipeline whose answer comes from the engine's (OpenAI-compatible) LLM: streamed on
    ``ask_with_events``, in one call on ``ask``."""

    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self.index: Any = None
        self.llm: Any = None

    def ask(self, question: str) -> Answer:
        return Answer(question, self.llm.generate(question).text, [], [], Trace(query=question))

    def ask_with_events(self, question: str, on_event: Callable[[Any], None]) -> Answer:
        from ragsieve.sieve.events import Token

        pieces = []
        for piece in self.llm.generate_stream(question):
            pieces.append(piece)
            on_event(Token(piece))
        return Answer(question, "".join(pieces), [], [], Trace(query=question))


def _service(tmp_path: Path, upstream: FaultServer, deadline_s: float = 60.0) -> tuple[Any, ServerThread]:
    from ragsieve.serve.app import ServeSettings, create_app
    from ragsieve.serve.engine import Engine

    index_dir = write_index_dir(tmp_path / "idx")
    config = PipelineConfig(index_dir=str(index_dir), pipeline="direct")
    engine = Engine(config, pipeline_factory=UpstreamPipeline, index_opener=FakeIndex, llm=_llm(upstream))
    app = create_app(engine, ServeSettings(deadline_s=deadline_s))
    return app, ServerThread(app)


def _post_and_leave(port: int, path: str, body: dict[str, Any]) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    data = json.dumps(body).encode()
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n".encode() + data
    )
    return sock


@pytest.mark.parametrize("path", ["/v1/ask/stream", "/v1/ask"])
def test_a_client_that_leaves_before_the_upstream_answers_frees_the_lane(
    tmp_path: Path, fault_server: FaultServer, path: str
) -> None:
    fault_server.script(Fault.hang(), Fault.json({"choices": [{"message": {"content": "the next answer"}}]}))
    app, server = _service(tmp_path, fault_server)
    with server:
        sock = _post_and_leave(server.port, path, {"question": "carbon?"})
        assert wait_until(lambda: fault_server.requests, 10.0), "the question never reached the upstream"
        sock.close()
        left = time.monotonic()
        assert wait_until(lambda: fault_server.closed, BOUND_S), "the upstream request was left open"
        assert fault_server.closed[0] - left < BOUND_S
        assert wait_until(lambda: app.state.queue.running == 0, BOUND_S), "the lane is still held"
        nxt = httpx.post(f"{server.url}/v1/ask", json={"question": "next?"}, timeout=10)
        health = httpx.get(f"{server.url}/v1/health", timeout=5).json()
    assert nxt.status_code == 200 and nxt.json()["answer"] == "the next answer"
    assert health["status"] == "ok" and health["queue_depth"] == 0


def test_a_request_past_its_deadline_closes_its_upstream_request(tmp_path: Path, fault_server: FaultServer) -> None:
    fault_server.script(Fault.hang(), Fault.json({"choices": [{"message": {"content": "the next answer"}}]}))
    app, server = _service(tmp_path, fault_server, deadline_s=0.5)
    with server:
        reply = httpx.post(f"{server.url}/v1/ask", json={"question": "carbon?"}, timeout=10)
        answered = time.monotonic()
        assert reply.status_code == 504
        assert wait_until(lambda: fault_server.closed, BOUND_S), "the upstream request was left open"
        assert fault_server.closed[0] - answered < BOUND_S
        assert wait_until(lambda: app.state.queue.running == 0, BOUND_S)
        nxt = httpx.post(f"{server.url}/v1/ask", json={"question": "next?"}, timeout=10)
    assert nxt.status_code == 200


# ---------------------------------------------------------------------- the bundled llama.cpp
@pytest.mark.slow
def test_the_bundled_llama_cpp_stops_within_the_bound_when_its_request_times_out(llm: Any) -> None:
    from ragsieve.serve.queue import DeadlineExceededError, LLMQueue

    prompt = "Write a very long story about a lighthouse keeper and the sea, chapter by chapter."

    async def scenario() -> tuple[float, str]:
        queue = LLMQueue(capacity=2)
        with pytest.raises(DeadlineExceededError):
            await queue.run(
                lambda: llm.generate(prompt, max_tokens=4000, temperature=0.7),
                deadline=time.monotonic() + 0.5, deadline_s=0.5,
            )
        gave_up = time.monotonic()
        nxt = await queue.run(lambda: "next", deadline=time.monotonic() + 30, deadline_s=30)
        return time.monotonic() - gave_up, nxt

    freed_after, nxt = asyncio.run(scenario())
    assert nxt == "next"
    assert freed_after < BOUND_S, f"llama.cpp held the lane {freed_after:.2f} s after the deadline"


@pytest.mark.slow
def test_the_bundled_llama_cpp_stream_stops_when_cancelled(llm: Any) -> None:
    token = CancelToken()
    pieces: list[str] = []
    with cancel_scope(token), pytest.raises(GenerationCancelledError):
        for piece in llm.generate_stream("Count from one to five hundred in words.", max_tokens=4000):
            pieces.append(piece)
            if len(pieces) == 3:
                cancelled_at = time.monotonic()
                token.cancel("the client disconnected")
    assert time.monotonic() - cancelled_at < BOUND_S


@pytest.mark.slow
def test_the_bundled_llama_cpp_stops_inside_a_long_prompt_evaluation(llm: Any) -> None:
    """A long prompt is evaluated in one native call that checks no Python flag; the abort flag
    stops it there (without it the evaluation runs to its end: tens of seconds on a busy CPU)."""
    prompt = " ".join(["the lighthouse keeper watched the grey sea from the tower"] * 140)
    token = CancelToken()
    started = threading.Event()

    def cancel_soon() -> None:
        started.wait(10)
        time.sleep(0.3)
        token.cancel("the client disconnected")

    threading.Thread(target=cancel_soon, daemon=True).start()
    start = time.monotonic()
    with cancel_scope(token), pytest.raises(GenerationCancelledError):
        started.set()
        llm.generate(prompt, max_tokens=4)
    assert time.monotonic() - start < 0.3 + BOUND_S
    assert llm.generate("Say hi.", max_tokens=4).text  # the model still answers afterwards


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    crypto = pytest.importorskip("cryptography")  # noqa: F841 - only to build a test certificate
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_a_cancel_before_the_headers_closes_a_tls_upstream_request(tmp_path: Path) -> None:
    """The same over TLS (an https endpoint such as a hosted API): the TLS socket is shut down."""
    import ssl

    cert, key = _self_signed(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    received, closed = threading.Event(), threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as tls:
            tls.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                data += tls.recv(4096)
            received.set()
            try:
                while tls.recv(4096):  # never answers; waits for the client to go
                    pass
            except (OSError, ssl.SSLError):
                pass
            closed.set()

    threading.Thread(target=serve, daemon=True).start()
    client = httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=ssl.create_default_context(cafile=str(cert)),
                          timeout=30)
    token = CancelToken()

    def cancel_once_sent() -> None:
        if received.wait(10):
            token.cancel("the client disconnected")

    threading.Thread(target=cancel_once_sent, daemon=True).start()
    try:
        with cancel_scope(token), pytest.raises(GenerationCancelledError):
            post_json(client, "/v1/chat/completions", {}, service="test server", max_retries=0, backoff_s=0.1)
        cancelled_at = time.monotonic()
        assert closed.wait(BOUND_S), "the TLS upstream request was left open"
        assert time.monotonic() - cancelled_at < BOUND_S
    finally:
        listener.close()
