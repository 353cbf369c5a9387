"""``ragsieve mcp`` driven by the MCP SDK's own client, as an assistant drives it.

The server runs as a real subprocess (``python -m ragsieve.cli mcp``) over a small index built
from ``tests/fixtures/corpus``; the LLM is the fake OpenAI-compatible server of
``tests/chat_server.py`` (every answer cites the passages it was given), so each call takes
milliseconds and the tests check the wiring, not an answer's quality. stdio: the tools, their
schemas, ``search``, ``ask``, bad input as tool errors, and a stdout that carries the protocol
and nothing else. Streamable HTTP: the API key of ``ragsieve serve`` (401 without it), loopback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.chat_server import ChatServer, serve_chat
from tests.helpers import copy_corpus

pytest.importorskip("mcp", reason="the mcp extra is not installed")

import anyio  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

from ragsieve.config import PipelineConfig  # noqa: E402

# Every wait is bounded: a server that hangs fails the test instead of the run.
CALL_TIMEOUT_S = 60.0
START_TIMEOUT_S = 60.0
API_KEY = "test-mcp-key-0123456789"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragsieve.index import Index

    root = tmp_path_factory.mktemp("mcp")
    Index.build(copy_corpus(root), root / "index", config=PipelineConfig(index_dir=str(root / "index")))
    return root / "index"


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        yield server


def _env(**extra: str) -> dict[str, str]:
    """The test session's own folders (HOME, XDG_*), no index or key from the environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAGSIEVE_INDEX", "RAGSIEVE_API_KEY")}
    return {**env, "NO_COLOR": "1", **extra}


def _server_args(index: Path, chat: ChatServer, *more: str) -> list[str]:
    return ["-m", "ragsieve.cli", "mcp", "--index", str(index), "--llm-url", chat.url, "--model", "fake",
            "--pipeline", "plain", *more]


def _text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


# ---------------------------------------------------------------------- stdio
def test_stdio_tools_search_ask_and_bad_input(index: Path, chat: ChatServer, tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=_server_args(index, chat), env=_env())
    seen: dict[str, Any] = {}

    async def session() -> None:
        with (tmp_path / "server.err").open("w") as errlog, anyio.fail_after(CALL_TIMEOUT_S):
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                seen["tools"] = {tool.name: tool for tool in (await client.list_tools()).tools}
                seen["search"] = await client.call_tool("search", {"query": "Apollo moon landing", "k": 2})
                seen["ask"] = await client.call_tool("ask", {"question": "What is the Moon?", "k": 2})
                seen["empty"] = await client.call_tool("ask", {"question": "   "})
                seen["k0"] = await client.call_tool("search", {"query": "moon", "k": 0})
                seen["partition"] = await client.call_tool("search", {"query": "moon", "partition": "geology"})
                seen["by partition"] = await client.call_tool(
                    "search", {"query": "moon", "k": 3, "partition": "biology"}
                )
                seen["audit"] = await client.call_tool("audit", {})

    anyio.run(session)

    tools = seen["tools"]
    assert set(tools) == {"ask", "search", "audit"}
    ask_in, search_in = tools["ask"].input_schema, tools["search"].input_schema
    assert ask_in["required"] == ["question"] and ask_in["properties"]["question"]["type"] == "string"
    k = next(b for b in ask_in["properties"]["k"]["anyOf"] if b.get("type") == "integer")
    assert (k["minimum"], k["maximum"]) == (1, 100)
    assert search_in["properties"]["k"]["minimum"] == 1 and "partition" in search_in["properties"]
    assert "outcome" in tools["ask"].output_schema["properties"]
    assert "hits" in tools["search"].output_schema["properties"]
    assert "astronomy" in tools["search"].description  # the index's partitions are named

    search = seen["search"]
    assert not search.is_error, _text(search)
    hits = search.structured_content["hits"]
    assert len(hits) == 2 and hits[0]["id"] == "astronomy/moon.txt:0" and hits[0]["score"] == 1.0
    assert "natural satellite" in hits[0]["text"] and hits[0]["source"] and hits[0]["citation"]
    assert "astronomy/moon.txt" in _text(search)

    ask = seen["ask"]
    assert not ask.is_error, _text(ask)
    answer = ask.structured_content
    assert answer["outcome"] == "answered" and answer["text"].startswith("The passages state it [1]")
    cited = [s for s in answer["sources"] if s["cited"]]
    assert cited and cited[0]["id"] == "astronomy/moon.txt:0" and cited[0]["citation"] == "astronomy/moon.txt"
    # stdio runs on the user's machine: a source opens as a file:// link under the ingested folder
    assert cited[0]["uri"].startswith("file://") and cited[0]["uri"].endswith("/astronomy/moon.txt")
    assert answer["sentences"][0]["sources"][0] == 1
    assert isinstance(answer["reasons"], list) and isinstance(answer["withdrawn"], list)
    assert "Sources:\n[1] astronomy/moon.txt" in _text(ask)
    assert "/v1/chat/completions" in chat.paths

    for name in ("empty", "k0", "partition"):
        result = seen[name]
        assert result.is_error, name
        assert "Traceback" not in _text(result), _text(result)
    assert "the question is empty" in _text(seen["empty"])
    assert "greater than or equal to 1" in _text(seen["k0"])
    assert "unknown partition 'geology'" in _text(seen["partition"]) and "astronomy, biology" in _text(
        seen["partition"]
    )
    assert {h["partition"] for h in seen["by partition"].structured_content["hits"]} == {"biology"}
    audit = seen["audit"]
    assert not audit.is_error, _text(audit)
    assert audit.structured_content["passages"] > 0 and "findings" in audit.structured_content
    assert _text(audit).startswith(f"{len(audit.structured_content['findings'])} findings over ")
    assert "Traceback" not in (tmp_path / "server.err").read_text()


