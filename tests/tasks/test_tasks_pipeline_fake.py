"""The task-adaptive pipeline's three paths and CRAG actions with fakes (no model loads)."""

from __future__ import annotations

import numpy as np
import pytest
from tasks_fakes import MALFORMED, HashEmbedder, ScriptedLLM

from ragsieve.errors import ConfigError, InputError
from ragsieve.sieve.adaptive import ListRetriever, TaskAdaptiveParts, refine_hits
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.tasks.config import TaskAdaptiveConfig
from ragsieve.tasks.evaluator import FEATURE_NAMES, TrainedRetrievalEvaluator
from ragsieve.types import Chunk

CHUNKS = [
    Chunk(
        id="w1",
        text="Frank Herbert wrote the novel Dune. The weather was mild that year.",
        doc_id="w",
        source="wiki",
        domain="wiki",
    ),
    Chunk(id="w2", text="Bananas are rich in potassium.", doc_id="w", source="wiki", domain="wiki"),
    Chunk(
        id="b1", text="Dune was published in 1965 by Chilton Books.", doc_id="b", source="web", domain="web"
    ),
]


@pytest.fixture()
def evaluator_path(tmp_path):
    ev = TrainedRetrievalEvaluator(upper=0.6, lower=0.2)
    ev.coef_ = np.array([8.0, 0.0, 0.0, 0.0, 0.0])[: len(FEATURE_NAMES)]
    ev.intercept_ = -3.0
    return str(ev.save(tmp_path / "ev.json"))


def task_pipeline(*args, ablate=(), **kwargs) -> Pipeline:
    """The task-adaptive preset with its components given."""
    return Pipeline.task_adaptive(TaskAdaptiveParts(*args, **kwargs), ablate=ablate)


def make(evaluator_path: str, texts=(), **cfg) -> tuple[Pipeline, ScriptedLLM]:
    emb = HashEmbedder()
    llm = ScriptedLLM(texts=list(texts))
    conf = TaskAdaptiveConfig(
        classifier="fixed",
        fixed_task="information_retrieval",
        evaluator_path=evaluator_path,
        hyde=False,
        **cfg,
    )
    return task_pipeline(llm, emb, ListRetriever(CHUNKS, emb), conf, k=2), llm


def stages(ans) -> list[str]:
    return [e["stage"] for e in ans.trace.events]


def test_general_qa_answers_directly(evaluator_path) -> None:
    pipe, llm = make(evaluator_path, texts=["Paris."])
    ans = pipe.ask("What is the capital of France?", task="general_qa")
    assert ans.text == "Paris." and ans.evidence == []
    assert "retrieval" not in stages(ans) and "retrieval_evaluation" not in stages(ans)
    assert llm.calls == 1


def test_sufficient_refines(evaluator_path) -> None:
    pipe, _ = make(evaluator_path, texts=["Frank Herbert [1]."], upper=0.0, lower=0.0)
    ans = pipe.ask("Who wrote the novel Dune?")
    assert ans.trace.stage("retrieval_evaluation")[0]["verdict"] == "sufficient"
    act = ans.trace.stage("retrieval_action")[0]
    assert act["action"] == "refine"
    assert "corrective_retrieval" not in stages(ans)
    assert ans.trace.stage("refine")[0]["chars_after"] < ans.trace.stage("refine")[0]["chars_before"]
    assert ans.cited_ids == [ans.evidence[0].chunk.id]


def test_insufficient_widens_to_other_partitions(evaluator_path) -> None:
    pipe, _ = make(
        evaluator_path, texts=["Dune publication", "In 1965."], upper=1.0, lower=1.0, domains=["wiki"]
    )
    ans = pipe.ask("When was Dune published?")
    assert ans.trace.stage("retrieval_action")[0]["action"] == "corrective_retrieval"
    corr = ans.trace.stage("corrective_retrieval")[0]
    assert corr["domains"] == ["web"] and corr["k"] == 4 and corr["hyde"] is True  # HyDE was off
    assert ans.trace.stage("query_rewrite")[0]["rewritten"] == "Dune publication"
    assert {h.chunk.domain for h in ans.evidence} == {"web"}


def test_partial_combines_both(evaluator_path) -> None:
    pipe, _ = make(evaluator_path, upper=1.0, lower=0.0, domains=["wiki"], rewrite_query=False)
    ans = pipe.ask("Who wrote the novel Dune?")
    assert ans.trace.stage("retrieval_action")[0]["action"] == "refine+corrective_retrieval"
    assert "refine" in stages(ans) and "corrective_retrieval" in stages(ans)


