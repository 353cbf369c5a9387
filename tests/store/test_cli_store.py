"""The same commands on Milvus: ``ragsieve ingest --store milvus`` then ``ask``/``search`` on the folder alone.

The LLM is the loopback OpenAI-compatible server of ``tests/test_cli_lean.py`` (one cited
sentence), so the checks are about which evidence each store returns, not the answer's wording.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.helpers import copy_corpus
from tests.test_cli_lean import chat_server, ragsieve  # noqa: F401 - chat_server is a fixture

pytest.importorskip("milvus_lite")

QUESTION = "What is the Moon?"


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli-store")
    corpus = copy_corpus(root)
    # fp32: its vectors do not depend on which texts share a batch (int8's dynamically quantized
    # activations do), so ingests that batch differently give the same vectors to compare exactly
    (root / "fp32.toml").write_text('[embedder]\nprecision = "fp32"\n')
    for name, extra in {"folder": [], "milvus": ["--store", "milvus"]}.items():
        result = ragsieve("ingest", str(corpus), "--index", str(root / name), "--threads", "1",
                          "--config", str(root / "fp32.toml"), *extra)  # fmt: skip
        assert result.returncode == 0, result.stderr
    return {"folder": root / "folder", "milvus": root / "milvus", "corpus": corpus, "config": root / "fp32.toml"}


def ask_json(index: Path, url: str, *args: str) -> dict:
    result = ragsieve("ask", QUESTION, "--index", str(index), "--llm-url", url, "--model", "fake", "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_ask_on_milvus_returns_the_folder_index_evidence(indexes, chat_server) -> None:  # noqa: F811
    url, _ = chat_server
    assert (indexes["milvus"] / "store.json").is_file() and (indexes["milvus"] / "milvus.db").exists()
    folder = ask_json(indexes["folder"], url, "--pipeline", "plain")
    milvus = ask_json(indexes["milvus"], url, "--pipeline", "plain")
    ids = [e["id"] for e in milvus["evidence"]]
    assert ids and ids == [e["id"] for e in folder["evidence"]]
    assert ids[0] == "astronomy/moon.txt:0"
    assert milvus["cited_ids"] == folder["cited_ids"]


def test_sieve_with_the_router_on_milvus(indexes, chat_server) -> None:  # noqa: F811
    url, _ = chat_server
    data = ask_json(indexes["milvus"], url, "--pipeline", "sieve", "--route", "auto")
    route = next(e for e in data["trace"]["events"] if e["stage"] == "route")
    assert route["mode"] == "auto" and route["probabilities"]
    assert data["trace"]["decisions"], "the sieve's checks must record their decisions"
    assert (indexes["milvus"] / "router").is_dir(), "the router is trained from Milvus and kept in the folder"
    folder = ask_json(indexes["folder"], url, "--pipeline", "sieve", "--route", "auto")
    assert [e["id"] for e in data["evidence"]] == [e["id"] for e in folder["evidence"]]


def test_cluster_ingest_gives_the_same_collection(indexes, tmp_path) -> None:
    pytest.importorskip("dask.distributed")
    out = tmp_path / "spread"
    result = ragsieve(
        "ingest",
        str(indexes["corpus"]),
        "--index",
        str(out),
        "--store",
        "milvus",
        "--workers",
        "2",
        "--partition-files",
        "2",
        "--config",
        str(indexes["config"]),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["workers"] == 2 and report["partitions"] == 3
    hits = {}
    for index in (indexes["milvus"], out):
        found = ragsieve("search", QUESTION, "--index", str(index), "--mode", "dense", "-k", "20", "--json")
        assert found.returncode == 0, found.stderr
        hits[index] = [(h["id"], round(h["score"], 5)) for h in json.loads(found.stdout)["hits"]]
    assert hits[out] == hits[indexes["milvus"]]


def test_a_server_uri_in_the_folder_is_never_used_unless_given(tmp_path) -> None:
    folder = tmp_path / "downloaded"
    folder.mkdir()
    (folder / "store.json").write_text(
        json.dumps({"backend": "milvus", "collection": "c", "lite_file": None, "uri": "http://192.0.2.1:19530"})
    )
    result = ragsieve("search", "moon", "--index", str(folder))
    assert result.returncode == 2
    message = " ".join(result.stderr.split())
    assert "live in Milvus" in message and "pass --store milvus --store-uri URI" in message


def test_info_on_milvus_shows_what_the_folder_index_shows(indexes) -> None:
    shown = {}
    for name in ("folder", "milvus"):
        result = ragsieve("info", "--index", str(indexes[name]), "--json")
        assert result.returncode == 0, result.stderr
        shown[name] = json.loads(result.stdout)
    folder, milvus = shown["folder"], shown["milvus"]
    assert folder["backend"] == "folder" and milvus["backend"] == "milvus"
    for key in ("chunks", "domains", "sources", "embedder"):
        assert milvus[key] == folder[key], key
    assert milvus["chunks"] > 0 and milvus["sources"] > 1
    assert milvus["uri"] == str(indexes["milvus"] / "milvus.db") and milvus["collection"] == "ragsieve"
    assert milvus["generation"].startswith("milvus-") and milvus["bytes"] > 0
    refused = ragsieve("info", "--index", str(indexes["milvus"]), "--verify")
    assert refused.returncode == 2 and "drop --verify" in " ".join(refused.stderr.split())
