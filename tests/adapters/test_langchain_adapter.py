"""The LangChain retriever inside a LangChain chain (retriever | format) on the demo index."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from tests.adapters.candidates import OFF_TOPIC, PLANTED, QUESTION, assert_the_checks_worked

from ragsieve.adapters.langchain import SieveRetriever
from ragsieve.errors import ConfigError

pytestmark = pytest.mark.slow


class DemoRetriever(BaseRetriever):
    """A user's retriever: the demo index's top hits, plus what a poisoned or noisy source adds."""

    index: Any
    extra: list[Document] = []

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        hits = self.index.search(query, k=6)
        docs = [Document(page_content=h.chunk.text, metadata={"source": h.chunk.source}, id=h.chunk.id) for h in hits]
        return docs + self.extra


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(d.page_content for d in docs)


def test_the_retriever_drops_planted_and_off_topic_documents_in_a_chain(demo_index, sieve_checks):
    injected = [Document(page_content=PLANTED, metadata={"source": "evil.example"}),
                Document(page_content=OFF_TOPIC, metadata={"source": "recipes.example"})]
    sieve = SieveRetriever(retriever=DemoRetriever(index=demo_index, extra=injected), checks=sieve_checks)
    chain = sieve | RunnableLambda(format_docs)
    context = chain.invoke(QUESTION)
    assert "graphene" in context.lower() and PLANTED not in context and OFF_TOPIC not in context
    checked = sieve.last_checked
    assert checked is not None and len(checked.kept) + len(checked.dropped) == 8
    assert_the_checks_worked(checked, [c.hit.chunk.text for c in checked.kept])
    docs = sieve.invoke(QUESTION)
    assert docs and all(d.metadata["ragsieve_verdict"] in ("kept", "flagged") for d in docs)
    assert all(0.0 <= d.metadata["ragsieve_relevance"] <= 1.0 and d.metadata["ragsieve_reasons"] for d in docs)
    assert all(d.metadata["source"] for d in docs)  # the wrapped retriever's metadata stays


def test_the_retriever_over_a_ragsieve_index_with_dropped_documents(demo_index, sieve_checks):
    sieve = SieveRetriever(index=demo_index, checks=sieve_checks, candidates=6, include_dropped=True)
    docs = (sieve | RunnableLambda(lambda ds: ds)).invoke(QUESTION)
    verdicts = [d.metadata["ragsieve_verdict"] for d in docs]
    assert len(docs) == 6 and "dropped" in verdicts
    # kept first, then dropped, each dropped one with the check that dropped it and why
    assert verdicts.index("dropped") == sum(v != "dropped" for v in verdicts)
    for d in docs[verdicts.index("dropped"):]:
        assert d.metadata["ragsieve_dropped_by"] and d.metadata["ragsieve_reasons"]
    assert {d.id for d in docs} <= {c.id for c in demo_index.chunks}


def test_one_source_of_candidates():
    with pytest.raises(ConfigError, match="exactly one"):
        SieveRetriever()
