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

    The embedding thresholds are uncalibrated starting values (cosine with all-MiniLM-L6-v2).
    A 15-question HotpotQA calibration in ``benchmarks/coe_hotpotqa.py`` gave intent 0.63 and
    relation 0.41; re-fit them with :meth:`ragsieve.coe.judges.EmbeddingJudge.fit` on your own
    labelled pairs.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    intent_judge: IntentJudgeKind = "embedding"
    keyword_judge: KeywordJudgeKind = "lexical+embedding"
    relation_judge: RelationJudgeKind = "embedding"
    intent_threshold: float = Field(0.35, ge=-1.0, le=1.0)
    relation_threshold: float = Field(0.45, ge=-1.0, le=1.0)
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
