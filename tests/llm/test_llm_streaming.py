"""Streamed generation: the OpenAI-compatible backend over server-sent events (a fake loopback
server: pieces, usage, cancellation and the deadline while a read is blocked, rejections), and
the llama.cpp backend's stream against its own ``generate`` (the bundled model, slow)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ragsieve.cancel import CancelToken, GenerationCancelledError, cancel_scope
from ragsieve.errors import ModelError
from ragsieve.llm.base import SupportsStreaming, generate_streaming
from ragsieve.llm.openai_http import OpenAICompatibleLLM

PIECES = ["Graphene ", "is ", "carbon."]


class SSEState:
    def __init__(self) -> None:
        self.mode = "ok"  # "ok" | "hang" (one piece, then silence) | "reject"
        self.payloads: list[dict[str, Any]] = []
        self.closed_early = threading.Event()


def _handler(state: SSEState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _event(self, data: Any) -> None:
            self.wfile.write(f"data: {json.dumps(data) if not isinstance(data, str) else data}\n\n".encode())
            self.wfile.flush()

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.payloads.append(body)
            if state.mode == "reject":
                raw = b'{"error": {"message": "stream is not supported"}}'
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                self._event({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
                for n, piece in enumerate(PIECES):
                    self._event({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
                    if state.mode == "hang" and n == 0:
                        for _ in range(100):  # silence for up to 10 s; a closed socket ends it
                            time.sleep(0.1)
                            self.wfile.write(b": keep-alive\n\n")
                            self.wfile.flush()
                        return
                self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 7, "completion_tokens": 3}})
                self._event("[DONE]")
            except (BrokenPipeError, ConnectionResetError):
                state.closed_early.set()

    return Handler


@pytest.fixture()
def sse_server() -> Iterator[tuple[str, SSEState]]:
    state = SSEState()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


def test_openai_backend_streams_the_pieces_and_reads_usage(sse_server) -> None:
    url, state = sse_server
    llm = OpenAICompatibleLLM("m", url, timeout_s=10)
    assert isinstance(llm, SupportsStreaming)
    seen: list[str] = []
    out = generate_streaming(llm, "What is graphene?", seen.append, max_tokens=16)
    assert seen == PIECES and out.text == "".join(PIECES)
    assert (out.prompt_tokens, out.completion_tokens, out.finish_reason) == (7, 3, "stop")
    assert state.payloads[0]["stream"] is True and state.payloads[0]["max_tokens"] == 16


def test_openai_stream_stops_when_its_job_is_cancelled_during_a_blocked_read(sse_server) -> None:
    url, state = sse_server
    state.mode = "hang"
    llm = OpenAICompatibleLLM("m", url, timeout_s=30)
    token = CancelToken()
    seen: list[str] = []

    def first_piece(piece: str) -> None:
        seen.append(piece)
        threading.Timer(0.3, token.cancel, args=("the client disconnected",)).start()

    start = time.monotonic()
    with cancel_scope(token), pytest.raises(GenerationCancelledError, match="disconnected"):
        generate_streaming(llm, "q", first_piece)
    assert seen == PIECES[:1] and time.monotonic() - start < 5
    assert state.closed_early.wait(5)  # the server saw the connection go


def test_openai_stream_ends_at_its_deadline_and_names_rejections(sse_server) -> None:
    url, state = sse_server
    state.mode = "hang"
    start = time.monotonic()
    with pytest.raises(ModelError, match="did not finish streaming within 1 s"):
        generate_streaming(OpenAICompatibleLLM("m", url, timeout_s=1), "q", lambda _: None)
    assert time.monotonic() - start < 5
    state.mode = "reject"
    with pytest.raises(ModelError, match="stream: true"):
        generate_streaming(OpenAICompatibleLLM("m", url, timeout_s=5), "q", lambda _: None)


@pytest.mark.slow
def test_llama_cpp_stream_is_the_generated_answer(llm) -> None:
    prompt = [{"role": "user", "content": "Name three colours of the rainbow."}]
    whole = llm.generate(prompt, max_tokens=24)
    pieces: list[str] = []
    streamed = generate_streaming(llm, prompt, pieces.append, max_tokens=24)
    assert len(pieces) > 3 and "".join(pieces) == whole.text == streamed.text
    assert streamed.prompt_tokens == whole.prompt_tokens and streamed.finish_reason == whole.finish_reason
    token = CancelToken()
    got: list[str] = []

    def cancel_after_first(piece: str) -> None:
        got.append(piece)
        token.cancel("test")

    with cancel_scope(token), pytest.raises(GenerationCancelledError):
        generate_streaming(llm, prompt, cancel_after_first, max_tokens=24)
    assert len(got) == 1
    assert llm.generate(prompt, max_tokens=24).text == whole.text  # the model is usable afterwards


def test_a_server_that_ignores_stream_true_still_gives_the_whole_reply():
    from tests.chat_server import serve_chat

    from ragsieve.config import LLMConfig
    from ragsieve.llm import load_llm

    with serve_chat() as chat:
        llm = load_llm(LLMConfig(backend="openai", base_url=chat.url, model="fake"))
        pieces: list[str] = []
        stream = llm.generate_stream([{"role": "user", "content": "Evidence:\n[1] a passage\nQuestion: q"}])
        while True:
            try:
                pieces.append(next(stream))
            except StopIteration as done:
                generation = done.value
                break
    assert "".join(pieces) == generation.text == "The passages state it [1]."
