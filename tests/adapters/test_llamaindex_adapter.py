"""The LlamaIndex node postprocessor inside a RetrieverQueryEngine (MockLLM) on the demo index."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from tests.adapters.candidates import OFF_TOPIC, PLANTED, QUESTION, assert_the_checks_worked

from ragsieve.adapters.llamaindex import SievePostprocessor
from ragsieve.errors import InputError

pytestmark = pytest.mark.slow


class DemoRetriever(BaseRetriever):
    """A user's retriever: the demo index's top hits, plus what a poisoned or noisy source adds."""

    def __init__(self, index: Any, extra: list[NodeWithScore]) -> None:
        super().__init__()
        self.index = index
        self.extra = extra

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.index.search(query_bundle.query_str, k=6)
        nodes = [NodeWithScore(node=TextNode(id_=h.chunk.id, text=h.chunk.text, metadata={"source": h.chunk.source}),
                               score=h.score) for h in hits]
        return nodes + self.extra


def injected() -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=PLANTED, metadata={"source": "evil.example"}), score=0.9),
            NodeWithScore(node=TextNode(text=OFF_TOPIC, metadata={"source": "recipes.example"}), score=0.2)]


def test_the_postprocessor_in_a_query_engine_drops_planted_and_off_topic_nodes(demo_index, sieve_checks):
    sieve = SievePostprocessor(checks=sieve_checks)
    engine = RetrieverQueryEngine.from_args(
        DemoRetriever(demo_index, injected()), llm=MockLLM(max_tokens=8), node_postprocessors=[sieve]
    )
    response = engine.query(QUESTION)
    texts = [n.node.get_content() for n in response.source_nodes]
    assert texts and PLANTED not in texts and OFF_TOPIC not in texts
    checked = sieve.last_checked
    assert checked is not None and len(checked.kept) + len(checked.dropped) == 8
    assert_the_checks_worked(checked, texts)
    for n in response.source_nodes:
        assert n.score == n.node.metadata["ragsieve_relevance"]  # the judge's 0-1 relevance
        assert n.node.metadata["ragsieve_verdict"] in ("kept", "flagged") and n.node.metadata["source"]
        # the verdict is metadata for the application, not text for the LLM
        assert "ragsieve_reasons" not in n.node.get_content(metadata_mode="llm")


def test_the_postprocessor_on_its_own_keeps_dropped_nodes_when_asked(demo_index, sieve_checks):
    nodes = DemoRetriever(demo_index, injected()).retrieve(QUESTION)
    out = SievePostprocessor(checks=sieve_checks, include_dropped=True).postprocess_nodes(nodes, query_str=QUESTION)
    assert len(out) == len(nodes)
    dropped = [n for n in out if n.node.metadata["ragsieve_verdict"] == "dropped"]
    assert {n.node.get_content() for n in dropped} >= {PLANTED, OFF_TOPIC} and all(n.score == 0.0 for n in dropped)
    assert all(n.node.metadata == {"source": n.node.metadata["source"]} for n in nodes)  # originals untouched
    with pytest.raises(InputError, match="question"):
        SievePostprocessor(checks=sieve_checks).postprocess_nodes(nodes)
