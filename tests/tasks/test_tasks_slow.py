"""Each task-adaptive stage and the three paths end to end with the real bundled models."""

from __future__ import annotations

import pytest

from ragsieve.config import PipelineConfig
from ragsieve.expand.hyde import HyDEExpander
from ragsieve.sieve.adaptive import ListRetriever, TaskAdaptiveParts
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.tasks.classifier import LLMTaskClassifier
from ragsieve.tasks.evaluator import VERDICTS, LLMRetrievalEvaluator, TrainedRetrievalEvaluator
from ragsieve.tasks.labels import TASK_LABELS
from ragsieve.tasks.reflection import GenerationReflector, distinct_n, knowledge_coverage
from ragsieve.types import Chunk

pytestmark = pytest.mark.slow

TEXTS = {
    "bees": [
        "Honeybees pollinate apple, almond and cherry trees.",
        "A honeybee colony stores honey in hexagonal wax combs.",
        "Worker bees communicate the direction of flowers with a waggle dance.",
    ],
    "volcanoes": [
        "Mount Etna in Sicily is one of the most active volcanoes in Europe.",
        "Basaltic lava is runny because it contains little silica.",
    ],
}
CHUNKS = [
    Chunk(id=f"{d}-{i}", text=t, doc_id=f"{d}-doc", source=f"{d}.txt", domain=d, position=i)
    for d, ts in TEXTS.items()
    for i, t in enumerate(ts)
]


def test_llm_classifier_both_modes(llm) -> None:
    for mode in ("json", "logprob"):
        clf = LLMTaskClassifier(mode=mode)
        clf.warm_up(llm)
        pred = clf.classify("Write a short poem about autumn leaves.")
        assert pred.label in TASK_LABELS and pred.latency_ms > 0
        assert sum(pred.proba.values()) == pytest.approx(1.0)


def test_hyde_merges_and_dedupes_with_real_models(llm, embedder) -> None:
    retriever = ListRetriever(CHUNKS, embedder)
    calls: list[str] = []

    def search(q: str, k: int):
        calls.append(q)
        return retriever.search(q, k=k)

    res = HyDEExpander(max_sentences=3, max_tokens=32).retrieve(
        "What do honeybees pollinate?", llm, embedder, search, k=3
    )
    assert res.hypothesis and len(calls) == len(res.sub_queries) >= 2
    ids = [h.chunk.id for h in res.hits]
    assert len(ids) == len(set(ids)) == 3
    assert res.n_candidates >= 3
    assert [h.score for h in res.hits] == sorted((h.score for h in res.hits), reverse=True)
    assert res.hits[0].chunk.domain == "bees"


def test_evaluators_with_real_models(llm, embedder) -> None:
    ev = TrainedRetrievalEvaluator.bundled()
    rel, irr = ev.score_passages(
        "Which volcano in Sicily is very active?",
        [
            "Mount Etna in Sicily is one of the most active volcanoes in Europe.",
            "A honeybee colony stores honey in hexagonal wax combs.",
        ],
        embedder,
    )
    assert rel > irr
    v = LLMRetrievalEvaluator(timeout_s=60, max_tokens=64).evaluate(
        "Which volcano in Sicily is very active?", [CHUNKS[3].text], llm
    )
    assert v.verdict in VERDICTS and v.latency_ms > 0


def test_coverage_and_distinct2_with_real_embedder(embedder) -> None:
    pts = TEXTS["bees"]
    same = knowledge_coverage(pts, " ".join(pts), embedder, theta=0.9)
    assert same.coverage == 1.0
    other = knowledge_coverage(
        pts, "Basaltic lava is runny because it contains little silica.", embedder, 0.6
    )
    assert other.coverage == 0.0
    assert distinct_n("bees bees bees bees", 2) == pytest.approx(1 / 3)


def test_regeneration_loop_bound_with_real_llm(llm, embedder) -> None:
    from ragsieve.llm.base import ChatMessage

    prompts: list[list[str]] = []

    def gen(missing: list[str]) -> str:
        prompts.append(missing)
        msg = "Write one sentence about bees." + ("" if not missing else " Mention: " + "; ".join(missing))
        return llm.generate([ChatMessage(role="user", content=msg)], max_tokens=16).text

    refl = GenerationReflector(theta_sim=0.99, min_coverage=1.0, min_distinct2=1.0, max_rounds=1)
    res = refl.run(TEXTS["bees"], gen, embedder)
    assert len(res.rounds) <= 2 and len(prompts) == len(res.rounds)
    if len(res.rounds) == 2:
        assert prompts[1]  # the second round names the uncovered points


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory, embedder):
    from ragsieve.index import Index

    d = tmp_path_factory.mktemp("tasks-index") / "idx"
    Index.from_chunks(CHUNKS, d, embedder=embedder)
    return str(d)


def _pipeline(index_dir: str, llm, embedder, **stage) -> Pipeline:
    cfg = PipelineConfig.model_validate(
        {
            "index_dir": index_dir,
            "pipeline": "task-adaptive",
            "retrieval": {"k": 2},
            "generation": {"max_tokens": 32},
            "stages": {"tasks": {"text_max_tokens": 32, "max_rounds": 1, "hyde_max_tokens": 24, **stage}},
        }
    )
    return Pipeline.task_adaptive(TaskAdaptiveParts.from_config(cfg, llm=llm, embedder=embedder), ablate=cfg.ablate)


def test_end_to_end_general_qa(index_dir, llm, embedder) -> None:
    pipe = _pipeline(index_dir, llm, embedder)
    ans = pipe.ask("How many legs does a spider have?")
    task = ans.trace.stage("task")[0]
    assert task["method"] == "tfidf" and task["label"] == "general_qa"
    assert ans.evidence == [] and ans.text and not ans.trace.stage("retrieval")


def test_end_to_end_information_retrieval(index_dir, llm, embedder) -> None:
    pipe = _pipeline(index_dir, llm, embedder, hyde=True, evaluator="trained")
    ans = pipe.ask("Which trees do honeybees pollinate?", task="information_retrieval")
    names = [e["stage"] for e in ans.trace.events]
    assert names.index("hyde") < names.index("retrieval") < names.index("retrieval_evaluation")
    assert ans.trace.stage("retrieval_action")[0]["action"] in (
        "refine",
        "corrective_retrieval",
        "refine+corrective_retrieval",
    )
    assert ans.text and ans.evidence
    assert ans.to_dict()["trace"]["events"]


def test_end_to_end_text_generation(index_dir, llm, embedder) -> None:
    pipe = _pipeline(index_dir, llm, embedder, hyde=False, evaluator="trained", min_coverage=1.0)
    ans = pipe.ask("Write a short paragraph for children about honeybees.", task="text_generation")
    rounds = ans.trace.stage("generation_reflection")
    assert 1 <= len(rounds) <= 2
    assert all(0.0 <= r["coverage"] <= 1.0 and 0.0 <= r["distinct2"] <= 1.0 for r in rounds)
    assert ans.trace.stage("generation")[-1]["path"] == "text_generation"
