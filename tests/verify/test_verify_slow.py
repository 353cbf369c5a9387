"""The two claim judges with the real bundled models (slow)."""

from __future__ import annotations

import pytest

from ragsieve.verify import LexicalEmbeddingJudge, LLMLogprobJudge

pytestmark = pytest.mark.slow

EVIDENCE = ["Graphene is a single layer of carbon atoms arranged in a hexagonal lattice."]


def test_llm_judge_prefers_the_supported_claim(llm):
    judge = LLMLogprobJudge(llm=llm)
    supported = judge.support("Graphene is made of carbon atoms.", EVIDENCE)
    unsupported = judge.support("Graphene was discovered on Mars in 1850.", EVIDENCE)
    assert 0.0 <= unsupported < supported <= 1.0


def test_lexical_judge_with_the_bundled_embedder(embedder):
    judge = LexicalEmbeddingJudge(embedder=embedder)
    supported = judge.support("Graphene is made of carbon atoms.", EVIDENCE)
    unsupported = judge.support("Graphene was discovered on Mars in 1850.", EVIDENCE)
    assert supported > 0.6 > unsupported
