"""Knowledge filtering and prediction fusion for retrieval-augmented classification.

Implements Qiang et al., "Exploring Knowledge Filtering for Retrieval-Augmented
Discriminative Tasks": perplexity labels (D_kf), four filters (direct, in-context, proxy,
ensemble) behind one interface, and prediction fusion.
"""

from __future__ import annotations

from .annotate import (
    KfDataset,
    KfPair,
    LabelScorer,
    PerplexityAnnotator,
    is_harmful,
    label_distributions,
    perplexity_ratio,
    relabel,
)
from .classify import FilteredClassifier, FilteredPrediction, candidates_from_hits
from .filters import (
    Candidate,
    DirectFilter,
    EnsembleFilter,
    FilterDecision,
    FilterName,
    ICLFilter,
    KnowledgeFilter,
    NoFilter,
    decide,
    ensemble_combine,
)
from .fusion import FusionResult, fuse, fusion_weights
from .proxy import ProxyFilter, pair_features
from .tasks import TASKS, TaskSpec, TaskTemplate, custom_task, get_task, resolve_task

__all__ = [
    "TASKS",
    "Candidate",
    "DirectFilter",
    "EnsembleFilter",
    "FilterDecision",
    "FilterName",
    "FilteredClassifier",
    "FilteredPrediction",
    "FusionResult",
    "ICLFilter",
    "KfDataset",
    "KfPair",
    "KnowledgeFilter",
    "LabelScorer",
    "NoFilter",
    "PerplexityAnnotator",
    "ProxyFilter",
    "TaskTemplate",
    "candidates_from_hits",
    "custom_task",
    "resolve_task",
    "TaskSpec",
    "decide",
    "ensemble_combine",
    "fuse",
    "fusion_weights",
    "get_task",
    "is_harmful",
    "label_distributions",
    "pair_features",
    "perplexity_ratio",
    "relabel",
]
