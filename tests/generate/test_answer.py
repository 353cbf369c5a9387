from __future__ import annotations

from tests.helpers import HashEmbedder

from ragsieve.generate.answer import build_answer_messages, cite_evidence, parse_citations
from ragsieve.types import Chunk, SearchHit


def _hits(*texts: str) -> list[SearchHit]:
    return [
        SearchHit(Chunk(id=f"c{i}", text=t, doc_id=f"d{i}", source="s"), 1.0 / (i + 1), i + 1, {})
        for i, t in enumerate(texts)
    ]


def test_markers_outside_the_evidence_are_ignored():
    hits = _hits("alpha", "beta")
    assert parse_citations("yes [2], also [1] and [2] and [7] [0]", hits) == ["c1", "c0"]


def test_cite_prefers_markers_then_similarity_then_none():
    hits = _hits("rivers flow into the sea", "volcanoes erupt molten rock")
    emb = HashEmbedder()
    assert cite_evidence("Rivers reach the sea [1].", hits, emb)[:2] == (["c0"], "markers")
    ids, method, sims = cite_evidence("Volcanoes erupt molten rock.", hits, emb)
    assert (ids, method) == (["c1"], "similarity") and sims[0][1] > 0.9
    assert cite_evidence("Something unrelated entirely.", hits, emb)[:2] == ([], "similarity")
    assert cite_evidence("anything", [], emb)[:2] == ([], "none")
    assert cite_evidence("no markers", hits, None)[:2] == ([], "none")


def test_answer_prompt_numbers_evidence_and_clips_long_text():
    hits = _hits("short", "word " * 400)
    messages = build_answer_messages("Q?", hits, max_chars=50)
    user = messages[-1]["content"]
    assert "[1] short" in user and "[2] word" in user and user.endswith("Question: Q?")
    assert len(user.split("[2] ")[1].split("\n")[0]) <= 50
    assert build_answer_messages("Q?", [])[0]["role"] == "system"
