from __future__ import annotations

import json
import logging

import pytest

from ragsieve.coe.features import (
    EvidenceFeatures,
    FeatureExtractor,
    Relation,
    fallback_features,
    fallback_keywords,
    intent_keywords_prompt,
    parse_intent_keywords,
    parse_relations,
    relations_prompt,
)
from ragsieve.errors import LLMOutputError

from .fakes import FakeLLM

Q = "Were Scott Derrickson and Ed Wood of the same nationality?"
IK = {"intent": "the nationality of two people", "keywords": ["Scott Derrickson", "Ed Wood"]}
REL = {"relations": [
    {"head": "Scott Derrickson", "tail": "nationality", "description": "Scott Derrickson has a nationality"},
    {"head": "Ed Wood", "tail": "nationality", "description": "Ed Wood has a nationality"},
]}


def test_prompts_have_five_examples_each():
    ik = intent_keywords_prompt(Q)
    rel = relations_prompt(Q, ["Scott Derrickson"])
    assert sum(m["role"] == "assistant" for m in ik) == 5
    assert sum(m["role"] == "assistant" for m in rel) == 5
    for m in ik + rel:
        if m["role"] == "assistant":
            json.loads(m["content"])  # every example is valid JSON
    assert ik[-1]["content"].endswith(Q)


def test_parse_intent_keywords_valid_and_deduplicated():
    intent, kws = parse_intent_keywords({"intent": " x ", "keywords": ["A b", "a B", " C. "]})
    assert intent == "x" and kws == ["A b", "C"]


def test_parse_intent_keywords_string_keywords_are_split():
    assert parse_intent_keywords({"intent": "x", "keywords": "a, b; c"})[1] == ["a", "b", "c"]


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"keywords": ["a"]},
        {"intent": "x"},
        {"intent": "x", "keywords": [" ", 3]},
        {"intent": "", "keywords": ["a"]},
    ],
)
def test_parse_intent_keywords_rejects_unusable(bad):
    with pytest.raises(LLMOutputError):
        parse_intent_keywords(bad)


def test_keywords_are_grounded_in_the_question():
    q = "What position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    _, kws = parse_intent_keywords({"intent": "x", "keywords": ["Movie", "Corliss Archer"]}, question=q)
    assert "Movie" not in kws
    assert kws[0] == "Corliss Archer" and "Kiss" in kws


def test_parse_relations_drops_unanchored_and_malformed():
    rels = parse_relations(
        {"relations": [
            {"head": "Ed Wood", "tail": "film", "description": "Ed Wood made a film"},
            {"head": "moon", "tail": "cheese", "description": "unrelated"},
            {"head": "Ed Wood", "tail": "x"},
            "junk",
        ]},
        ["Ed Wood"],
    )
    assert rels == [Relation("Ed Wood", "film", "Ed Wood made a film")]
    with pytest.raises(LLMOutputError):
        parse_relations({"rels": []}, ["a"])


def test_fallback_keywords_spans():
    assert fallback_keywords(Q) == ["Scott Derrickson", "Ed Wood"]
    assert fallback_keywords('The director of "Big Stone Gap" lives in what New York city?') == [
        "Big Stone Gap", "New York"]
    # content words (longest first) when there are no spans
    assert fallback_keywords("how many legs does a spider have") == ["spider", "legs"]
    assert fallback_keywords("how many legs does a spider have", content_words=False) == []


def test_extract_with_llm_and_disk_cache(tmp_path):
    llm = FakeLLM([IK, REL])
    ex = FeatureExtractor(cache_dir=str(tmp_path))
    f = ex.extract(Q, llm)
    assert f.source == "llm"
    assert f.keywords == ["Scott Derrickson", "Ed Wood"]
    assert len(f.relations) == 2
    assert f.feature_kinds() == ["intent", "keyword", "keyword", "relation", "relation"]
    assert len(list(tmp_path.glob("*.json"))) == 1
    again = ex.extract(Q, FakeLLM([]))  # no scripted output: must come from the cache
    assert again == f
    assert EvidenceFeatures.from_dict(f.to_dict()) == f


def test_extract_retries_then_succeeds():
    llm = FakeLLM([LLMOutputError("bad json"), {"intent": "x", "keywords": []}, IK, REL])
    ex = FeatureExtractor(retries=2)
    assert ex.extract(Q, llm).source == "llm"
    assert llm.json_calls == 4


def test_extract_falls_back_with_log(caplog):
    llm = FakeLLM([LLMOutputError("bad"), LLMOutputError("bad")])
    with caplog.at_level(logging.WARNING, logger="ragsieve.coe.features"):
        f = FeatureExtractor(retries=1).extract(Q, llm)
    assert f.source == "fallback" and f.keywords == ["Scott Derrickson", "Ed Wood"] and f.relations == []
    assert "fell back" in caplog.text
    assert f == fallback_features(Q)


def test_relation_failure_keeps_intent_and_keywords():
    f = FeatureExtractor(retries=0).extract(Q, FakeLLM([IK, LLMOutputError("bad")]))
    assert f.source == "partial" and f.relations == [] and f.intent == IK["intent"]


def test_corrupt_cache_is_ignored(tmp_path):
    ex = FeatureExtractor(cache_dir=str(tmp_path))
    ex.extract(Q, FakeLLM([IK, REL]))
    (path,) = tmp_path.glob("*.json")
    path.write_text("{not json")
    assert ex.extract(Q, FakeLLM([IK, REL])).source == "llm"
