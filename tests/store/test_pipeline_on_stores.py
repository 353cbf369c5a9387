"""The sieve on top of each store: ``Pipeline.ask`` unchanged over the folder index and Milvus."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.helpers import HashEmbedder, copy_corpus
from tests.test_pipeline import ScriptedLLM

from ragsieve.config import PipelineConfig, RetrievalConfig
from ragsieve.index import Index
from ragsieve.io import atomic_write_json
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.store import FolderStore, MilvusStore, Store


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Store]:
    pytest.importorskip("milvus_lite")
    root = tmp_path_factory.mktemp("stores")
    index = Index.build(copy_corpus(root), root / "idx", embedder=HashEmbedder())
    milvus = MilvusStore(str(root / "milvus.db"), HashEmbedder())
    milvus.add(index.chunks, embeddings=np.asarray(index.embeddings))
    return {"folder": FolderStore(index), "milvus": milvus}


def ask(store: Store, question: str, **retrieval: object) -> tuple[list[str], list[str]]:
    config = PipelineConfig(pipeline="plain", retrieval=RetrievalConfig(**retrieval))
    pipe = Pipeline(config, index=store, llm=ScriptedLLM("Mitochondria make ATP [1]."))
    answer = pipe.ask(question, k=3)
    assert answer.trace.stage("retrieve"), "the retrieve stage must be traced"
    return [h.chunk.id for h in answer.evidence], answer.cited_ids


def test_dense_ask_gives_the_same_evidence_on_both_stores(stores: dict[str, Store]) -> None:
    question = "What do mitochondria produce?"
    folder = ask(stores["folder"], question, mode="dense")
    milvus = ask(stores["milvus"], question, mode="dense")
    assert folder == milvus
    assert folder[1] == [folder[0][0]]


def test_hybrid_ask_cites_the_same_top_chunk(stores: dict[str, Store]) -> None:
    question = "What do mitochondria produce?"
    assert ask(stores["folder"], question)[1] == ask(stores["milvus"], question)[1]


def test_fixed_route_and_source_weight_pruning_on_milvus(stores: dict[str, Store]) -> None:
    milvus = stores["milvus"]
    assert isinstance(milvus, MilvusStore)
    domain = milvus.domains[0]
    config = PipelineConfig(pipeline="plain", stages={"route": {"domain": domain}})
    pipe = Pipeline(config, index=milvus, llm=ScriptedLLM("ok [1]."))
    answer = pipe.ask("What do mitochondria produce?", k=3)
    assert answer.evidence and {h.chunk.domain for h in answer.evidence} == {domain}

    top = milvus.search("What do mitochondria produce?", k=1)[0].chunk.source
    atomic_write_json(Path(milvus.dir) / "source_weights.json", {"weights": {top: 0.0}})
    pruned = MilvusStore(milvus.uri, HashEmbedder())
    try:
        config = PipelineConfig(pipeline="plain", retrieval=RetrievalConfig(use_source_weights="prune"))
        answer = Pipeline(config, index=pruned, llm=ScriptedLLM("ok [1].")).ask("What do mitochondria produce?", k=3)
        assert answer.evidence and all(h.chunk.source != top for h in answer.evidence)
    finally:
        (Path(milvus.dir) / "source_weights.json").unlink()


@pytest.mark.parametrize("question", ["What do mitochondria produce?", "What is the largest planet?"])
def test_sieve_with_the_router_decides_alike_on_both_stores(stores: dict[str, Store], question: str) -> None:
    """route=auto trains the router from each store's chunks; every check then sees the same candidates."""
    traces = {}
    for name, store in stores.items():
        config = PipelineConfig(
            pipeline="sieve", stages={"route": {"domain": "auto"}}, retrieval=RetrievalConfig(mode="dense")
        )
        answer = Pipeline(config, index=store, llm=ScriptedLLM("It is in the passage [1].")).ask(question, k=3)
        trace = answer.trace.to_dict()
        route = [e for e in trace["events"] if e["stage"] == "route"]
        assert route, f"the route stage must be traced on {name}"
        decisions = [(d["check"], d["id"], d["verdict"]) for d in trace["decisions"]]
        traces[name] = (route[0].get("domains"), decisions, answer.abstained, [h.chunk.id for h in answer.evidence])
    assert traces["folder"] == traces["milvus"]
    assert traces["milvus"][1], "the sieve's checks must record their decisions"
    if "planet" in question:
        assert traces["milvus"][0] == ["astronomy"]
