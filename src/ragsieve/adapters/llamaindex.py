"""A LlamaIndex node postprocessor that applies the sieve's checks to retrieved nodes.

:class:`SievePostprocessor` goes wherever LlamaIndex takes ``node_postprocessors`` (a query
engine, a chat engine, a ``RetrieverQueryEngine``)::

    from ragsieve.adapters.llamaindex import SievePostprocessor

    engine = index.as_query_engine(similarity_top_k=10, node_postprocessors=[SievePostprocessor()])

It keeps the nodes :class:`ragsieve.sieve.checks.SieveChecks` keeps, best first, with the judge's
0-1 relevance as each node's score and the verdict in its metadata (left out of what the LLM
and the embedder see).

Needs the ``llamaindex`` extra: ``pip install 'ragsieve[llamaindex]'``.
"""

from __future__ import annotations

from typing import Any

from ragsieve.extras import require

# The adapter is the llamaindex extra: without it, importing this module names the extra.
require("llama_index.core", "llamaindex", "the LlamaIndex node postprocessor")

from llama_index.core.bridge.pydantic import Field, PrivateAttr  # noqa: E402
from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle  # noqa: E402

from ragsieve.adapters import VERDICT_KEYS  # noqa: E402
from ragsieve.errors import InputError  # noqa: E402
from ragsieve.sieve.checks import CheckedCandidate, CheckedCandidates, SieveChecks, foreign_hit, unique_ids  # noqa: E402
from ragsieve.types import SearchHit  # noqa: E402

__all__ = ["SievePostprocessor", "node_hit"]


def node_hit(node: NodeWithScore, rank: int) -> SearchHit:
    """A retrieved node as a candidate (its text without metadata, node id and score)."""
    meta = dict(node.node.metadata or {})
    return foreign_hit(
        node.node.get_content(metadata_mode=MetadataMode.NONE),
        id=node.node.node_id,
        source=meta.get("source") or meta.get("file_path") or meta.get("file_name"),
        metadata=meta,
        score=node.score,
        rank=rank,
        retriever="llamaindex",
    )


class SievePostprocessor(BaseNodePostprocessor):
    """Retrieved nodes through the sieve's candidate checks.

    ``checks``: the :class:`~ragsieve.sieve.checks.SieveChecks` to run (default: the sieve's,
    with the bundled evaluator as judge). ``include_dropped`` keeps the dropped nodes after the
    kept ones (score 0, ``ragsieve_verdict == "dropped"``). The last run's
    :class:`~ragsieve.sieve.checks.CheckedCandidates` (trace included) is :attr:`last_checked`.
    """

    checks: SieveChecks = Field(default_factory=SieveChecks, exclude=True)
    include_dropped: bool = False
    _last: CheckedCandidates | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "RagsieveSievePostprocessor"

    @property
    def last_checked(self) -> CheckedCandidates | None:
        """The checks' full result for the last query (kept, dropped with reasons, trace)."""
        return self._last

    def warm_up(self) -> None:
        """Load the checks' models now rather than on the first query."""
        self.checks.warm_up()

    @staticmethod
    def _node(node: NodeWithScore, checked: CheckedCandidate) -> NodeWithScore:
        # a copy: the original node may live in a docstore shared by other queries
        copy = node.node.model_copy()
        copy.metadata = {**node.node.metadata, **checked.metadata()}
        copy.excluded_llm_metadata_keys = [*node.node.excluded_llm_metadata_keys, *VERDICT_KEYS]
        copy.excluded_embed_metadata_keys = [*node.node.excluded_embed_metadata_keys, *VERDICT_KEYS]
        score = checked.relevance if checked.relevance is not None else node.score
        return NodeWithScore(node=copy, score=score if checked.kept else 0.0)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise InputError("the sieve's checks need the question: pass query_bundle= or query_str=")
        if not nodes:
            return []
        hits = unique_ids(node_hit(n, i + 1) for i, n in enumerate(nodes))
        by_id: dict[str, Any] = {h.chunk.id: n for h, n in zip(hits, nodes, strict=True)}
        result = self.checks.check(query_bundle.query_str, hits)
        self._last = result
        out = [self._node(by_id[c.id], c) for c in result.kept]
        if self.include_dropped:
            out += [self._node(by_id[c.id], c) for c in result.dropped]
        return out
