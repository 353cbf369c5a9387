"""Fixtures for the reliability tier: tiny indexes built with the fast deterministic embedder."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import HashEmbedder
from tests.reliability.support import FAST, write_corpus

from ragsieve.index import Index


@pytest.fixture()
def hash_embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus")


@pytest.fixture()
def small_index(tmp_path: Path, corpus: Path, hash_embedder: HashEmbedder) -> Index:
    config = FAST.model_copy(update={"ingest": FAST.ingest.model_copy(update={"metadata_fields": ["kind"]})})
    return Index.build(corpus, tmp_path / "idx", config=config, embedder=hash_embedder)


@pytest.fixture()
def fake_embedder(monkeypatch: pytest.MonkeyPatch) -> HashEmbedder:
    """Every embedder the CLI or an index loads is the fast hash embedder (no model files)."""
    emb = HashEmbedder()
    monkeypatch.setattr("ragsieve.embed.load_embedder", lambda config=None: emb)
    monkeypatch.setattr("ragsieve.index.store.load_embedder", lambda config=None: emb)
    return emb
