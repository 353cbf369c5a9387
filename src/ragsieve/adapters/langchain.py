"""A LangChain retriever that applies the sieve's checks to another retriever's documents.

:class:`SieveRetriever` wraps any LangChain ``BaseRetriever`` (or a ragsieve index or store) and
returns the documents :class:`ragsieve.sieve.checks.SieveChecks` keeps, best first, each with the
verdict in its metadata (``ragsieve_relevance`` on the judge's 0-1 scale, ``ragsieve_label``,
``ragsieve_verdict``, ``ragsieve_reasons``). It is a runnable like any retriever::

    from ragsieve.adapters.langchain import SieveRetriever

    sieve = SieveRetriever(retriever=vector_store.as_retriever(search_kwargs={"k": 10}))
    chain = sieve | (lambda docs: "\\n\\n".join(d.page_content for d in docs))
    chain.invoke("What is graphene?")

Needs the ``langchain`` extra: ``pip install 'ragsieve[langchain]'``.
"""

from __future__ import annotations

from typing import Any

from ragsieve.extras import require

# The adapter is the langchain extra: without it, importing this module names the extra.
require("langchain_core", "langchain", "the LangChain retriever adapter")

from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict, Field, PrivateAttr  # noqa: E402

from ragsieve.errors import ConfigError  # noqa: E402
from ragsieve.sieve.checks import CheckedCandidate, CheckedCandidates, SieveChecks, foreign_hit, unique_ids  # noqa: E402
from ragsieve.types import SearchHit  # noqa: E402

__all__ = ["SieveRetriever", "document_hit"]


def document_hit(doc: Document, rank: int) -> SearchHit:
    """A LangChain document as a candidate (its ``id``, ``metadata["source"]``, and a
    ``metadata["score"]`` when the retriever put one there)."""
    score = doc.metadata.get("score")
    return foreign_hit(
        doc.page_content,
        id=doc.id,
        source=doc.metadata.get("source"),
        metadata=doc.metadata,
        score=float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
        rank=rank,
        retriever="langchain",
    )


class SieveRetriever(BaseRetriever):
    """Any retriever's documents, through the sieve's candidate checks.

    ``retriever``: the LangChain retriever whose documents are checked; or ``index``: a ragsieve
    ``Index``/``Store`` searched for ``candidates`` chunks. ``checks``: the
    :class:`~ragsieve.sieve.checks.SieveChecks` to run (default: the sieve's, with the bundled
    evaluator as judge; pass ``SieveChecks(checks=("judge", "poison"))`` to keep every relevant
    document rather than the minimal cover). ``include_dropped`` appends the dropped documents
    (``ragsieve_verdict == "dropped"``) after the kept ones. The last run's
    :class:`~ragsieve.sieve.checks.CheckedCandidates` (trace included) is :attr:`last_checked`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: BaseRetriever | None = None
    index: Any = None
    candidates: int = Field(10, ge=1)
    checks: SieveChecks = Field(default_factory=SieveChecks)
    include_dropped: bool = False
    _last: CheckedCandidates | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        if (self.retriever is None) == (self.index is None):
            raise ConfigError(
                "SieveRetriever needs exactly one source of candidates: pass retriever= (a LangChain "
                "retriever) or index= (a ragsieve Index or Store)"
            )
        if self.index is not None and self.checks.embedder is None:
            # the index's own embedder serves the checks too (no second model in memory)
            self.checks.embedder = getattr(self.index, "embedder", None)

    @property
    def last_checked(self) -> CheckedCandidates | None:
        """The checks' full result for the last query (kept, dropped with reasons, trace)."""
        return self._last

    def warm_up(self) -> None:
        """Load the checks' models now rather than on the first query."""
        self.checks.warm_up()

    def _candidates(self, query: str, run_manager: CallbackManagerForRetrieverRun) -> list[tuple[SearchHit, Document]]:
        if self.retriever is not None:
            docs = self.retriever.invoke(query, config={"callbacks": run_manager.get_child()})
            hits = unique_ids(document_hit(d, i + 1) for i, d in enumerate(docs))
            return list(zip(hits, docs, strict=True))
        out = []
        for hit in self.index.search(query, k=self.candidates):
            meta = {"source": hit.chunk.source, "title": hit.chunk.title, "domain": hit.chunk.domain,
                    **hit.chunk.metadata, **{k: v for k, v in hit.chunk.location().items() if v is not None}}
            out.append((hit, Document(page_content=hit.chunk.text, metadata=meta, id=hit.chunk.id)))
        return out

    @staticmethod
    def _document(doc: Document, checked: CheckedCandidate) -> Document:
        return Document(page_content=doc.page_content, metadata={**doc.metadata, **checked.metadata()}, id=doc.id)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        pairs = self._candidates(query, run_manager)
        if not pairs:
            return []
        docs = {hit.chunk.id: doc for hit, doc in pairs}
        result = self.checks.check(query, [hit for hit, _ in pairs])
        self._last = result
        out = [self._document(docs[c.id], c) for c in result.kept]
        if self.include_dropped:
            out += [self._document(docs[c.id], c) for c in result.dropped]
        return out
