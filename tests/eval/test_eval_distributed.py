"""``run_eval`` on a Dask cluster: the records of the single-process path, pipelines built once per worker."""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import HashEmbedder, copy_corpus

from ragsieve.config import IngestConfig, PipelineConfig
from ragsieve.eval.data import QAItem
from ragsieve.eval.harness import EvalCache, EvalSpec, run_eval
from ragsieve.index import Index
from ragsieve.llm.base import ContinuationScore, Generation
from ragsieve.verify import LexicalEmbeddingJudge

QUESTIONS = [
    "What do ribosomes build?",
    "What is the largest planet?",
    "What makes ATP in the cell?",
    "Which star is closest to Earth?",
    "What does graphene consist of?",
    "Who landed on the Moon first?",
    "What is the Sun made of?",
]
ITEMS = [QAItem(id=f"q{i}", question=q, answers=["x"]) for i, q in enumerate(QUESTIONS)]
# Timings are the only fields that differ between two runs of the same answers.
TIMINGS = {"seconds", "stage_ms"}


class EchoLLM:
    """A deterministic model: the reply depends only on the prompt, and cites the first passage."""

    model_name = "echo"

    def warm_up(self) -> None:
        pass

    def generate(
        self, prompt: Any, *, max_tokens: int = 256, temperature: float = 0.0, stop: Any = None, seed: Any = None
    ) -> Generation:
        words = str(prompt).split()
        return Generation(f"The passage says {' '.join(words[-6:])} [1].", len(words), 8, "stop")

    def generate_json(self, prompt: Any, schema: Any, *, max_tokens: int = 256) -> Any:
        raise NotImplementedError

    def continuation_logprobs(self, prompt: Any, continuations: Any) -> list[ContinuationScore]:
        return [ContinuationScore(-float(len(c)), 1) for c in continuations]

    def next_token_logprobs(self, prompt: Any, candidates: Any) -> list[float]:
        return [-float(len(c)) for c in candidates]

    def perplexity(self, prompt: Any, answer: Any) -> float:
        return 1.0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "echo"}


BUILDS: list[tuple[str, int]] = []


def build_pipeline(index_dir: str, spec: EvalSpec) -> Any:
    from ragsieve.sieve.pipeline import Pipeline

    BUILDS.append((spec.name, threading.get_ident()))
    return Pipeline(spec.config, index=Index.open(index_dir, embedder=HashEmbedder()), llm=EchoLLM())


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("eval-dask")
    config = PipelineConfig(ingest=IngestConfig(extract_entities=False))
    Index.build(copy_corpus(root), root / "idx", config=config, embedder=HashEmbedder()).close()
    return str(root / "idx")


@pytest.fixture
def client():  # noqa: ANN201
    distributed = pytest.importorskip("dask.distributed")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def specs() -> list[EvalSpec]:
    plain = PipelineConfig(pipeline="plain")
    return [EvalSpec("plain", plain), EvalSpec("no-retrieval", plain, no_retrieval=True)]


def without_timings(records: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return {name: [{k: v for k, v in r.items() if k not in TIMINGS} for r in recs] for name, recs in records.items()}


def test_cluster_records_equal_the_single_process_records(tmp_path: Path, index_dir: str, client: Any) -> None:
    build = functools.partial(build_pipeline, index_dir)
    single = run_eval(
        ITEMS, specs(), EvalCache(tmp_path / "one.jsonl"), LexicalEmbeddingJudge(HashEmbedder()), build=build
    )
    BUILDS.clear()
    seen: list[tuple[int, int]] = []
    cache = EvalCache(tmp_path / "dask.jsonl")
    spread = run_eval(
        ITEMS,
        specs(),
        cache,
        LexicalEmbeddingJudge(HashEmbedder()),
        build=build,
        client=client,
        partition_size=1,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert without_timings(spread) == without_timings(single)
    assert any(r["faithfulness"] for r in spread["plain"]), "the judge scored the answers on the workers"
    # Seven one-question partitions, two configurations: each worker thread builds each pipeline at most once.
    assert len(BUILDS) == len(set(BUILDS)) <= 2 * len(specs())
    assert seen[-1] == (len(ITEMS) * 2, len(ITEMS) * 2)
    assert len(EvalCache(cache.path).load().records) == len(ITEMS) * 2, "the driver wrote every record"

    # Resumed: nothing is asked again, on the cluster or in this process.
    BUILDS.clear()
    again = run_eval(
        ITEMS, specs(), EvalCache(cache.path).load(), LexicalEmbeddingJudge(HashEmbedder()), build=build, client=client
    )
    assert again == spread and not BUILDS


def test_a_partly_cached_run_answers_only_the_missing_questions_on_the_cluster(
    tmp_path: Path, index_dir: str, client: Any
) -> None:
    build = functools.partial(build_pipeline, index_dir)
    cache = EvalCache(tmp_path / "c.jsonl")
    first = run_eval(ITEMS[:3], specs(), cache, None, build=build)
    rest = run_eval(ITEMS, specs(), EvalCache(cache.path).load(), None, build=build, client=client)
    assert [r["item_id"] for r in rest["plain"]] == [i.id for i in ITEMS]
    assert rest["plain"][:3] == first["plain"], "cached records are reused as they are"
    single = run_eval(ITEMS, specs(), EvalCache(tmp_path / "s.jsonl"), None, build=build)
    assert without_timings(rest) == without_timings(single)
