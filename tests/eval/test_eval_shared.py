"""``ragsieve eval`` over shared work: every configuration gets the record it gets when run alone
(answer text, abstention, confidence, evidence, citations, decisions, signals, faithfulness),
while searches, judge scores and embeddings are computed once for all of them.

The demo corpus (Markdown and text files) indexed with the deterministic hash embedder, the
deterministic ``EchoLLM`` of the pinned-trace test, all 52 demo questions (answerable and not).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.helpers import HashEmbedder, copy_demo_corpus
from tests.test_pipeline_traces import EchoLLM

from ragsieve import Pipeline
from ragsieve.config import PipelineConfig
from ragsieve.eval.cli import make_judge, questions_per_minute, throughput_line
from ragsieve.eval.data import load_qa
from ragsieve.eval.harness import EvalCache, EvalSpec, default_specs, run_eval
from ragsieve.eval.shared import MemoJudge, MemoSearch, SharedWork
from ragsieve.index import Index
from ragsieve.sieve.judge import EvaluatorJudge
from ragsieve.verify import LexicalEmbeddingJudge

# Wall-clock fields: the only ones allowed to differ between the two ways of running.
TIMED = ("seconds", "stage_ms")


class CountingEmbedder(HashEmbedder):
    """The hash embedder, counting the texts it embeds (one count shared by every instance)."""

    def __init__(self, counter: list[int]) -> None:
        super().__init__()
        self.counter = counter

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.counter[0] += len(texts)
        return super().embed(texts)


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shared")
    Index.build(copy_demo_corpus(root), root / "idx", embedder=HashEmbedder())
    return root / "idx"


@pytest.fixture()
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Searches run and passages judged, counted under both ways of running."""
    counts = {"searches": 0, "judged": 0}
    search, score = Index.search, EvaluatorJudge.score

    def counting_search(self: Index, *args: Any, **kwargs: Any) -> Any:
        counts["searches"] += 1
        return search(self, *args, **kwargs)

    def counting_score(self: EvaluatorJudge, question: str, passages: Sequence[str]) -> list[float]:
        counts["judged"] += len(passages)
        return score(self, question, passages)

    monkeypatch.setattr(Index, "search", counting_search)
    monkeypatch.setattr(EvaluatorJudge, "score", counting_score)
    yield counts


def _specs(index_dir: Path) -> list[EvalSpec]:
    # the sieve, plain RAG, no retrieval, and an ablation that judges the same candidates as the sieve
    return default_specs(PipelineConfig(index_dir=str(index_dir)), [["verify"]])


def _without_timings(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k not in TIMED}


def test_shared_work_gives_every_configuration_its_answers_when_run_alone(
    tmp_path: Path, demo_index: Path, counted: dict[str, int]
) -> None:
    from ragsieve.demo import demo_data_path

    items = load_qa(Path(str(demo_data_path("questions.jsonl"))), None)
    assert len(items) == 52
    specs = _specs(demo_index)

    # Alone: each configuration in its own run, with its own index, model, embedder and judge.
    embedded_alone = [0]
    alone: dict[str, list[dict[str, Any]]] = {}
    for spec in specs:

        def build(s: EvalSpec) -> Pipeline:
            index = Index.open(demo_index, embedder=CountingEmbedder(embedded_alone))
            return Pipeline(s.config, index=index, llm=EchoLLM())

        judge = LexicalEmbeddingJudge(CountingEmbedder(embedded_alone))
        cache = EvalCache(tmp_path / f"alone-{spec.name}.jsonl")
        alone.update(run_eval(items, [spec], cache, judge, build=build, baseline_signals=True))
    searched_alone, judged_alone = counted["searches"], counted["judged"]

    # Shared: all configurations in one run over one SharedWork (the faithfulness judge's embedder too).
    embedded_shared = [0]
    shared = SharedWork(load_llm=lambda _: EchoLLM(), load_embedder=lambda _: CountingEmbedder(embedded_shared))
    judge = make_judge("lexical-embedding", specs[0].config, shared)
    together = run_eval(items, specs, EvalCache(tmp_path / "shared.jsonl"), judge, shared=shared,
                        baseline_signals=True)  # fmt: skip

    assert list(together) == [s.name for s in specs]
    for spec in specs:
        for want, got in zip(alone[spec.name], together[spec.name], strict=True):
            assert got["error"] is None, got["error"]
            assert _without_timings(got) == _without_timings(want), f"{spec.name} / {want['item_id']}"

    # The comparison has something to compare: the configurations answer differently, the sieve
    # abstains on some questions and answers others, and the faithfulness judge scored answers.
    sieve, plain = together["sieve"], together["plain"]
    assert any(s["answer"] != p["answer"] for s, p in zip(sieve, plain, strict=True))
    assert any(r["abstained"] for r in sieve) and any(not r["abstained"] for r in sieve)
    assert any(r["faithfulness"] for r in plain)

    # ... and less work was done: fewer searches, passages judged and texts embedded.
    searched_shared = counted["searches"] - searched_alone
    judged_shared = counted["judged"] - judged_alone
    assert shared.counts()["searches"] == searched_shared
    assert shared.counts()["judged_passages"] == judged_shared
    assert shared.counts()["embedded_texts"] == embedded_shared[0]
    assert 0 < searched_shared < searched_alone
    assert 0 < judged_shared < judged_alone
    assert 0 < embedded_shared[0] < embedded_alone[0]


