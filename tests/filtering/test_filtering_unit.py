"""Unit tests of the filtering stage with fake models (fast)."""

from __future__ import annotations

import numpy as np
import pytest
from filtering_fakes import FakeEmbedder, FakeLLM, FakeRetriever, FakeScorer

from ragsieve.errors import ConfigError, InputError
from ragsieve.filtering import (
    Candidate,
    DirectFilter,
    EnsembleFilter,
    FilteredClassifier,
    ICLFilter,
    KfDataset,
    KfPair,
    NoFilter,
    PerplexityAnnotator,
    ProxyFilter,
    ensemble_combine,
    fuse,
    fusion_weights,
    get_task,
    perplexity_ratio,
    relabel,
)
from ragsieve.filtering.filters import contextual_calibration
from ragsieve.filtering.proxy import to_uniform_prior
from ragsieve.types import Trace

SST2 = get_task("sst-2")


# ---------------------------------------------------------------- fusion
def test_fusion_weights_match_formula() -> None:
    sims, ph, alpha = np.array([0.8, 0.2, 0.5]), np.array([0.1, 0.9, 0.5]), 0.3
    lam = alpha * sims + (1 - alpha) * ph
    np.testing.assert_allclose(fusion_weights(sims, ph, alpha), lam / lam.sum())


def test_fuse_is_weighted_sum_brute_force() -> None:
    rng = np.random.default_rng(0)
    dists = rng.dirichlet(np.ones(3), size=5)
    sims, ph = rng.uniform(0, 1, 5), rng.uniform(0, 1, 5)
    r = fuse(dists, sims, ph, 0.5, fallback=np.ones(3) / 3)
    expected = np.zeros(3)
    lam = [0.5 * s + 0.5 * p for s, p in zip(sims, ph, strict=True)]
    for lam_i, d in zip(lam, dists, strict=True):
        expected += lam_i / sum(lam) * d
    np.testing.assert_allclose(r.proba, expected)
    assert not r.used_fallback
    assert r.proba.sum() == pytest.approx(1.0)


def test_fuse_empty_set_falls_back() -> None:
    r = fuse(np.zeros((0, 2)), [], [], 0.5, fallback=np.array([0.3, 0.7]))
    assert r.used_fallback
    np.testing.assert_allclose(r.proba, [0.3, 0.7])
    assert r.weights.size == 0


def test_fusion_zero_lambda_is_uniform_and_negative_clipped() -> None:
    np.testing.assert_allclose(fusion_weights([-0.5, -0.2], [0.0, 0.0], 1.0), [0.5, 0.5])
    np.testing.assert_allclose(fusion_weights([-0.5, 0.5], [0.0, 0.0], 1.0), [0.0, 1.0])


def test_fusion_rejects_bad_input() -> None:
    with pytest.raises(InputError, match="alpha"):
        fusion_weights([0.1], [0.1], 1.5)
    with pytest.raises(InputError, match="one per piece"):
        fusion_weights([0.1, 0.2], [0.1], 0.5)
    with pytest.raises(InputError, match="labels"):
        fuse(np.ones((2, 3)) / 3, [0.1, 0.2], [0.1, 0.2], 0.5, fallback=np.ones(2) / 2)


# ---------------------------------------------------------------- annotation
def test_perplexity_ratio_and_variants() -> None:
    ann = PerplexityAnnotator("sst-2", theta=1.0, variant="predicted")
    # with k the prediction flips to negative with confidence 0.55 < 0.6 without: harmful
    pair = ann.label_from_distributions(SST2, "q", "k", p_without=[0.4, 0.6], p_with=[0.55, 0.45])
    assert pair.ratio == pytest.approx((1 / 0.55) / (1 / 0.6))
    assert pair.harmful
    gold = PerplexityAnnotator("sst-2", theta=1.0, variant="gold")
    g = gold.label_from_distributions(SST2, "q", "k", [0.4, 0.6], [0.55, 0.45], gold="negative")
    assert g.ratio == pytest.approx(0.4 / 0.55)
    assert not g.harmful  # knowledge made the gold label more likely
    assert perplexity_ratio([0.2, 0.8], [0.4, 0.6], 1, 1) == pytest.approx(0.75)


def test_gold_variant_needs_gold() -> None:
    ann = PerplexityAnnotator("sst-2", variant="gold")
    with pytest.raises(InputError, match="gold label"):
        ann.label_from_distributions(SST2, "q", "k", [0.5, 0.5], [0.5, 0.5])
    with pytest.raises(InputError, match="not one of"):
        ann.label_from_distributions(SST2, "q", "k", [0.5, 0.5], [0.5, 0.5], gold="meh")


