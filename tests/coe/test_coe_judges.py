from __future__ import annotations

import numpy as np
import pytest

from ragsieve.coe.config import CoEConfig, load_coe_config
from ragsieve.coe.features import EvidenceFeatures, Relation
from ragsieve.coe.judges import (
    CoEDiscriminator,
    EmbeddingJudge,
    JudgeInput,
    LexicalEmbeddingJudge,
    LexicalKeywordJudge,
    LLMYesNoJudge,
    best_threshold,
    lexical_match_score,
)
from ragsieve.errors import ConfigError, InputError

from .fakes import BagEmbedder, FakeLLM

FEATS = EvidenceFeatures(
    "Were Scott Derrickson and Ed Wood of the same nationality?",
    "the nationality of a person",
    ["Scott Derrickson", "Ed Wood"],
    [Relation("Scott Derrickson", "nationality", "Scott Derrickson is American")],
    "llm",
)
SNIPS = [
    "Scott Derrickson: Scott Derrickson is an American director.",
    "Ed Wood: Edward Davis Wood Jr. was an American filmmaker.",
    "Woodson is a census-designated place in Arkansas.",
]


def test_lexical_scores_exact_partial_and_stemmed():
    assert lexical_match_score("Scott Derrickson is a director", "scott derrickson") == 1.0
    assert lexical_match_score("Derrickson is a director", "Scott Derrickson") == 0.5
    assert lexical_match_score("He is of American nationality", "nationalities") == 1.0
    assert lexical_match_score("Téa Leoni stars", "Tea Leoni") == 1.0
    assert lexical_match_score("nothing here", "Ed Wood") == 0.0
    out = LexicalKeywordJudge(0.5).judge(JudgeInput(SNIPS, ["Ed Wood", "Derrickson"]))
    assert out.covered.tolist() == [[False, True], [True, False], [False, False]]


def test_best_threshold_matches_brute_force():
    rng = np.random.default_rng(0)
    s = rng.random(40)
    y = (s + rng.normal(0, 0.2, 40)) > 0.5
    t = best_threshold(s, y)

    def f1(th):
        p = s >= th
        return 2 * (p & y).sum() / (p.sum() + y.sum())

    assert f1(t) == pytest.approx(max(f1(th) for th in np.concatenate([s, [2.0]])))
    with pytest.raises(InputError, match="both positive and negative"):
        best_threshold(s, np.ones(40, bool))


def test_embedding_judge_threshold_and_fit():
    sim = np.array([[0.9, 0.1], [0.4, 0.6]])
    j = EmbeddingJudge(threshold=0.5)
    assert j.judge(JudgeInput(["a", "b"], ["x", "y"], sim)).covered.tolist() == [[True, False], [False, True]]
    fitted = EmbeddingJudge().fit(np.array([0.9, 0.8, 0.3, 0.2]), np.array([1, 1, 0, 0]))
    assert 0.3 < fitted.threshold_ < 0.8
    with pytest.raises(ConfigError, match="no threshold"):
        EmbeddingJudge().judge(JudgeInput(["a"], ["x"], np.zeros((1, 1))))
    with pytest.raises(InputError, match="similarity"):
        EmbeddingJudge(0.5).judge(JudgeInput(["a"], ["x"]))


def test_lexical_embedding_is_union():
    inp = JudgeInput(["Ed Wood films", "other"], ["Ed Wood"], np.array([[0.0], [0.95]]))
    assert LexicalEmbeddingJudge(0.5, 0.9).judge(inp).covered.ravel().tolist() == [True, True]


def test_llm_judge_uses_logprobs_and_contextual_calibration():
    # The fake model says yes with p=0.8 to everything, 0.8 also for the content-free input:
    # after calibration that bias is removed (p = 0.5), a mention-based p=0.95 stays high.
    llm = FakeLLM(p_yes=lambda text: 0.95 if "Ed Wood:" in text else 0.8)
    raw = LLMYesNoJudge(llm, "keyword", calibrate=False).judge(JudgeInput(SNIPS, ["Ed Wood"]))
    assert raw.covered.ravel().tolist() == [True, True, True]
    cal = LLMYesNoJudge(llm, "keyword", threshold=0.6, calibrate=True).judge(JudgeInput(SNIPS, ["Ed Wood"]))
    assert cal.scores[0, 0] == pytest.approx(0.5)
    assert cal.covered.ravel().tolist() == [False, True, False]
    assert any("N/A" in p for p in llm.prompts)
    assert all("Answer yes or no" in p for p in llm.prompts)
    with pytest.raises(ConfigError):
        LLMYesNoJudge(llm, "topic")  # type: ignore[arg-type]


def test_discriminator_mixes_judges_and_finds_coe():
    d = CoEDiscriminator(
        {"intent_judge": "embedding", "keyword_judge": "lexical", "relation_judge": "llm",
         "intent_threshold": -1.0},
        llm=FakeLLM(p_yes=lambda t: 0.9 if "American" in t else 0.1),
        embedder=BagEmbedder(),
    )
    j = d.judge(FEATS, SNIPS)
    assert j.covered.shape == (3, 4)
    assert j.covered[:, 0].all()  # threshold -1: every snippet conveys the intent
    assert j.covered[:, 1].tolist() == [True, False, False]
    assert j.covered[:, 2].tolist() == [False, True, False]
    assert j.has_coe() and j.has_coe([0, 1]) and not j.has_coe([0]) and not j.has_coe([2])
    recs = j.to_records(["a", "b", "c"])
    assert recs[0]["id"] == "a" and "keyword:Scott Derrickson" in recs[0]["covers"]


def test_discriminator_missing_models_are_config_errors():
    with pytest.raises(ConfigError, match="embedder"):
        CoEDiscriminator({}).judge(FEATS, SNIPS)
    with pytest.raises(ConfigError, match="no LLM"):
        CoEDiscriminator({"intent_judge": "llm"}, embedder=BagEmbedder()).judge(FEATS, SNIPS)


def test_config_validation():
    with pytest.raises(ConfigError, match="keyword_judge"):
        load_coe_config({"keyword_judge": "regex"})
    assert load_coe_config(None) == CoEConfig()
    assert CoEConfig.model_validate(CoEConfig().to_dict()) == CoEConfig()
