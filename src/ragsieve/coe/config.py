"""Typed configuration of the chain-of-evidence stage (``PipelineConfig.stages["coe"]``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragsieve.errors import ConfigError

__all__ = ["CoEConfig", "IntentJudgeKind", "KeywordJudgeKind", "RelationJudgeKind", "load_coe_config"]

IntentJudgeKind = Literal["embedding", "llm"]
KeywordJudgeKind = Literal["lexical", "embedding", "lexical+embedding", "llm"]
RelationJudgeKind = Literal["embedding", "llm"]


class CoEConfig(BaseModel):
    """Judges per feature, thresholds, the cover search and feature extraction.

    The embedding thresholds (cosine with all-MiniLM-L6-v2) are calibrated on HotpotQA: the
    F1-optimal cut between supporting-fact sentences and the other sentences of the same
    question, over the 100 dev questions with sentence-level supporting facts (intent 0.556 from
    4,117 pairs, relation 0.555 from 4,539 pairs; 5-fold cross-fitted values 0.53-0.59, see
    docs/results.md). Re-fit them on your own labelled pairs with
    :meth:`ragsieve.coe.judges.EmbeddingJudge.fit` when your questions look different.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    intent_judge: IntentJudgeKind = "embedding"
    keyword_judge: KeywordJudgeKind = "lexical+embedding"
    relation_judge: RelationJudgeKind = "embedding"
    intent_threshold: float = Field(0.556, ge=-1.0, le=1.0)
    relation_threshold: float = Field(0.555, ge=-1.0, le=1.0)
    keyword_lexical_threshold: float = Field(0.5, ge=0.0, le=1.0)
    keyword_embedding_threshold: float = Field(0.6, ge=-1.0, le=1.0)
    llm_threshold: float = Field(0.5, ge=0.0, le=1.0)
    llm_calibrate: bool = True
    max_snippet_chars: int = Field(600, ge=20)
    cover: Literal["greedy", "exact", "auto"] = "auto"
    max_exact: int = Field(30, ge=1, le=64)
    candidates: int = Field(20, ge=1)
    fallback_k: int = Field(1, ge=0)
    cache_dir: str | None = None
    extraction_retries: int = Field(0, ge=0)  # the LLM backend already retries once

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def load_coe_config(data: CoEConfig | dict[str, Any] | None) -> CoEConfig:
    if isinstance(data, CoEConfig):
        return data
    try:
        return CoEConfig.model_validate(data or {})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"stages.coe is invalid: {problems}") from exc
