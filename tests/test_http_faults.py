"""The HTTP clients against a fault-injecting loopback server: hangs, drips, 5xx, 429 with odd
Retry-After values, malformed and wrong-shape JSON, and servers that echo the API key."""

from __future__ import annotations

import logging
import math
import time
from datetime import datetime, timezone

import pytest
from tests.fault_server import Fault

from ragsieve.embed.openai_http import OpenAIEmbedder
from ragsieve.errors import ConfigError, ModelError
from ragsieve.http import MAX_RETRY_AFTER_S, make_client, post_json, redact, retry_after_seconds
from ragsieve.llm.openai_http import OpenAICompatibleLLM

KEY_ENV = "RAGSIEVE_FAULT_TEST_KEY"
KEY = "sk-test-5ecret-Zq81x"
CHAT_OK = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3}}


def _post(server, timeout_s: float = 0.6, retries: int = 0) -> dict:
    client = make_client(server.url, KEY_ENV, timeout_s)
    return post_json(client, "/v1/x", {"q": 1}, service="the test server", max_retries=retries, backoff_s=0.01)


def _llm(server, timeout_s: float = 0.6, retries: int = 0) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM("m", server.url, api_key_env=KEY_ENV, timeout_s=timeout_s, max_retries=retries)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


# ------------------------------------------------------------------ overall deadline
@pytest.mark.parametrize(
    "fault",
    [Fault.hang(), Fault.drip({"choices": ["x" * 200]}, interval_s=0.05), Fault.drip_headers(interval_s=0.05)],
    ids=["hang", "drip-body", "drip-headers"],
)
def test_each_attempt_ends_within_its_timeout(fault_server, fault) -> None:
    fault_server.script(fault)
    start = time.monotonic()
    with pytest.raises(ModelError, match=r"test server at http://127\.0\.0\.1:\d+/v1/x .*timeout_s=0\.6") as info:
        _post(fault_server, timeout_s=0.6)
    elapsed = time.monotonic() - start
    assert elapsed < 1.5, elapsed
    assert KEY not in str(info.value)


def test_the_llm_deadline_covers_retries_one_attempt_at_a_time(fault_server) -> None:
    fault_server.script(Fault.drip(CHAT_OK, interval_s=0.05), Fault.json(CHAT_OK))
    start = time.monotonic()
    assert _llm(fault_server, timeout_s=0.4, retries=1).generate("hi").text == "hi"
    assert time.monotonic() - start < 1.5
    assert len(fault_server.requests) == 2


def test_a_slow_but_steady_reply_inside_the_deadline_is_read(fault_server) -> None:
    fault_server.script(Fault.drip({"ok": 1}, interval_s=0.01))
    assert _post(fault_server, timeout_s=3.0) == {"ok": 1}


def test_timeouts_must_be_positive_and_finite() -> None:
    for bad in (0, -1.0, math.nan, math.inf):
        with pytest.raises(ConfigError, match="timeout_s"):
            make_client("http://127.0.0.1:9", KEY_ENV, bad)


# ------------------------------------------------------------------ retries
def test_5xx_then_success(fault_server) -> None:
    fault_server.script(Fault.error(503), Fault.error(502, body="bad gateway"), Fault.json({"ok": True}))
    assert _post(fault_server, retries=3) == {"ok": True}
    assert len(fault_server.requests) == 3


def test_5xx_until_retries_run_out(fault_server) -> None:
    fault_server.script(Fault.error(500, body="boom"))
    with pytest.raises(ModelError, match=r"kept failing \(HTTP 500: boom\) after 2 attempts"):
        _post(fault_server, retries=1)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2", 2.0),
        ("0", 0.0),
        ("-5", None),
        ("1e308", MAX_RETRY_AFTER_S),
        ("nan", None),
        ("inf", None),
        ("-inf", None),
        ("soon", None),
        ("", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
        ("Fri, 31 Dec 9999 23:59:59 GMT", MAX_RETRY_AFTER_S),
        ("Mon, 99 Foo 2020 99:99:99 GMT", None),
    ],
)
def test_retry_after_is_clamped(value: str, expected: float | None) -> None:
    assert retry_after_seconds(value) == expected


