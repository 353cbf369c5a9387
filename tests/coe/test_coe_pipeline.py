"""``--select scope-coe`` through the pipeline (fake LLM, bag-of-words embedder)."""

from __future__ import annotations

from ragsieve.coe import ScopeCoESelector
from ragsieve.config import validate_config
from ragsieve.index import Index
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.types import Chunk

from .fakes import BagEmbedder, FakeLLM

Q = "Were Scott Derrickson and Ed Wood of the same nationality?"
TEXTS = [
    "Woodson is a census-designated place in Arkansas.",
    "Scott Derrickson is an American director.",
    "Tyler Bates is a composer.",
    "Ed Wood was an American filmmaker.",
    "Kiss and Tell is a 1945 film.",
]


def test_pipeline_uses_scope_coe(tmp_path):
    chunks = [Chunk(id=f"c{i}", text=t, doc_id=f"d{i}", source="s") for i, t in enumerate(TEXTS)]
    emb = BagEmbedder()
    index = Index.from_chunks(chunks, tmp_path / "idx", embedder=emb)
    cfg = validate_config({
        "pipeline": "plain",
        "retrieval": {"k": 5, "candidates": 5},
        "stages": {"select": {"method": "scope-coe"},
                   "coe": {"keyword_judge": "lexical", "intent_threshold": -1.0, "cover": "exact"}},
    })
    llm = FakeLLM([{"intent": "nationality of two people", "keywords": ["Scott Derrickson", "Ed Wood"]},
                   {"relations": []}], text="Yes, both are American [1].")
    pipe = Pipeline(cfg, index=index, llm=llm)
    ans = pipe.ask(Q)
    assert isinstance(pipe.selector, ScopeCoESelector)
    assert sorted(h.chunk.id for h in ans.evidence) == ["c1", "c3"]
    rec = ans.trace.stage("select")[-1]
    assert rec["method"] == "scope-coe" and rec["full_chain"]
    assert rec["features"]["keywords"] == ["Scott Derrickson", "Ed Wood"]
