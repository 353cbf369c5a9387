"""The store protocol's behaviour, run against the folder index and Milvus Lite alike."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.helpers import HashEmbedder

from ragsieve.config import RetrievalConfig
from ragsieve.errors import IndexStoreError, InputError
from ragsieve.store import FolderStore, MilvusStore, Store
from ragsieve.types import Chunk

TEXTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "p1": ("physics", "Graphene is a single layer of carbon atoms in a hexagonal lattice.", {"year": 2004}),
    "p2": ("physics", "Superconductors carry current with zero electrical resistance.", {"year": 1911}),
    "p3": ("physics", "Neutron stars are the collapsed cores of massive stars.", {"year": 1967}),
    "b1": ("biology", "Ribosomes translate messenger RNA into protein chains.", {"year": 1955}),
    "b2": ("biology", "Mitochondria produce most of the cell's chemical energy.", {"year": 1890}),
    "b3": ("biology", "CRISPR lets scientists edit genes in living cells.", {"year": 2012, "tags": ["gene", "tool"]}),
}


def make_chunks() -> list[Chunk]:
    return [
        Chunk(id=cid, text=text, doc_id=cid, source=f"{domain}/{cid}.md", domain=domain, metadata=meta)
        for cid, (domain, text, meta) in TEXTS.items()
    ]


@pytest.fixture(params=["folder", "milvus"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    embedder = HashEmbedder()
    if request.param == "folder":
        made: Store = FolderStore.create(make_chunks(), tmp_path / "index", embedder)
    else:
        pytest.importorskip("pymilvus")
        pytest.importorskip("milvus_lite")
        made = MilvusStore(str(tmp_path / "store.db"), embedder)
        made.add(make_chunks())
    yield made
    made.close()


def ids(hits: list) -> list[str]:
    return [h.chunk.id for h in hits]


def test_implements_the_protocol(store: Store) -> None:
    assert isinstance(store, Store)
    assert store.domains == ["biology", "physics"]
    assert len(store) == 6


def test_get_round_trips_a_chunk(store: Store) -> None:
    chunk = store.get("b3")
    assert chunk == make_chunks()[5]
    with pytest.raises(InputError, match="no chunk with id 'zz'"):
        store.get("zz")


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
def test_each_mode_finds_the_matching_chunk_first(store: Store, mode: str) -> None:
    hits = store.search("graphene carbon lattice", k=3, mode=mode)  # type: ignore[arg-type]
    assert hits[0].chunk.id == "p1"
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))
    if mode == "hybrid":
        assert {"dense", "sparse", "fused"} <= set(hits[0].scores)


def test_dense_scores_match_across_stores(tmp_path: Path) -> None:
    pytest.importorskip("milvus_lite")
    embedder = HashEmbedder()
    folder = FolderStore.create(make_chunks(), tmp_path / "index", embedder)
    milvus = MilvusStore(str(tmp_path / "store.db"), embedder)
    milvus.add(make_chunks())
    for q in ["protein from RNA", "stars collapse", "edit genes"]:
        a, b = folder.search(q, k=6, mode="dense"), milvus.search(q, k=6, mode="dense")
        assert np.allclose([h.score for h in a], [h.score for h in b], atol=1e-5)
        assert ids(a)[0] == ids(b)[0]
    folder.close()
    milvus.close()


def test_domains_restrict_the_search(store: Store) -> None:
    hits = store.search("energy current carbon protein", k=6, domains=["biology"])
    assert hits and {h.chunk.domain for h in hits} == {"biology"}
    with pytest.raises(InputError, match="unknown domain 'chemistry'"):
        store.search("x", domains=["chemistry"])


def test_metadata_filter(store: Store) -> None:
    assert ids(store.search("cells", k=6, where={"year": 2012})) == ["b3"]
    assert set(ids(store.search("cells", k=6, where={"year": ["1955", "1890"]}))) == {"b1", "b2"}
    assert ids(store.search("genes", k=6, where={"tags": "tool"})) == ["b3"]
    assert set(ids(store.search("stars", k=6, where={"source": "physics/p3.md"}))) == {"p3"}
    with pytest.raises(InputError, match="no chunk in this index has a field 'colour'"):
        store.search("x", where={"colour": "red"})


def test_prune_threshold_drops_low_weight_sources(tmp_path: Path, store: Store) -> None:
    (store.dir / "source_weights.json").write_text(json.dumps({"weights": {"physics/p1.md": 0.1}}))
    reopened: Store
    if isinstance(store, FolderStore):
        reopened = FolderStore.open(store.dir, HashEmbedder())
    else:
        assert isinstance(store, MilvusStore)
        store.close()
        reopened = MilvusStore(store.uri, HashEmbedder())
    assert reopened.source_weights == {"physics/p1.md": 0.1}
    assert "p1" in ids(reopened.search("graphene carbon", k=6))
    assert "p1" not in ids(reopened.search("graphene carbon", k=6, prune_threshold=0.5))
    reopened.close()


def test_add_upsert_delete_change_the_generation(store: Store) -> None:
    first = store.generation
    new = Chunk(id="c1", text="Catalysts speed up chemical reactions.", doc_id="c1", source="c.md", domain="chemistry")
    store.add([new])
    assert store.generation != first
    assert "chemistry" in store.domains and len(store) == 7
    with pytest.raises(InputError, match="already in the store; use upsert"):
        store.add([new])
    assert store.search("catalysts reactions", k=1, mode="sparse")[0].chunk.id == "c1"

    second = store.generation
    changed = Chunk(id="p1", text="Enzymes are biological catalysts.", doc_id="p1", source="b.md", domain="biology")
    store.upsert([changed])
    assert store.generation != second
    assert store.get("p1").text == "Enzymes are biological catalysts."
    assert len(store) == 7
    assert ids(store.search("graphene lattice", k=6, mode="sparse")) == []

    assert store.delete(["c1", "nope"]) == 1
    assert "chemistry" not in store.domains and len(store) == 6
    with pytest.raises(InputError):
        store.get("c1")


def test_given_embeddings_are_used_and_checked(store: Store) -> None:
    vector = np.zeros((1, 64), dtype=np.float32)
    vector[0, 3] = 1.0
    store.add([Chunk(id="v", text="unrelated words", doc_id="v", source="v.md")], embeddings=vector)
    hit = store.search("anything", k=1, mode="dense", query_vector=vector[0])[0]
    assert hit.chunk.id == "v" and hit.score == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(InputError, match="one row per chunk"):
        store.add([Chunk(id="w", text="w", doc_id="w", source="w.md")], embeddings=np.zeros((2, 64)))


def test_search_rejects_bad_arguments(store: Store) -> None:
    with pytest.raises(InputError, match="k must be at least 1"):
        store.search("x", k=0)
    with pytest.raises(InputError, match="unknown search mode"):
        store.search("x", mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="query is empty"):
        store.search("  ")
    hits = store.search("carbon", k=2, retrieval=RetrievalConfig(fusion="weighted", dense_weight=0.5))
    assert len(hits) == 2


def test_milvus_refuses_another_embedder(tmp_path: Path) -> None:
    pytest.importorskip("milvus_lite")
    store = MilvusStore(str(tmp_path / "store.db"), HashEmbedder())
    store.add(make_chunks())
    store.close()
    with pytest.raises(IndexStoreError):
        MilvusStore(str(tmp_path / "store.db"), HashEmbedder(name="other/model")).warm_up()


def test_milvus_state_survives_reopening(tmp_path: Path) -> None:
    pytest.importorskip("milvus_lite")
    store = MilvusStore(str(tmp_path / "store.db"), HashEmbedder())
    store.add(make_chunks())
    generation = store.generation
    store.close()
    again = MilvusStore(str(tmp_path / "store.db"), HashEmbedder())
    assert again.generation == generation and again.domains == ["biology", "physics"]
    assert [c.id for c in again.chunks] == sorted(TEXTS)
    again.close()


def test_milvus_reader_sees_another_writer_after_refresh(tmp_path: Path) -> None:
    pytest.importorskip("milvus_lite")
    writer = MilvusStore(str(tmp_path / "store.db"), HashEmbedder())
    writer.add(make_chunks()[:3])
    reader = MilvusStore(str(tmp_path / "store.db"), HashEmbedder())
    before = reader.generation
    writer.add(make_chunks()[3:])
    assert reader.generation == before and reader.domains == ["physics"]
    reader.refresh()
    assert reader.generation == writer.generation != before
    assert reader.domains == ["biology", "physics"] and len(reader) == 6
    assert reader.search("ribosomes protein", k=1, mode="sparse")[0].chunk.id == "b1"
    writer.close()
    reader.close()


def test_a_server_uri_is_shown_without_credentials() -> None:
    from ragsieve.store.milvus import redact_uri

    assert redact_uri("https://alice:s3cret@milvus.example:19530/db?token=abc#x") == "https://milvus.example:19530/db"
    assert redact_uri("http://localhost:19530") == "http://localhost:19530"


def test_the_english_analyzer_stems_where_the_standard_one_does_not(tmp_path: Path) -> None:
    pytest.importorskip("milvus_lite")
    from ragsieve.errors import ConfigError

    chunk = Chunk(id="v", text="Vitamins are essential nutrients.", doc_id="v", source="v.md")
    other = Chunk(id="c", text="The cat sat on the mat.", doc_id="c", source="c.md")
    found = {}
    for analyzer in ("standard", "english"):
        with MilvusStore(str(tmp_path / f"{analyzer}.db"), HashEmbedder(), analyzer=analyzer) as store:
            store.add([chunk, other])
            found[analyzer] = [h.chunk.id for h in store.search("vitamin", k=2, mode="sparse")]
    assert found == {"standard": [], "english": ["v"]}
    with pytest.raises(ConfigError, match="unknown Milvus text analyzer"):
        MilvusStore(str(tmp_path / "x.db"), HashEmbedder(), analyzer="klingon")
