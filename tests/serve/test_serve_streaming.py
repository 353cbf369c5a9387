"""Streaming through the service: tokens leave the server while the model is still generating
(ordering proved with a gate, not with sleeps), stage events reach /v1/ask/stream, and a client
that disconnects mid-stream cancels its LLM call and frees the model lane."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.helpers import HashEmbedder, copy_corpus
from tests.serve.fakes import ServerThread, fake_engine, write_index_dir

from ragsieve.cancel import check_cancelled, current_token
from ragsieve.config import PipelineConfig
from ragsieve.index import Index
from ragsieve.llm.base import ContinuationScore, Generation
from ragsieve.serve.app import ChatContent, ServeSettings, create_app
from ragsieve.serve.engine import Engine

REPLY = "Apollo 11 landed on the Moon in July 1969 [1]."
QUESTION = "When did Apollo 11 land on the Moon?"


class SlowStreamingLLM:
    """One word about every 0.2 s. After the first word it waits for ``gate`` (the test sets it
    when it has read that word from the HTTP stream), and records whether the gate opened, so
    the test proves the first token reached the client before the last one was generated.
    ``block=True``: after the first word it waits until its job is cancelled."""

    model_name = "slow-fake"

    def __init__(self, block: bool = False) -> None:
        self.gate = threading.Event()
        self.gate_opened: bool | None = None
        self.block = block
        self.cancelled = threading.Event()
        self.finished_at_first_read: bool | None = None
        self.done = threading.Event()

    def warm_up(self) -> None:
        pass

    def generate(self, prompt: Any, **_: Any) -> Generation:
        return Generation(REPLY, 10, len(REPLY.split()), "stop")

    def generate_stream(self, prompt: Any, **_: Any) -> Any:
        token = current_token()
        assert token is not None, "the service runs every LLM call under a cancel token"
        words = REPLY.split(" ")
        for n, word in enumerate(words):
            check_cancelled()
            yield word if n == len(words) - 1 else word + " "
            if n == 0:
                if self.block:
                    if token.wait(10):
                        self.cancelled.set()
                    check_cancelled()
                self.gate_opened = self.gate.wait(10)
            elif token.wait(0.2):  # the pace of a slow model; returns early when cancelled
                self.cancelled.set()
                check_cancelled()
        self.done.set()
        return Generation(REPLY, 10, len(words), "stop")

    def continuation_logprobs(self, prompt: Any, continuations: Any) -> list[ContinuationScore]:
        return [ContinuationScore(0.0, 1) for _ in continuations]

    def next_token_logprobs(self, prompt: Any, candidates: Any) -> list[float]:
        return [0.0 for _ in candidates]

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "slow-fake"}


@pytest.fixture(scope="module")
def built_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Index]:
    root = tmp_path_factory.mktemp("serve-stream")
    index = Index.build(copy_corpus(root), root / "idx", embedder=HashEmbedder())
    return root / "idx", index


def _server(built_index: tuple[Path, Index], llm: SlowStreamingLLM) -> ServerThread:
    path, index = built_index
    engine = Engine(PipelineConfig(index_dir=str(path), pipeline="plain"), index_opener=lambda _: index, llm=llm)
    return ServerThread(create_app(engine, ServeSettings()))


def _sse(lines: Any) -> Any:
    """(kind, data) per server-sent event of /v1/ask/stream."""
    kind = None
    for line in lines:
        if line.startswith("event: "):
            kind = line[len("event: "):]
        elif line.startswith("data: "):
            yield kind, json.loads(line[len("data: "):])


def test_ask_stream_sends_each_stage_and_the_first_token_before_the_last_is_generated(built_index) -> None:
    llm = SlowStreamingLLM()
    events: list[tuple[str, Any]] = []
    with (
        _server(built_index, llm) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
        client.stream("POST", "/v1/ask/stream", json={"question": QUESTION}) as resp,
    ):
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        for kind, data in _sse(resp.iter_lines()):
            events.append((kind, data))
            if kind == "token" and not llm.gate.is_set():
                llm.finished_at_first_read = llm.done.is_set()
                llm.gate.set()  # only now may the model generate the other words
    assert llm.gate_opened is True and llm.finished_at_first_read is False
    kinds = [k for k, _ in events]
    assert kinds[-2:] == ["answer", "done"] and kinds.count("token") == len(REPLY.split())
    stages = [d["stage"] for k, d in events if k == "stage"]
    assert stages == ["warm_up", "route", "retrieve", "select", "generate"]
    generate = next(d for k, d in events if k == "stage" and d["stage"] == "generate")
    assert generate["duration_ms"] > 1000 and generate["records"][0]["stage"] == "generate"
    first_token, generate_done = kinds.index("token"), kinds.index("stage", kinds.index("token"))
    assert first_token < generate_done  # tokens arrive while the generate stage is still running
    answer = events[-2][1]["answer"]
    assert answer["answer"] == REPLY and answer["pipeline"] == "plain" and events[-2][1]["streamed_is_final"]


def test_chat_completions_stream_tokens_as_they_are_generated(built_index) -> None:
    llm = SlowStreamingLLM()
    pieces: list[str] = []
    body = {"model": "ragsieve", "messages": [{"role": "user", "content": QUESTION}], "stream": True}
    lines: list[str] = []
    with (
        _server(built_index, llm) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
        client.stream("POST", "/v1/chat/completions", json=body) as resp,
    ):
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if not line:
                continue
            lines.append(line)
            if line == "data: [DONE]":
                continue
            delta = json.loads(line[len("data: "):])["choices"][0]["delta"]
            if delta.get("content"):
                pieces.append(delta["content"])
                if not llm.gate.is_set():
                    llm.finished_at_first_read = llm.done.is_set()
                    llm.gate.set()
    assert llm.gate_opened is True and llm.finished_at_first_read is False
    assert pieces[0] == "Apollo" and "".join(pieces).startswith(REPLY) and "Sources:" in "".join(pieces)
    assert lines[-1] == "data: [DONE]"
    last = json.loads(lines[-2][len("data: "):])
    assert last["choices"][0]["finish_reason"] == "stop" and last["ragsieve_trace"]["answer"] == REPLY


def _is_first_token(path: str, line: str) -> bool:
    """Whether ``line`` carries generated text. Stage events also name the question's words
    (the retrieve stage's records hold the passages), so hanging up on one of them would leave
    before the model started, and nothing would be there to cancel."""
    if not line.startswith("data: {"):
        return False
    data = json.loads(line[len("data: "):])
    if path == "/v1/ask/stream":
        return data.get("kind") == "token"
    return any(choice.get("delta", {}).get("content") for choice in data.get("choices", []))


@pytest.mark.parametrize("path", ["/v1/ask/stream", "/v1/chat/completions"])
def test_a_client_that_disconnects_mid_stream_cancels_its_llm_call(built_index, path: str) -> None:
    llm = SlowStreamingLLM(block=True)
    llm.gate.set()
    body: dict[str, Any] = (
        {"question": QUESTION} if path == "/v1/ask/stream"
        else {"model": "ragsieve", "messages": [{"role": "user", "content": QUESTION}], "stream": True}
    )
    with _server(built_index, llm) as server:
        with httpx.Client(base_url=server.url, timeout=30) as client, client.stream("POST", path, json=body) as resp:
            for line in resp.iter_lines():
                if _is_first_token(path, line):
                    break  # one token read: hang up while the model is still generating
        assert llm.cancelled.wait(10), "the disconnect did not cancel the LLM call"
        # the single model lane is free again: the next request gets an answer
        llm.block, llm.cancelled = False, threading.Event()
        with httpx.Client(base_url=server.url, timeout=30) as client:
            answer = client.post("/v1/ask", json={"question": QUESTION})
        assert answer.status_code == 200 and answer.json()["answer"] == REPLY


def test_ask_stream_of_a_pipeline_without_events_and_its_errors(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    app = create_app(fake_engine(write_index_dir(tmp_path / "idx")), ServeSettings())
    with TestClient(app) as client:
        with client.stream("POST", "/v1/ask/stream", json={"question": "What is graphene made of?"}) as resp:
            events = list(_sse(resp.iter_lines()))
        assert [k for k, _ in events] == ["answer", "done"] and events[0][1]["answer"]["evidence"]
        bad = client.post("/v1/ask/stream", json={"question": "hi", "pipeline": "nope"})
        assert bad.status_code == 422
        failing = client.post("/v1/ask/stream", json={"question": "raise:ModelError"})
        assert failing.status_code == 503 and "fake failure" in failing.json()["error"]["message"]


def test_chat_content_holds_back_whitespace_and_withdraws_changed_text() -> None:
    content = ChatContent()
    assert [content.token(t) for t in [" Paris ", "is ", "big. "]] == ["Paris", " is", " big."]
    assert content.rest("Paris is big.\n\nSources:\n[1] x") == "\n\nSources:\n[1] x"
    changed = ChatContent()
    changed.token("Paris is small.")
    rest = changed.rest("I can't give an answer the evidence supports.")
    assert rest.startswith("\n\n[ragsieve withdrew") and rest.endswith("I can't give an answer the evidence supports.")
    assert changed.withdraw("regenerating").startswith("\n\n[ragsieve withdrew") and changed.sent == ""


@pytest.mark.slow
def test_the_page_shows_each_stage_and_the_unchecked_tokens_before_the_answer(built_index) -> None:
    from tests.serve.test_serve_browser import _chromium

    playwright = pytest.importorskip("playwright.sync_api")
    executable = _chromium()
    llm = SlowStreamingLLM()
    with _server(built_index, llm) as server, playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(server.url + "/")
            page.fill("#question", QUESTION)
            page.click("#ask-button")
            # the first word is on the page while the model waits at the gate: nothing is final yet
            page.locator("#stream-answer", has_text="Apollo").wait_for(timeout=20_000)
            assert page.get_attribute("body", "data-rendered") is None
            finished = page.locator("#stream-stages li.finished").all_inner_texts()
            assert [t.split(" — ")[0] for t in finished] == ["warm_up", "route", "retrieve", "select"]
            assert page.locator("#stream-stages li.running[data-stage=generate]").count() == 1
            llm.gate.set()
            page.wait_for_selector("body[data-rendered=true]", timeout=20_000)
            assert REPLY.split(" [")[0] in page.inner_text("#answer")
            assert not errors
        finally:
            browser.close()