def test_retry_after_http_date_in_the_near_future() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert retry_after_seconds("Thu, 01 Jan 2026 12:00:07 GMT", now=now) == 7.0


@pytest.mark.parametrize("value", ["-5", "nan", "inf", "1e308", "Fri, 31 Dec 9999 23:59:59 GMT", "garbage"])
def test_429_with_odd_retry_after_waits_a_bounded_time(fault_server, monkeypatch, value: str) -> None:
    waits: list[float] = []
    monkeypatch.setattr("ragsieve.http.time.sleep", waits.append)
    fault_server.script(Fault.error(429, retry_after=value), Fault.json({"ok": True}))
    assert _post(fault_server, retries=2) == {"ok": True}
    assert len(waits) == 1 and 0.0 <= waits[0] <= MAX_RETRY_AFTER_S


# ------------------------------------------------------------------ malformed replies
def test_malformed_json_is_a_clear_error(fault_server) -> None:
    fault_server.script(Fault.raw("{not json", **{"Content-Type": "application/json"}))
    with pytest.raises(ModelError, match="returned non-JSON"):
        _post(fault_server)
    fault_server.script(Fault.json([1, 2]))
    with pytest.raises(ModelError, match="a JSON list, not an object"):
        _post(fault_server)


@pytest.mark.parametrize(
    ("reply", "field"),
    [
        ({"choices": [{"message": "hi"}]}, "choices.0.message"),
        ({"choices": [{"message": {"content": 5}}]}, "choices.0.message.content"),
        ({"choices": []}, "choices"),
        ({"choices": None}, "choices"),
        ({"id": "x"}, "choices"),
        ({**CHAT_OK, "usage": "many"}, "usage"),
        ({**CHAT_OK, "usage": {"prompt_tokens": "lots"}}, "usage.prompt_tokens"),
        ({**CHAT_OK, "usage": {"completion_tokens": -3}}, "usage.completion_tokens"),
    ],
)
def test_wrong_shape_chat_reply_names_the_field(fault_server, reply: dict, field: str) -> None:
    fault_server.script(Fault.json(reply))
    with pytest.raises(ModelError, match=rf"LLM server at http://127\.0\.0\.1:\d+/v1/chat/completions .*{field}:"):
        _llm(fault_server).generate("hi")


def test_chat_reply_with_null_usage_and_content_is_accepted(fault_server) -> None:
    fault_server.script(Fault.json({"choices": [{"message": {"content": None}}], "usage": None}))
    gen = _llm(fault_server).generate("hi")
    assert gen.text == "" and gen.prompt_tokens == 0


@pytest.mark.parametrize(
    ("reply", "field"),
    [
        ({"choices": [{"message": {"content": "a"}, "logprobs": {"content": []}}]}, "logprobs.content"),
        (
            {"choices": [{"message": {"content": "a"}, "logprobs": {"content": [{"top_logprobs": [{"t": 1}]}]}}]},
            "top_logprobs.0.token",
        ),
    ],
)
def test_wrong_shape_logprobs_name_the_field(fault_server, reply: dict, field: str) -> None:
    llm = _llm(fault_server)
    llm._echo_supported = False  # go straight to chat top_logprobs
    fault_server.script(Fault.json(reply))
    with pytest.raises(ModelError, match=field):
        llm.next_token_logprobs("q", ["a"])


