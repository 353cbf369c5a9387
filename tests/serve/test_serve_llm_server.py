"""Against a real OpenAI-compatible server: llama-cpp-python's own ``llama_cpp.server`` on
loopback with the bundled SmolLM2 GGUF. Chat, JSON-schema output and log-probabilities through
ragsieve's client; ``ragsieve ask --llm-url``; and the service using it as its LLM."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.helpers import copy_corpus
from tests.serve.fakes import ServerThread

from ragsieve.config import PipelineConfig
from ragsieve.errors import RagsieveError
from ragsieve.serve.app import ServeSettings, create_app
from ragsieve.serve.engine import Engine

pytestmark = pytest.mark.slow
START_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] extras are not installed")
    from ragsieve.llm.bundled import bundled_gguf_path

    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(bundled_gguf_path()), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--n_threads", "1", "--model_alias", "smollm2"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer within {START_TIMEOUT_S} s")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def _client(url: str, **kwargs: object):  # type: ignore[no-untyped-def]
    from ragsieve.llm.openai_http import OpenAICompatibleLLM

    return OpenAICompatibleLLM("smollm2", url + "/v1", timeout_s=180, max_retries=0, **kwargs)  # type: ignore[arg-type]


def test_chat_and_next_token_logprobs(llm_server: str) -> None:
    llm = _client(llm_server)
    out = llm.generate("Name one colour.", max_tokens=8)
    assert out.text.strip() and out.completion_tokens > 0
    yes, no = llm.next_token_logprobs("Is fire hot? Answer yes or no.", ["yes", "no"])
    assert yes <= 0 and no <= 0  # log-probabilities from the server's top_logprobs


def test_prompt_logprobs_without_a_template_name_what_is_missing(llm_server: str) -> None:
    with pytest.raises(RagsieveError, match="apply-template"):
        _client(llm_server).continuation_logprobs("Is fire hot?", ["yes", "no"])


def test_prompt_logprobs_with_the_template_work_or_name_the_feature_and_stages(llm_server: str) -> None:
    # llama_cpp.server answers a list of prompts in /v1/completions with a 5xx: the client must then
    # say which feature is missing and which stages need it, not report a generic server fault.
    import llama_cpp

    from ragsieve.llm.bundled import bundled_gguf_path

    vocab = llama_cpp.Llama(str(bundled_gguf_path()), vocab_only=True, verbose=False)
    template = vocab.metadata["tokenizer.chat_template"]
    try:
        scores = _client(llm_server, chat_template=template).continuation_logprobs("Is fire hot?", ["yes", "no"])
    except RagsieveError as exc:
        assert "prompt log-probabilities are needed by" in str(exc) and "closed-book confidence" in str(exc)
    else:
        assert all(s.logprob < 0 and s.n_tokens >= 1 for s in scores)


def test_json_schema_output_falls_back_to_json_object(llm_server: str) -> None:
    # llama_cpp.server answers response_format=json_schema with a 5xx; json_object (with the schema
    # restated) is the fallback, and the result is validated against the schema.
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
    llm = _client(llm_server)
    try:
        out = llm.generate_json("Name one colour as JSON.", schema, max_tokens=24)
    except RagsieveError as exc:
        assert "schema-constrained JSON output is needed by" in str(exc) or "did not return JSON" in str(exc)
    else:
        assert isinstance(out.get("colour"), str)


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragsieve.index import Index

    root = tmp_path_factory.mktemp("tiny")
    Index.build(copy_corpus(root), root / "index", config=PipelineConfig(index_dir=str(root / "index")))
    return root / "index"


def _cli_ask(llm_server: str, index: Path, tmp_path: Path, pipeline: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "short.toml"
    config.write_text("[generation]\nmax_tokens = 32\n", encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "ragsieve.cli", "ask", "Who first stepped onto the Moon, and when?",
         "--index", str(index),
         "--llm-url", llm_server + "/v1", "--model", "smollm2", "--config", str(config), "-k", "2", "--json",
         "--pipeline", pipeline],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "400"},
    )


@pytest.mark.parametrize("pipeline", ["plain", "sieve"])
def test_cli_ask_with_llm_url(llm_server: str, tiny_index: Path, tmp_path: Path, pipeline: str) -> None:
    proc = _cli_ask(llm_server, tiny_index, tmp_path, pipeline)
    assert proc.returncode == 0, proc.stderr[-2000:]
    answer = json.loads(proc.stdout)
    assert answer["answer"].strip()
    assert answer["trace"]["llm_calls"] >= 1
    presets = [e.get("preset") for e in answer["trace"]["events"] if e["stage"] == "pipeline"]
    assert presets == [pipeline]  # the stage-list pipeline records which preset ran


def test_service_uses_the_llm_server(llm_server: str, tiny_index: Path) -> None:
    cfg = PipelineConfig.model_validate({
        "index_dir": str(tiny_index),
        "llm": {"backend": "openai", "model": "smollm2", "base_url": llm_server + "/v1", "timeout_s": 180},
        "generation": {"max_tokens": 32},
    })
    app = create_app(Engine(cfg), ServeSettings())
    with ServerThread(app) as server:
        question = [{"role": "user", "content": "What do astronomers study?"}]
        chat = server.url + "/v1/chat/completions"
        resp = httpx.post(chat, timeout=300, json={"model": "plain", "messages": question})
        sieve = httpx.post(chat, timeout=300, json={"model": "sieve", "messages": question})
        health = httpx.get(server.url + "/v1/health").json()
    assert resp.status_code == 200, resp.text
    assert sieve.status_code == 200, sieve.text  # the sieve copes without prompt log-probs
    assert resp.json()["choices"][0]["message"]["content"].strip()
    assert health["model_loaded"] and health["model"] == "smollm2"