def test_annotate_with_scorer_and_llm_perplexity() -> None:
    llm, scorer = FakeLLM(), FakeScorer()
    ann = PerplexityAnnotator("sst-2", theta=1.0, variant="predicted")
    pairs = ann.annotate(llm, scorer, SST2, "a film .", ["a good thing", "a bad thing"], gold="positive")
    # both pieces make the model more confident in its own prediction: harmless by PPL
    assert [p.harmful for p in pairs] == [False, False]
    assert [p.rank for p in pairs] == [1, 2]
    gold = PerplexityAnnotator("sst-2", theta=1.0, variant="gold")
    pairs = gold.annotate(llm, scorer, SST2, "a film .", ["a good thing", "a bad thing"], gold="positive")
    assert [p.harmful for p in pairs] == [False, True]  # "bad" lowers p(gold)
    ann_llm = PerplexityAnnotator("sst-2", theta=1.0, ppl_source="llm")
    pairs = ann_llm.annotate(llm, scorer, SST2, "a film .", ["a good thing", "a bad thing"])
    assert [p.ppl_with for p in pairs] == [1.5, 2.0]
    assert [p.harmful for p in pairs] == [False, True]


def test_dataset_roundtrip_and_relabel(tmp_path) -> None:
    ann = PerplexityAnnotator("sst-2")
    pairs = [
        ann.label_from_distributions(SST2, "q1", "k1", [0.4, 0.6], [0.3, 0.7], gold="negative"),
        ann.label_from_distributions(SST2, "q1", "k2", [0.4, 0.6], [0.55, 0.45], gold="negative"),
    ]
    ds = KfDataset(pairs, meta={"theta": 1.0, "seed": 13})
    path = ds.save(tmp_path / "dkf.jsonl")
    back = KfDataset.load(path)
    assert back.meta == {"theta": 1.0, "seed": 13}
    assert [p.to_dict() for p in back] == [p.to_dict() for p in pairs]
    assert back.harmful.tolist() == [False, True]
    gold = relabel(back, "gold", 1.0, SST2.labels)
    # gold = negative: k1 lowers p(negative) 0.4 -> 0.3 (harmful), k2 raises it (harmless)
    assert [p.harmful for p in gold] == [True, False]
    with pytest.raises(InputError, match="does not exist"):
        KfDataset.load(tmp_path / "missing.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"x": 1}\n')
    with pytest.raises(InputError, match="not a D_kf pair"):
        KfDataset.load(tmp_path / "bad.jsonl")


# ---------------------------------------------------------------- filters
def test_contextual_calibration() -> None:
    assert contextual_calibration(0.3, 0.3) == pytest.approx(0.5)
    assert contextual_calibration(0.4, 0.3) > 0.5


def test_direct_filter_scores_and_calibrates() -> None:
    llm = FakeLLM()
    raw = DirectFilter("sst-2", calibration="none")
    raw.warm_up(llm)
    p_raw = raw.score_many("a film .", [Candidate("good facts"), Candidate("bad facts")])
    np.testing.assert_allclose(p_raw, [0.4, 0.1])
    assert (raw.score_many("q", [Candidate("good")]) < 0.5).all()  # leans to Harmful
    cal = DirectFilter("sst-2", calibration="content-free")
    cal.warm_up(llm)
    p = cal.score_many("a film .", [Candidate("good facts"), Candidate("bad facts")])
    assert p[0] == pytest.approx(0.5) and p[1] < 0.5
    assert cal.score("a film .", "bad facts") < 0.5
    assert "(A) Harmful\n(B) Harmless" in llm.calls[0]
    decisions = cal.decide("a film .", [Candidate("good facts"), Candidate("bad facts")])
    assert [d.keep for d in decisions] == [True, False]
    assert DirectFilter.from_dict(cal.to_dict()).to_dict() == cal.to_dict()
    with pytest.raises(ConfigError, match="warm_up"):
        DirectFilter("sst-2").score_many("q", [Candidate("k")])


def _pairs(n: int = 10) -> list[KfPair]:
    return [KfPair("sst-2", f"q{i}", f"k{i}", i % 2 == 0, 1.0, "predicted") for i in range(n)]


def test_icl_filter_demos_balanced_and_persisted() -> None:
    f = ICLFilter("sst-2", n_demos=4, seed=1).fit(KfDataset(_pairs()))
    assert sorted(d["harmful"] for d in f.demos_) == [False, False, True, True]
    f.warm_up(FakeLLM())
    msgs = f._messages("q", "k")
    assert len(msgs) == 9 and msgs[1]["role"] == "assistant" and msgs[1]["content"] in {"A", "B"}
    g = ICLFilter.from_dict(f.to_dict())
    assert g.demos_ == f.demos_
    assert f.score_many("q", [Candidate("k")]).shape == (1,)
    with pytest.raises(InputError, match="both Harmful and Harmless"):
        ICLFilter().fit([p for p in _pairs() if p.harmful])
    with pytest.raises(ConfigError, match="demonstrations"):
        ICLFilter()._messages("q", "k")


def _proxy_data(n: int = 120) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 5))  # noqa: N806
    y = (X[:, 0] + 0.1 * rng.normal(size=n) > 0).astype(int)
    return X, y


