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


def test_trim_repetition_cuts_a_loop_at_the_last_clause_end():
    from ragsieve.text import trim_repetition

    loop = ("Graphene is made of a single layer of carbon atoms bonded in a hexagonal lattice [1], which is "
            "a single layer of carbon atoms bonded in a hexagonal lattice, which is a single layer")
    first = "Graphene is made of a single layer of carbon atoms bonded in a hexagonal lattice [1]."
    assert trim_repetition(loop) == first
    assert trim_repetition("It melts at 3550 C [2]. It melts at 3550 C [2]. It melts") == "It melts at 3550 C [2]."
    honest = "The tower is in Paris [1]. The tower is 330 metres tall [2]."
    assert trim_repetition(honest) == honest
    assert trim_repetition("a b c d a b c d", ngram=4) == "a b c d"
    assert trim_repetition("a b c d a b c d", ngram=5) == "a b c d a b c d"
