"""HyDE query expansion: retrieve with the sentences of a hypothetical answer.

The LLM writes a short hypothetical answer to the query; the answer is split into sentences;
each sentence is concatenated with the original query and sent to the retriever; the results
are merged, de-duplicated by chunk id and re-ranked by dense cosine (the index's embedder).
``rerank="query"`` orders by cosine to the original query only, as the paper describes; with a
bi-encoder that reproduces plain dense retrieval exactly whenever the original query is among the
sub-queries, so the default ``"fused"`` averages cosine to the original query with the best
cosine to any sub-query.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

from ragsieve.errors import InputError
from ragsieve.llm.base import LLM, ChatMessage
from ragsieve.types import SearchHit

logger = logging.getLogger(__name__)

RerankMode = Literal["query", "fused"]
RERANK_MODES: tuple[str, ...] = ("query", "fused")

# A search function: (query, k) -> ranked hits. Bind partitions/mode with functools.partial or a lambda.
SearchFn = Callable[[str, int], list[SearchHit]]



def split_hypothesis(text: str, min_chars: int = 12, max_sentences: int = 4) -> list[str]:
    """Split a hypothetical answer into sentences (short fragments are merged into the previous one)."""
    from ragsieve.ingest import split_sentences

    parts = [s.strip() for s in split_sentences(text) if s.strip()]
    out: list[str] = []
    for s in parts:
        if out and len(s) < min_chars:
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
    return out[:max_sentences]


def merge_hits(result_lists: Sequence[Sequence[SearchHit]]) -> list[SearchHit]:
    """Union of several ranked lists, de-duplicated by chunk id (keeping the best score seen)."""
    best: dict[str, SearchHit] = {}
    for hits in result_lists:
        for h in hits:
            prev = best.get(h.chunk.id)
            if prev is None or h.score > prev.score:
                best[h.chunk.id] = h
    return list(best.values())


def rerank_by_cosine(
    query_vec: np.ndarray, hits: Sequence[SearchHit], chunk_vecs: np.ndarray, k: int
) -> list[SearchHit]:
    """Order hits by cosine(query, chunk) (vectors L2-normalised), keep ``k``, renumber ranks."""
    if not hits:
        return []
    sims = chunk_vecs @ query_vec
    order = np.argsort(-sims, kind="stable")[:k]
    out = []
    for rank, i in enumerate(order):
        h = hits[int(i)]
        out.append(SearchHit(h.chunk, float(sims[i]), rank, {**h.scores, "hyde_cosine": float(sims[i])}))
    return out


def rerank_fused(
    query_vec: np.ndarray, sub_vecs: np.ndarray, hits: Sequence[SearchHit], chunk_vecs: np.ndarray, k: int
) -> list[SearchHit]:
    """Order hits by 0.5 * cos(query, chunk) + 0.5 * max_i cos(sub_query_i, chunk).

    Re-ranking by the original query alone makes dense HyDE retrieval identical to plain dense
    retrieval (the query's own top-k are the k chunks closest to it); the fused score keeps the
    original query's relevance while letting the hypothetical sentences lift bridging evidence.
    """
    if not hits:
        return []
    q = chunk_vecs @ query_vec
    s = (chunk_vecs @ sub_vecs.T).max(axis=1) if sub_vecs.shape[0] else q
    fused = 0.5 * q + 0.5 * s
    order = np.argsort(-fused, kind="stable")[:k]
    return [
        SearchHit(
            hits[int(i)].chunk,
            float(fused[i]),
            r,
            {**hits[int(i)].scores, "hyde_cosine": float(q[i]), "hyde_fused": float(fused[i])},
        )
        for r, i in enumerate(order)
    ]


class HyDEResult(NamedTuple):
    hits: list[SearchHit]
    hypothesis: str
    sub_queries: list[str]
    n_candidates: int  # distinct chunks before re-ranking

    def trace_record(self) -> dict[str, Any]:
        return {
            "hypothesis": self.hypothesis,
            "sub_queries": self.sub_queries,
            "n_candidates": self.n_candidates,
            "kept_ids": [h.chunk.id for h in self.hits],
        }


class HyDEExpander:
    """Hypothetical-document expansion around any search function.

    Example::

        hyde = HyDEExpander(max_sentences=3)
        result = hyde.retrieve("Who founded the Hanseatic League?", llm, embedder,
                               lambda q, k: index.search(q, k=k), k=5)
        result.hits, result.hypothesis
    """

    def __init__(
        self,
        enabled: bool = True,
        max_tokens: int = 96,
        max_sentences: int = 3,  # stages.tasks.hyde_max_sentences' default
        per_query_k: int | None = None,
        include_original: bool = True,
        rerank: RerankMode = "fused",
    ) -> None:
        self.enabled = enabled
        self.max_tokens = max_tokens
        self.max_sentences = max_sentences
        self.per_query_k = per_query_k
        self.include_original = include_original
        self.rerank = rerank

    def hypothesize(self, query: str, llm: LLM) -> str:
        prompt = [
            ChatMessage(
                role="system",
                content="Write a short, factual-sounding passage that answers the question. Do not say you are unsure.",
            ),
            ChatMessage(role="user", content=query),
        ]
        return llm.generate(prompt, max_tokens=self.max_tokens, temperature=0.0).text.strip()

    def sub_queries(self, query: str, hypothesis: str) -> list[str]:
        subs = [f"{query} {s}" for s in split_hypothesis(hypothesis, max_sentences=self.max_sentences)]
        if self.include_original or not subs:
            subs = [query, *subs]
        return subs

    def retrieve(
        self, query: str, llm: LLM, embedder: Any, search: SearchFn, k: int = 5, hypothesis: str | None = None
    ) -> HyDEResult:
        """Retrieve ``k`` hits for ``query``; when disabled this is a plain ``search(query, k)``."""
        if not query.strip():
            raise InputError("HyDE needs a non-empty query")
        if not self.enabled:
            return HyDEResult(search(query, k), "", [query], 0)
        hyp = self.hypothesize(query, llm) if hypothesis is None else hypothesis
        subs = self.sub_queries(query, hyp)
        per_k = self.per_query_k or k
        merged = merge_hits([search(q, per_k) for q in subs])
        if not merged:
            return HyDEResult([], hyp, subs, 0)
        if self.rerank not in RERANK_MODES:
            raise InputError(f"HyDE rerank {self.rerank!r} is unknown; use one of {', '.join(RERANK_MODES)}")
        texts = [h.chunk.text for h in merged]
        if self.rerank == "query":
            vecs = np.asarray(embedder.embed([query, *texts]), dtype=np.float32)
            hits = rerank_by_cosine(vecs[0], merged, vecs[1:], k)
        else:
            vecs = np.asarray(embedder.embed([query, *subs, *texts]), dtype=np.float32)
            hits = rerank_fused(vecs[0], vecs[1 : 1 + len(subs)], merged, vecs[1 + len(subs) :], k)
        logger.debug("HyDE: %d sub-queries, %d distinct candidates, kept %d", len(subs), len(merged), len(hits))
        return HyDEResult(hits, hyp, subs, len(merged))

    def to_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "max_tokens": self.max_tokens,
            "max_sentences": self.max_sentences,
            "per_query_k": self.per_query_k,
            "include_original": self.include_original,
            "rerank": self.rerank,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HyDEExpander:
        return cls(**data)
