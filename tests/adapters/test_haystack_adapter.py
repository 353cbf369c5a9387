"""The Haystack component inside a Haystack Pipeline (in-memory BM25 retrievers) on the demo index."""

from __future__ import annotations

from inspect import signature

import pytest
from haystack import Document, Pipeline
from haystack.components.joiners import DocumentJoiner
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from tests.adapters.candidates import OFF_TOPIC, PLANTED, QUESTION, assert_the_checks_worked

from ragsieve.adapters.haystack import SieveDocumentChecker

pytestmark = pytest.mark.slow


def build_pipeline(demo_index, checker: SieveDocumentChecker) -> Pipeline:
    """The demo corpus and a second, poisoned source, both retrieved by BM25 and joined."""
    corpus = InMemoryDocumentStore()
    corpus.write_documents([Document(id=c.id, content=c.text, meta={"source": c.source}) for c in demo_index.chunks])
    web = InMemoryDocumentStore()
    web.write_documents([Document(content=PLANTED, meta={"source": "evil.example"}),
                         Document(content=OFF_TOPIC, meta={"source": "recipes.example"})])
    pipe = Pipeline()
    pipe.add_component("corpus", InMemoryBM25Retriever(document_store=corpus, top_k=6))
    pipe.add_component("web", InMemoryBM25Retriever(document_store=web, top_k=2))
    pipe.add_component("joiner", DocumentJoiner())
    pipe.add_component("sieve", checker)
    pipe.connect("corpus.documents", "joiner.documents")
    pipe.connect("web.documents", "joiner.documents")
    pipe.connect("joiner.documents", "sieve.documents")
    return pipe


def test_the_component_in_a_pipeline_drops_planted_and_off_topic_documents(demo_index, sieve_checks):
    checker = SieveDocumentChecker()
    checker.sieve_checks = sieve_checks  # the shared, warmed-up checks (same config as the default)
    pipe = build_pipeline(demo_index, checker)
    out = pipe.run({"corpus": {"query": QUESTION}, "web": {"query": QUESTION}, "sieve": {"query": QUESTION}})
    kept, dropped = out["sieve"]["documents"], out["sieve"]["dropped"]
    assert len(kept) + len(dropped) == 8
    assert_the_checks_worked(checker.last_checked, [d.content for d in kept])
    by_text = {d.content: d for d in dropped}
    assert by_text[PLANTED].meta["ragsieve_dropped_by"] == "poison"
    assert by_text[OFF_TOPIC].meta["ragsieve_dropped_by"] == "judge"
    assert all(d.score == d.meta["ragsieve_relevance"] and d.meta["source"] for d in kept)


def test_the_component_serialises_with_the_pipeline(demo_index):
    checker = SieveDocumentChecker(config={"sieve": {"upper": 0.7}}, checks=["judge", "poison"])
    data = checker.to_dict()
    assert data["init_parameters"] == {"config": {"sieve": {"upper": 0.7}}, "checks": ["judge", "poison"]}
    back = SieveDocumentChecker.from_dict(data)
    assert back.sieve_checks.checks == ["judge", "poison"] and back.sieve_checks.config.sieve.upper == 0.7
    text = build_pipeline(demo_index, checker).dumps()
    # Haystack 3 loads classes only from modules the caller trusts; Haystack 2 has no allowlist
    trusted = {"allowed_modules": ["ragsieve.adapters.haystack"]}
    loaded = Pipeline.loads(text, **(trusted if "allowed_modules" in signature(Pipeline.loads).parameters else {}))
    sieve = loaded.get_component("sieve")
    assert isinstance(sieve, SieveDocumentChecker) and sieve.checks == ["judge", "poison"]
    assert SieveDocumentChecker().run(query=QUESTION, documents=[]) == {"documents": [], "dropped": []}
