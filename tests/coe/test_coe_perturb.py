from __future__ import annotations

import random

import numpy as np
import pytest

from ragsieve.coe.judges import JudgeInput, LexicalKeywordJudge
from ragsieve.coe.perturb import (
    accuracy,
    answer_type,
    following_rate,
    generalize_keyword,
    generate_misinformation,
    inject_irrelevant,
    irrelevant_fraction,
    mentions,
    replace_answer,
    replace_mentions,
    same_type_wrong_answer,
    sentence_perturbation,
    word_perturbation,
)
from ragsieve.errors import InputError

from .fakes import FakeLLM

GOLD = [
    "Scott Derrickson: Scott Derrickson is an American director.",
    "Scott Derrickson: Derrickson lives in Los Angeles.",
    "Ed Wood: Ed Wood was an American filmmaker.",
]
KW = ["Scott Derrickson", "Ed Wood"]


def _cov(sents, kws):
    return LexicalKeywordJudge(0.5).judge(JudgeInput(sents, kws)).covered


def test_senp_breaks_chain_and_never_removes_answer_sentences():
    cov = _cov(GOLD, KW)
    res = sentence_perturbation(GOLD, cov, ["keyword"] * 2, answers=["Los Angeles"])
    assert res.broken
    assert 1 in res.kept  # contains the answer
    kept_cov = cov[res.kept].any(axis=0)
    assert not kept_cov.all()
    assert sorted(res.kept + res.removed) == [0, 1, 2]
    # minimality of the walk: the chain was intact before the last removal
    before = res.kept + res.removed[-1:]
    assert cov[before].any(axis=0).all()


def test_senp_unbreakable_when_every_keyword_sentence_has_the_answer():
    sents = ["Ed Wood was American.", "Scott Derrickson was American."]
    res = sentence_perturbation(sents, _cov(sents, KW), ["keyword"] * 2, answers=["American"])
    assert not res.broken and res.removed == [] and res.kept == [0, 1]


def test_senp_shape_check():
    with pytest.raises(InputError, match="shape"):
        sentence_perturbation(GOLD, np.ones((2, 2), bool), ["keyword"] * 2, ["x"])


@pytest.mark.parametrize("seed", range(20))
def test_wordp_leaves_no_mention(seed):
    rng = random.Random(seed)
    kw = rng.choice(["Scott Derrickson", "Ed Wood", "Kiss and Tell", "New York"])
    filler = ["the", "film", "was", "made", "in", "1994", "by", "director", "and"]
    variants = [kw, kw.upper(), kw.lower(), kw + "'s", kw.split()[-1]]
    sents = [
        " ".join(rng.choice(filler + [rng.choice(variants)]) for _ in range(rng.randint(3, 12)))
        for _ in range(rng.randint(1, 4))
    ]
    out, used = word_perturbation(sents, [kw], answers=["1994"], replacements={kw: "the thing"})
    assert all(mentions(s, kw, partial=False) == 0 for s in out)
    assert all(kw.lower() not in s.lower() for s in out)


def test_wordp_skips_answer_keywords_and_uses_llm():
    llm = FakeLLM([{"general_term": "the filmmaker"}])
    out, used = word_perturbation(GOLD, KW, answers=["Scott Derrickson"], llm=llm)
    assert used == {"Ed Wood": "the filmmaker"}
    assert "Scott Derrickson" in out[0] and "Ed Wood" not in out[2] and "the filmmaker" in out[2]


def test_generalize_rejects_terms_mentioning_the_keyword():
    llm = FakeLLM([{"general_term": "Ed Wood the director"}, {"general_term": "ED WOOD"}])
    assert generalize_keyword("Ed Wood", llm, retries=1) == "this entity"
    assert generalize_keyword("Ed Wood", FakeLLM([{"general_term": "the director"}])) == "the director"


def test_replace_mentions_rejects_self_mentioning_replacement():
    with pytest.raises(InputError, match="itself mentions"):
        replace_mentions("Ed Wood", "Ed Wood", "young Ed Wood")
    assert replace_mentions("Wood's film", "Ed Wood", "his") == "his film"


@pytest.mark.parametrize("p", [0.0, 0.25, 0.5, 0.75])
def test_inject_irrelevant_proportion_and_order(p):
    rel = ["alpha beta gamma.", "delta epsilon zeta eta theta."]
    pool = [f"noise sentence number {i} about nothing." for i in range(20)]
    out = inject_irrelevant(rel, pool, p, seed=1)
    irr = [s for s in out if s not in rel]
    assert [s for s in out if s in rel] == rel
    assert irrelevant_fraction(rel, irr) == pytest.approx(p, abs=0.02)
    if p == 0.0:
        assert out == rel


def test_inject_irrelevant_validation():
    with pytest.raises(InputError):
        inject_irrelevant(["a"], ["b"], 1.0)
    with pytest.raises(InputError, match="empty"):
        inject_irrelevant(["a"], [" "], 0.5)


def test_answer_types_and_same_type_wrong_answer():
    assert answer_type("yes") == "yesno"
    assert answer_type("1994") == "year"
    assert answer_type("October 10, 1924") == "date"
    assert answer_type("3,677 seated") == "number"
    assert answer_type("Chief of Protocol") == "entity"
    pool = ["1990", "Paris", "Chief of Protocol", "2001", "no"]
    assert same_type_wrong_answer("yes", pool) == "no"
    assert same_type_wrong_answer("1994", pool) in {"1990", "2001"}
    w = same_type_wrong_answer("Chief of Protocol", pool)
    assert w == "Paris"
    with pytest.raises(InputError, match="no wrong answer"):
        same_type_wrong_answer("October 10, 1924", pool)


def test_replace_answer_and_llm_misinformation():
    assert replace_answer(["He was Chief of Protocol."], "chief of protocol", "Mayor") == ["He was Mayor."]
    good = FakeLLM(text="The arena seats 500 people.")
    assert generate_misinformation("How many seats?", "500", good) == "The arena seats 500 people."
    bad = FakeLLM(text="I do not know.")
    assert "500" in generate_misinformation("How many seats?", "500", bad)


def test_metrics():
    preds = ["It is Paris", "London", "Rome I think"]
    golds = [["Paris"], ["Paris"], ["Paris"]]
    assert accuracy(preds, golds) == pytest.approx(1 / 3)
    assert following_rate(preds, ["London", "London", "Rome"], golds) == pytest.approx(2 / 3)
    with pytest.raises(InputError):
        accuracy(["a"], [])
