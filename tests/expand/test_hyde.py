"""HyDE expansion: sub-queries, merge, de-duplication and re-ranking (fakes, no model loads)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tasks"))
from tasks_fakes import HashEmbedder, ScriptedLLM  # noqa: E402

from ragsieve.errors import InputError  # noqa: E402
from ragsieve.expand.hyde import HyDEExpander, merge_hits, rerank_by_cosine, split_hypothesis  # noqa: E402
from ragsieve.types import Chunk, SearchHit  # noqa: E402


def hit(cid: str, text: str, score: float, rank: int = 0) -> SearchHit:
    return SearchHit(Chunk(id=cid, text=text, doc_id=cid, source="s"), score, rank, {"dense": score})


def test_split_hypothesis_merges_fragments_and_caps() -> None:
    parts = split_hypothesis(
        "Dune is a novel. Yes. It was written by Frank Herbert in 1965. It won awards. It has sequels.",
        max_sentences=3,
    )
    assert parts[0] == "Dune is a novel. Yes."
    assert len(parts) == 3


def test_merge_dedupes_keeping_best_score() -> None:
    a = [hit("1", "x", 0.5), hit("2", "y", 0.4)]
    b = [hit("2", "y", 0.9), hit("3", "z", 0.1)]
    merged = {h.chunk.id: h.score for h in merge_hits([a, b])}
    assert merged == {"1": 0.5, "2": 0.9, "3": 0.1}


def test_rerank_by_cosine_orders_and_renumbers() -> None:
    hits = [hit("a", "a", 0.0), hit("b", "b", 0.0), hit("c", "c", 0.0)]
    vecs = np.array([[1, 0], [0, 1], [0.6, 0.8]], dtype=np.float32)
    out = rerank_by_cosine(np.array([0, 1], dtype=np.float32), hits, vecs, k=2)
    assert [h.chunk.id for h in out] == ["b", "c"] and [h.rank for h in out] == [0, 1]
    assert out[0].scores["hyde_cosine"] == pytest.approx(1.0)


def test_retrieve_runs_one_search_per_sentence_plus_query() -> None:
    docs = {
        "d1": "Frank Herbert wrote the novel Dune.",
        "d2": "Dune was published in 1965 by Chilton Books.",
        "d3": "Bananas are rich in potassium.",
    }
    emb = HashEmbedder()
    calls: list[str] = []

    def search(q: str, k: int) -> list[SearchHit]:
        calls.append(q)
        vq = emb.embed([q])[0]
        scored = sorted(((float(emb.embed([t])[0] @ vq), cid, t) for cid, t in docs.items()), reverse=True)
        return [hit(cid, t, s, r) for r, (s, cid, t) in enumerate(scored[:k])]

    llm = ScriptedLLM(texts=["Dune was written by Frank Herbert. It was published in 1965."])
    res = HyDEExpander(max_sentences=4).retrieve("Who wrote Dune?", llm, emb, search, k=2)
    assert calls[0] == "Who wrote Dune?" and len(calls) == 3
    assert all(c.startswith("Who wrote Dune?") for c in calls)
    assert len(res.hits) == 2 and len({h.chunk.id for h in res.hits}) == 2
    assert res.n_candidates == 3 and "Frank Herbert" in res.hypothesis
    assert res.hits[0].score >= res.hits[1].score


def test_disabled_is_plain_search_and_empty_query_rejected() -> None:
    out = HyDEExpander(enabled=False).retrieve(
        "q", ScriptedLLM(), HashEmbedder(), lambda q, k: [hit("1", "x", 1)], 3
    )
    assert out.hypothesis == "" and [h.chunk.id for h in out.hits] == ["1"]
    with pytest.raises(InputError):
        HyDEExpander().retrieve(" ", ScriptedLLM(), HashEmbedder(), lambda q, k: [], 3)


def test_empty_retrieval_gives_empty_result() -> None:
    res = HyDEExpander().retrieve("q?", ScriptedLLM(texts=["A. B."]), HashEmbedder(), lambda q, k: [], 3)
    assert res.hits == [] and res.n_candidates == 0


def test_fused_rerank_differs_from_query_only() -> None:
    from ragsieve.expand.hyde import rerank_fused

    hits = [hit("a", "a", 0.0), hit("b", "b", 0.0)]
    chunk_vecs = np.array([[1, 0], [0.6, 0.8]], dtype=np.float32)
    q = np.array([1, 0], dtype=np.float32)
    sub = np.array([[0, 1]], dtype=np.float32)
    assert [h.chunk.id for h in rerank_by_cosine(q, hits, chunk_vecs, 2)] == ["a", "b"]
    fused = rerank_fused(q, sub, hits, chunk_vecs, 2)
    assert [h.chunk.id for h in fused] == ["b", "a"]  # 0.5*0.6+0.5*0.8 = 0.7 > 0.5*1+0.5*0 = 0.5
    assert fused[0].score == pytest.approx(0.7)


def test_unknown_rerank_mode_is_rejected() -> None:
    hyde = HyDEExpander(rerank="bogus")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="rerank"):
        hyde.retrieve("q?", ScriptedLLM(texts=["A b c d e f."]), HashEmbedder(), lambda q, k: [hit("1", "x", 1)], 3)
