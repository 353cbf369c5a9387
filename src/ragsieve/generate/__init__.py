"""Generation: answers with citations, yes/no answers from log-probabilities
(:mod:`ragsieve.generate.polar`), and label distributions for classification."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragsieve.generate.answer import (
    SYSTEM_PROMPT,
    attribute_by_similarity,
    build_answer_messages,
    cite_evidence,
    parse_citations,
)
from ragsieve.text import trim_repetition

if TYPE_CHECKING:
    from ragsieve.generate.classify import LabelClassifier


def __getattr__(name: str) -> Any:
    if name == "LabelClassifier":
        from ragsieve.generate.classify import LabelClassifier

        return LabelClassifier
    raise AttributeError(name)


__all__ = [
    "SYSTEM_PROMPT",
    "LabelClassifier",
    "attribute_by_similarity",
    "build_answer_messages",
    "cite_evidence",
    "parse_citations",
    "trim_repetition",
]
