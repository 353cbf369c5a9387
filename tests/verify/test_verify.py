"""Claim splitting, the two built-in judges (with fakes) and verify_answer."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from tests.helpers import HashEmbedder

from ragsieve.errors import ConfigError, ModelError
from ragsieve.types import Chunk, SearchHit
from ragsieve.verify import (
    ClaimJudge,
    LexicalEmbeddingJudge,
    LLMLogprobJudge,
    build_claim_judge,
    split_claims,
    verify_answer,
)
from ragsieve.verify.claims import split_claim_markers


def hit(cid: str, text: str) -> SearchHit:
    return SearchHit(Chunk(id=cid, text=text, doc_id=cid, source="s"), 1.0, 1, {})


class YesNoLLM:
    """Says "yes" (log-prob) when every claim word is in the evidence part of the prompt."""

    model_name = "yes-no"

    def __init__(self) -> None:
        self.calls = 0

    def warm_up(self) -> None:
        pass

    def next_token_logprobs(self, prompt, candidates: Sequence[str]) -> list[float]:
        self.calls += 1
        user = prompt[-1]["content"]
        evidence, claim = user.split("Claim: ")
        claim = claim.split("\n")[0]
        words = [w.strip(".").lower() for w in claim.split()]
        ok = claim != "N/A" and all(w in evidence.lower() for w in words)
        yes, no = (math.log(0.9), math.log(0.1)) if ok else (math.log(0.3), math.log(0.7))
        return [yes if c.lower() == "yes" else no for c in candidates]


def test_split_claims_moves_leading_markers_back() -> None:
    claims = split_claim_markers("Mitochondria make ATP. [1] [3] Ribosomes build proteins [2].")
    assert [c.markers for c in claims] == [[1, 3], [2]]
    assert split_claims("A [1].  [2]") == ["A [1]. [2]"]
    assert split_claims("") == []
    assert split_claims("Cells divide. Proteins fold!") == ["Cells divide.", "Proteins fold!"]


def test_lexical_judge_catches_invented_numbers() -> None:
    judge = LexicalEmbeddingJudge(embedding_weight=0.0)
    ev = ["Dune was published in 1965 by Chilton Books."]
    assert judge.support("Dune was published in 1965.", ev) == 1.0
    assert judge.support("Dune was published in 1999.", ev) == pytest.approx(2 / 3)
    assert judge.support("anything", []) == 0.0


def test_lexical_judge_mixes_embedding_similarity() -> None:
    judge = LexicalEmbeddingJudge(embedder=HashEmbedder(), embedding_weight=0.5)
    close = judge.support("Frank Herbert wrote Dune.", ["Frank Herbert wrote Dune. Bananas are yellow."])
    far = judge.support("Bees make honey.", ["Frank Herbert wrote Dune."])
    assert close > 0.9 and far < 0.2
    with pytest.raises(ModelError, match="embedder"):
        LexicalEmbeddingJudge(embedding_weight=0.5).support("x", ["y"])
    with pytest.raises(ConfigError):
        LexicalEmbeddingJudge(embedding_weight=2.0)


def test_llm_judge_reads_yes_no_logprobs_and_calibrates() -> None:
    llm = YesNoLLM()
    judge = LLMLogprobJudge(llm=llm)
    ev = ["Frank Herbert wrote Dune."]
    supported = judge.support("Herbert wrote Dune.", ev)
    unsupported = judge.support("Tolkien wrote Dune.", ev)
    # calibrated against the content-free claim (p_yes 0.3): 0.9 -> 0.955, 0.3 -> 0.5
    assert supported == pytest.approx((0.9 / 0.3) / (0.9 / 0.3 + 0.1 / 0.7))
    assert unsupported == pytest.approx(0.5)
    calls = llm.calls
    assert judge.support("Herbert wrote Dune.", ev) == supported and llm.calls == calls  # memoised
    raw = LLMLogprobJudge(llm=YesNoLLM(), calibrate=False)
    assert raw.support("Herbert wrote Dune.", ev) == pytest.approx(0.9)
    with pytest.raises(ModelError, match="no LLM"):
        LLMLogprobJudge().support("x", ["y"])


def test_verify_answer_cited_uncited_and_no_evidence() -> None:
    judge = LexicalEmbeddingJudge(embedding_weight=0.0)
    evidence = [hit("a", "Frank Herbert wrote Dune."), hit("b", "Dune appeared in 1965.")]
    verdicts = verify_answer("Herbert wrote Dune [1]. Dune appeared in 1965. It won in 1970 [2].", evidence, judge)
    assert [(v.cited_ids, v.against, v.supported) for v in verdicts] == [
        (["a"], "cited", True),
        ([], "all", True),
        (["b"], "cited", False),
    ]
    assert all(v.judge == "lexical-embedding" for v in verdicts)
    none = verify_answer("Paris is in France.", [], judge)
    assert none[0].against == "none" and not none[0].supported and none[0].score == 0.0
    plain = verify_answer("Herbert wrote Dune [1].", ["Frank Herbert wrote Dune."], judge)
    assert plain[0].cited_ids == ["1"] and plain[0].supported


def test_user_judges_fit_the_protocol() -> None:
    class Always:
        name = "always"

        def warm_up(self) -> None:
            pass

        def support(self, claim: str, evidence: Sequence[str]) -> float:
            return 1.0

    assert isinstance(Always(), ClaimJudge)
    assert isinstance(LexicalEmbeddingJudge(), ClaimJudge) and isinstance(LLMLogprobJudge(), ClaimJudge)
    assert verify_answer("Anything at all.", ["x"], Always())[0].supported
    assert isinstance(build_claim_judge("lexical-embedding"), LexicalEmbeddingJudge)
    with pytest.raises(ConfigError, match="unknown claim judge"):
        build_claim_judge("oracle")
