"""The service over a fake pipeline: contract, errors, auth, queueing, reload, shutdown, metrics."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
from fastapi.testclient import TestClient
from tests.serve.fakes import FakePipeline, ServerThread, fake_engine, write_index_dir

from ragsieve.serve.app import ServeSettings, answer_content, create_app, fast_json
from ragsieve.serve.engine import DEFAULT_MODEL_NAME, PIPELINE_NAMES
from ragsieve.serve.schemas import PipelineName, SearchResponse

ASK = "/v1/ask"
CHAT = "/v1/chat/completions"


@pytest.fixture()
def index_dir(tmp_path: Path) -> Path:
    return write_index_dir(tmp_path / "idx")


@pytest.fixture(autouse=True)
def _reset_fake() -> None:
    FakePipeline.delay_s = 0.0
    FakePipeline.running = 0
    FakePipeline.max_running = 0


def _client(index_dir: Path, **settings: Any) -> TestClient:
    return TestClient(create_app(fake_engine(index_dir), ServeSettings(**settings)))


def test_health_reports_generation_and_model(index_dir: Path) -> None:
    with _client(index_dir) as client:
        for _ in range(100):
            body = client.get("/v1/health").json()
            if body["status"] == "ok":
                break
            time.sleep(0.01)
        assert body["status"] == "ok"
        assert body["model_loaded"] is True and body["model"] == "fake-llm"
        assert body["index_generation"] and body["queue_capacity"] == 16


def test_ask_returns_the_cli_json_contract(index_dir: Path) -> None:
    with _client(index_dir) as client:
        resp = client.post(ASK, json={"question": "How do quantum dots emit light?"})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["pipeline"] == "direct" and body["index_generation"]
    assert {"answer", "abstained", "abstain_reason", "confidence", "claims", "evidence", "cited_ids"} <= set(body)
    verdicts = {d["verdict"] for d in body["trace"]["decisions"]}
    assert verdicts == {"kept", "dropped"}
    assert body["evidence"][0]["title"] == "Quantum dots"
    assert [c["supported"] for c in body["claims"]] == [True, False]


def test_chat_completion_has_cited_content_and_trace(index_dir: Path) -> None:
    with _client(index_dir) as client:
        resp = client.post(CHAT, json={"model": "ragsieve", "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "What is graphene?"},
            {"role": "assistant", "content": "..."},
            {"role": "user", "content": [{"type": "text", "text": "What is graphene made of?"}]},
        ]})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["object"] == "chat.completion"
    content = body["choices"][0]["message"]["content"]
    assert "[1]" in content and "Sources:\n[1] Graphene (" in content
    assert body["ragsieve_trace"]["question"] == "What is graphene made of?"
    assert body["usage"] == {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}


def test_chat_streams_openai_chunks_then_trace_then_done(index_dir: Path) -> None:
    question = {"model": "direct", "messages": [{"role": "user", "content": "What is graphene made of?"}]}
    with _client(index_dir) as client:
        plain = client.post(CHAT, json=question).json()["choices"][0]["message"]["content"]
        with client.stream("POST", CHAT, json={**question, "stream": True}) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            lines = [line for line in resp.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[len("data: "):]) for line in lines[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == plain
    assert len(chunks) > 5  # word by word, not one blob
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["ragsieve_trace"]["trace"]["decisions"]


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]}, 404, "model"),
        ({"model": "ragsieve", "messages": [{"role": "system", "content": "hi"}]}, 400, "messages"),
        ({"model": "ragsieve", "messages": [{"role": "user", "content": "   "}]}, 400, "messages"),
        ({"model": "ragsieve", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "messages"),
        ({"model": "ragsieve", "messages": []}, 422, "messages"),
        ({"model": "ragsieve", "messages": [{"role": "user", "content": "hi"}], "n": 3}, 422, "n"),
        ({"messages": [{"role": "user", "content": "hi"}]}, 422, "model"),
    ],
)
def test_bad_chat_requests_name_the_problem(index_dir: Path, body: dict[str, Any], status: int, param: str) -> None:
    with _client(index_dir) as client:
        resp = client.post(CHAT, json=body)
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["param"] == param and error["message"]


@pytest.mark.parametrize(
    ("question", "status"),
    [
        ("raise:InputError", 400),
        ("raise:ModelError", 503),
        ("raise:IndexStoreError", 503),
        ("raise:LLMOutputError", 502),
    ],
)
def test_library_errors_map_to_status_codes(index_dir: Path, question: str, status: int) -> None:
    with _client(index_dir) as client:
        resp = client.post(ASK, json={"question": question})
    assert resp.status_code == status
    assert "fake failure" in resp.json()["error"]["message"]


def test_malformed_bodies_and_paths_get_json_errors(index_dir: Path) -> None:
    with _client(index_dir) as client:
        not_json = client.post(ASK, content=b"{not json", headers={"Content-Type": "application/json"})
        unknown_field = client.post(ASK, json={"question": "x", "temperature": 2})
        unsupported = client.post(ASK, json={"question": "x", "route": "physics"})
        unknown_pipeline = client.post(ASK, json={"question": "x", "pipeline": "nope"})
        missing = client.get("/v2/nothing")
        wrong_method = client.get(ASK)
    assert not_json.status_code == 422 and "error" in not_json.json()
    assert unknown_field.status_code == 422 and unknown_field.json()["error"]["param"] == "temperature"
    assert unsupported.status_code == 400 and "does not take route" in unsupported.json()["error"]["message"]
    assert unknown_pipeline.status_code == 422 and unknown_pipeline.json()["error"]["param"] == "pipeline"
    assert missing.status_code == 404 and missing.json()["error"]["message"]
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["message"]


def test_search_ranks_with_per_retriever_scores_and_filters(index_dir: Path) -> None:
    with _client(index_dir) as client:
        resp = client.post("/v1/search", json={"query": "carbon lattice", "k": 3})
        filtered = client.post("/v1/search", json={"query": "carbon lattice", "k": 3, "where": {"domain": "physics"}})
        bad_k = client.post("/v1/search", json={"query": "carbon", "k": 0})
        bad_mode = client.post("/v1/search", json={"query": "carbon", "mode": "magic"})
        bad_route = client.post("/v1/search", json={"query": "carbon", "route": "biology"})
    hits = resp.json()["hits"]
    assert [h["rank"] for h in hits] == [1, 2, 3]
    assert {"dense", "sparse", "fused"} <= set(hits[0]["scores"])
    assert hits[0]["title"] in {"Graphene", "Diamond"}
    assert {h["domain"] for h in filtered.json()["hits"]} == {"physics"}
    assert resp.json()["trace"]["timings_ms"]["search"] >= 0
    assert bad_k.status_code == 422 and bad_mode.status_code == 422
    assert bad_route.status_code == 400 and "unknown domain 'biology'" in bad_route.json()["error"]["message"]


def test_classify_returns_a_distribution(index_dir: Path) -> None:
    with _client(index_dir) as client:
        resp = client.post("/v1/classify", json={"text": "a positive, joyful film", "labels": ["positive", "negative"]})
        dup = client.post("/v1/classify", json={"text": "x", "labels": ["a", "a"]})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert abs(sum(body["labels"].values()) - 1) < 1e-6 and body["prediction"] in ("positive", "negative")
    assert dup.status_code == 422 and "distinct" in dup.json()["error"]["message"]


def test_api_key_is_required_everywhere_but_health_and_page(index_dir: Path) -> None:
    with _client(index_dir, api_key="s3cret") as client:
        assert client.get("/v1/health").status_code == 200
        assert client.get("/").status_code == 200
        denied = client.post(ASK, json={"question": "graphene"})
        assert denied.status_code == 401 and denied.headers["WWW-Authenticate"] == "Bearer"
        assert client.get("/metrics").status_code == 401
        assert client.get("/openapi.json").status_code == 401
        wrong = client.post(ASK, json={"question": "graphene"}, headers={"Authorization": "Bearer s3cre"})
        assert wrong.status_code == 401
        ok = client.post(ASK, json={"question": "graphene"}, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200
        assert client.get("/metrics", headers={"X-API-Key": "s3cret"}).status_code == 200


def test_request_pipeline_names_follow_the_config() -> None:
    assert set(get_args(PipelineName)) == {DEFAULT_MODEL_NAME, *PIPELINE_NAMES}


def test_fast_json_validates_and_writes_nan_as_null() -> None:
    hit = {"id": "a", "rank": 1, "score": float("nan"), "scores": {"dense": float("inf")}}
    resp = fast_json(SearchResponse, {"query": "q", "hits": [hit], "trace": {}})
    body = json.loads(resp.body)
    assert body["hits"][0]["score"] is None and body["hits"][0]["scores"]["dense"] is None
    with pytest.raises(ValueError):
        fast_json(SearchResponse, {"query": "q"})


def test_answer_content_lists_only_cited_sources() -> None:
    answer = {"answer": "It is carbon [2].", "cited_ids": ["b"], "abstained": False,
              "evidence": [{"id": "a", "title": "A", "source": "a.md"}, {"id": "b", "title": "", "source": "b.md"}]}
    # No citation field (an older answer): the id, once.
    assert answer_content(answer) == "It is carbon [2].\n\nSources:\n[2] b"


def test_answer_content_cites_path_and_page_once() -> None:
    evidence = [
        {"id": "pdf/manual.pdf:3", "source": "pdf/manual.pdf", "title": "", "citation": "pdf/manual.pdf:6"},
        {"id": "md/guide.md:0", "source": "md/guide.md", "title": "Install guide",
         "citation": "md/guide.md#Install > Linux"},
        {"id": "md/x.md:0", "source": "md/x.md", "title": "md/x.md#Intro", "citation": "md/x.md#Intro"},
    ]
    answer = {"answer": "Run it [1][2][3].", "cited_ids": ["pdf/manual.pdf:3", "md/guide.md:0", "md/x.md:0"],
              "abstained": False, "evidence": evidence}
    sources = answer_content(answer).split("Sources:\n")[1].splitlines()
    assert sources == [
        "[1] pdf/manual.pdf:6",
        "[2] Install guide (md/guide.md#Install › Linux)",
        "[3] md/x.md#Intro",
    ]


# ---------------------------------------------------------------------- concurrency (real uvicorn)
async def _post_many(
    url: str, bodies: list[dict[str, Any]], path: str = ASK, timeout: float = 30
) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=timeout) as client:
        return list(await asyncio.gather(*(client.post(path, json=b) for b in bodies)))


def test_llm_work_is_serialised_and_a_full_queue_answers_429(index_dir: Path) -> None:
    FakePipeline.delay_s = 0.3
    app = create_app(fake_engine(index_dir), ServeSettings(queue_size=1))
    with ServerThread(app) as server:
        responses = asyncio.run(_post_many(server.url, [{"question": f"graphene {i}"} for i in range(5)]))
        metrics = httpx.get(server.url + "/metrics").text
    codes = sorted(r.status_code for r in responses)
    assert codes.count(200) >= 2 and codes.count(429) >= 1 and set(codes) <= {200, 429}
    rejected = next(r for r in responses if r.status_code == 429)
    assert int(rejected.headers["Retry-After"]) >= 1
    assert "queue is full" in rejected.json()["error"]["message"]
    assert FakePipeline.max_running == 1
    assert 'ragsieve_http_rejected_total{endpoint="/v1/ask"}' in metrics


def test_searches_run_while_the_llm_is_busy(index_dir: Path) -> None:
    app = create_app(fake_engine(index_dir), ServeSettings())

    async def scenario(url: str) -> tuple[float, int, int]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            slow = asyncio.ensure_future(client.post(ASK, json={"question": "sleep:3.0 graphene"}))
            await asyncio.sleep(0.2)
            start = time.perf_counter()
            found = await asyncio.gather(*(client.post("/v1/search", json={"query": "carbon"}) for _ in range(4)))
            elapsed = time.perf_counter() - start
            return elapsed, (await slow).status_code, sum(r.status_code == 200 for r in found)

    with ServerThread(app) as server:
        elapsed, slow_status, ok = asyncio.run(scenario(server.url))
    assert ok == 4 and slow_status == 200
    assert elapsed < 2.0  # did not wait for the 3 s answer


def test_deadline_answers_504(index_dir: Path) -> None:
    app = create_app(fake_engine(index_dir), ServeSettings(deadline_s=0.3))

    async def scenario(url: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            slow = asyncio.ensure_future(client.post(ASK, json={"question": "sleep:0.6 x"}))
            # the second question must queue behind the running one (sent together, either may
            # reach the server first)
            for _ in range(500):
                if FakePipeline.running:
                    break
                await asyncio.sleep(0.01)
            queued = await client.post(ASK, json={"question": "graphene"})
            return [await slow, queued]

    with ServerThread(app) as server:
        responses = asyncio.run(scenario(server.url))
    assert [r.status_code for r in responses] == [504, 504]
    assert "deadline" in responses[0].json()["error"]["message"]


def test_client_disconnect_cancels_queued_work(index_dir: Path) -> None:
    asked: list[str] = []
    original = FakePipeline._ask

    def recording(self: FakePipeline, question: str, k: int | None, no_retrieval: bool) -> Any:
        asked.append(question)
        return original(self, question, k, no_retrieval)

    app = create_app(fake_engine(index_dir), ServeSettings())

    async def scenario(url: str) -> int:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            first = asyncio.ensure_future(client.post(ASK, json={"question": "sleep:0.8 first"}))
            await asyncio.sleep(0.2)
            async with httpx.AsyncClient(base_url=url, timeout=0.2) as impatient:
                with pytest.raises(httpx.ReadTimeout):
                    await impatient.post(ASK, json={"question": "second"})
            return (await first).status_code

    FakePipeline._ask = recording  # type: ignore[method-assign]
    try:
        with ServerThread(app) as server:
            assert asyncio.run(scenario(server.url)) == 200
            time.sleep(0.3)
            assert app.state.queue.depth == 0
    finally:
        FakePipeline._ask = original  # type: ignore[method-assign]
    assert asked == ["sleep:0.8 first"]


def test_graceful_shutdown_finishes_in_flight_requests(index_dir: Path) -> None:
    app = create_app(fake_engine(index_dir), ServeSettings())
    server = ServerThread(app)
    result: dict[str, Any] = {}
    with server:
        def call() -> None:
            result["resp"] = httpx.post(server.url + ASK, json={"question": "sleep:0.8 graphene"}, timeout=30)

        caller = threading.Thread(target=call)
        caller.start()
        time.sleep(0.3)
        server.stop()  # what SIGTERM does: stop accepting, wait for in-flight requests
        caller.join(timeout=30)
    assert result["resp"].status_code == 200
    assert result["resp"].json()["answer"]


def test_reingested_index_is_picked_up_without_restart(tmp_path: Path) -> None:
    index_dir = write_index_dir(tmp_path / "idx", n_docs=2)
    engine = fake_engine(index_dir)
    with TestClient(create_app(engine, ServeSettings())) as client:
        before = client.post("/v1/search", json={"query": "buffer solution pH"}).json()
        # Re-ingest the way Index.build does: build beside, then swap the directory in.
        staged = write_index_dir(tmp_path / "staged", n_docs=5)
        os.replace(index_dir, tmp_path / "old")
        os.replace(staged, index_dir)
        shutil.rmtree(tmp_path / "old")
        after = client.post("/v1/search", json={"query": "buffer solution pH"}).json()
        health = client.get("/v1/health").json()
        metrics = client.get("/metrics").text
    assert "Buffers" not in [h["title"] for h in before["hits"]]
    assert after["hits"][0]["title"] == "Buffers"
    assert after["index_generation"] != before["index_generation"] == before["index_generation"]
    assert health["index_generation"] == after["index_generation"]
    assert "ragsieve_index_reloads_total 1.0" in metrics


def test_a_broken_reingest_keeps_the_previous_index_serving(tmp_path: Path) -> None:
    index_dir = write_index_dir(tmp_path / "idx", n_docs=3)
    with TestClient(create_app(fake_engine(index_dir), ServeSettings())) as client:
        first = client.post("/v1/search", json={"query": "graphene"}).json()
        chunks = (index_dir / "chunks.json").read_text(encoding="utf-8")
        (index_dir / "chunks.json").unlink()
        write_manifest = json.dumps({"n_chunks": 3, "t": time.time_ns()})
        (index_dir / "manifest.json").write_text(write_manifest + " ", encoding="utf-8")
        during = client.post("/v1/search", json={"query": "graphene"})
        health = client.get("/v1/health").json()
        (index_dir / "chunks.json").write_text(chunks, encoding="utf-8")
        (index_dir / "manifest.json").write_text(write_manifest, encoding="utf-8")
        after = client.get("/v1/health").json()
        client.post("/v1/search", json={"query": "graphene"})
        recovered = client.get("/v1/health").json()
    assert during.status_code == 200 and during.json()["index_generation"] == first["index_generation"]
    assert health["status"] == "degraded" and "still serving the previous one" in health["problem"]
    assert after["status"] == "degraded"  # health itself does not reload; the next request does
    assert recovered["status"] == "ok" and recovered["index_generation"] != first["index_generation"]


def test_metrics_count_requests_errors_and_stage_latency(index_dir: Path) -> None:
    with _client(index_dir) as client:
        client.post(ASK, json={"question": "graphene"})
        client.post(ASK, json={"question": ""})
        text = client.get("/metrics").text
    assert 'ragsieve_http_requests_total{endpoint="/v1/ask",method="POST",status="200"} 1.0' in text
    assert 'ragsieve_http_errors_total{endpoint="/v1/ask",status="422"} 1.0' in text
    assert 'ragsieve_stage_duration_seconds_count{stage="judge"} 1.0' in text
    assert "ragsieve_llm_queue_depth 0.0" in text
    assert 'ragsieve_http_request_duration_seconds_bucket{endpoint="/v1/ask"' in text


def test_page_is_served_self_contained(index_dir: Path) -> None:
    with _client(index_dir) as client:
        page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="ask-form"' in page.text and "ragsieveRender" in page.text
    assert "http://" not in page.text and "https://" not in page.text  # nothing fetched from elsewhere


# ---------------------------------------------------------------------- cited passages
def test_passage_route_returns_the_cited_text_and_location(index_dir: Path) -> None:
    with _client(index_dir) as client:
        resp = client.get("/v1/passages/chemistry/001:0")
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["id"] == "chemistry/001:0" and body["text"].startswith("Graphene is a single layer")
        assert body["title"] == "Graphene" and body["citation"] == "chemistry/001:0"
        assert body["index_generation"]
        # Ids with characters a URL must escape come back whole.
        assert client.get("/v1/passages/chemistry%2F001%3A0").json()["id"] == "chemistry/001:0"


@pytest.mark.parametrize("bad", ["../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd", "/etc/passwd", "nope:0"])
def test_passage_route_only_looks_ids_up(index_dir: Path, bad: str) -> None:
    with _client(index_dir) as client:
        resp = client.get("/v1/passages/" + bad)
    # A 404 either way: the client may normalise "../" out of the URL before it is sent.
    assert resp.status_code == 404 and "root:" not in resp.text
    if resp.request.url.path.startswith("/v1/passages/"):
        assert "no passage with id" in resp.json()["error"]["message"]


def test_passage_route_needs_the_api_key(index_dir: Path) -> None:
    with _client(index_dir, api_key="s3cret") as client:
        assert client.get("/v1/passages/chemistry/001:0").status_code == 401
        ok = client.get("/v1/passages/chemistry/001:0", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200


def test_passage_of_a_section_carries_its_heading_path_and_a_local_file_link(tmp_path: Path) -> None:
    from ragsieve.serve.app import PassageResponse, passage_of
    from ragsieve.types import Chunk

    chunk = Chunk(id="md/guide.md:2", text="Run the installer.", doc_id="md/guide.md", source="md/guide.md",
                  path="md/guide.md", heading=["Install", "Linux"], char_start=10, char_end=28)

    class OneChunkIndex:
        corpus_root = tmp_path

        def get(self, chunk_id: str) -> Chunk:
            if chunk_id != chunk.id:
                raise KeyError(chunk_id)
            return chunk

    local = PassageResponse.model_validate(passage_of(OneChunkIndex(), "md/guide.md:2", local=True))
    assert local.heading == ["Install", "Linux"] and local.citation == "md/guide.md#Install > Linux"
    assert local.link == (tmp_path / "md" / "guide.md").as_uri()
    # A client on another machine gets no file link (and so not the indexed folder's absolute path).
    remote = passage_of(OneChunkIndex(), "md/guide.md:2", local=False)
    assert remote["link"] is None and str(tmp_path) not in json.dumps(remote)
