"""A corrupted vector file is caught without --verify: a norm sample when a vector file is
opened, and a range check on the dense scores of every search."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.helpers import HashEmbedder

from ragsieve.errors import IndexStoreError
from ragsieve.index import Index
from ragsieve.index.store import check_dense_scores

GARBAGE = b"\x55" * 64  # 16 float32 of 1.5e13: the kind of bytes a bad disk block leaves
# One whole 64-dim vector of garbage: the hash embedder's sparse query vectors would score a
# partly overwritten one 0.
GARBAGE_VECTOR = b"\x55" * 256


def _overwrite_tail(path: Path, data: bytes) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as fh:  # same size, so the cheap size check passes
        fh.seek(size - len(data))
        fh.write(data)


def _reopen(small_index: Index, hash_embedder: HashEmbedder) -> Index:
    directory = small_index.dir
    small_index.close()
    return Index.open(directory, embedder=hash_embedder)


def test_garbage_in_dense_faiss_is_refused_naming_the_file(small_index: Index, hash_embedder) -> None:
    healthy = small_index.search("red planet dust", k=3, mode="dense")
    assert all(-1.0 <= h.scores["dense"] <= 1.0 for h in healthy)
    _overwrite_tail(small_index.generation_dir / "global" / "dense.faiss", GARBAGE)
    # The checksum recorded at ingest refuses it on open.
    with pytest.raises(IndexStoreError, match=r"dense\.faiss.*does not match the checksum") as info:
        _reopen(small_index, hash_embedder)
    assert "re-ingest" in str(info.value)
    # With the checksum pass off, the norm sample names it on the first search.
    index = Index.open(small_index.dir, embedder=hash_embedder, check_contents=False)
    with pytest.raises(IndexStoreError, match=r"dense\.faiss.*(--verify|does not match the checksum)") as info:
        index.search("red planet dust", k=3)
    assert "re-ingest" in str(info.value)


def test_the_score_check_runs_on_every_search(small_index: Index, hash_embedder, monkeypatch) -> None:
    # Where the vectors cannot be sampled on open (an IVF index) and the checksum pass is off,
    # the score check alone catches it.
    monkeypatch.setattr("ragsieve.index.store._dense_sample", lambda dense, rows: None)
    monkeypatch.setattr("ragsieve.index.store._name_the_culprit", lambda *args: None)
    _overwrite_tail(small_index.generation_dir / "global" / "dense.faiss", GARBAGE_VECTOR)
    small_index.close()
    index = Index.open(small_index.dir, embedder=hash_embedder, check_contents=False)
    with pytest.raises(IndexStoreError, match=r"dense\.faiss returned an impossible similarity .*--verify"):
        index.search("red planet dust", k=3, mode="hybrid")
    # Sparse search does not read the vectors, so it still answers.
    assert index.search("red planet dust", k=3, mode="sparse")


def test_garbage_in_embeddings_npy_is_caught_on_open(small_index: Index, hash_embedder) -> None:
    _overwrite_tail(small_index.generation_dir / "embeddings.npy", GARBAGE)
    directory = small_index.dir
    small_index.close()
    with pytest.raises(IndexStoreError, match=r"embeddings\.npy.*(--verify|does not match the checksum)"):
        Index.open(directory, embedder=hash_embedder)


def test_check_dense_scores_bounds() -> None:
    ok = np.array([0.99, -1.0, 0.0], dtype=np.float32)
    check_dense_scores(ok, 1.0 + 1e-3, Path("x/dense.faiss"), Path("x"))
    for bad in ([1.5], [float("nan")], [float("inf")], [4.8e23]):
        with pytest.raises(IndexStoreError, match="dense.faiss"):
            check_dense_scores(np.array(bad, dtype=np.float32), 1.0 + 1e-3, Path("x/dense.faiss"), Path("x"))


def test_an_index_of_vectors_that_are_not_unit_length_is_not_flagged(tmp_path: Path) -> None:
    class RawEmbedder(HashEmbedder):  # an embedder configured with normalize=False
        normalize = False

        def embed(self, texts: list[str]) -> np.ndarray:
            return super().embed(texts) * 3.0

    from tests.reliability.support import FAST, write_corpus

    raw = RawEmbedder()
    built = Index.build(write_corpus(tmp_path / "corpus"), tmp_path / "idx", config=FAST, embedder=raw)
    built.close()
    # Opened by a normalising embedder of the same name: scores exceed 1 but are not corruption.
    with Index.open(tmp_path / "idx", embedder=HashEmbedder()) as index:
        hits = index.search("red planet dust", k=3, mode="dense")
    assert hits and max(h.scores["dense"] for h in hits) > 1.0
