"""The stages of a built preset share one embedding memo: the candidates' vectors come from the
index's stored rows, and a text one check embedded is not embedded again by the next."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from tests.helpers import HashEmbedder, copy_corpus
from tests.test_pipeline_traces import EchoLLM

from ragsieve import Pipeline
from ragsieve.config import PipelineConfig
from ragsieve.index import Index
from ragsieve.sieve.build import SharedEmbedder
from ragsieve.sieve.retrieve import CandidateSearch
from ragsieve.sieve.state import Ref
from ragsieve.types import Chunk, SearchHit, Trace


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return super().embed(texts)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("memo")
    return Index.build(copy_corpus(root), root / "idx", embedder=HashEmbedder())


def test_a_sieve_ask_embeds_no_indexed_passage_and_no_text_twice(index):
    counting = CountingEmbedder()
    index.embedder = counting
    pipe = Pipeline(PipelineConfig(pipeline="sieve", index_dir=str(index.dir), sieve={"need": "always"}),
                    index=index, llm=EchoLLM())
    answer = pipe.ask("What is the Moon?")
    judged = [d["id"] for d in answer.trace.decisions if d["check"] == "judge"]
    assert judged, "the judge scored no candidate"
    passages = {index.get(i).text for i in judged}
    assert not passages & set(counting.texts), "a candidate passage was embedded again"
    # the search takes the question's vector from the memo the checks embed it with
    repeated = {t for t in counting.texts if counting.texts.count(t) > 1}
    assert not repeated, repeated


@pytest.mark.parametrize("question", ["What is the Moon?", "When did Apollo 11 land on the Moon?"])
def test_the_cold_path_with_the_need_probe_embeds_nothing_twice(index, question):
    # need=auto (the default): the task router, then a probe search the judge scores
    counting = CountingEmbedder()
    index.embedder = counting
    pipe = Pipeline(PipelineConfig(pipeline="sieve", index_dir=str(index.dir)), index=index, llm=EchoLLM())
    answer = pipe.ask(question)
    assert answer.trace.stage("need") and answer.trace.stage("judge")
    assert question in counting.texts
    repeated = sorted({t for t in counting.texts if counting.texts.count(t) > 1})
    assert not repeated, f"embedded twice in one question: {repeated}"


def test_a_search_with_another_embedder_than_the_index_embeds_the_question_itself(index):
    # the memo wraps a different embedder than the index's: its vector would not match the rows
    index.embedder = HashEmbedder()
    other = CountingEmbedder()
    shared = SharedEmbedder(Ref(index), inner=lambda: other)
    search = CandidateSearch(Ref(index), PipelineConfig().retrieval, sieve=True, wide=False, embedder=shared)
    hits = search("What is the Moon?", Trace(query="What is the Moon?"))
    assert hits and other.texts == []


def test_only_hits_whose_text_is_the_indexed_chunk_take_its_stored_vector(index):
    index.embedder = HashEmbedder()
    shared = SharedEmbedder(Ref(index))
    indexed = index.chunks[0]
    foreign = Chunk(id=index.chunks[1].id, text="a passage from another retriever", doc_id="x", source="x")
    hits = [SearchHit(indexed, 1.0, 1, {}), SearchHit(foreign, 0.5, 2, {})]
    shared.remember_hits(hits)
    memo = shared()
    # the indexed chunk and its sentences (stored at ingest); nothing of the foreign passage
    from ragsieve.index.sentences import own_sentences

    assert len(memo) == 1 + len(own_sentences(indexed.text))
    assert foreign.text not in memo._vectors
    np.testing.assert_array_equal(memo.embed([indexed.text])[0], index.embeddings[index.row(indexed.id)])


def test_no_memo_without_an_index():
    assert SharedEmbedder(Ref(None))() is None
    SharedEmbedder(Ref(None)).remember_hits([])  # nothing to remember into: no error


def test_stored_vectors_that_are_not_unit_vectors_are_not_taken(index, monkeypatch):
    index.embedder = HashEmbedder()
    monkeypatch.setattr(index, "normalized", False)
    shared = SharedEmbedder(Ref(index))
    shared.remember_hits([SearchHit(index.chunks[0], 1.0, 1, {})])
    assert len(shared()) == 0
