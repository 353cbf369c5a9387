"""End-to-end with the bundled SmolLM2-135M and MiniLM (slow)."""

from __future__ import annotations

import numpy as np
import pytest

from ragsieve.coe import ScopeCoESelector
from ragsieve.coe.judges import JudgeInput, LLMYesNoJudge
from ragsieve.types import Chunk, SearchHit, Trace

pytestmark = pytest.mark.slow

Q = "Were Scott Derrickson and Ed Wood of the same nationality?"
TEXTS = [
    "Woodson, Arkansas: Woodson is a census-designated place in Pulaski County, Arkansas.",
    "Scott Derrickson: Scott Derrickson (born July 16, 1966) is an American director and producer.",
    "Tyler Bates: He has collaborated with directors like Zack Snyder and Scott Derrickson.",
    "Ed Wood: Edward Davis Wood Jr. was an American filmmaker, actor, writer and director.",
]


def test_scope_coe_with_bundled_models(llm, embedder, tmp_path):
    sel = ScopeCoESelector({"cache_dir": str(tmp_path), "cover": "exact"}, llm=llm, embedder=embedder)
    hits = [SearchHit(Chunk(id=f"c{i}", text=t, doc_id=f"d{i}", source="s"), 1.0, i + 1, {})
            for i, t in enumerate(TEXTS)]
    trace = Trace(Q)
    kept = sel.select(Q, hits, trace)
    rec = trace.stage("select")[0]
    feats = rec["features"]
    assert feats["intent"] and feats["keywords"]
    assert {"Scott Derrickson", "Ed Wood"} <= set(feats["keywords"])  # grounded + capitalised spans
    assert 1 <= len(kept) <= len(hits)
    ids = {h.chunk.id for h in kept}
    assert {"c1", "c3"} & ids  # the two people's sentences carry the keywords
    assert len(list(tmp_path.glob("*.json"))) == 1  # features cached on disk


def test_llm_yes_no_judge_gives_calibrated_probabilities(llm):
    j = LLMYesNoJudge(llm, "keyword", calibrate=True)
    out = j.judge(JudgeInput([TEXTS[1], TEXTS[0]], ["Scott Derrickson"]))
    assert np.all((out.scores > 0) & (out.scores < 1))
    assert out.scores[0, 0] > out.scores[1, 0]  # the mentioning snippet scores higher