def test_empty_retrieval_still_answers(evaluator_path) -> None:
    emb = HashEmbedder()
    conf = TaskAdaptiveConfig(
        classifier="fixed",
        fixed_task="information_retrieval",
        evaluator_path=evaluator_path,
        hyde=False,
        rewrite_query=False,
    )
    pipe = task_pipeline(
        ScriptedLLM(texts=["A hypothesis.", "I don't know."]), emb, ListRetriever([], emb), conf
    )
    ans = pipe.ask("Who wrote Dune?")
    assert ans.text == "I don't know." and ans.evidence == []
    assert ans.trace.stage("retrieval_evaluation")[0]["verdict"] == "insufficient"
    assert ans.trace.stage("generation")[0]["path"] == "no-evidence"


def test_text_generation_records_reflection_rounds(evaluator_path) -> None:
    pipe, llm = make(
        evaluator_path,
        texts=["Bananas.", "Bananas.", "Bananas."],
        upper=0.0,
        lower=0.0,
        min_coverage=1.0,
        theta_sim=0.99,
        max_rounds=2,
    )
    ans = pipe.ask("Write a short note about the novel Dune", task="text_generation")
    rounds = ans.trace.stage("generation_reflection")
    assert [r["round"] for r in rounds] == [0, 1, 2]
    assert all({"coverage", "distinct2", "uncovered"} <= set(r) for r in rounds)
    assert "previous draft missed" in llm.prompts[-1]


def test_malformed_classifier_output_takes_default_path(evaluator_path) -> None:
    emb = HashEmbedder()
    llm = ScriptedLLM(texts=["answer"], json_objects=[MALFORMED, MALFORMED])
    conf = TaskAdaptiveConfig(
        classifier="llm-json",
        default_task="information_retrieval",
        evaluator_path=evaluator_path,
        hyde=False,
        evaluator="off",
    )
    pipe = task_pipeline(llm, emb, ListRetriever(CHUNKS, emb), conf)
    ans = pipe.ask("Who wrote Dune?")
    task = ans.trace.stage("task")[0]
    assert task["fallback"] and task["label"] == "information_retrieval"
    assert ans.text == "answer"


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="stages.tasks"):
        TaskAdaptiveConfig.from_stage({"hyde": "sometimes"})
    with pytest.raises(ConfigError, match="fixed_task"):
        task_pipeline(ScriptedLLM(), HashEmbedder(), None, TaskAdaptiveConfig(classifier="fixed"))


def test_refine_keeps_best_sentences_in_order(evaluator_path) -> None:
    from ragsieve.types import SearchHit

    hits = [SearchHit(CHUNKS[0], 1.0, 0, {})]
    out = refine_hits("q", hits, lambda q, s: [0.9, 0.1], top_sentences=5, min_score=0.5)
    assert out[0].chunk.text == "Frank Herbert wrote the novel Dune."
    out = refine_hits("q", hits, lambda q, s: [0.1, 0.2], top_sentences=5, min_score=0.5)
    assert out[0].chunk.text == "The weather was mild that year."  # at least the best one
    with pytest.raises(InputError):
        task_pipeline(
            ScriptedLLM(),
            HashEmbedder(),
            None,
            TaskAdaptiveConfig(classifier="tfidf", evaluator_path=evaluator_path),
        ).ask(" ")


def test_task_adaptive_is_a_preset_of_the_one_pipeline(evaluator_path) -> None:
    pipe, _ = make(evaluator_path, texts=["Frank Herbert [1]."], upper=0.0, lower=0.0)
    assert isinstance(pipe, Pipeline) and pipe.preset == "task-adaptive"
    assert [s.name for s in pipe.stages] == ["need", "retrieve", "judge", "generate"]
    emb = HashEmbedder()
    pipe.task_parts().retriever = ListRetriever(CHUNKS[2:], emb)  # benchmarks swap the pool per question
    ans = pipe.ask("When was Dune published?")
    assert {h.chunk.id for h in ans.evidence} <= {"b1"}
    judged = [d for d in ans.trace.decisions if d["check"] == "judge"]
    assert [d["id"] for d in judged] == ["b1"] and "score" in judged[0]
    assert {"need", "retrieve", "judge", "generate"} <= set(ans.trace.timings_ms)


def test_task_adaptive_ablation_skips_the_evaluator(evaluator_path) -> None:
    emb = HashEmbedder()
    conf = TaskAdaptiveConfig(
        classifier="fixed", fixed_task="information_retrieval", evaluator_path=evaluator_path, hyde=False
    )
    pipe = task_pipeline(
        ScriptedLLM(texts=["Herbert [1]."]), emb, ListRetriever(CHUNKS, emb), conf, k=2, ablate=["judge"]
    )
    ans = pipe.ask("Who wrote the novel Dune?")
    assert "retrieval_evaluation" not in stages(ans) and len(ans.evidence) == 2
