"""Routing over a real partitioned Index (hashing embedder, no model): training from chunks
and labels, persistence beside the index, fallbacks, and the pipeline's --route handling."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from ragsieve.errors import IndexStoreError, InputError
from ragsieve.route import (
    ROUTER_DIR,
    DomainRouter,
    QueryRouter,
    RouteConfig,
    examples_from_jsonl,
    load_router,
    resolve_route,
    route_query,
    train_router,
)

from .conftest import DOMAINS, QUESTIONS


def test_partitioned_ingestion_by_folder(index: Any) -> None:
    assert index.domains == ["code", "debate", "health"]
    assert index.partitioned
    for domain in index.domains:
        hits = index.search("python json file", k=3, domains=[domain])
        assert hits and all(h.chunk.domain == domain for h in hits)
    assert {h.chunk.domain for h in index.search("python", k=24)} >= {"code"}


def test_train_from_chunks_persists_beside_the_index(index: Any) -> None:
    router = train_router(index, {"classifier": "logreg"})
    folder = index.dir / ROUTER_DIR
    assert (folder / "router.npz").is_file()
    meta = json.loads((folder / "router.json").read_text())
    assert meta["trained_on"] == "chunks" and meta["n_train"] == sum(len(v) for v in DOMAINS.values())
    loaded = load_router(index)
    assert list(loaded.classes_) == list(router.classes_)


def test_train_from_labels(index: Any, labels_file: Path) -> None:
    router = train_router(index, {"classifier": "multinomial-nb"}, labels=labels_file)
    assert DomainRouter.read_meta(index.dir / ROUTER_DIR)["trained_on"] == "labels"
    assert router.score(*examples_from_jsonl(labels_file)[:2]) == 1.0


def test_labels_with_unknown_domain_are_refused(index: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "x y", "domain": "astronomy"}) + "\n")
    with pytest.raises(InputError, match="astronomy"):
        train_router(index, labels=bad)
    bad.write_text(json.dumps({"text": "q"}) + "\n")
    with pytest.raises(InputError, match="lacks"):
        examples_from_jsonl(bad)
    with pytest.raises(InputError, match="does not exist"):
        examples_from_jsonl(tmp_path / "nope.jsonl")


def test_route_confident_query_searches_one_partition(index: Any) -> None:
    import shutil

    # ingest trained a router; remove it to check one is trained on first use when missing
    assert (index.dir / ROUTER_DIR / "router.npz").is_file()
    shutil.rmtree(index.dir / ROUTER_DIR)
    qr = QueryRouter(index, {"mass_threshold": 0.5, "unsure_threshold": 0.4})
    decision = qr.route("python json file parse dictionary")
    assert decision.domains == ["code"] and not decision.fallback
    assert set(decision.probabilities) == set(index.domains)
    # the router was trained on first use and saved
    assert (index.dir / ROUTER_DIR / "router.npz").is_file()


def test_multi_domain_and_fallback_are_counted(index: Any) -> None:
    qr = QueryRouter(index, {"mass_threshold": 0.999, "unsure_threshold": 0.0, "max_domains": 3})
    multi = qr.route("python code for heart health")
    assert multi.multi
    qr2 = QueryRouter(index, {"unsure_threshold": 0.99})
    unsure = qr2.route("python code for heart health")
    assert unsure.fallback and unsure.domains is None and "unsure" in unsure.reason
    assert qr.stats.counts["multi"] == 1 and qr2.stats.counts["fallback"] == 1


@pytest.mark.parametrize("query", ["", "   ", "the of and", "zzzz qqqq"])
def test_unfeaturisable_queries_fall_back(index: Any, query: str, caplog: pytest.LogCaptureFixture) -> None:
    qr = QueryRouter(index)
    with caplog.at_level(logging.INFO, logger="ragsieve.route.runtime"):
        decision = qr.route(query)
    assert decision.fallback and decision.domains is None
    assert "global index" in caplog.text


def test_router_on_other_domains_falls_back_not_crashes(index: Any) -> None:
    other = DomainRouter().fit(["stars and galaxies", "rocks and minerals"], ["astronomy", "geology"])
    other.save(index.dir / ROUTER_DIR)
    with pytest.raises(IndexStoreError, match="retrain"):
        load_router(index)
    decision = QueryRouter(index).route("python json")
    assert decision.fallback and "router unavailable" in decision.reason


def test_router_with_extra_domain_ignores_it(index: Any) -> None:
    texts = [t for docs in DOMAINS.values() for t in docs] + ["stars and galaxies", "planets orbit stars"]
    labels = [d for d, docs in DOMAINS.items() for _ in docs] + ["astronomy", "astronomy"]
    DomainRouter().fit(texts, labels).save(index.dir / ROUTER_DIR)
    decision = QueryRouter(index, {"unsure_threshold": 0.0}).route("galaxies and stars python")
    assert "astronomy" not in decision.probabilities
    assert sum(decision.probabilities.values()) == pytest.approx(1.0)


def test_single_domain_index_falls_back(tmp_path: Path, hash_embedder: Any) -> None:
    from ragsieve.index import Index
    from ragsieve.types import Chunk

    chunks = [
        Chunk(id=f"c{i}", text=t, doc_id="d", source="s", domain="only")
        for i, t in enumerate(DOMAINS["code"])
    ]
    idx = Index.from_chunks(chunks, tmp_path / "one", embedder=hash_embedder)
    assert QueryRouter(idx).route("python").fallback
    with pytest.raises(InputError, match="at least two"):
        train_router(idx)


def test_resolve_route_modes(index: Any) -> None:
    assert resolve_route(index, "q", "all").domains is None
    assert resolve_route(index, "q", "health").domains == ["health"]
    with pytest.raises(InputError, match="unknown domain 'astro'.*code, debate, health"):
        resolve_route(index, "q", "astro")
    auto = resolve_route(index, "python json parse", "auto", {"unsure_threshold": 0.3, "mass_threshold": 0.5})
    assert auto.domains == ["code"]


def test_route_query_reuses_the_loaded_router(index: Any) -> None:
    route_query(index, "python json", {})
    path = index.dir / ROUTER_DIR / "router.npz"
    mtime = path.stat().st_mtime_ns
    route_query(index, "vitamin d bones", {})
    assert path.stat().st_mtime_ns == mtime


def test_routed_accuracy_on_labelled_questions(index: Any) -> None:
    qr = QueryRouter(index, RouteConfig(classifier="logreg", mass_threshold=0.5, unsure_threshold=0.0))
    correct = sum(qr.route(q).domains == [d] for q, d in QUESTIONS)
    assert correct >= 0.75 * len(QUESTIONS)


def test_invalid_stage_config_is_a_clear_error() -> None:
    from ragsieve.errors import ConfigError

    with pytest.raises(ConfigError, match="stages.route"):
        RouteConfig.parse({"mass_threshold": 2.0})
    with pytest.raises(ConfigError, match="stages.route"):
        RouteConfig.parse({"classifer": "logreg"})


def test_pipeline_records_the_route_in_the_trace(index: Any) -> None:
    from ragsieve.config import PipelineConfig
    from ragsieve.sieve.pipeline import Pipeline
    from ragsieve.types import Trace

    cfg = PipelineConfig(stages={"route": {"domain": "auto", "unsure_threshold": 0.3, "mass_threshold": 0.5}})
    pipe = Pipeline(cfg, index=index)
    trace = Trace(query="python json parse")
    domains = pipe.resolve_domains("python json parse", trace)
    assert domains == ["code"]
    event = trace.stage("route")[0]
    assert event["mode"] == "auto" and event["searched"] == ["code"]
    assert set(event["probabilities"]) == {"code", "debate", "health"} and event["fallback"] is False
    hits = pipe.retrieve("python json parse", trace, k=3, domains=domains)
    assert hits and all(h.chunk.domain == "code" for h in hits)
    fallback_trace = Trace(query="the of")
    assert pipe.resolve_domains("the of", fallback_trace) is None
    assert fallback_trace.stage("route")[0]["searched"] == ["<global>"]


def test_default_classifier_depends_on_training_source(index: Any, labels_file: Path) -> None:
    assert train_router(index, save=False).classifier == "multinomial-nb"
    assert train_router(index, labels=labels_file, save=False).classifier == "logreg"
    assert train_router(index, {"classifier": "linear-svc"}, save=False).classifier == "linear-svc"
    assert not (index.dir / ROUTER_DIR / "router.skops").exists()
