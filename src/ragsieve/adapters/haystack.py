"""A Haystack 2.x component that applies the sieve's checks to retrieved documents.

:class:`SieveDocumentChecker` takes ``query`` and ``documents`` (from any retriever) and returns
``documents`` (kept by :class:`ragsieve.sieve.checks.SieveChecks`, best first, with the judge's
0-1 relevance as the score) and ``dropped`` (each with its reasons in ``meta``)::

    from haystack import Pipeline
    from ragsieve.adapters.haystack import SieveDocumentChecker

    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=10))
    pipe.add_component("sieve", SieveDocumentChecker())
    pipe.connect("retriever.documents", "sieve.documents")
    pipe.run({"retriever": {"query": q}, "sieve": {"query": q}})["sieve"]["documents"]

Needs the ``haystack`` extra: ``pip install 'ragsieve[haystack]'``.
"""

# No ``from __future__ import annotations``: Haystack 2 reads the run() signature's types at
# run time, and string annotations would not connect to other components' sockets.
import dataclasses
from typing import Any

from ragsieve.extras import require

# The adapter is the haystack extra: without it, importing this module names the extra.
require("haystack", "haystack", "the Haystack component")

from haystack import Document, component, default_from_dict, default_to_dict  # noqa: E402

from ragsieve.config import PipelineConfig, validate_config  # noqa: E402
from ragsieve.sieve.checks import CheckedCandidate, CheckedCandidates, SieveChecks, foreign_hit, unique_ids  # noqa: E402
from ragsieve.types import SearchHit  # noqa: E402

__all__ = ["SieveDocumentChecker", "document_hit"]


def document_hit(doc: Document, rank: int) -> SearchHit:
    """A Haystack document as a candidate (its id, ``meta["source"]`` or file path, score)."""
    meta = dict(doc.meta or {})
    return foreign_hit(
        doc.content or "",
        id=doc.id,
        source=meta.get("source") or meta.get("file_path"),
        metadata=meta,
        score=doc.score,
        rank=rank,
        retriever="haystack",
    )


@component
class SieveDocumentChecker:
    """The sieve's candidate checks as a Haystack component.

    ``config``: a ragsieve config as a dict (``PipelineConfig``'s fields; its ``sieve`` section
    and ``stages`` set the checks); ``checks``: a subset of the candidate checks (default: all
    of them, as in the sieve). Serialises with ``to_dict``/``from_dict`` like any component; a
    custom judge or embedder is set on :attr:`sieve_checks` after construction.
    """

    def __init__(self, config: dict[str, Any] | None = None, checks: list[str] | None = None) -> None:
        self.config = dict(config or {})
        self.checks = list(checks) if checks is not None else None
        cfg: PipelineConfig = validate_config(self.config) if self.config else PipelineConfig()
        self.sieve_checks = SieveChecks(cfg, checks=self.checks)
        self.last_checked: CheckedCandidates | None = None

    def warm_up(self) -> None:
        """Load the checks' models (Haystack calls this before the pipeline's first run)."""
        self.sieve_checks.warm_up()

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, config=self.config, checks=self.checks)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SieveDocumentChecker":
        return default_from_dict(cls, data)

    @staticmethod
    def _document(doc: Document, checked: CheckedCandidate) -> Document:
        score = checked.relevance if checked.relevance is not None else doc.score
        return dataclasses.replace(doc, meta={**doc.meta, **checked.metadata()}, score=score)

    @component.output_types(documents=list[Document], dropped=list[Document])
    def run(self, query: str, documents: list[Document]) -> dict[str, list[Document]]:
        """Check ``documents`` for ``query``: the kept ones (best first) and the dropped ones."""
        if not documents:
            return {"documents": [], "dropped": []}
        hits = unique_ids(document_hit(d, i + 1) for i, d in enumerate(documents))
        by_id = {h.chunk.id: d for h, d in zip(hits, documents, strict=True)}
        result = self.sieve_checks.check(query, hits)
        self.last_checked = result
        return {
            "documents": [self._document(by_id[c.id], c) for c in result.kept],
            "dropped": [self._document(by_id[c.id], c) for c in result.dropped],
        }
