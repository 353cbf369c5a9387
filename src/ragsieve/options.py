"""The option sets, each declared once as a ``Literal``, and the sieve's stage names.

The config fields (:mod:`ragsieve.config`) are typed by these, the command line builds its
choices from them (``typing.get_args``) and the docs read them here. They live apart from the
config so that the command line can list its choices (``ragsieve --help``) without importing
pydantic and building every config model.
"""

from __future__ import annotations

from typing import Literal

# The stage list every pipeline preset is drawn from, in execution order.
SIEVE_STAGES: tuple[str, ...] = (
    "route", "need", "retrieve", "judge", "poison", "filter", "conflict", "select", "generate", "verify", "decide"
)

PipelineName = Literal["plain", "direct", "task-adaptive", "sieve"]
SelectName = Literal["top-k", "scope-coe"]
RetrievalModeName = Literal["dense", "sparse", "hybrid"]
FusionName = Literal["rrf", "weighted"]
ChunkUnit = Literal["sentence", "window"]
# What the sieve does when its kept passages answer the question differently
# (ragsieve.conflict.ConflictDetector, the sieve's ``conflict`` stage).
ConflictPolicy = Literal["both", "abstain", "trusted"]
DenseKind = Literal["flat", "ivf", "hnsw"]
StoreBackendName = Literal["folder", "milvus"]
FilterName = Literal["none", "direct", "icl", "proxy", "ensemble"]  # stages.filtering.filter
# What the ``decide`` stage does with the combined confidence: "decide" answers, answers with a
# caveat or abstains; "observe" records the signals and the draft and always answers (to collect
# training rows for a decision model).
DecideMode = Literal["decide", "observe"]
# The verify stage's withdrawals that may still end a run on their own when the ``decide`` stage
# runs (``decide.vetoes``); any other withdrawal is a signal the decision weighs. "responsive":
# the reply does not answer the question; "unsupported": no answer sentence is supported;
# "min_confidence": below ``sieve.min_confidence``.
VetoName = Literal["responsive", "unsupported", "min_confidence"]

__all__ = [
    "SIEVE_STAGES",
    "ChunkUnit",
    "ConflictPolicy",
    "DecideMode",
    "DenseKind",
    "FilterName",
    "FusionName",
    "PipelineName",
    "RetrievalModeName",
    "SelectName",
    "StoreBackendName",
    "VetoName",
]
