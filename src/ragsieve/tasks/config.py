"""Configuration of the task-adaptive pipeline (``PipelineConfig.stages["tasks"]``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragsieve.errors import ConfigError
from ragsieve.tasks.labels import TaskLabel

ClassifierKind = Literal["tfidf", "llm-json", "llm-logprob", "fixed"]
EvaluatorKind = Literal["trained", "llm", "off"]


class TaskAdaptiveConfig(BaseModel):
    """Every switch of the task-adaptive pipeline; the ablations flip ``hyde``,
    ``evaluator`` and ``generation_reflection``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # Task routing
    classifier: ClassifierKind = "tfidf"
    classifier_path: str | None = None  # a saved TfidfTaskClassifier; None trains on the bundled set
    fixed_task: TaskLabel | None = None  # classifier="fixed": every request takes this path
    default_task: TaskLabel = "information_retrieval"  # fallback when the LLM classifier's output is unusable

    # Retrieval
    k: int | None = Field(default=None, ge=1)  # None: PipelineConfig.retrieval.k
    domains: list[str] | None = None  # first-pass partitions; None: the global index
    hyde: bool = True
    hyde_max_sentences: int = Field(default=3, ge=1)
    hyde_max_tokens: int = Field(default=96, ge=8)
    hyde_rerank: Literal["query", "fused"] = "fused"

    # Retrieval-stage reflection
    evaluator: EvaluatorKind = "trained"
    evaluator_path: str | None = None  # None: the bundled trained evaluator
    upper: float | None = Field(default=None, ge=0.0, le=1.0)  # override the trained evaluator's thresholds
    lower: float | None = Field(default=None, ge=0.0, le=1.0)
    evaluator_timeout_s: float = Field(default=30.0, gt=0.0)
    evaluator_max_tokens: int = Field(default=128, ge=16)  # LLM evaluator's chain of thought + verdict
    refine_top_sentences: int = Field(default=6, ge=1)
    refine_min_score: float = Field(default=0.15, ge=0.0, le=1.0)
    corrective_k_factor: int = Field(default=2, ge=1)
    rewrite_query: bool = True
    corrective_hyde: bool = True  # corrective retrieval uses HyDE when the first pass did not

    # Generation and generation-stage reflection
    text_max_tokens: int = Field(default=256, ge=16)
    generation_reflection: bool = True
    theta_sim: float = Field(default=0.6, ge=-1.0, le=1.0)
    min_coverage: float = Field(default=0.5, ge=0.0, le=1.0)
    min_distinct2: float = Field(default=0.6, ge=0.0, le=1.0)
    max_rounds: int = Field(default=2, ge=0)

    @classmethod
    def from_stage(cls, data: dict[str, Any] | None) -> TaskAdaptiveConfig:
        try:
            return cls.model_validate(data or {})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"stages.tasks is invalid: {problems}") from exc
