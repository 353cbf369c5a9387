"""``GET /v1/audit``: the corpus audit over what the caller may read, never more."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient
from tests.helpers import HashEmbedder
from tests.serve.access_fixtures import (
    ADMIN,
    DOCS,
    KEY_A,
    KEYS,
    OWNED,
    Doc,
    echo_engine,
    leaks,
    write_keys_file,
)

from ragsieve.index import Index
from ragsieve.serve.app import ServeSettings, create_app
from ragsieve.serve.keys import KeyRing
from ragsieve.types import Chunk

# Each reader's first document has a copy (another document of the same reader, its text
# repeated): a mirror finding per reader, so the audit has something of each to show or hide.
COPIES = {"a": 900, "b": 901}


def _copy(doc: Doc, n: int) -> Chunk:
    chunk = doc.chunk()
    twin = Doc(doc.owner, n)
    return replace(chunk, id=f"{twin.doc_id}:0", doc_id=twin.doc_id, source=twin.path, path=twin.path,
                   title=twin.title, text=f"{chunk.text} {chunk.text}")


def _chunks() -> list[Chunk]:
    chunks = [d.chunk() for d in DOCS]
    for owner, n in COPIES.items():
        first = Doc(owner, 0)
        chunks = [replace(c, text=f"{c.text} {c.text}") if c.doc_id == first.doc_id else c for c in chunks]
        chunks.append(_copy(first, n))
    return chunks


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    tmp = tmp_path_factory.mktemp("audit")
    index_dir, emb = tmp / "index", HashEmbedder()
    Index.from_chunks(_chunks(), index_dir, embedder=emb).close()
    keys = write_keys_file(tmp)
    app = create_app(echo_engine(index_dir, emb), ServeSettings(keys=KeyRing(keys_file=keys), warm_up=False))
    with TestClient(app) as test_client:
        yield test_client


def _audit(client: TestClient, key: str, *checks: str) -> dict:
    params = [("check", c) for c in checks]
    response = client.get("/v1/audit", params=params, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.text
    return response.json()


def test_each_reader_audits_only_its_own_documents(client: TestClient) -> None:
    everything = _audit(client, ADMIN)
    assert everything["passages"] == len(DOCS) + len(COPIES)
    for caller, other in (("a", "b"), ("b", "a")):
        report = _audit(client, KEYS[caller])
        assert report["passages"] == len(OWNED[caller]) + 1
        assert report["findings"], "each reader's own mirror is found"
        assert not leaks(json.dumps(report), OWNED[other])
        owners = {d[3] for f in report["findings"] for d in f["documents"]}
        assert owners <= {caller}


def test_the_audit_is_computed_once_per_scope(client: TestClient) -> None:
    first = _audit(client, KEY_A, "mirror")
    again = _audit(client, KEY_A, "mirror")
    assert first == again
    assert first["checks"] == ["mirror"]


def test_an_unknown_check_is_refused_with_the_kinds(client: TestClient) -> None:
    response = client.get("/v1/audit", params={"check": "typo"}, headers={"Authorization": f"Bearer {ADMIN}"})
    assert response.status_code == 400
    assert "mirror" in response.text


def test_the_audit_needs_a_key(client: TestClient) -> None:
    assert client.get("/v1/audit").status_code == 401


def test_the_fixture_holds_findings_of_both_readers(client: TestClient) -> None:
    """The leak test above means something only if the whole index has findings of both owners."""
    owners = {d[3] for f in _audit(client, ADMIN)["findings"] for d in f["documents"]}
    assert owners == {"a", "b"}
