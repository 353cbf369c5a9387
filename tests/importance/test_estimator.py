"""Estimator, leave-one-out, pruning/reweighting, storage with an index and the JSONL loader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragsieve.errors import ConfigError, IndexStoreError, InputError
from ragsieve.importance import (
    DataImportance,
    apply_source_weights,
    from_lists,
    leave_one_out,
    load_jsonl,
    load_prune_threshold,
    load_source_weights,
    masked_scores,
    reweight_scores,
    save_source_weights,
    synthetic,
    tune_prune_threshold,
)
from ragsieve.types import Chunk, SearchHit

from .bruteforce import majority_topk


def qa_data(n: int = 60, seed: int = 0):
    """Questions with 8 results from 4 sources: 'good' answers right, 'bad' answers wrong."""
    rng = np.random.default_rng(seed)
    lists = []
    for q in range(n):
        row = []
        for r in range(8):
            src = ["good", "bad", "mixed", "bad2"][int(rng.integers(0, 4))]
            right = src == "good" or (src == "mixed" and rng.random() < 0.5)
            row.append({"id": f"q{q}-{r}", "source": src, "utility": float(right),
                        "answer": "right" if right else f"wrong{int(rng.integers(0, 2))}"})
        lists.append(row)
    return from_lists(lists)


def test_fit_ranks_good_sources_above_bad() -> None:
    data = qa_data()
    est = DataImportance(k=3, epochs=20, learning_rate=50.0).fit(data)
    w = est.source_weights()
    assert w["good"] > w["mixed"] > w["bad"] and w["good"] > w["bad2"]
    assert est.weights_.min() >= 0.0 and est.weights_.max() <= 1.0
    assert est.item_weights_.shape == (data.n_items,)
    assert est.history_[-1] > est.history_[0]  # gradient ascent raises the expected utility
    again = DataImportance.from_dict(json.loads(json.dumps(est.to_dict())))
    np.testing.assert_array_equal(again.weights_, est.weights_)
    assert again.source_weights() == w


@pytest.mark.parametrize("method", ["approx", "montecarlo"])
def test_other_methods_agree_on_the_ranking(method: str) -> None:
    data = qa_data()
    utility = "majority" if method == "montecarlo" else "additive"
    est = DataImportance(k=3, epochs=10, learning_rate=50.0, method=method, epsilon=0.05, utility=utility)
    w = est.fit(data).source_weights()
    assert w["good"] > w["bad"]


def test_item_level_weights_and_bad_params(tmp_path: Path) -> None:
    data = synthetic(30, list_len=10, n_sources=4, seed=1)
    est = DataImportance(k=3, epochs=3, group_by="item").fit(data)
    assert est.weights_.shape == (data.n_items,)
    with pytest.raises(InputError):
        est.source_weights()
    with pytest.raises(ConfigError):
        DataImportance(k=0).fit(data)
    with pytest.raises(ConfigError):
        DataImportance(method="exact", utility="majority").fit(data)
    with pytest.raises(InputError):
        DataImportance().fit(from_lists([]))
    est.save(tmp_path / "m.json")
    assert DataImportance.load(tmp_path / "m.json").get_params() == est.get_params()


def test_leave_one_out_matches_definition() -> None:
    data = qa_data(20, seed=3)
    loo = leave_one_out(data, k=3, utility="majority")
    u = majority_topk(3)
    expected = np.zeros(data.n_sources)
    for t in range(data.n_tuples):
        a, b = data.offsets[t], data.offsets[t + 1]
        src, util, ans = data.source[a:b], data.utility[a:b].tolist(), data.answer[a:b].tolist()
        full = u(util, ans)
        for s in set(src.tolist()):
            keep = src != s
            expected[s] += full - u([x for x, k in zip(util, keep, strict=True) if k],
                                    [x for x, k in zip(ans, keep, strict=True) if k])
    np.testing.assert_allclose(loo, expected / data.n_tuples, atol=1e-12)


def test_prune_threshold_and_reweight() -> None:
    data = qa_data()
    est = DataImportance(k=3, epochs=20, learning_rate=50.0).fit(data)
    base = masked_scores(data, np.ones(data.n_sources, bool), k=3).mean()
    tuned = tune_prune_threshold(data, est.weights_, k=3)
    assert tuned.validation_score >= base and tuned.pruned_sources >= 1
    kept = est.weights_ >= tuned.threshold
    assert kept[data.sources.index("good")] and not kept[data.sources.index("bad")]
    rew = reweight_scores(data, est.weights_, k=3, n_samples=32, seed=0)
    assert rew.shape == (data.n_tuples,) and rew.mean() > base


def hit(source: str, rank: int) -> SearchHit:
    return SearchHit(Chunk(id=f"c{rank}", text="t", doc_id="d", source=source), 1.0 / (rank + 1), rank, {})


def test_index_storage_and_query_time(tmp_path: Path) -> None:
    assert load_source_weights(tmp_path) is None
    save_source_weights(tmp_path, {"good": 0.9, "bad": 0.0, "meh": 0.4}, threshold=0.5)
    weights = load_source_weights(tmp_path)
    assert weights == {"good": 0.9, "bad": 0.0, "meh": 0.4}
    assert load_prune_threshold(tmp_path) == 0.5
    hits = [hit("bad", 0), hit("good", 1), hit("unknown", 2), hit("meh", 3), hit("good", 4)]
    pruned = apply_source_weights(hits, weights, "prune", threshold=0.5)
    assert [h.chunk.source for h in pruned] == ["good", "unknown", "good"]
    assert apply_source_weights(hits, weights, "off") == hits
    rng = np.random.default_rng(0)
    draws = [apply_source_weights(hits, weights, "reweight", rng=rng) for _ in range(200)]
    assert all("bad" not in [h.chunk.source for h in d] for d in draws)
    share_meh = np.mean(["meh" in [h.chunk.source for h in d] for d in draws])
    assert 0.25 < share_meh < 0.55
    assert all(sum(h.chunk.source == "good" for h in d) in (0, 2) for d in draws)  # one draw per source
    with pytest.raises(InputError):
        save_source_weights(tmp_path, {"x": 1.5})
    (tmp_path / "source_weights.json").write_text("[1, 2]")
    with pytest.raises(IndexStoreError):
        load_source_weights(tmp_path)


def test_jsonl_loader(tmp_path: Path) -> None:
    path = tmp_path / "val.jsonl"
    rows = [
        {"id": "q1", "items": [
            {"id": "a", "source": "s1", "utility": 1},
            {"id": "b", "source": "s2", "utility": 0},
        ]},
        {"id": "q2", "items": []},
        {"id": "q3", "items": [{"id": "b", "source": "s2", "utility": 0.25}]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    data = load_jsonl(path)
    assert data.n_tuples == 3 and data.n_positions == 3 and data.sources == ["s1", "s2"]
    assert data.tuple_ids == ["q1", "q2", "q3"] and data.utility.tolist() == [1.0, 0.0, 0.25]
    path.write_text(json.dumps({"id": "q", "items": [{"id": "a", "source": "s"}]}) + "\n")
    with pytest.raises(InputError, match="utility"):
        load_jsonl(path)
    path.write_text(json.dumps({"id": "q"}) + "\n")
    with pytest.raises(InputError, match="items"):
        load_jsonl(path)
    with pytest.raises(InputError, match="does not exist"):
        load_jsonl(tmp_path / "missing.jsonl")


def test_zero_removal_rate_keeps_every_source_even_with_negative_values() -> None:
    data = qa_data(20, seed=4)
    loo = leave_one_out(data, k=3, utility="majority") - 1.0  # all negative
    tuned = tune_prune_threshold(data, loo, k=3, rates=(0.0,))
    assert tuned.pruned_sources == 0 and np.isfinite(tuned.threshold)
    assert (loo >= tuned.threshold).all()


def test_montecarlo_refuses_an_impractical_sample_count() -> None:
    from ragsieve.importance import montecarlo_samples

    assert montecarlo_samples(0.1, 0.05, 100) == int(np.ceil(200 * np.log(2 * 100 / 0.05)))
    with pytest.raises(ConfigError, match="larger epsilon"):
        DataImportance(method="montecarlo", utility="majority", epsilon=1e-3).fit(qa_data(5))