def test_wrong_shape_echo_logprobs_name_the_field(fault_server) -> None:
    llm = OpenAICompatibleLLM(
        "m", fault_server.url, api_key_env=KEY_ENV, timeout_s=1.0, max_retries=0, chat_template="{{ messages }}"
    )
    logprobs = {"tokens": ["a"], "token_logprobs": ["x"], "text_offset": [0]}
    fault_server.script(Fault.json({"choices": [{"logprobs": logprobs}]}))
    with pytest.raises(ModelError, match=r"choices\.0\.logprobs\.token_logprobs\.0"):
        llm.continuation_logprobs("q", ["a"])


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        ({"data": [{"index": 0, "embedding": "x"}]}, r"data\.0\.embedding"),
        ({"data": [{"embedding": [1.0]}]}, r"data\.0\.index"),
        ({"data": "nope"}, r"data: "),
        ({"object": "list"}, r"data: "),
        ({"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]}, "lengths"),
        ({"data": [{"index": 0, "embedding": [1.0]}]}, r"1 vectors .* for 2 texts"),
        ({"data": [{"index": 0, "embedding": []}, {"index": 1, "embedding": []}]}, "lengths"),
    ],
)
def test_wrong_shape_embeddings_name_the_field(fault_server, reply: dict, match: str) -> None:
    fault_server.script(Fault.json(reply))
    emb = OpenAIEmbedder("e", fault_server.url, api_key_env=KEY_ENV, timeout_s=1.0, max_retries=0)
    with pytest.raises(ModelError, match=match):
        emb._request(["a", "b"])


def test_embeddings_with_nan_are_rejected(fault_server) -> None:
    fault_server.script(Fault.raw('{"data": [{"index": 0, "embedding": [NaN, 1.0]}]}'))
    emb = OpenAIEmbedder("e", fault_server.url, api_key_env=KEY_ENV, timeout_s=1.0, max_retries=0)
    with pytest.raises(ModelError, match=r"data\.0\.embedding\.0"):
        emb._request(["a"])


# ------------------------------------------------------------------ secrets
@pytest.mark.parametrize("status", [400, 401, 500])
def test_an_echoed_key_never_reaches_errors_or_logs(fault_server, caplog, status: int) -> None:
    caplog.set_level(logging.DEBUG)
    fault_server.script(Fault.echo_auth(status))
    with pytest.raises(ModelError) as info:
        _llm(fault_server, retries=1).generate("hi")
    assert fault_server.requests[0][2]["Authorization"] == f"Bearer {KEY}"  # the key was sent
    text = str(info.value) + "\n" + caplog.text
    assert KEY not in text and "[REDACTED]" in str(info.value)


def test_a_key_echoed_in_a_non_json_or_wrong_shape_reply_is_redacted(fault_server) -> None:
    fault_server.script(Fault.raw(f"<html>bad key {KEY}</html>"))
    with pytest.raises(ModelError) as info:
        _llm(fault_server).generate("hi")
    assert KEY not in str(info.value)
    fault_server.script(Fault.json({"choices": [{"message": {"content": KEY * 3}}], "usage": {"prompt_tokens": KEY}}))
    with pytest.raises(ModelError, match=r"usage\.prompt_tokens") as info:
        _llm(fault_server).generate("hi")
    assert KEY not in str(info.value)


def test_an_embedder_error_does_not_leak_the_key(fault_server, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    fault_server.script(Fault.echo_auth(403))
    emb = OpenAIEmbedder("e", fault_server.url, api_key_env=KEY_ENV, timeout_s=1.0, max_retries=0)
    with pytest.raises(ModelError) as info:
        emb._request(["a"])
    assert KEY not in str(info.value) + caplog.text


def test_redact() -> None:
    assert redact(f"key={KEY} auth: Bearer abc.def-1", [KEY]) == "key=[REDACTED] auth: Bearer [REDACTED]"
    assert redact("authorization: bearer xyz", []) == "authorization: bearer [REDACTED]"
    assert redact("a b c", ["", "b"]) == "a b c"  # too short to redact as a bare substring


def test_connection_refused_is_a_clear_error() -> None:
    client = make_client("http://127.0.0.1:9", KEY_ENV, 0.5)
    with pytest.raises(ModelError, match=r"could not reach s at http://127\.0\.0\.1:9/v1/x after 1 attempts"):
        post_json(client, "/v1/x", {}, service="s", max_retries=0, backoff_s=0.0)
