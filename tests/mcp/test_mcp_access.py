"""Access keys on the MCP server over streamable HTTP, driven by the SDK's own client: two
readers over interleaved documents, hundreds of generated tool calls, and no tool result that
holds or cites a document the caller may not read (the LLM echoes its prompt)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

import anyio  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402
from tests.serve.access_fixtures import (
    ADMIN,
    DOCS,
    KEYS,
    OWNED,
    TOPICS,
    Doc,
    build_index,
    echo_engine,
    leaks,
    write_keys_file,  # noqa: E402
)
from tests.serve.fakes import ServerThread  # noqa: E402

from ragsieve.mcp.server import MCP_PATH, build_server, http_app  # noqa: E402
from ragsieve.serve.keys import KeyRing  # noqa: E402

CALL_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("mcp-access")
    index_dir, emb = build_index(tmp / "index", DOCS)
    keys = write_keys_file(tmp)
    server = build_server(echo_engine(index_dir, emb), local=False)
    app = http_app(server, api_key=KeyRing(keys_file=keys), allowed_hosts=None)
    with ServerThread(app) as running:
        yield running.url + MCP_PATH


CALL = st.fixed_dictionaries({
    "caller": st.sampled_from("ab"),
    "tool": st.sampled_from(["search", "search", "ask"]),
    "topic": st.sampled_from(TOPICS),
    "markers": st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, len(OWNED["a"]) - 1)), max_size=2),
    "k": st.integers(1, 10),
    "partition": st.sampled_from([None, "all", "shared", "doma", "domb"]),
})


async def _calls(url: str, calls: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str, str]]:
    """Every call on one session per caller: (the call, the whole result as text, what it sent)."""
    out: list[tuple[dict[str, Any], str, str]] = []
    with anyio.fail_after(CALL_TIMEOUT_S):
        for caller in "ab":
            mine = [c for c in calls if c["caller"] == caller]
            if not mine:
                continue
            async with (
                create_mcp_http_client(headers={"Authorization": f"Bearer {KEYS[caller]}"}) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                for call in mine:
                    words = " ".join([call["topic"], *(Doc(o, n).marker for o, n in call["markers"])])
                    args: dict[str, Any] = {"k": call["k"], "partition": call["partition"]}
                    args["query" if call["tool"] == "search" else "question"] = words
                    result = await client.call_tool(call["tool"], args)
                    text = json.dumps(result.model_dump(mode="json"), default=str)
                    out.append((call, text, json.dumps(args)))
    return out


def test_tool_calls_never_show_another_readers_documents(mcp_url: str) -> None:
    seen = {"calls": 0, "own": 0, "tools": set()}

    @settings(max_examples=13, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(CALL, min_size=40, max_size=40))
    def calls_never_leak(calls: list[dict[str, Any]]) -> None:
        for call, text, sent in anyio.run(_calls, mcp_url, calls):
            seen["calls"] += 1
            seen["tools"].add(call["tool"])  # type: ignore[union-attr]
            other = "b" if call["caller"] == "a" else "a"
            found = leaks(text, OWNED[other], sent)
            assert not found, f"{call}: the result shows {found}: {text[:400]}"
            if leaks(text, OWNED[call["caller"]], sent):
                seen["own"] += 1

    calls_never_leak()
    assert seen["calls"] >= 500
    assert seen["tools"] == {"search", "ask"}
    assert seen["own"] > seen["calls"] // 4  # the check can fail: own documents do show


def test_the_admin_key_and_a_wrong_key(mcp_url: str) -> None:
    async def search(key: str) -> Any:
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http,
            streamable_http_client(mcp_url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            return await client.call_tool("search", {"query": "carbon laser policy", "k": 20})

    result = anyio.run(search, ADMIN)
    assert {hit["id"][3] for hit in result.structured_content["hits"]} == {"a", "b"}

    import httpx

    refused = httpx.post(mcp_url, json={}, headers={"Authorization": "Bearer wrong-key"})
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "invalid_api_key"
