from __future__ import annotations

import pytest

from ragsieve.coe import ScopeCoESelector
from ragsieve.types import Chunk, SearchHit, Trace

from .fakes import BagEmbedder, FakeLLM

Q = "Were Scott Derrickson and Ed Wood of the same nationality?"
IK = {"intent": "the nationality of two people", "keywords": ["Scott Derrickson", "Ed Wood"]}
REL = {"relations": []}
TEXTS = [
    "Woodson is a census-designated place in Arkansas.",
    "Scott Derrickson is an American director.",
    "Tyler Bates worked with Scott Derrickson.",
    "Ed Wood was an American filmmaker.",
]


def hits() -> list[SearchHit]:
    return [
        SearchHit(Chunk(id=f"c{i}", text=t, doc_id=f"d{i}", source="s"), 1.0 - i / 10, i + 1, {})
        for i, t in enumerate(TEXTS)
    ]


@pytest.mark.parametrize("method", ["greedy", "exact"])
def test_selects_covering_set_and_traces(method):
    sel = ScopeCoESelector(
        {"keyword_judge": "lexical", "intent_threshold": -1.0, "cover": method},
        llm=FakeLLM([IK, REL]), embedder=BagEmbedder(),
    )
    trace = Trace(Q)
    kept = sel.select(Q, hits(), trace)
    ids = [h.chunk.id for h in kept]
    assert ids == ["c1", "c3"]
    (rec,) = trace.stage("select")
    assert rec["method"] == "scope-coe" and rec["full_chain"] and rec["kept"] == ids
    assert rec["features"]["keywords"] == ["Scott Derrickson", "Ed Wood"]
    assert len(rec["judgements"]) == 4
    assert {d["id"] for d in rec["dropped"]} == {"c0", "c2"}
    assert "coe" in trace.timings_ms


def test_partial_cover_and_fallback():
    sel = ScopeCoESelector(
        {"keyword_judge": "lexical", "intent_threshold": 1.0, "fallback_k": 2},
        llm=FakeLLM([{"intent": "x", "keywords": ["Zorro Q"]}, REL]), embedder=BagEmbedder(),
    )
    trace = Trace("Who is Zorro Q?")
    kept = sel.select("Who is Zorro Q?", hits(), trace)
    assert [h.chunk.id for h in kept] == ["c0", "c1"]
    rec = trace.stage("select")[0]
    assert rec["fallback_top_k"] and not rec["full_chain"]
    assert set(rec["uncovered"]) == {"intent", "keyword:Zorro Q"}


def test_candidates_limit_and_roundtrip():
    sel = ScopeCoESelector({"candidates": 2, "keyword_judge": "lexical", "intent_threshold": -1.0},
                           llm=FakeLLM([IK, REL]), embedder=BagEmbedder())
    trace = Trace(Q)
    kept = sel.select(Q, hits(), trace)
    assert [h.chunk.id for h in kept] == ["c1"]
    assert any("beyond 2 candidates" in d["reason"] for d in trace.stage("select")[0]["dropped"])
    again = ScopeCoESelector.from_dict(sel.to_dict())
    assert again.config == sel.config


def test_plain_text_snippets_and_chunks_are_accepted():
    sel = ScopeCoESelector(
        {"keyword_judge": "lexical", "intent_threshold": -1.0}, llm=FakeLLM([IK, REL]), embedder=BagEmbedder()
    )
    trace = Trace(Q)
    kept = sel.select(Q, list(TEXTS), trace)
    assert kept == [TEXTS[1], TEXTS[3]]
    rec = trace.stage("select")[0]
    assert rec["kept"] == ["s2", "s4"] and {d["id"] for d in rec["dropped"]} == {"s1", "s3"}
    chunks = [h.chunk for h in hits()]
    sel2 = ScopeCoESelector(
        {"keyword_judge": "lexical", "intent_threshold": -1.0}, llm=FakeLLM([IK, REL]), embedder=BagEmbedder()
    )
    assert [c.id for c in sel2.select(Q, chunks)] == ["c1", "c3"]  # no trace needed


def test_other_candidate_types_are_refused():
    from ragsieve.errors import InputError

    sel = ScopeCoESelector({"keyword_judge": "lexical"}, llm=FakeLLM([IK, REL]), embedder=BagEmbedder())
    with pytest.raises(InputError, match="pass SearchHit, Chunk or str"):
        sel.select(Q, [42])  # type: ignore[list-item]
