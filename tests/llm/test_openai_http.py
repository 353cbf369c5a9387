"""OpenAI-compatible backend against a tiny fake server on 127.0.0.1 (loopback only)."""

from __future__ import annotations

import json
import math
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ragsieve.config import LLMConfig
from ragsieve.errors import ConfigError, LLMOutputError, ModelError
from ragsieve.llm import LLM, load_llm
from ragsieve.llm.openai_http import OpenAICompatibleLLM

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def char_logprob(ch: str) -> float:
    """The fake model's log-prob of a one-character token."""
    return -((ord(ch) % 7) + 1) / 10.0


class FakeState:
    def __init__(self) -> None:
        self.fail_next = 0  # answer this many requests with 503 first
        self.fail_status = 503
        self.json_schema_ok = True
        self.echo_ok = True
        self.apply_template_ok = True
        self.chat_logprobs_ok = True
        self.bad_json = 0  # answer this many JSON requests with invalid JSON
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []


class Handler(BaseHTTPRequestHandler):
    state: FakeState

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        if status == 429:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(raw)

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        st = self.state
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        st.requests.append((self.path, body, dict(self.headers)))
        if st.fail_next > 0:
            st.fail_next -= 1
            self._send(st.fail_status, {"error": "overloaded"})
            return
        if self.path == "/v1/chat/completions":
            self._chat(body)
        elif self.path == "/v1/completions":
            self._completions(body)
        elif self.path == "/apply-template" and st.apply_template_ok:
            msgs = body["messages"]
            text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs)
            self._send(200, {"prompt": text + "<|im_start|>assistant\n"})
        elif self.path == "/tokenize":
            self._send(200, {"tokens": list(range(len(body["prompt"].split())))})
        else:
            self._send(404, {"error": "not found"})

    def _chat(self, body: dict[str, Any]) -> None:
        st = self.state
        fmt = body.get("response_format")
        if fmt and fmt["type"] == "json_schema" and not st.json_schema_ok:
            self._send(400, {"error": "response_format json_schema not supported"})
            return
        if body.get("logprobs"):
            if not st.chat_logprobs_ok:
                self._send(400, {"error": "logprobs not supported"})
                return
            top = [
                {"token": "Yes", "logprob": -0.3},
                {"token": "No", "logprob": -1.5},
                {"token": "Ma", "logprob": -2.5},
            ]
            self._send(
                200,
                {
                    "choices": [
                        {
                            "message": {"content": "Yes"},
                            "finish_reason": "length",
                            "logprobs": {"content": [{"token": "Yes", "top_logprobs": top}]},
                        }
                    ]
                },
            )
            return
        if fmt:
            if st.bad_json > 0:
                st.bad_json -= 1
                text = '{"answer": '
            else:
                text = '{"answer": "yes", "score": 3}'
        else:
            text = "Hello world. Bye."
            for s in body.get("stop") or []:
                if s in text:
                    text = text[: text.index(s)]
            text = text[: body.get("max_tokens", 256)]
        self._send(
            200,
            {
                "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 7, "completion_tokens": len(text.split())},
            },
        )

    def _completions(self, body: dict[str, Any]) -> None:
        if not self.state.echo_ok:
            self._send(400, {"error": "echo is not supported"})
            return
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        choices = []
        for i, prompt in enumerate(prompts):
            tokens = list(prompt) + ["!"]  # one character per token, then one generated token
            values: list[float | None] = [None] + [char_logprob(c) for c in prompt[1:]] + [-0.1]
            logprobs = {"tokens": tokens, "token_logprobs": values, "text_offset": list(range(len(tokens)))}
            choices.append({"index": i, "text": prompt + "!", "logprobs": logprobs})
        self._send(200, {"choices": choices[::-1]})  # out of order: the client sorts by index


@pytest.fixture()
def server() -> Iterator[tuple[str, FakeState]]:
    state = FakeState()
    handler = type("BoundHandler", (Handler,), {"state": state})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    finally:
        httpd.shutdown()
        httpd.server_close()


