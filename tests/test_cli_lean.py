"""ingest, search and ask --llm-url through the real ``ragsieve`` command, with only the core installed.

``.ci/lean-core.sh`` runs this file in a fresh virtual environment holding the core alone (no
torch, no llama.cpp, nothing compiled); in the full install it runs with the rest of the suite.
The LLM is a small OpenAI-compatible server on loopback that answers every chat request with
one cited sentence, so the test checks the wiring, not an answer's quality.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import copy_corpus

ANSWER = "The Moon is Earth's only natural satellite [1]."


class _ChatServer(BaseHTTPRequestHandler):
    requests: list[str]

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        self.requests.append(self.path)
        if self.path != "/v1/chat/completions" or body.get("logprobs"):
            self._send(404, {"error": "not supported by this server"})
            return
        content = json.dumps({"answer": "yes", "score": 1}) if body.get("response_format") else ANSWER
        self._send(200, {
            "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 9},
        })

    def _send(self, status: int, body: dict[str, Any]) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture(scope="module")
def chat_server() -> Iterator[tuple[str, list[str]]]:
    requests: list[str] = []
    handler = type("Handler", (_ChatServer,), {"requests": requests})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", requests
    finally:
        httpd.shutdown()
        httpd.server_close()


def ragsieve(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAGSIEVE_INDEX": "", "COLUMNS": "80", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "ragsieve.cli", *args],
        capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def lean_index(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lean")
    result = ragsieve("ingest", str(copy_corpus(root)), "--index", str(root / "idx"), "--threads", "1", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["chunks_embedded"] > 0
    return root / "idx"


def test_search_shows_blocks_and_json(lean_index):
    result = ragsieve("search", "Apollo moon landing", "--index", str(lean_index), "-k", "2")
    assert result.returncode == 0, result.stderr
    # The citation of a plain-text file is its path (a ":0" would read as a page number).
    assert "  1. astronomy/moon.txt\n" in result.stdout
    assert all(len(line) <= 80 for line in result.stdout.splitlines())
    as_json = ragsieve("search", "Apollo moon landing", "--index", str(lean_index), "-k", "2", "--json")
    top = json.loads(as_json.stdout)["hits"][0]
    assert top["id"] == "astronomy/moon.txt:0" and top["path"] == "astronomy/moon.txt"
    assert top["citation"] == "astronomy/moon.txt" and top["char_start"] == 0


def test_ask_through_an_openai_compatible_server(lean_index, chat_server):
    url, requests = chat_server
    result = ragsieve(
        "ask", "What is the Moon?", "--index", str(lean_index), "--llm-url", url, "--model", "fake", "--json"
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert "natural satellite" in answer["answer"]
    assert "/v1/chat/completions" in requests


def test_the_default_index_is_named(lean_index):
    result = subprocess.run(
        [sys.executable, "-m", "ragsieve.cli", "search", "Moon", "-k", "1", "--json"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "RAGSIEVE_INDEX": str(lean_index)},
    )
    assert result.returncode == 0, result.stderr
    assert f"using index {lean_index}" in " ".join(result.stderr.split())
