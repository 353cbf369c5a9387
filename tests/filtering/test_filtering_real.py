"""Filtering with the real bundled models (slow tier)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsieve.filtering import (
    DirectFilter,
    EnsembleFilter,
    FilteredClassifier,
    ICLFilter,
    KfDataset,
    PerplexityAnnotator,
    ProxyFilter,
    get_task,
)
from ragsieve.filtering.scoring import scorer_for_task
from ragsieve.types import Chunk, Trace

pytestmark = pytest.mark.slow

SST2 = get_task("sst-2")
CORPUS = [
    "The film won many awards for its moving performances.",
    "Critics praised the movie as a wonderful, heartfelt story.",
    "The sequel was a boring and tedious failure at the box office.",
    "Rust is a form of iron oxide that forms in moist air.",
    "The Danube flows through ten countries before reaching the Black Sea.",
    "Photosynthesis converts light energy into chemical energy.",
    "Audiences left the theatre disappointed by the dull plot.",
    "The orchestra performed a symphony by Beethoven.",
]


@pytest.fixture(scope="module")
def scorer(llm):  # type: ignore[no-untyped-def]
    return scorer_for_task("sst-2").fit_calibration(llm)


def test_perplexity_annotation_tiny_example(llm, scorer) -> None:  # type: ignore[no-untyped-def]
    query = "a wonderful , moving film ."
    knowledge = [CORPUS[1], CORPUS[3]]
    by_dist = PerplexityAnnotator("sst-2", theta=1.0).annotate(llm, scorer, SST2, query, knowledge, gold="positive")
    p0 = scorer.predict_proba(llm, query)
    for pair in by_dist:
        y_with = int(np.argmax(pair.p_with))
        y_without = int(np.argmax(pair.p_without))
        assert pair.p_without == pytest.approx([p0["negative"], p0["positive"]])
        assert pair.ppl_with == pytest.approx(1 / pair.p_with[y_with])
        assert pair.ratio == pytest.approx(pair.ppl_with / pair.ppl_without)
        assert pair.harmful == (pair.ratio > 1.0)
        assert y_without == int(np.argmax([p0["negative"], p0["positive"]]))
    # full-vocabulary perplexity of the verbalizer, straight from the model
    by_llm = PerplexityAnnotator("sst-2", theta=1.0, ppl_source="llm").annotate(
        llm, scorer, SST2, query, knowledge, gold="positive"
    )
    for pair in by_llm:
        label = SST2.labels[int(np.argmax(pair.p_with))]
        direct = llm.perplexity(scorer.build_prompt(query, [pair.knowledge]), scorer.verbalizer_words()[label])
        assert pair.ppl_with == pytest.approx(direct, rel=1e-6)
        assert math.isfinite(pair.ratio) and pair.ratio > 0
    gold = PerplexityAnnotator("sst-2", theta=1.0, variant="gold").annotate(
        llm, scorer, SST2, query, knowledge, gold="positive"
    )
    for pair in gold:
        assert pair.ratio == pytest.approx(pair.p_without[1] / pair.p_with[1])


def test_direct_filter_real_model_is_calibrated(llm) -> None:  # type: ignore[no-untyped-def]
    f = DirectFilter("sst-2")
    f.warm_up(llm)
    p = f.score_many("a wonderful , moving film .", [_cand(CORPUS[1]), _cand(CORPUS[3])])
    assert p.shape == (2,) and ((p > 0) & (p < 1)).all()
    # content-free calibration: the "N/A" reference itself scores exactly 0.5
    assert f.score("a wonderful , moving film .", "N/A") == pytest.approx(0.5)


def _cand(text: str, rank: int = 1):  # type: ignore[no-untyped-def]
    from ragsieve.filtering import Candidate

    return Candidate(text, rank=rank)


def test_classify_end_to_end_with_filtering_and_fusion(llm, embedder, scorer, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ragsieve.index import Index

    chunks = [Chunk(id=f"k{i}", text=t, doc_id=f"d{i}", source="fixture") for i, t in enumerate(CORPUS)]
    index = Index.from_chunks(chunks, tmp_path / "idx", embedder=embedder)
    # D_kf from two labelled queries, then an ensemble of proxy + in-context filter
    ann = PerplexityAnnotator("sst-2")
    pairs = []
    for q, gold in (
        ("a boring , tedious sequel .", "negative"),
        ("a heartfelt , wonderful story .", "positive"),
    ):
        hits = index.search(q, k=4, mode="dense")
        pairs += ann.annotate(llm, scorer, SST2, q, [h.chunk.text for h in hits], gold=gold)
    dkf = KfDataset(pairs)
    assert all(p.harmful == (p.ratio > 1.0) for p in dkf)
    for p in pairs[:2]:  # the tiny set may be one-sided: make sure both classes have two pairs
        p.harmful = True
    for p in pairs[2:4]:
        p.harmful = False
    icl = ICLFilter("sst-2", n_demos=2).fit(dkf)
    icl.warm_up(llm)
    proxy = ProxyFilter(cv=2).warm_up(embedder).fit(dkf)
    for flt in (DirectFilter("sst-2"), EnsembleFilter(proxy, icl, theta=0.8)):
        if isinstance(flt, DirectFilter):
            flt.warm_up(llm)
        clf = FilteredClassifier(
            llm,
            scorer,
            SST2.labels,
            retriever=index,
            embedder=embedder,
            knowledge_filter=flt,
            fusion=True,
            top_k=4,
            max_keep=3,
            mode="dense",
        )
        trace = Trace("the plot was dull and the acting bored me .")
        pred = clf.predict(trace.query, trace=trace)
        assert pred.label in SST2.labels
        assert sum(pred.proba.values()) == pytest.approx(1.0)
        rec = trace.stage("filtering")[0]
        assert len(rec["candidates"]) == 4
        kept = [c for c in rec["candidates"] if c["keep"]]
        assert len(kept) <= 3
        if kept:
            assert sum(c["fusion_weight"] for c in kept) == pytest.approx(1.0, abs=1e-3)
        else:
            assert rec["used_fallback"]
        assert all(-1.0 <= c["similarity"] <= 1.0 for c in rec["candidates"])


def test_filters_cli_train_and_eval_proxy(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from typer.testing import CliRunner

    from ragsieve.filtering import KfPair
    from ragsieve.filtering.cli import app

    pairs = []
    for i in range(12):
        q = f"review {i}: a moving film"
        pairs.append(
            KfPair(
                "sst-2",
                q,
                CORPUS[3 + i % 3],
                True,
                1.5,
                "predicted",
                gold="positive",
                rank=2,
                p_without=[0.4, 0.6],
                p_with=[0.5, 0.5],
            )
        )
        pairs.append(
            KfPair(
                "sst-2",
                q,
                CORPUS[i % 2],
                False,
                0.8,
                "predicted",
                gold="positive",
                rank=1,
                p_without=[0.4, 0.6],
                p_with=[0.2, 0.8],
            )
        )
    KfDataset(pairs, {"theta": 1.0}).save(tmp_path / "dkf.jsonl")
    runner = CliRunner()
    res = runner.invoke(
        app, ["train", "--dkf", str(tmp_path / "dkf.jsonl"), "--out", str(tmp_path / "proxy"), "--variant", "gold"]
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        app,
        [
            "eval",
            "--heldout",
            str(tmp_path / "dkf.jsonl"),
            "--filter",
            "proxy",
            "--proxy",
            str(tmp_path / "proxy"),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["pairs"] == 24 and out["f1"] > 0.8
    res = runner.invoke(
        app,
        ["train", "--dkf", str(tmp_path / "dkf.jsonl"), "--out", str(tmp_path / "proxy-u"), "--prior", "uniform"],
    )
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "proxy-u" / "proxy.json").read_text())["prior"] == "uniform"
    res = runner.invoke(
        app, ["train", "--dkf", str(tmp_path / "dkf.jsonl"), "--out", str(tmp_path / "x"), "--prior", "flat"]
    )
    assert res.exit_code != 0 and "--prior" in str(res.exception or res.output)
