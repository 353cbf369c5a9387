"""The service follows re-ingests of a real (generations + CURRENT) index: atomically between
requests, never mixing generations in one answer, counting reloads and reporting the generation."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient
from tests.helpers import HashEmbedder
from tests.reliability.support import FAST
from tests.serve.fakes import FakeLLM, FakePipeline, ServerThread

from ragsieve.index import Index
from ragsieve.serve.app import ServeSettings, create_app
from ragsieve.serve.engine import Engine

TAG = re.compile(r"ver(\d+)tag")


def _write_version(corpus: Path, version: int, with_gone: bool) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    for name in ("sun", "moon", "mars", "venus"):
        (corpus / f"{name}.txt").write_text(
            f"alpha beta {name} ver{version}tag. The {name} is described in edition {version}."
        )
    gone = corpus / "gone.txt"
    if with_gone:
        gone.write_text(f"zeppelin quokka alpha ver{version}tag: a document that a later edition deletes.")
    elif gone.exists():
        gone.unlink()


def _engine(index_dir: Path, embedder: HashEmbedder) -> Engine:
    config = FAST.model_copy(update={"index_dir": str(index_dir), "pipeline": "direct"})
    return Engine(
        config,
        pipeline_factory=FakePipeline,
        index_opener=lambda d: Index.open(d, embedder=embedder),
        llm=FakeLLM(),
    )


def _build(corpus: Path, index_dir: Path, embedder: HashEmbedder) -> str:
    index = Index.build(corpus, index_dir, config=FAST, embedder=embedder)
    generation = index.generation
    index.close()
    return generation


def test_a_reingest_is_served_without_restart(tmp_path: Path) -> None:
    corpus, index_dir, embedder = tmp_path / "corpus", tmp_path / "idx", HashEmbedder()
    _write_version(corpus, 1, with_gone=True)
    first = _build(corpus, index_dir, embedder)
    with TestClient(create_app(_engine(index_dir, embedder), ServeSettings())) as client:
        before = client.post("/v1/search", json={"query": "zeppelin quokka", "k": 3}).json()
        _write_version(corpus, 2, with_gone=False)  # edit every document, delete one
        second = _build(corpus, index_dir, embedder)
        after = client.post("/v1/search", json={"query": "zeppelin quokka", "k": 3}).json()
        health = client.get("/v1/health").json()
        metrics = client.get("/metrics").text
    assert before["index_generation"] == first and before["hits"][0]["source"] == "gone.txt"
    assert after["index_generation"] == second != first
    assert "gone.txt" not in [hit["source"] for hit in after["hits"]]
    assert all("ver2tag" in hit["text"] for hit in after["hits"])
    assert health["index_generation"] == second
    assert "ragsieve_index_reloads_total 1.0" in metrics


def test_fifty_clients_see_three_reingests_atomically(tmp_path: Path) -> None:
    """50 concurrent clients on /v1/search while the index is re-ingested 3 times."""
    corpus, index_dir, embedder = tmp_path / "corpus", tmp_path / "idx", HashEmbedder()
    _write_version(corpus, 0, with_gone=False)
    first = _build(corpus, index_dir, embedder)
    version_of = {first: 0}
    started: dict[int, float] = {0: 0.0}  # version -> when its ingest began
    published: dict[int, float] = {0: 0.0}  # version -> when its ingest had returned
    engine = _engine(index_dir, embedder)
    app = create_app(engine, ServeSettings(search_threads=2))
    stop = threading.Event()
    failures: list[BaseException] = []
    answered: set[Any] = set()  # the index generations the clients have been answered from

    def until_answered(generation: Any) -> None:
        # a loaded machine may answer nothing in a fixed pause: each version is re-ingested over
        # only once some client has been answered from the one before (at most 30 s)
        end = time.monotonic() + 30
        while generation not in answered and time.monotonic() < end:
            time.sleep(0.05)

    def reingest() -> None:
        try:
            until_answered(first)
            for version in (1, 2, 3):
                time.sleep(1.0)
                _write_version(corpus, version, with_gone=False)
                started[version] = time.monotonic()
                generation = _build(corpus, index_dir, embedder)
                version_of[generation] = version
                published[version] = time.monotonic()
                until_answered(generation)
            time.sleep(0.6)
        except BaseException as exc:  # surfaced by the assertions below
            failures.append(exc)
        finally:
            stop.set()

    results: list[tuple[float, float, int, dict[str, Any] | str]] = []

    async def client_loop(client: httpx.AsyncClient) -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                resp = await client.post("/v1/search", json={"query": "alpha beta", "k": 4})
                body: dict[str, Any] | str = resp.json() if resp.status_code == 200 else resp.text
                results.append((t0, time.monotonic(), resp.status_code, body))
                if isinstance(body, dict):
                    answered.add(body.get("index_generation"))
            except httpx.HTTPError as exc:
                results.append((t0, time.monotonic(), 0, repr(exc)))

    async def load(url: str) -> None:
        limits = httpx.Limits(max_connections=50, max_keepalive_connections=50)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
            await asyncio.gather(*(client_loop(client) for _ in range(50)))

    with ServerThread(app) as server:
        writer = threading.Thread(target=reingest)
        writer.start()
        asyncio.run(load(server.url))
        writer.join(timeout=30)
        metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
        health = httpx.get(f"{server.url}/v1/health", timeout=10).json()

    assert not failures, failures
    errors = [r for r in results if r[2] != 200]
    assert not errors, errors[:3]
    assert len(results) >= 100, len(results)
    mixed, stale = [], []
    for t0, t1, _, body in results:
        assert isinstance(body, dict)
        version = version_of[body["index_generation"]]
        tags = {int(m) for hit in body["hits"] for m in TAG.findall(hit["text"])}
        if tags != {version}:
            mixed.append((version, tags))
        # The newest generation whose ingest had returned before the request started ...
        newest_at_start = max(v for v, when in published.items() if when <= t0)
        # ... and none newer than the last ingest that had begun before the answer came back.
        newest_possible = max(v for v, when in started.items() if when <= t1)
        if not newest_at_start <= version <= newest_possible:
            stale.append((version, newest_at_start, newest_possible))
    assert not mixed, mixed[:3]
    assert not stale, stale[:3]
    assert {version_of[r[3]["index_generation"]] for r in results if isinstance(r[3], dict)} == {0, 1, 2, 3}
    assert engine.reloads == 3
    assert "ragsieve_index_reloads_total 3.0" in metrics
    assert version_of[health["index_generation"]] == 3