def make(url: str, **kw: Any) -> OpenAICompatibleLLM:
    kw.setdefault("backoff_s", 0.001)
    return OpenAICompatibleLLM("fake-model", url, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_generate_sends_parameters_and_parses(server, monkeypatch):
    url, st = server
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    llm = make(url, api_key_env="FAKE_KEY", seed=5)
    assert isinstance(llm, LLM)
    gen = llm.generate("Hi", max_tokens=20, stop=["."])
    assert gen.text == "Hello world" and gen.finish_reason == "stop" and gen.prompt_tokens == 7
    path, body, headers = st.requests[-1]
    assert path == "/v1/chat/completions"
    assert body["messages"] == [{"role": "user", "content": "Hi"}]
    assert body["stop"] == ["."] and body["max_tokens"] == 20 and body["temperature"] == 0.0 and body["seed"] == 5
    assert headers["Authorization"] == "Bearer sk-test"


def test_retries_on_5xx_and_429_then_succeeds(server):
    url, st = server
    st.fail_next = 2
    assert make(url, max_retries=3).generate("Hi").text.startswith("Hello")
    assert len(st.requests) == 3
    st.fail_next, st.fail_status = 1, 429
    assert make(url, max_retries=1).generate("Hi").text.startswith("Hello")


def test_gives_up_after_max_retries(server):
    url, st = server
    st.fail_next = 10
    with pytest.raises(ModelError, match="kept failing"):
        make(url, max_retries=2).generate("Hi")
    assert len(st.requests) == 3


def test_unreachable_server_is_clear_model_error():
    url = f"http://127.0.0.1:{free_port()}"
    llm = make(url, max_retries=1, timeout_s=2)
    with pytest.raises(ModelError, match=r"could not reach LLM server at .*start it or fix base_url"):
        llm.generate("Hi")


def test_generate_json_uses_json_schema_and_validates(server):
    url, st = server
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    assert make(url).generate_json("Q?", schema) == {"answer": "yes", "score": 3}
    fmt = st.requests[-1][1]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == schema


def test_generate_json_falls_back_to_json_object(server):
    url, st = server
    st.json_schema_ok = False
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    assert make(url).generate_json("Q?", schema)["answer"] == "yes"
    body = st.requests[-1][1]
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"][0]["role"] == "system" and "answer" in body["messages"][0]["content"]


def test_generate_json_retries_once_then_raises(server):
    url, st = server
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    st.bad_json = 1
    assert make(url).generate_json("Q?", schema)["answer"] == "yes"
    st.bad_json = 2
    with pytest.raises(LLMOutputError, match="2 attempts"):
        make(url).generate_json("Q?", schema)
    with pytest.raises(LLMOutputError):  # valid JSON that breaks the schema
        make(url).generate_json("Q?", {"type": "object", "required": ["missing"]})


def test_continuation_logprobs_via_echo_and_apply_template(server):
    url, st = server
    llm = make(url)
    scores = llm.continuation_logprobs("Hi", ["ab", "xyz", ""])
    assert scores[0].n_tokens == 2 and scores[1].n_tokens == 3 and scores[2].n_tokens == 0
    assert math.isclose(scores[0].logprob, char_logprob("a") + char_logprob("b"))
    sent = st.requests[-1][1]
    assert sent["echo"] is True and sent["prompt"][1].endswith("<|im_start|>assistant\nxyz")
    assert len(sent["prompt"]) == 2  # one request for all non-empty continuations
    ppl = llm.perplexity("Hi", "xyz")
    assert math.isclose(ppl, math.exp(-scores[1].logprob / 3))
    assert llm.next_token_logprobs("Hi", ["ab", "xyz"]) == [char_logprob("a"), char_logprob("x")]


def test_local_chat_template_when_server_lacks_apply_template(server):
    url, st = server
    st.apply_template_ok = False
    with pytest.raises(ModelError, match="chat_template"):
        make(url).continuation_logprobs("Hi", ["ab"])
    llm = make(url, chat_template=TEMPLATE)
    assert llm.continuation_logprobs("Hi", ["ab"])[0].n_tokens == 2
    assert st.requests[-1][1]["prompt"] == ["<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nab"]


def test_next_token_falls_back_to_chat_top_logprobs(server):
    url, st = server
    st.echo_ok = False
    llm = make(url)
    assert llm.next_token_logprobs("Q?", ["Yes", "No", "Maybe", "Other"]) == [-0.3, -1.5, -2.5, -2.5]
    assert st.requests[-1][1]["top_logprobs"] == 20
    with pytest.raises(ModelError, match="cannot score prompt tokens"):
        llm.continuation_logprobs("Q?", ["Yes"])


def test_server_without_any_logprobs_is_model_error(server):
    url, st = server
    st.echo_ok = st.chat_logprobs_ok = False
    with pytest.raises(ModelError, match="cannot return log-probabilities"):
        make(url).next_token_logprobs("Q?", ["Yes"])


def test_count_tokens_server_and_estimate(server):
    url, st = server
    assert make(url).count_tokens("one two three") == 3


def test_to_dict_round_trip_and_load_llm(server):
    url, _ = server
    llm = make(url, chat_template=TEMPLATE, max_retries=1)
    again = OpenAICompatibleLLM.from_dict(json.loads(json.dumps(llm.to_dict())))
    assert again.to_dict() == llm.to_dict()
    built = load_llm(LLMConfig(backend="openai", model="m", base_url=url, max_retries=0, n_threads=1))
    assert isinstance(built, OpenAICompatibleLLM) and built.max_retries == 0 and built.root_url == url[:-3]
    with pytest.raises(ConfigError, match="base_url"):
        load_llm(LLMConfig(backend="openai", model="m"))