def test_proxy_fit_predict_proba_and_persistence(tmp_path) -> None:
    X, y = _proxy_data()  # noqa: N806
    proxy = ProxyFilter(C=1.0).fit(X, y)
    p = proxy.predict_proba(X)
    assert p.shape == (120, 2)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert (proxy.predict(X) == y).mean() > 0.9
    proxy.save(tmp_path / "proxy")
    back = ProxyFilter.load(tmp_path / "proxy")
    np.testing.assert_allclose(back.predict_proba(X), p)
    assert back.get_params() == proxy.get_params()
    with pytest.raises(InputError, match="features per row"):
        back.predict_proba(X[:, :3])
    with pytest.raises(ConfigError, match="not fitted"):
        ProxyFilter().predict_proba(X)
    with pytest.raises(InputError, match="not a saved proxy"):
        ProxyFilter.load(tmp_path / "nothing")


def test_uniform_prior_shift_is_bayes_rule() -> None:
    proba = np.array([[0.2, 0.8], [0.5, 0.5]])
    # trained where 80% of pairs were Harmless: a 0.8 Harmless output is exactly the prior
    shifted = to_uniform_prior(proba, 0.8)
    np.testing.assert_allclose(shifted[0], [0.5, 0.5])
    np.testing.assert_allclose(shifted[1], [0.8, 0.2])
    np.testing.assert_allclose(to_uniform_prior(proba, 0.5), proba)
    np.testing.assert_allclose(shifted.sum(axis=1), 1.0)


def test_proxy_uniform_prior_flags_more_harmful_on_imbalanced_data(tmp_path) -> None:
    rng = np.random.default_rng(0)
    n = 400
    y = (rng.random(n) < 0.85).astype(int)  # 85% Harmless
    X = rng.normal(size=(n, 4)) + 0.6 * y[:, None]  # noqa: N806 - weakly separable
    trained = ProxyFilter(C=1.0).fit(X, y)
    uniform = ProxyFilter(C=1.0, prior="uniform").fit(X, y)
    assert uniform.harmless_rate_ == pytest.approx(y.mean())
    flagged_train = (trained.predict(X) == 0).mean()
    flagged_uniform = (uniform.predict(X) == 0).mean()
    assert flagged_train < 0.1 < flagged_uniform
    # same ranking of pairs, only the scale moves
    a, b = trained.predict_proba(X)[:, 1], uniform.predict_proba(X)[:, 1]
    assert np.array_equal(np.argsort(a, kind="stable"), np.argsort(b, kind="stable"))
    uniform.save(tmp_path / "p")
    back = ProxyFilter.load(tmp_path / "p")
    assert back.prior == "uniform" and back.harmless_rate_ == pytest.approx(uniform.harmless_rate_)
    np.testing.assert_allclose(back.predict_proba(X), uniform.predict_proba(X))
    with pytest.raises(ConfigError, match="prior"):
        ProxyFilter(prior="balanced").fit(X, y)  # type: ignore[arg-type]


def test_proxy_learns_from_pairs() -> None:
    # harmful iff the knowledge is about weather; the embedding features can see that
    pairs = []
    for i in range(40):
        pairs.append(
            KfPair("sst-2", f"movie review {i % 7}", f"rain storm weather {i}", True, 2.0, "predicted", rank=1)
        )
        pairs.append(
            KfPair("sst-2", f"movie review {i % 7}", f"movie review film {i}", False, 0.5, "predicted", rank=2)
        )
    proxy = ProxyFilter(C=1.0).warm_up(FakeEmbedder()).fit(KfDataset(pairs))
    p = proxy.score_many("movie review 3", [Candidate("rain storm weather 5", rank=1), Candidate("movie film", rank=2)])
    assert p[0] < 0.5 < p[1]
    with pytest.raises(ConfigError, match="embedder"):
        ProxyFilter().fit(KfDataset(pairs))


class _Fixed:
    name, threshold = "fixed", 0.5

    def __init__(self, p: list[float]) -> None:
        self.p = np.array(p)
        self.seen: list[str] = []

    def score_many(self, q, cs, *, query_embedding=None):  # type: ignore[no-untyped-def]
        self.seen += [c.text for c in cs]
        return self.p[[int(c.text) for c in cs]]

    def to_dict(self) -> dict[str, str]:
        return {"name": "fixed"}


