"""Smaller guarantees: racing ingests into a new folder, atomic folder saves, a repeated JSONL id,
a sparse query with no searchable word, Retry-After below zero, the bounded total deadline of one
LLM call, and cancellation reaching the HTTP and llama.cpp backends."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.fault_server import Fault
from tests.helpers import HashEmbedder
from tests.reliability.support import FAST, start_worker, write_corpus

from ragsieve.cancel import CancelToken, GenerationCancelledError, cancel_scope
from ragsieve.errors import ModelError, RagsieveError
from ragsieve.http import make_client, post_json
from ragsieve.index import BuildReport, Index, storage
from ragsieve.io import atomic_directory
from ragsieve.llm.openai_http import OpenAICompatibleLLM


# ---------------------------------------------------------------------- racing ingests
def test_a_new_folder_another_ingest_is_creating_is_not_refused(tmp_path: Path) -> None:
    target = tmp_path / "idx"
    target.mkdir()
    # The instant between the other ingest's mkdir and its marker rename.
    (target / "..ragsieve-index.k2x9q1ab.tmp").write_text("{}")
    assert storage.prepare_target(target) == target
    assert storage.dir_state(target) == "index"


def test_two_ingests_racing_to_create_a_new_index_both_succeed(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    target = tmp_path / "fresh" / "idx"
    workers = [start_worker(corpus, target) for _ in range(2)]
    outcomes = [w.communicate(timeout=120) for w in workers]
    codes = [w.returncode for w in workers]
    assert codes == [0, 0], [err for _, err in outcomes]
    generations = {json.loads(out)["generation"] for out, _ in outcomes}
    assert len(generations) == 2  # serialised by the writer lock, each published whole
    with Index.open(target, embedder=HashEmbedder()) as index:
        assert index.generation in generations


# ---------------------------------------------------------------------- atomic_directory
def test_concurrent_saves_are_atomic_for_readers(tmp_path: Path) -> None:
    target = tmp_path / "proxy-filter"
    with atomic_directory(target) as tmp:
        (tmp / "a.txt").write_text("start")
        (tmp / "b.txt").write_text("start")
    stop = threading.Event()
    problems: list[str] = []
    errors: list[BaseException] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                a = (target / "a.txt").read_text()
                if not a or a.count(":") != 1 and a != "start":
                    problems.append(f"partial file {a!r}")
            except FileNotFoundError:
                problems.append("target missing")

    def saver(n: int) -> None:
        try:
            for i in range(15):
                with atomic_directory(target) as tmp:
                    (tmp / "a.txt").write_text(f"{n}:{i}")
                    (tmp / "b.txt").write_text(f"{n}:{i}")
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    savers = [threading.Thread(target=saver, args=(n,)) for n in range(4)]
    for t in readers + savers:
        t.start()
    for t in savers:
        t.join(timeout=60)
    stop.set()
    for t in readers:
        t.join(timeout=10)
    assert not errors, errors[:3]
    assert not problems, problems[:3]
    assert (target / "a.txt").read_text() == (target / "b.txt").read_text()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "proxy-filter"]
    assert not leftovers, leftovers


def test_a_failed_save_is_a_ragsieve_error_with_a_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "saved"

    def disk_full(root: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("ragsieve.io.fsync_tree", disk_full)
    with (
        pytest.raises(RagsieveError, match="saving .*saved failed .*No space left.*save again"),
        atomic_directory(target) as tmp,
    ):
        (tmp / "a.txt").write_text("x")
    assert not target.exists()


# ---------------------------------------------------------------------- ingest and search inputs
def test_one_repeated_jsonl_id_skips_that_record_with_a_warning(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    (corpus / "biology" / "notes.jsonl").write_text(
        '{"id": "n1", "text": "Leaves turn light into sugar by photosynthesis.", "kind": "plant"}\n'
        '{"id": "n1", "text": "Ferns spread by spores carried on the wind.", "kind": "plant"}\n'
        '{"id": "n2", "text": "Bacteria divide by binary fission.", "kind": "microbe"}\n'
    )
    report = BuildReport()
    index = Index.build(corpus, tmp_path / "idx", config=FAST, embedder=HashEmbedder(), report=report)
    texts = " ".join(c.text for c in index.chunks)
    index.close()
    assert "photosynthesis" in texts and "binary fission" in texts
    assert "Ferns" not in texts
    skipped = " ".join(f"{where}: {why}" for where, why in report.skipped)
    assert "line 2" in skipped and "repeats id 'n1'" in skipped


@pytest.mark.parametrize("query", ["the of and to", "🔥🚀 ✨", "?!", "and 🎉"])
def test_a_sparse_query_without_searchable_words_returns_a_note(small_index: Index, query: str) -> None:
    from tests.serve.fakes import FakeLLM, FakePipeline

    from ragsieve.serve.engine import Engine

    config = FAST.model_copy(update={"index_dir": str(small_index.dir), "pipeline": "direct"})
    engine = Engine(config, pipeline_factory=FakePipeline, index_opener=lambda d: small_index, llm=FakeLLM())
    empty = engine.search(query, k=3, mode="sparse")
    normal = engine.search("red planet", k=3, mode="sparse")
    assert empty["hits"] == [] and "stopwords" in empty["note"] and "dense or hybrid" in empty["note"]
    assert normal["hits"] and "note" not in normal


# ---------------------------------------------------------------------- the HTTP client
def test_a_negative_retry_after_falls_back_to_the_backoff(fault_server, monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr("ragsieve.http.time.sleep", waits.append)
    fault_server.script(Fault.error(429, retry_after="-5"), Fault.error(429, retry_after="0"), Fault.json({"ok": 1}))
    client = make_client(fault_server.url, "RAGSIEVE_NO_KEY", 1.0)
    reply = post_json(client, "/v1/x", {}, service="test server", max_retries=3, backoff_s=0.25)
    assert reply == {"ok": 1}
    assert len(waits) == 2 and all(w >= 0.25 for w in waits), waits  # never back-to-back


def test_one_llm_call_has_a_bounded_total_deadline(fault_server, monkeypatch: pytest.MonkeyPatch) -> None:
    fault_server.script(Fault.hang())
    monkeypatch.setattr("ragsieve.http.TOTAL_DEADLINE_S", 1.0)
    llm = OpenAICompatibleLLM("m", fault_server.url, api_key_env="RAGSIEVE_NO_KEY", timeout_s=0.4, max_retries=8)
    start = time.monotonic()
    with pytest.raises(ModelError, match="total deadline|timeout_s"):
        llm.generate("hi")
    assert time.monotonic() - start < 2.0  # not 9 attempts x 0.4 s plus backoff


def test_one_question_shares_one_deadline_across_its_calls(fault_server) -> None:
    from ragsieve.http import question_deadline

    fault_server.script(Fault.hang())
    llm = OpenAICompatibleLLM("m", fault_server.url, api_key_env="RAGSIEVE_NO_KEY", timeout_s=0.5, max_retries=0)
    start = time.monotonic()
    failures = 0
    with question_deadline(1.2):
        for _ in range(5):  # a question that would make five calls of 0.5 s each
            with pytest.raises(ModelError):
                llm.generate("hi")
            failures += 1
    assert failures == 5 and time.monotonic() - start < 2.0


def test_the_default_total_deadline_is_at_most_two_minutes() -> None:
    import ragsieve.http as http

    assert http.TOTAL_DEADLINE_S <= 120.0


def test_a_cancelled_call_closes_the_stream_of_a_hung_server(fault_server) -> None:
    fault_server.script(Fault.hang())
    client = make_client(fault_server.url, "RAGSIEVE_NO_KEY", 30.0)
    token = CancelToken()
    threading.Timer(0.3, token.cancel, args=("the client disconnected",)).start()
    start = time.monotonic()
    with cancel_scope(token), pytest.raises(GenerationCancelledError, match="client disconnected"):
        post_json(client, "/v1/x", {}, service="test server", max_retries=3, backoff_s=0.1)
    assert time.monotonic() - start < 1.5


def test_llama_cpp_stops_generating_between_tokens_when_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:  # the loop below plays llama.cpp; only its criteria list is needed
        import sys
        import types

        class StoppingCriteriaList(list):  # type: ignore[type-arg]
            def __call__(self, ids: Any, logits: Any) -> bool:
                return any(criterion(ids, logits) for criterion in self)

        monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(StoppingCriteriaList=StoppingCriteriaList))
    from ragsieve.llm.llama_cpp import LlamaCppLLM

    produced: list[int] = []

    class FakeLlama:
        def create_completion(self, *, stopping_criteria: Any = None, **_: Any) -> dict[str, Any]:
            for n in range(3000):  # one token per millisecond: 3 s uncancelled
                time.sleep(0.001)
                produced.append(n)
                if stopping_criteria is not None and stopping_criteria([n], None):
                    break
            return {"choices": [{"text": "x" * len(produced), "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": len(produced)}}

        def detokenize(self, ids: Any) -> bytes:
            return b""

    llm = LlamaCppLLM(stop_repetition_ngram=0)
    monkeypatch.setattr(llm, "_model", lambda: FakeLlama())
    monkeypatch.setattr(llm, "_render_with_stops", lambda prompt: ("prompt", []))
    monkeypatch.setattr(llm, "_tokens_of_rendered", lambda text: [1, 2, 3])
    monkeypatch.setattr(llm, "_check_fits", lambda n, what: None)
    monkeypatch.setattr(llm, "reset_cache", lambda keep_saved=False: None)
    token = CancelToken()
    threading.Timer(0.2, token.cancel, args=("past the 0.2 s deadline",)).start()
    start = time.monotonic()
    with cancel_scope(token), pytest.raises(GenerationCancelledError):
        llm.generate("hi", max_tokens=5000)
    assert time.monotonic() - start < 1.5 and len(produced) < 3000
