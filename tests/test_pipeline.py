"""End-to-end: ingest a fixture folder, search, and ask with the real bundled models."""

from __future__ import annotations

import pytest
from tests.helpers import copy_corpus

from ragsieve.config import PipelineConfig
from ragsieve.errors import InputError
from ragsieve.index import Index
from ragsieve.io import atomic_write_json
from ragsieve.llm.base import ContinuationScore, Generation
from ragsieve.pipeline import Pipeline, reweight_hits


@pytest.fixture(scope="module")
def fixture_index(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("e2e")
    return Index.build(copy_corpus(root), root / "idx", embedder=embedder)


class ScriptedLLM:
    """Returns a fixed reply; records the prompts it was given."""

    model_name = "scripted"

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.prompts: list = []

    def warm_up(self) -> None:
        pass

    def generate(self, prompt, *, max_tokens=256, temperature=0.0, stop=None, seed=None) -> Generation:
        self.prompts.append(prompt)
        return Generation(self.reply, 100, 10, "stop")

    def generate_json(self, prompt, schema, *, max_tokens=256):
        raise NotImplementedError

    def continuation_logprobs(self, prompt, continuations):
        return [ContinuationScore(0.0, 1) for _ in continuations]

    def next_token_logprobs(self, prompt, candidates):
        return [0.0 for _ in candidates]

    def perplexity(self, prompt, answer):
        return 1.0

    def count_tokens(self, text):
        return len(text.split())

    def to_dict(self):
        return {"backend": "scripted"}


def test_citation_markers_map_to_evidence_ids(fixture_index):
    llm = ScriptedLLM("Mitochondria make ATP [1]. Ribosomes build proteins [2] [9].")
    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=fixture_index, llm=llm)
    answer = pipe.ask("What do mitochondria produce?", k=3)
    assert answer.cited_ids == [answer.evidence[0].chunk.id, answer.evidence[1].chunk.id]
    assert answer.trace.stage("generate")[0]["citation_method"] == "markers"
    user_prompt = llm.prompts[0][-1]["content"]
    assert "[1] " in user_prompt and "Question: What do mitochondria produce?" in user_prompt


def test_similarity_attribution_when_the_model_gives_no_markers(fixture_index):
    llm = ScriptedLLM("The first crewed Moon landing was Apollo 11 in July 1969.")
    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=fixture_index, llm=llm)
    answer = pipe.ask("When did people first land on the Moon?")
    assert answer.cited_ids[0] == "astronomy/moon.txt:0"
    assert answer.trace.stage("generate")[0]["citation_method"] == "similarity"


def test_fixed_route_and_unknown_route(fixture_index):
    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=fixture_index, llm=ScriptedLLM("ok"))
    answer = pipe.ask("energy", route="biology")
    assert {h.chunk.domain for h in answer.evidence} == {"biology"}
    assert answer.trace.stage("route")[0]["searched"] == ["biology"]
    with pytest.raises(InputError, match="unknown domain 'geology'"):
        pipe.ask("energy", route="geology")


@pytest.mark.parametrize("question, message", [("", "empty"), ("  \n", "empty"), ("why " * 1000, "over the limit")])
def test_bad_questions(fixture_index, question, message):
    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=fixture_index, llm=ScriptedLLM("ok"))
    with pytest.raises(InputError, match=message):
        pipe.ask(question)


def test_reweighting_by_source_weights(fixture_index, tmp_path):
    hits = fixture_index.search("DNA enzyme protein", k=5)
    atomic_write_json(fixture_index.dir / "source_weights.json", {"weights": {"example-bio.org": 0.0}})
    try:
        reopened = Index.open(fixture_index.dir, embedder=fixture_index.embedder)
        reweighted = reweight_hits(reopened, hits)
        assert all(h.chunk.source != "example-bio.org" for h in reweighted[:2]) or all(
            h.score == 0 for h in reweighted if h.chunk.source == "example-bio.org"
        )
        assert [h.rank for h in reweighted] == list(range(1, len(hits) + 1))
        assert all(h.scores["source_weight"] == 0.0 for h in reweighted if h.chunk.source == "example-bio.org")
    finally:
        (fixture_index.dir / "source_weights.json").unlink()


@pytest.mark.slow
def test_ask_end_to_end_with_the_bundled_models(fixture_index, llm):
    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=fixture_index, llm=llm)
    answer = pipe.ask("What does nuclear fusion in the Sun's core turn hydrogen into?")
    assert answer.text.strip()
    assert answer.cited_ids, "the answer should be attributed to at least one evidence chunk"
    for cid in answer.cited_ids:
        assert fixture_index.get(cid).id == cid  # cited ids exist in the index
        assert cid in {h.chunk.id for h in answer.evidence}
    trace = answer.to_dict()["trace"]
    candidates = [e for e in trace["events"] if e["stage"] == "retrieve"][0]["candidates"]
    assert candidates and {"dense", "sparse", "fused"} <= set(candidates[0]["scores"])
    assert trace["llm_calls"] == 1 and trace["prompt_tokens"] > 50
    assert {"retrieve", "generate"} <= set(trace["timings_ms"])


@pytest.mark.slow
def test_no_retrieval_answers_from_the_model_alone(llm):
    pipe = Pipeline(PipelineConfig(pipeline="plain"), llm=llm)
    answer = pipe.ask("What is the capital of France?", no_retrieval=True)
    assert answer.text.strip() and answer.evidence == [] and answer.cited_ids == []
    assert answer.trace.stage("retrieve")[0]["skipped"] is True
