"""Health tells the truth about the index being served, and no answer of the service reveals
where its files live: every error status the service returns is produced here with a server-side
cause whose message holds an absolute path, and no body (JSON, SSE event or chat chunk) may
carry one. Also: questions of the wrong type, route errors in the request's terms, and Host
names with a trailing dot."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.helpers import HashEmbedder
from tests.reliability.support import FAST, write_corpus
from tests.serve.fakes import FakeLLM, FakePipeline, fake_engine, write_index_dir

from ragsieve.config import PipelineConfig
from ragsieve.errors import (
    ConfigError,
    DamagedFileError,
    IndexStoreError,
    InputError,
    LLMOutputError,
    ModelError,
    check_question,
)
from ragsieve.index import Index
from ragsieve.serve.app import ServeSettings, create_app
from ragsieve.serve.engine import Engine

# An absolute POSIX path of two or more components, or a Windows drive path.
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/\\])/(?:[^\s/'\"()<>\\]+/)+[^\s/'\"()<>\\]*|[A-Za-z]:\\\\?[^\s'\"]+")


def _real_engine(index_dir: Path, emb: HashEmbedder) -> Engine:
    config = PipelineConfig(index_dir=str(index_dir), pipeline="direct")
    return Engine(
        config, pipeline_factory=FakePipeline, index_opener=lambda d: Index.open(d, embedder=emb), llm=FakeLLM()
    )


@pytest.fixture()
def built(tmp_path: Path) -> tuple[Path, HashEmbedder]:
    emb = HashEmbedder()
    index = Index.build(write_corpus(tmp_path / "corpus"), tmp_path / "idx", config=FAST, embedder=emb)
    index.close()
    return index.dir, emb


def _damage_partition(index_dir: Path, domain: str = "astronomy") -> None:
    index = Index.open(index_dir, embedder=HashEmbedder(), check_contents=False)
    path = index.generation_dir / "partitions" / index.manifest["partition_dirs"][domain] / "dense.faiss"
    index.close()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # same size: only the recorded checksum sees it
    path.write_bytes(bytes(data))


# ---------------------------------------------------------------------- health and the index
def test_health_is_degraded_naming_the_damaged_files_role_never_its_path(built: tuple[Path, HashEmbedder]) -> None:
    index_dir, emb = built
    _damage_partition(index_dir)
    with TestClient(create_app(_real_engine(index_dir, emb), ServeSettings())) as client:
        health = _settled_health(client)
        search = client.post("/v1/search", json={"query": "red planet", "route": "astronomy"})
        unaffected = client.post("/v1/search", json={"query": "red planet", "route": "all"})
    assert health["status"] == "degraded"
    assert "dense vector file (dense.faiss) of partition astronomy-" in health["problem"]
    assert "ragsieve ingest" in health["problem"]
    assert str(index_dir) not in str(health) and not ABSOLUTE_PATH.search(str(health))
    assert search.status_code == 503 and "dense vector file" in search.json()["error"]["message"]
    assert str(index_dir) not in search.text and not ABSOLUTE_PATH.search(search.text)
    assert unaffected.status_code == 200


def test_damage_found_by_a_request_turns_health_degraded(built: tuple[Path, HashEmbedder]) -> None:
    index_dir, emb = built
    engine = _real_engine(index_dir, emb)
    with TestClient(create_app(engine, ServeSettings(warm_up=False))) as client:
        engine.snapshot()
        engine.model_loaded = True
        assert client.get("/v1/health").json()["status"] == "ok"
        _damage_partition(index_dir)  # damaged while served, before the partition was first read
        assert client.post("/v1/search", json={"query": "red planet", "route": "astronomy"}).status_code == 503
        health = client.get("/v1/health").json()
    assert health["status"] == "degraded" and "dense vector file" in health["problem"]


def test_an_intact_index_is_ok(built: tuple[Path, HashEmbedder]) -> None:
    index_dir, emb = built
    with TestClient(create_app(_real_engine(index_dir, emb), ServeSettings())) as client:
        health = _settled_health(client)
    assert health["status"] == "ok" and health["problem"] is None


def _settled_health(client: TestClient) -> dict[str, Any]:
    for _ in range(500):
        health: dict[str, Any] = client.get("/v1/health").json()
        if health["status"] != "starting":
            return health
        time.sleep(0.01)
    raise AssertionError("the service never finished starting")


# ---------------------------------------------------------------------- no paths in any body
class PathLeakingPipeline(FakePipeline):
    """Fails as the question says, with a message naming an absolute server path."""

    secret = "/srv/ragsieve-secret/models/model.gguf"
    errors: dict[str, type[Exception]] = {
        "input": InputError, "model": ModelError, "index": IndexStoreError, "config": ConfigError,
        "output": LLMOutputError,
        "damaged": lambda msg: DamagedFileError(msg, role="dense vector file", repair="re-ingest"),  # type: ignore[dict-item]
    }

    def ask(self, question: str, k: int | None = None, no_retrieval: bool = False) -> Any:
        kind = question.split()[0]
        if kind in self.errors:
            raise self.errors[kind](f"cannot read {self.secret} or C:\\srv\\secret\\model.gguf ({kind})")
        if kind == "slow":
            time.sleep(0.6)
        return super().ask(question, k=k, no_retrieval=no_retrieval)


def _bodies_of_every_error(tmp_path: Path) -> dict[str, tuple[int, str]]:
    index_dir = write_index_dir(tmp_path / "idx")
    engine = fake_engine(index_dir)
    engine._pipeline_factory = PathLeakingPipeline
    settings = ServeSettings(
        api_key="k", deadline_s=0.3, queue_size=1, max_body_bytes=2048, body_timeout_s=0.3,
        allowed_hosts=frozenset({"testserver", "127.0.0.1"}),
    )
    app = create_app(engine, settings)
    key = {"Authorization": "Bearer k"}
    out: dict[str, tuple[int, str]] = {}
    with TestClient(app) as client:
        def record(name: str, response: Any) -> None:
            out[name] = (response.status_code, response.text)

        for kind in PathLeakingPipeline.errors:
            record(f"ask {kind}", client.post("/v1/ask", json={"question": f"{kind} q"}, headers=key))
            record(f"stream {kind}", client.post("/v1/ask/stream", json={"question": f"{kind} q"}, headers=key))
            chat = {"model": "ragsieve", "messages": [{"role": "user", "content": f"{kind} q"}]}
            record(f"chat {kind}", client.post("/v1/chat/completions", json=chat, headers=key))
            record(f"chat stream {kind}", client.post("/v1/chat/completions", json={**chat, "stream": True},
                                                      headers=key))
        record("401", client.post("/v1/ask", json={"question": "q"}))
        record("404 path", client.get("/v1/nothing", headers=key))
        record("404 model", client.post("/v1/chat/completions", headers=key,
                                        json={"model": "nope", "messages": [{"role": "user", "content": "q"}]}))
        record("404 passage", client.get("/v1/passages/no-such-id", headers=key))
        record("405", client.delete("/v1/ask", headers=key))
        record("413", client.post("/v1/ask", content=b"x" * 5000, headers={**key, "Content-Type": "application/json"}))
        record("421", client.get("/v1/health", headers={"Host": "rebound.example"}))
        record("422", client.post("/v1/ask", json={"question": 42}, headers=key))
        record("400 route", client.post("/v1/search", json={"query": "q", "route": "nowhere"}, headers=key))
        record("400 content-length", client.post("/v1/ask", headers={**key, "Content-Length": "x"}, content=b""))
        record("504", client.post("/v1/ask", json={"question": "slow q"}, headers=key))
        record("health", client.get("/v1/health"))
        # 429: one request runs, one waits, the third finds the queue full.
        replies: list[Any] = []
        threads = [threading.Thread(target=lambda: replies.append(
            client.post("/v1/ask", json={"question": "slow q"}, headers=key))) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for n, reply in enumerate(replies):
            record(f"busy {n}", reply)
    return out


def test_no_error_body_holds_an_absolute_path(tmp_path: Path) -> None:
    bodies = _bodies_of_every_error(tmp_path)
    statuses = {status for status, _ in bodies.values()}
    assert {200, 400, 401, 404, 405, 413, 421, 422, 429, 502, 503, 504} <= statuses, sorted(statuses)
    for name, (status, text) in bodies.items():
        assert PathLeakingPipeline.secret not in text, f"{name} ({status}) leaks a path: {text[:300]}"
        assert str(tmp_path) not in text, f"{name} ({status}) leaks a path: {text[:300]}"
        assert not ABSOLUTE_PATH.search(text), f"{name} ({status}): {ABSOLUTE_PATH.search(text)}"
    # The message still says what went wrong (only the folders are gone).
    assert "model.gguf" in bodies["ask model"][1]


# ---------------------------------------------------------------------- smaller guarantees
@pytest.mark.parametrize(
    ("value", "said"),
    [(b"what is graphene?", "bytes, not text; decode it"), (42, "must be a string, not int"),
     (None, "is None"), ("   ", "is empty"), (["q"], "must be a string, not list")],
)
def test_a_question_that_is_not_text_gets_a_type_error_naming_the_type(value: Any, said: str) -> None:
    with pytest.raises(InputError, match=re.escape(said)):
        check_question(value)


def test_the_engine_refuses_a_question_that_is_not_text(tmp_path: Path) -> None:
    engine = fake_engine(write_index_dir(tmp_path / "idx"))
    with pytest.raises(InputError, match="bytes, not text"):
        engine.ask(b"carbon?")
    with pytest.raises(InputError, match="must be a string, not int"):
        engine.search(42)


def test_an_unknown_route_is_named_in_the_requests_terms(tmp_path: Path) -> None:
    with TestClient(create_app(fake_engine(write_index_dir(tmp_path / "idx")), ServeSettings())) as client:
        reply = client.post("/v1/search", json={"query": "carbon", "route": "nowhere"})
        ask = client.post("/v1/ask", json={"question": "carbon?", "route": "nowhere"})
    for response in (reply, ask):
        message = response.json()["error"]["message"]
        assert response.status_code == 400 and "route field" in message and "--route" not in message


@pytest.mark.parametrize("host", ["localhost.", "localhost.:8000", "LOCALHOST.", "127.0.0.1:8000", "[::1]:8000"])
def test_a_loopback_host_with_a_trailing_dot_or_port_is_answered(tmp_path: Path, host: str) -> None:
    from ragsieve.serve.guard import allowed_hosts_for

    app = create_app(fake_engine(write_index_dir(tmp_path / "idx")), ServeSettings(allowed_hosts=allowed_hosts_for(
        "127.0.0.1")))
    with TestClient(app) as client:
        assert client.get("/v1/health", headers={"Host": host}).status_code == 200
        assert client.get("/v1/health", headers={"Host": "localhost.evil.example"}).status_code == 421


def test_health_and_metrics_count_connections(tmp_path: Path) -> None:
    with TestClient(create_app(fake_engine(write_index_dir(tmp_path / "idx")), ServeSettings())) as client:
        health = client.get("/v1/health").json()
        metrics = client.get("/metrics").text
    assert set(health["connections"]) == {"open", "clients", "refused", "timed_out"}
    assert "ragsieve_connections_open" in metrics
