"""The shared JSON-over-HTTP helper: retries, Retry-After, errors that name the service."""

from __future__ import annotations

import httpx
import pytest

from ragsieve.errors import ModelError
from ragsieve.http import HTTPStatusError, make_client, post_json


def client_for(handler) -> httpx.Client:
    return httpx.Client(base_url="http://server.test/v1", transport=httpx.MockTransport(handler))


def test_retries_5xx_then_returns_json(monkeypatch):
    sleeps: list[float] = []
    monkeypatch.setattr("ragsieve.http.time.sleep", sleeps.append)
    answers = iter(
        [
            httpx.Response(503, text="busy"),
            httpx.Response(429, headers={"Retry-After": "2"}),
            httpx.Response(200, json={"ok": True}),
        ]
    )
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return next(answers)

    data = post_json(
        client_for(handler), "/embeddings", {"x": 1}, service="the test server", max_retries=3, backoff_s=0.01
    )
    assert data == {"ok": True}
    assert seen == ["http://server.test/v1/embeddings"] * 3
    assert sleeps[1] == 2.0 and 0.01 <= sleeps[0] <= 0.011


def test_gives_up_with_a_clear_error(monkeypatch):
    monkeypatch.setattr("ragsieve.http.time.sleep", lambda s: None)

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(ModelError, match=r"could not reach the test server at http://server.test/v1/x after 3 "):
        post_json(client_for(refuse), "/x", {}, service="the test server", max_retries=2, backoff_s=0.0)
    with pytest.raises(ModelError, match="kept failing"):
        post_json(client_for(lambda r: httpx.Response(500)), "/x", {}, service="s", max_retries=1, backoff_s=0.0)
    with pytest.raises(ModelError, match="returned non-JSON"):
        post_json(
            client_for(lambda r: httpx.Response(200, text="<html>")),
            "/x",
            {},
            service="s",
            max_retries=0,
            backoff_s=0.0,
        )


def test_4xx_is_left_to_the_caller():
    with pytest.raises(HTTPStatusError) as info:
        post_json(
            client_for(lambda r: httpx.Response(400, text="bad param")),
            "/x",
            {},
            service="s",
            max_retries=3,
            backoff_s=0.0,
        )
    assert info.value.status == 400 and "bad param" in info.value.body


def test_make_client_sends_the_key_only_when_set(monkeypatch):
    monkeypatch.delenv("RAGSIEVE_TEST_KEY", raising=False)
    assert "authorization" not in make_client("http://h/v1/", "RAGSIEVE_TEST_KEY", 5.0).headers
    monkeypatch.setenv("RAGSIEVE_TEST_KEY", "sekret")
    client = make_client("http://h/v1/", "RAGSIEVE_TEST_KEY", 5.0)
    assert client.headers["authorization"] == "Bearer sekret" and str(client.base_url) == "http://h/v1/"
