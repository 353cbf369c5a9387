"""Retrieval-augmented classification with knowledge filtering and prediction fusion.

:class:`FilteredClassifier` retrieves the top ``top_k`` knowledge pieces for a text, asks a
:class:`~ragsieve.filtering.filters.KnowledgeFilter` for P(harmless) of each, keeps at most
``max_keep`` (in retrieval order) and predicts a label either from all kept pieces
concatenated into one prompt (``fusion=False``) or by fusing one label distribution per
kept piece (``fusion=True``, see :mod:`ragsieve.filtering.fusion`). With nothing kept it
falls back to the prediction without retrieval.

The trace (stage ``"filtering"``) lists every candidate with its similarity, P(harmless),
decision, the filter that decided and its fusion weight.

Example:
    >>> clf = FilteredClassifier(llm, scorer, labels=["negative", "positive"], retriever=index,
    ...                          embedder=index.embedder, knowledge_filter=DirectFilter("sst-2"),
    ...                          fusion=True)  # doctest: +SKIP
    >>> clf.predict("a gripping , funny film .").label  # doctest: +SKIP
    'positive'
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np

from ragsieve.errors import InputError
from ragsieve.llm.base import LLM
from ragsieve.types import SearchHit, Trace

from .annotate import LabelScorer, label_distributions
from .filters import Candidate, FilterDecision, KnowledgeFilter, NoFilter, decide
from .fusion import fuse

logger = logging.getLogger(__name__)

RetrievalMode = Literal["dense", "sparse", "hybrid"]


class Retriever(Protocol):
    def search(self, query: str, k: int = 10, mode: RetrievalMode = "hybrid") -> list[SearchHit]: ...


class FilteredPrediction(NamedTuple):
    label: str
    proba: dict[str, float]
    decisions: list[FilterDecision]
    weights: list[float]  # fusion weight per kept piece (empty without fusion or with the fallback)
    used_fallback: bool


def candidates_from_hits(
    query_embedding: np.ndarray, hits: Sequence[SearchHit], knowledge_embeddings: np.ndarray
) -> list[Candidate]:
    """Candidates with cosine similarity to the query (embeddings are L2-normalised)."""
    sims = knowledge_embeddings @ query_embedding if len(hits) else np.zeros(0)
    return [
        Candidate(h.chunk.text, rank=i + 1, similarity=float(s), score=float(h.score), embedding=e, id=h.chunk.id)
        for i, (h, s, e) in enumerate(zip(hits, sims, knowledge_embeddings, strict=True))
    ]


class FilteredClassifier:
    """Filter retrieved knowledge, then classify (concatenated or fused)."""

    def __init__(
        self,
        llm: LLM,
        scorer: LabelScorer,
        labels: Sequence[str],
        retriever: Retriever | None = None,
        embedder: Any = None,
        knowledge_filter: KnowledgeFilter | None = None,
        fusion: bool = True,
        alpha: float = 0.5,
        top_k: int = 30,
        max_keep: int = 8,
        mode: RetrievalMode = "dense",
    ) -> None:
        if max_keep < 1 or top_k < 1:
            raise InputError("top_k and max_keep must be at least 1")
        self.llm = llm
        self.scorer = scorer
        self.labels = list(labels)
        self.retriever = retriever
        self.embedder = embedder
        self.knowledge_filter: KnowledgeFilter = knowledge_filter or NoFilter()
        self.fusion = fusion
        self.alpha = alpha
        self.top_k = top_k
        self.max_keep = max_keep
        self.mode = mode

    def to_dict(self) -> dict[str, Any]:
        return {
            "labels": self.labels,
            "filter": self.knowledge_filter.to_dict(),
            "fusion": self.fusion,
            "alpha": self.alpha,
            "top_k": self.top_k,
            "max_keep": self.max_keep,
            "mode": self.mode,
        }

    def _proba(self, text: str, knowledge: list[str] | None) -> np.ndarray:
        d = self.scorer.predict_proba(self.llm, text, knowledge)
        return np.array([d[label] for label in self.labels], dtype=float)

    def retrieve(self, text: str) -> tuple[np.ndarray | None, list[Candidate]]:
        if self.retriever is None:
            return None, []
        hits = self.retriever.search(text, k=self.top_k, mode=self.mode)
        if self.embedder is None:
            return None, [
                Candidate(
                    h.chunk.text,
                    rank=i + 1,
                    similarity=float(h.scores.get("dense", 0.0)),
                    score=float(h.score),
                    id=h.chunk.id,
                )
                for i, h in enumerate(hits)
            ]
        vecs = np.asarray(self.embedder.embed([text] + [h.chunk.text for h in hits]), dtype=np.float32)
        return vecs[0], candidates_from_hits(vecs[0], hits, vecs[1:])

    def predict_with_candidates(
        self,
        text: str,
        candidates: Sequence[Candidate],
        *,
        query_embedding: np.ndarray | None = None,
        trace: Trace | None = None,
    ) -> FilteredPrediction:
        decisions = decide(
            self.knowledge_filter, text, candidates, query_embedding=query_embedding, max_keep=self.max_keep
        )
        kept = [d for d in decisions if d.keep]
        weights: list[float] = []
        fallback = False
        if not kept:
            proba = self._proba(text, None)
            fallback = True
        elif self.fusion:
            dists = label_distributions(self.scorer, self.llm, text, [d.candidate.text for d in kept], self.labels)
            res = fuse(
                dists,
                [d.candidate.similarity for d in kept],
                [d.p_harmless for d in kept],
                self.alpha,
                fallback=np.full(len(self.labels), 1.0 / len(self.labels)),
            )
            proba, weights = res.proba, res.weights.tolist()
        else:
            proba = self._proba(text, [d.candidate.text for d in kept])
        label = self.labels[int(np.argmax(proba))]
        if trace is not None:
            wmap = {id(d): w for d, w in zip(kept, weights, strict=False)}
            trace.record(
                "filtering",
                filter=self.knowledge_filter.name,
                fusion=self.fusion,
                used_fallback=fallback,
                candidates=[
                    {
                        "id": d.candidate.id,
                        "rank": d.candidate.rank,
                        "text": d.candidate.text,
                        "similarity": round(d.candidate.similarity, 4),
                        "p_harmless": round(d.p_harmless, 4),
                        "keep": d.keep,
                        "decided_by": d.source,
                        "fusion_weight": round(wmap[id(d)], 4) if id(d) in wmap else None,
                    }
                    for d in decisions
                ],
            )
        return FilteredPrediction(
            label,
            {lab: float(p) for lab, p in zip(self.labels, proba, strict=True)},
            decisions,
            weights,
            fallback,
        )

    def predict(self, text: str, trace: Trace | None = None) -> FilteredPrediction:
        if not text.strip():
            raise InputError("the text to classify is empty; pass a non-empty text")
        if trace is not None:
            with trace.timed("retrieve"):
                q_emb, cands = self.retrieve(text)
            with trace.timed("filter+classify"):
                return self.predict_with_candidates(text, cands, query_embedding=q_emb, trace=trace)
        q_emb, cands = self.retrieve(text)
        return self.predict_with_candidates(text, cands, query_embedding=q_emb)
