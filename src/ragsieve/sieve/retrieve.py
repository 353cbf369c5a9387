"""Stage ``retrieve``: hybrid search over the routed partitions, with the learned source
weights applied when the index has them and the config asks (the sieve always reweights)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ragsieve.config import RetrievalConfig, RetrieveStageConfig
from ragsieve.errors import ConfigError
from ragsieve.index import Index
from ragsieve.sieve.prior import AuditPrior
from ragsieve.sieve.state import PipelineState, Ref
from ragsieve.store.protocol import Store
from ragsieve.types import SearchHit, Trace


def source_weight_threshold(index: Index | Store) -> float:
    """The pruning threshold stored with the index's learned source weights."""
    data = json.loads((index.dir / "source_weights.json").read_text(encoding="utf-8"))
    return float(data.get("threshold", 0.5)) if isinstance(data, dict) else 0.5


def reweight_hits(index: Index | Store, hits: list[SearchHit]) -> list[SearchHit]:
    """Scale each hit's score by its source's learned weight and re-rank."""
    weights = index.source_weights
    if weights is None:
        raise ConfigError(
            "retrieval.use_source_weights=reweight but the index has no source_weights.json; "
            "run `ragsieve importance apply` first"
        )
    scored = [
        SearchHit(
            h.chunk,
            h.score * weights.get(h.chunk.source, 1.0),
            0,
            {**h.scores, "source_weight": weights.get(h.chunk.source, 1.0)},
        )
        for h in hits
    ]
    scored.sort(key=lambda h: -h.score)
    return [SearchHit(h.chunk, h.score, r, h.scores) for r, h in enumerate(scored, 1)]


class CandidateSearch:
    """Candidates for selection from the index: ``retrieval.candidates`` hits (``k`` when
    larger) unless top-k selection needs only ``k``; ``sieve=True`` reweights by source weights
    whenever the index has them. Shared by the ``need`` probe and the ``retrieve`` stage."""

    def __init__(
        self,
        index: Ref[Index | Store],
        retrieval: RetrievalConfig,
        *,
        sieve: bool,
        wide: bool,
        embedder: Callable[[], Any] | None = None,
        prior: AuditPrior | None = None,
    ) -> None:
        self.index = index
        self.retrieval = retrieval
        self.sieve = sieve
        # the saved corpus audit as a prior (stages.retrieve.audit_prior): marked sources start with less trust
        self.prior = prior
        self.wide = wide  # a selector other than top-k chooses from all the candidates
        # the stages' shared embedding memo: the question's vector for the search comes from it,
        # so the checks that embed the question later do not embed it again
        self.embedder = embedder

    def question_vector(self, index: Index | Store, question: str) -> np.ndarray | None:
        """The question's vector from the shared memo when it wraps the index's own embedder
        (else ``None``: the index embeds the question itself)."""
        memo = self.embedder() if self.embedder is not None else None
        if memo is None or getattr(memo, "inner", None) is not getattr(index, "embedder", None):
            return None
        return np.asarray(memo.embed([question])[0])

    def __call__(
        self,
        question: str,
        trace: Trace,
        k: int | None = None,
        domains: list[str] | None = None,
        where: dict[str, Any] | None = None,
    ) -> list[SearchHit]:
        index = self.index()
        rc = self.retrieval
        n = max(k or rc.k, rc.k)
        use = rc.use_source_weights
        if self.sieve and use == "off" and index.source_weights is not None:
            use = "reweight"
        prune = None
        if use == "prune":
            if index.source_weights is None:
                raise ConfigError(
                    "retrieval.use_source_weights=prune but the index has no source_weights.json; "
                    "run `ragsieve importance apply` first"
                )
            prune = source_weight_threshold(index)
        hits = index.search(
            question,
            k=max(n, rc.candidates) if self.wide else n,
            mode=rc.mode,
            where=where,
            domains=domains,
            retrieval=rc,
            prune_threshold=prune,
            query_vector=self.question_vector(index, question) if rc.mode != "sparse" else None,
        )
        if use == "reweight":
            hits = reweight_hits(index, hits)
        prior: dict[str, Any] = {}
        if self.prior is not None:
            hits, prior["audit_prior"] = self.prior.apply(index, hits, trace)
        trace.record(
            "retrieve",
            mode=rc.mode,
            fusion=rc.fusion,
            domains=domains,
            where=where,
            source_weights=use,
            **prior,
            candidates=[h.to_dict() for h in hits],
        )
        return hits


def normalised_top_score(
    hits: Sequence[SearchHit], mode: str = "hybrid", fusion: str = "rrf", rrf_k: int = 60, n_retrievers: int = 2
) -> float | None:
    """The top hit's retrieval score mapped to [0, 1]; ``None`` without hits. A reciprocal-rank
    fused score is divided by its maximum (first in every retriever: ``n / (rrf_k + 1)``), a
    weighted fusion and a cosine are already on [0, 1], and a BM25 score ``s`` becomes
    ``s / (1 + s)``."""
    if not hits:
        return None
    top = min(hits, key=lambda h: h.rank)
    if mode == "hybrid" and fusion == "rrf":
        return min(1.0, max(0.0, float(top.scores.get("fused", top.score)) * (rrf_k + 1) / n_retrievers))
    if mode == "hybrid":
        return min(1.0, max(0.0, float(top.scores.get("fused", top.score))))
    if mode == "dense":
        return min(1.0, max(0.0, float(top.scores.get("dense", top.score))))
    s = max(0.0, float(top.scores.get("sparse", top.score)))
    return s / (1.0 + s)


class RetrieveStage:
    """Hybrid search (source weights applied when the index has them and the config asks).

    Reads ``state.retrieve``, ``state.probe`` (the need stage's hits, reused), ``state.domains``,
    ``state.where`` and ``state.k``; writes a ``retrieve`` trace record with every candidate.
    Set by ``retrieval`` (and ``stages.retrieve.candidates`` in the sieve)."""

    name = "retrieve"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ("probe", "domains")
    writes: tuple[str, ...] = ("signals",)
    emits: tuple[str, ...] = ("retrieval.top_score",)

    def __init__(self, search: CandidateSearch, n: int | None = RetrieveStageConfig().candidates) -> None:
        # n: candidates to retrieve (stages.retrieve.candidates); None: the request's k (plain RAG)
        self.search = search
        self.n = n

    def warm_up(self) -> None:
        pass

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        if not state.retrieve:
            trace.record("retrieve", skipped=True, reason="--no-retrieval" if state.forced_no_retrieval else "need")
            return []
        if state.probe is not None:
            trace.record("retrieve", reused="need probe", ids=[h.chunk.id for h in state.probe])
            hits = state.probe
        else:
            hits = self.search(question, trace, k=self.n or state.k, domains=state.domains, where=state.where)
        # plain RAG's own confidence: the top retrieval score, on [0, 1]
        rc = self.search.retrieval
        state.signal("retrieval.top_score", normalised_top_score(hits, rc.mode, rc.fusion, rc.rrf_k))
        return hits