def test_stdio_stdout_carries_only_the_protocol(index: Path, chat: ChatServer) -> None:
    """Raw JSON-RPC lines in, every stdout line a JSON-RPC message out (logging goes to stderr)."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "ask", "arguments": {"question": "What do ribosomes build?"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "search", "arguments": {"query": 5}}},
    ]
    proc = subprocess.Popen(
        [sys.executable, *_server_args(index, chat)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), text=True,
    )
    replies: dict[int, dict[str, Any]] = {}
    lines: list[str] = []
    try:
        assert proc.stdin is not None and proc.stdout is not None
        for request in requests:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            if "id" not in request:
                continue
            deadline = time.monotonic() + CALL_TIMEOUT_S
            while request["id"] not in replies:
                assert time.monotonic() < deadline, "no reply in time"
                line = proc.stdout.readline()
                assert line, "the server closed stdout"
                lines.append(line)
                message = json.loads(line)  # anything but a JSON-RPC message on stdout fails here
                assert message["jsonrpc"] == "2.0"
                if "id" in message:
                    replies[message["id"]] = message
        rest, err = proc.communicate(timeout=CALL_TIMEOUT_S)  # closes stdin: the server ends
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in rest.splitlines() if line.strip())
    assert proc.returncode == 0, err[-2000:]
    assert replies[1]["result"]["serverInfo"]["name"] == "ragsieve"
    answer = replies[2]["result"]
    assert not answer.get("isError") and answer["structuredContent"]["outcome"] in ("answered", "abstained")
    assert replies[3]["result"]["isError"] is True  # a number where the query's text goes
    assert "ragsieve MCP server on stdio" in err and "Traceback" not in err


# ---------------------------------------------------------------------- streamable HTTP
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def http_server(index: Path, chat: ChatServer, tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    err_path = tmp_path / "http.err"
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, *_server_args(index, chat, "--http", "--port", str(port))],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=_env(RAGSIEVE_API_KEY=API_KEY),
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "ragsieve MCP server for" not in err_path.read_text():
            assert proc.poll() is None, err_path.read_text()[-2000:]
            assert time.monotonic() < deadline, "the server did not start in time"
            time.sleep(0.1)
        while True:  # the start-up line comes just before the port opens
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "the port did not open in time"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "Traceback" not in err_path.read_text()


def test_http_needs_the_api_key(http_server: str) -> None:
    import httpx

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    for sent in ({}, {"Authorization": "Bearer wrong-key"}):
        reply = httpx.post(http_server, json=initialize, headers={**headers, **sent}, timeout=10)
        assert reply.status_code == 401, reply.text
        assert reply.json()["error"]["code"] == "invalid_api_key"
        assert reply.headers["www-authenticate"] == "Bearer"
    # the DNS-rebinding guard of `ragsieve serve`: a name the loopback server does not answer to
    rebound = httpx.post(http_server, json=initialize, timeout=10,
                         headers={**headers, "Authorization": f"Bearer {API_KEY}", "Host": "attacker.example"})
    assert rebound.status_code == 421

    seen: dict[str, Any] = {}

    async def session() -> None:
        with anyio.fail_after(CALL_TIMEOUT_S):
            async with (
                create_mcp_http_client(headers={"Authorization": f"Bearer {API_KEY}"}) as http,
                streamable_http_client(http_server, http_client=http) as (read, write),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                seen["tools"] = [tool.name for tool in (await client.list_tools()).tools]
                seen["ask"] = await client.call_tool("ask", {"question": "What is the Moon?", "k": 1})

    anyio.run(session)
    assert sorted(seen["tools"]) == ["ask", "audit", "search"]
    answer = seen["ask"].structured_content
    assert not seen["ask"].is_error and answer["outcome"] == "answered"
    # over the network no answer names where the server's files are
    assert all(s["uri"] is None for s in answer["sources"]) and "file://" not in _text(seen["ask"])


def test_http_beyond_loopback_needs_a_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragsieve.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["mcp", "--http", "--index", str(tmp_path), "--host", "0.0.0.0"])
    assert exc.value.code == 2
    assert "set an API key" in " ".join(capsys.readouterr().err.split())


def test_a_missing_index_fails_before_serving(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragsieve.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["mcp", "--index", str(tmp_path / "nothing")])
    assert exc.value.code == 2
    assert "no index at" in " ".join(capsys.readouterr().err.split())
