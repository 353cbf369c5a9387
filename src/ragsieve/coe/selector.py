"""ScopeCoE: keep the smallest set of retrieved snippets that covers the question's chain
of evidence (intent, keywords, relations) instead of a fixed top-k.

Candidates may be index hits (``SearchHit``), ``Chunk`` objects or plain text snippets: a user
who brings sentences rather than an index gets the covering sentences back.

Example:
    >>> from ragsieve.coe import ScopeCoESelector
    >>> sel = ScopeCoESelector({"keyword_judge": "lexical", "cover": "exact"})
    >>> # sel.warm_up(); sel.select("Who founded Queen?", hits, trace)  -> covering hits
    >>> # sel.select("Who founded Queen?", ["Queen was formed by ...", "..."])  -> covering strings
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, TypeVar

from ragsieve.coe.config import CoEConfig, load_coe_config
from ragsieve.coe.cover import CoverResult, cover
from ragsieve.coe.features import EvidenceFeatures, FeatureExtractor
from ragsieve.coe.judges import CoEDiscriminator, Judgements, TextEmbedder
from ragsieve.errors import InputError, ModelError
from ragsieve.llm.base import LLM
from ragsieve.types import Chunk, SearchHit, Trace

__all__ = ["ScopeCoESelector"]

logger = logging.getLogger(__name__)

Candidate = TypeVar("Candidate", SearchHit, Chunk, str)


def _id_text_rank(candidate: SearchHit | Chunk | str, position: int) -> tuple[str, str, int]:
    """A candidate's id, text and rank; strings are named ``s1``, ``s2``, ... in input order."""
    if isinstance(candidate, SearchHit):
        return candidate.chunk.id, candidate.chunk.text, candidate.rank
    if isinstance(candidate, Chunk):
        return candidate.id, candidate.text, position + 1
    if isinstance(candidate, str):
        return f"s{position + 1}", candidate, position + 1
    raise InputError(
        f"ScopeCoE candidate {position + 1} is a {type(candidate).__name__}; pass SearchHit, Chunk or str snippets"
    )


class ScopeCoESelector:
    """The ``scope-coe`` selector of the pipeline (``--select scope-coe``).

    Light constructor; :meth:`warm_up` loads the bundled LLM and embedder when none were
    given. The trace gets one ``select`` record with the extracted features, the judgement
    of every candidate and the covering set.
    """

    def __init__(
        self,
        config: CoEConfig | dict[str, Any] | None = None,
        llm: LLM | None = None,
        embedder: TextEmbedder | None = None,
    ) -> None:
        self.config = load_coe_config(config)
        self.llm = llm
        self.embedder = embedder

    def to_dict(self) -> dict[str, Any]:
        return {"type": "scope-coe", **self.config.to_dict()}

    @classmethod
    def from_config(
        cls, config: Any, llm: LLM | None = None, embedder: TextEmbedder | None = None
    ) -> ScopeCoESelector:
        """Build from a :class:`ragsieve.config.PipelineConfig` (its ``stages.coe`` section)."""
        return cls(config.stages.coe, llm=llm, embedder=embedder)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScopeCoESelector:
        data = {k: v for k, v in data.items() if k != "type"}
        return cls(data)

    def warm_up(self) -> None:
        if self.llm is None:
            from ragsieve.config import LLMConfig
            from ragsieve.llm import load_llm

            self.llm = load_llm(LLMConfig.model_validate({"n_threads": 1}))
        self.llm.warm_up()
        if self.embedder is None:
            from ragsieve.config import EmbedderConfig
            from ragsieve.embed import load_embedder

            self.embedder = load_embedder(EmbedderConfig.model_validate({}))
        warm = getattr(self.embedder, "warm_up", None)
        if callable(warm):
            warm()

    def _ready(self) -> LLM:
        if self.llm is None or self.embedder is None:
            self.warm_up()
        if self.llm is None:  # pragma: no cover - warm_up always sets it
            raise ModelError("ScopeCoE has no LLM after warm_up(); pass llm= or check the llm config")
        return self.llm

    def extract(self, query: str) -> EvidenceFeatures:
        c = self.config
        return FeatureExtractor(c.cache_dir, c.extraction_retries).extract(query, self._ready())

    def judge(self, features: EvidenceFeatures, snippets: list[str]) -> Judgements:
        self._ready()
        return CoEDiscriminator(self.config, self.llm, self.embedder).judge(features, snippets)

    def choose(self, judgements: Judgements) -> CoverResult:
        return cover(judgements.covered, judgements.kinds, self.config.cover, self.config.max_exact)

    def select(self, query: str, hits: Sequence[Candidate], trace: Trace | None = None) -> list[Candidate]:
        """The covering subset of ``hits`` (same type as given: hits, chunks or strings)."""
        trace = trace if trace is not None else Trace(query=query)
        described = [_id_text_rank(h, i) for i, h in enumerate(hits)]
        n = self.config.candidates
        cands, cand_info = list(hits[:n]), described[:n]
        with trace.timed("coe"):
            features = self.extract(query)
            judgements = self.judge(features, [text for _, text, _ in cand_info])
            result = self.choose(judgements)
        chosen = list(result.selected)
        fallback = False
        if not chosen and cands and self.config.fallback_k:
            chosen = list(range(min(self.config.fallback_k, len(cands))))
            fallback = True
        kept = [cands[i] for i in chosen]
        names = features.feature_names()
        trace.record(
            "select",
            method="scope-coe",
            cover=result.method,
            features=features.to_dict(),
            judgements=judgements.to_records([cid for cid, _, _ in cand_info]),
            kept=[cand_info[i][0] for i in chosen],
            full_chain=result.full,
            uncovered=[names[j] for j in range(len(names)) if j not in result.covered_features],
            fallback_top_k=fallback,
            dropped=[
                {"id": cid, "reason": "not needed to cover the chain of evidence"}
                for i, (cid, _, _) in enumerate(cand_info)
                if i not in chosen
            ]
            + [{"id": cid, "reason": f"rank {rank} beyond {n} candidates"} for cid, _, rank in described[n:]],
        )
        return kept
