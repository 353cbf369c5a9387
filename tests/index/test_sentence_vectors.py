"""The vectors of each chunk's sentences are stored at ingest, so a question embeds none of them;
an index built before they were stored gets them once, as a new generation."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.helpers import HashEmbedder, copy_corpus
from tests.test_cold_start import SlowLoadingLLM

from ragsieve.config import validate_config
from ragsieve.errors import IndexStoreError
from ragsieve.index import Index, storage
from ragsieve.index.sentences import OFFSETS, VECTORS, own_sentences, passage_sentences
from ragsieve.ingest import split_sentences
from ragsieve.sieve.pipeline import Pipeline

QUESTION = "When did Apollo 11 land on the Moon?"


class CountingEmbedder(HashEmbedder):
    """Records every text it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            self.texts.extend(texts)
        return super().embed(texts)


def all_sentences(index: Index) -> set[str]:
    return {s for c in index.chunks for s in passage_sentences(c.text)}


def ask(index_dir: Path, embedder: CountingEmbedder) -> Any:
    # the default sieve (its bundled relevance judge, verify's lexical+embedding claim judge);
    # need always retrieves, so the question goes through every check
    cfg = validate_config({"sieve": {"need": "always", "route": "all"}})
    index = Index.open(index_dir, embedder=embedder)
    return Pipeline(cfg, index=index, llm=SlowLoadingLLM(load_s=0.0)).ask(QUESTION)


def strip_sentence_vectors(index_dir: Path) -> str:
    """Make the live generation what the previous release wrote: no sentence vectors, no record
    of them; returns the generation now live."""
    gen, _ = storage.read_current(index_dir)
    src = index_dir / storage.GENERATIONS / gen
    manifest = json.loads((src / storage.MANIFEST).read_text())
    new = storage.new_generation_id()
    building = index_dir / storage.GENERATIONS / f"{storage.BUILDING_PREFIX}{new}"
    shutil.copytree(src, building)
    shutil.rmtree(building / "sentences")
    (building / storage.MANIFEST).unlink()
    manifest.pop("sentence_vectors")
    for rel in (OFFSETS, VECTORS):
        manifest["checksums"].pop(rel)
    manifest["generation"] = new
    storage.publish_generation(index_dir, building, manifest)
    return new


@pytest.fixture()
def built(tmp_path: Path) -> Path:
    with Index.build(copy_corpus(tmp_path), tmp_path / "idx", embedder=HashEmbedder()):
        pass
    return tmp_path / "idx"


def test_the_checks_splitter_is_the_one_the_stored_vectors_follow():
    # the relevance judge's features and the verifier split evidence with ingest's splitter
    from ragsieve.tasks.evaluator import _split_sentences

    for text in ("One. Two sentences here.", "No end", "Dr. Who came.\n\nA new paragraph.", "   "):
        assert passage_sentences(text) == (_split_sentences(text) or [text])
        assert passage_sentences(text) == (split_sentences(text) or [text])
    assert own_sentences("A single sentence.") == []
    assert own_sentences("First one. Second one.") == ["First one.", "Second one."]


def test_ingest_stores_the_sentence_vectors_with_their_checksums(built):
    with Index.open(built, embedder=HashEmbedder()) as index:
        recorded = index.manifest["checksums"]
        assert OFFSETS in recorded and VECTORS in recorded
        sentences, vectors = index.sentence_vectors(range(len(index)))
        multi = [c for c in index.chunks if len(passage_sentences(c.text)) > 1]
        assert multi, "the corpus should have chunks of several sentences"
        assert len(sentences) == sum(len(passage_sentences(c.text)) for c in multi)
        np.testing.assert_allclose(vectors, HashEmbedder().embed(sentences), atol=1e-6)


def test_a_question_embeds_no_passage_sentence(built):
    embedder = CountingEmbedder()
    answer = ask(built, embedder)
    assert answer.text
    index = Index.open(built, embedder=HashEmbedder())
    embedded = set(embedder.texts)
    assert not embedded & all_sentences(index), "a passage sentence was embedded at question time"
    assert not embedded & {c.text for c in index.chunks}, "a stored chunk was embedded again"
    assert QUESTION in embedded  # the embedder was used: the count above can see an embedding


def test_an_index_without_sentence_vectors_gets_them_once(built):
    old = strip_sentence_vectors(built)
    index = Index.open(built, embedder=HashEmbedder())
    assert index.generation == old and "sentence_vectors" not in index.manifest
    sentences = all_sentences(index)
    index.close()

    first = CountingEmbedder()
    ask(built, first)
    # every sentence embedded once (those the chunk vectors stand for excepted), in one pass
    computed = [t for t in first.texts if t in sentences]
    assert computed and len(computed) == len(set(computed))
    live, _ = storage.read_current(built)
    assert live != old
    with Index.open(built, embedder=HashEmbedder(), verify=True) as upgraded:  # every checksum holds
        assert upgraded.manifest["checksums"][VECTORS]["sha256"] == storage.sha256_file(
            built / storage.GENERATIONS / live / VECTORS
        )
        assert upgraded.sentence_vectors(range(len(upgraded)))[0]
    # the old generation is intact (kept as the previous one), its files unchanged
    with pytest.raises(FileNotFoundError):
        (built / storage.GENERATIONS / old / VECTORS).stat()
    storage.verify_files(
        built / storage.GENERATIONS / old,
        json.loads((built / storage.GENERATIONS / old / storage.MANIFEST).read_text())["checksums"],
        built,
        hashes=True,
    )

    second = CountingEmbedder()
    ask(built, second)
    assert not set(second.texts) & sentences, "the stored sentence vectors were computed again"
    assert storage.read_current(built)[0] == live


def test_a_read_only_index_uses_them_in_memory_and_stores_nothing(built, monkeypatch):
    old = strip_sentence_vectors(built)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(storage, "new_generation_id", refuse)
    embedder = CountingEmbedder()
    assert ask(built, embedder).text
    assert storage.read_current(built)[0] == old
    assert not [p for p in (built / storage.GENERATIONS).iterdir() if p.name.startswith(storage.BUILDING_PREFIX)]


def test_damaged_sentence_vectors_are_named_and_a_reingest_repairs_them(built, tmp_path):
    gen, _ = storage.read_current(built)
    path = built / storage.GENERATIONS / gen / VECTORS
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with Index.open(built, embedder=HashEmbedder()) as index, pytest.raises(
        IndexStoreError, match="sentences/vectors.npy"
    ):
        index.sentence_vectors([0])
    with Index.build(tmp_path / "corpus", built, embedder=HashEmbedder()) as repaired:
        sentences, vectors = repaired.sentence_vectors(range(len(repaired)))
        np.testing.assert_allclose(vectors, HashEmbedder().embed(sentences), atol=1e-6)


def test_a_reingest_reuses_the_stored_sentence_vectors(built, tmp_path):
    embedder = CountingEmbedder()
    with Index.build(tmp_path / "corpus", built, embedder=embedder) as again:
        assert not set(embedder.texts) & all_sentences(again)
        assert again.sentence_vectors(range(len(again)))[0]


def test_a_rebuild_from_chunks_reuses_the_stored_sentence_vectors(built, tmp_path):
    with Index.open(built, embedder=HashEmbedder()) as index:
        chunks, vectors = list(index.chunks), np.asarray(index.embeddings)
    embedder = CountingEmbedder()
    with Index.from_chunks(chunks, built, embedder=embedder, embeddings=vectors) as again:
        assert embedder.texts == []
        assert again.sentence_vectors(range(len(again)))[0]
