"""Chain of evidence (CoE): evidence features of a question, per-snippet feature judges,
the ScopeCoE minimal-cover selector and a perturbation toolkit for studying which
knowledge an LLM prefers.

Example:
    >>> from ragsieve.coe import greedy_cover, exact_cover
    >>> import numpy as np
    >>> exact_cover(np.eye(2, dtype=bool), ["intent", "keyword"]).selected
    [0, 1]
"""

from ragsieve.coe.config import CoEConfig
from ragsieve.coe.cover import CoverResult, cover, exact_cover, greedy_cover
from ragsieve.coe.features import EvidenceFeatures, FeatureExtractor, Relation, fallback_features
from ragsieve.coe.judges import (
    CoEDiscriminator,
    EmbeddingJudge,
    Judgements,
    LexicalEmbeddingJudge,
    LexicalKeywordJudge,
    LLMYesNoJudge,
)
from ragsieve.coe.selector import ScopeCoESelector

__all__ = [
    "CoEConfig",
    "CoEDiscriminator",
    "CoverResult",
    "EmbeddingJudge",
    "EvidenceFeatures",
    "FeatureExtractor",
    "Judgements",
    "LLMYesNoJudge",
    "LexicalEmbeddingJudge",
    "LexicalKeywordJudge",
    "Relation",
    "ScopeCoESelector",
    "cover",
    "exact_cover",
    "fallback_features",
    "greedy_cover",
]