def test_searches_share_hits_only_when_every_argument_is_the_same(demo_index: Path, counted: dict[str, int]) -> None:
    index = Index.open(demo_index, embedder=HashEmbedder())
    seen: list[int] = []
    memo = MemoSearch(index, on_hits=lambda hits: seen.append(len(hits)))
    cfg = PipelineConfig()
    q = "What is graphene made of?"
    first = memo.search(q, k=5, mode="hybrid", retrieval=cfg.retrieval)
    again = memo.search(q, k=5, mode="hybrid", retrieval=cfg.retrieval)
    assert [h.chunk.id for h in again] == [h.chunk.id for h in first] and counted["searches"] == 1
    # a caller that passes the question's vector shares with one that lets the index embed it
    memo.search(q, k=5, mode="hybrid", retrieval=cfg.retrieval, query_vector=HashEmbedder().embed([q])[0])
    assert counted["searches"] == 1
    # another k, mode, retrieval setting, filter or question is another search
    wider = memo.search(q, k=8, mode="hybrid", retrieval=cfg.retrieval)
    memo.search(q, k=5, mode="sparse", retrieval=cfg.retrieval)
    other = cfg.retrieval.model_copy(update={"rrf_k": 10})
    memo.search(q, k=5, mode="hybrid", retrieval=other)
    memo.search(q, k=5, mode="hybrid", retrieval=cfg.retrieval, where={"domain": index.domains[0]})
    memo.search("Who detected gravitational waves?", k=5, mode="hybrid", retrieval=cfg.retrieval)
    assert counted["searches"] == 6 and memo.searches == 6 and len(seen) == 6
    assert len(wider) == 8 and len(first) == 5
    # the results are the index's own
    assert [h.chunk.id for h in first] == [h.chunk.id for h in index.search(q, k=5, retrieval=cfg.retrieval)]
    # every other attribute is the index's
    assert memo.dir == index.dir and memo.domains == index.domains and memo.wrapped is index


def test_judge_scores_each_question_and_passage_once(demo_index: Path) -> None:
    inner = EvaluatorJudge(HashEmbedder())
    judge = MemoJudge(inner)
    judge.warm_up()
    assert (judge.name, judge.upper, judge.lower) == (inner.name, inner.upper, inner.lower)
    passages = ["Graphene is a single layer of carbon atoms.", "LIGO detected gravitational waves in 2015."]
    first = judge.score("What is graphene?", passages)
    assert judge.scored == 2
    # the same pair again, in another order and with a new passage: only the new one is scored
    again = judge.score("What is graphene?", [passages[1], "Mars is red.", passages[0]])
    assert judge.scored == 3 and again[0] == first[1] and again[2] == first[0]
    assert again == inner.score("What is graphene?", [passages[1], "Mars is red.", passages[0]])
    # another question is another pair
    judge.score("Who detected gravitational waves?", passages)
    assert judge.scored == 5


def test_configurations_with_different_settings_get_their_own_parts(demo_index: Path) -> None:
    shared = SharedWork(load_llm=lambda _: EchoLLM(), load_embedder=lambda _: HashEmbedder())
    base = PipelineConfig(index_dir=str(demo_index))
    other_model = base.model_copy(update={"llm": base.llm.model_copy(update={"n_ctx": 1024})})
    stages = base.stages.model_copy(update={"judge": base.stages.judge.model_copy(update={"model": "x"})})
    other_judge = base.model_copy(update={"stages": stages})
    assert shared.index(base) is shared.index(other_model)
    assert shared.llm(base.llm) is not shared.llm(other_model.llm)
    assert shared.judge(base) is not shared.judge(other_judge)
    assert shared.embedder(base.embedder) is shared.index(base).embedder


def test_throughput_is_reported_per_minute_of_answering() -> None:
    assert questions_per_minute(10, 120.0) == 5.0
    assert questions_per_minute(0, 30.0) is None
    assert "5.00 questions per minute" in throughput_line(10, 2, 120.0, True)
    assert "from the cache" in throughput_line(0, 2, 3.0, True)