def test_ensemble_uses_icl_only_when_proxy_unsure() -> None:
    proxy, icl = _Fixed([0.95, 0.6, 0.05, 0.3]), _Fixed([0.1, 0.2, 0.9, 0.8])
    e = EnsembleFilter(proxy, icl, theta=0.8)
    cands = [Candidate(str(i)) for i in range(4)]
    np.testing.assert_allclose(e.score_many("q", cands), [0.95, 0.2, 0.05, 0.8])
    assert icl.seen == ["1", "3"]
    assert [d.source for d in e.decide("q", cands)] == ["proxy", "icl", "proxy", "icl"]
    p, used = ensemble_combine(proxy.p, icl.p, 0.8)
    np.testing.assert_allclose(p, [0.95, 0.2, 0.05, 0.8])
    assert used.tolist() == [True, False, True, False]


# ---------------------------------------------------------------- classifier
def _classifier(filter_obj, fusion: bool) -> FilteredClassifier:  # type: ignore[no-untyped-def]
    retriever = FakeRetriever(["a good fact", "a bad fact", "another good point", "bad news"])
    return FilteredClassifier(
        FakeLLM(),
        FakeScorer(),
        ["negative", "positive"],
        retriever=retriever,
        embedder=FakeEmbedder(),
        knowledge_filter=filter_obj,
        fusion=fusion,
        alpha=0.5,
        top_k=4,
        max_keep=8,
    )


def test_filtered_classifier_fusion_and_trace() -> None:
    f = DirectFilter("sst-2")
    clf = _classifier(f, fusion=True)
    f.warm_up(clf.llm)
    trace = Trace("a film .")
    pred = clf.predict("a film .", trace=trace)
    kept = [d for d in pred.decisions if d.keep]
    assert [d.candidate.text for d in kept] == ["a good fact", "another good point"]
    assert pred.label == "positive" and not pred.used_fallback
    assert sum(pred.weights) == pytest.approx(1.0)
    rec = trace.stage("filtering")[0]
    assert len(rec["candidates"]) == 4
    assert {c["keep"] for c in rec["candidates"]} == {True, False}
    assert all(c["fusion_weight"] is None for c in rec["candidates"] if not c["keep"])
    assert "similarity" in rec["candidates"][0] and "p_harmless" in rec["candidates"][0]


def test_filtered_classifier_fallback_and_concatenation() -> None:
    drop_all = _classifier(NoFilter(threshold=2.0), fusion=True)
    pred = drop_all.predict("a film .")
    assert pred.used_fallback and pred.proba["positive"] == pytest.approx(0.6)
    concat = _classifier(NoFilter(), fusion=False)
    pred = concat.predict("a film .")
    assert concat.scorer.calls[-1] == ["a good fact", "a bad fact", "another good point", "bad news"]
    assert pred.weights == []
    capped = _classifier(NoFilter(), fusion=False)
    capped.max_keep = 2
    capped.predict("a film .")
    assert capped.scorer.calls[-1] == ["a good fact", "a bad fact"]
    with pytest.raises(InputError, match="empty"):
        concat.predict("  ")


def test_proxy_with_one_example_in_a_class_fits_uncalibrated() -> None:
    X, y = _proxy_data(30)  # noqa: N806
    y = np.zeros(30, dtype=int)
    y[0] = 1
    proxy = ProxyFilter().fit(X, y)
    assert proxy.predict_proba(X).shape == (30, 2)
    with pytest.raises(InputError, match="only one class"):
        ProxyFilter().fit(X, np.zeros(30, dtype=int))


def test_filter_factory_and_cli_help(tmp_path) -> None:
    from typer.testing import CliRunner

    from ragsieve.filtering.cli import app
    from ragsieve.filtering.factory import FilteringConfig, make_filter

    assert make_filter(FilteringConfig(filter="none"), None).name == "none"
    assert make_filter(FilteringConfig(filter="direct"), FakeLLM()).name == "direct"
    with pytest.raises(ConfigError, match="--dkf"):
        make_filter(FilteringConfig(filter="icl"), FakeLLM())
    with pytest.raises(ConfigError, match="--proxy"):
        make_filter(FilteringConfig(filter="ensemble"), FakeLLM())
    X, y = _proxy_data()  # noqa: N806
    ProxyFilter().fit(X, y).save(tmp_path / "p")
    assert make_filter(FilteringConfig(filter="proxy", proxy_path=str(tmp_path / "p")), None).name == "proxy"
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0 and "annotate" in result.output and "train" in result.output
