"""The cheap integrity check on the default open: every file a query reads is checked against the
sha256 recorded when it was written (the index's files at ingest, the router's when it was
trained), once per process, so a same-size change is refused without ``--verify``, by an error
that names the file's role and the command that repairs it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.helpers import HashEmbedder

from ragsieve.errors import DamagedFileError
from ragsieve.index import Index
from ragsieve.route.router import DomainRouter
from ragsieve.route.train import ROUTER_DIR, load_router


def _swap_last_two_vectors(path: Path, dim: int) -> None:
    """Swap the last two vectors of a flat faiss file in place: same size, valid vectors, only
    their order changed (the top hit of a query becomes another chunk)."""
    width = dim * 4
    data = bytearray(path.read_bytes())
    a, b = len(data) - 2 * width, len(data) - width
    first, second = bytes(data[a:b]), bytes(data[b:])
    assert first != second
    data[a:b], data[b:] = second, first
    path.write_bytes(bytes(data))


def test_a_swapped_pair_of_vectors_in_dense_faiss_is_refused_on_open(small_index: Index, hash_embedder) -> None:
    dim = small_index.embeddings.shape[1]
    n = len(small_index)
    last = small_index.chunks[n - 1]
    assert small_index.search(last.text, k=1, mode="dense")[0].chunk.id == last.id
    path = small_index.generation_dir / "global" / "dense.faiss"
    size = path.stat().st_size
    small_index.close()
    _swap_last_two_vectors(path, dim)
    assert path.stat().st_size == size
    # What the swap does to a reader that does not check: the top hit is another chunk.
    unchecked = Index.open(small_index.dir, embedder=hash_embedder, check_contents=False)
    assert unchecked.search(last.text, k=1, mode="dense")[0].chunk.id != last.id
    unchecked.close()
    with pytest.raises(DamagedFileError) as info:
        Index.open(small_index.dir, embedder=hash_embedder)
    error = info.value
    assert error.role == "dense vector file (dense.faiss) of the global index"
    assert error.role in str(error) and "ragsieve ingest" in str(error) and "ragsieve ingest" in error.repair


def test_a_damaged_partition_file_is_refused_when_the_partition_loads(small_index: Index, hash_embedder) -> None:
    assert small_index.partitioned
    folder = small_index.generation_dir / "partitions" / small_index.manifest["partition_dirs"]["astronomy"]
    small_index.close()
    _swap_last_two_vectors(folder / "dense.faiss", small_index.embeddings.shape[1])
    index = Index.open(small_index.dir, embedder=hash_embedder)  # the global index is intact
    assert index.search("red planet", k=2)
    with pytest.raises(DamagedFileError, match=r"dense vector file \(dense\.faiss\) of partition astronomy-"):
        index.search("red planet", k=2, domains=["astronomy"])


def test_each_file_is_hashed_once_per_process_and_again_once_changed(
    small_index: Index, hash_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ragsieve.io as io

    hashed: list[str] = []
    real = io.sha256_file
    def counting(path: Any) -> str:
        hashed.append(str(path))
        return real(path)

    monkeypatch.setattr(io, "sha256_file", counting)
    directory = small_index.dir
    small_index.close()
    io.forget_verified_files()
    Index.open(directory, embedder=hash_embedder).close()
    first = len(hashed)
    assert first > 0 and any(p.endswith("dense.faiss") for p in hashed)
    Index.open(directory, embedder=hash_embedder).close()
    assert len(hashed) == first, "an unchanged file was hashed again"
    chunks = small_index.generation_dir / "chunks.jsonl"
    text = chunks.read_text(encoding="utf-8")
    chunks.write_text(text.replace("hydrogen", "hydrOgen"), encoding="utf-8")  # same size, new mtime
    with pytest.raises(DamagedFileError, match=r"chunk text file \(chunks\.jsonl\)"):
        Index.open(directory, embedder=hash_embedder)


def test_verify_checks_every_file_now(small_index: Index, hash_embedder) -> None:
    path = small_index.generation_dir / "global" / "dense.faiss"
    small_index.close()
    _swap_last_two_vectors(path, small_index.embeddings.shape[1])
    with pytest.raises(DamagedFileError, match="dense.faiss"):
        Index.open(small_index.dir, embedder=hash_embedder, verify=True)


# ---------------------------------------------------------------------- the router
@pytest.fixture()
def router_dir(small_index: Index) -> Path:
    from ragsieve.route.train import ensure_router

    ensure_router(small_index)
    folder = small_index.dir / ROUTER_DIR
    assert (folder / "router.json").is_file()
    return folder


def _model_file(folder: Path) -> Path:
    return next(folder / name for name in ("router.npz", "router.skops") if (folder / name).is_file())


def test_a_same_size_change_to_the_router_model_is_refused(small_index: Index, router_dir: Path) -> None:
    model = _model_file(router_dir)
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0x01
    model.write_bytes(bytes(data))
    with pytest.raises(DamagedFileError) as info:
        load_router(small_index)
    assert info.value.role.startswith("router model file")
    assert "ragsieve router train" in str(info.value)


def test_a_same_size_change_to_router_json_is_refused(small_index: Index, router_dir: Path) -> None:
    meta_path = router_dir / "router.json"
    text = meta_path.read_text(encoding="utf-8")
    meta = json.loads(text)
    n_train = int(meta["n_train"])
    changed = text.replace(f'"n_train": {n_train}', f'"n_train": {(n_train + 1) % 10 + (n_train // 10) * 10}')
    assert changed != text and len(changed) == len(text)
    meta_path.write_text(changed, encoding="utf-8")
    with pytest.raises(DamagedFileError, match=r"router metadata file \(router\.json\).*router train"):
        DomainRouter.load(router_dir)


def test_a_damaged_router_is_not_used_for_routing(small_index: Index, router_dir: Path) -> None:
    from ragsieve.route import route_query

    model = _model_file(router_dir)
    data = bytearray(model.read_bytes())
    data[-10] ^= 0x01
    model.write_bytes(bytes(data))
    decision = route_query(small_index, "red planet dust storms", {})
    assert decision.fallback and "router model file" in decision.reason


def test_a_router_saved_without_checksums_still_loads(small_index: Index, router_dir: Path) -> None:
    meta_path = router_dir / "router.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta.pop("meta_sha256")
    meta.pop("files")
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    router = load_router(small_index)
    assert set(router.classes_) == {"astronomy", "biology"}


def test_an_index_without_recorded_checksums_still_opens(tmp_path: Path) -> None:
    """A format-1 index records no checksums: it opens (sizes and vectors sampled, a warning
    says to re-ingest), as tests/index/test_index.py's upgrade test exercises in full."""
    from ragsieve.types import Chunk

    emb = HashEmbedder()
    folder = tmp_path / "old"
    folder.mkdir()
    chunks = [Chunk(id=f"c{i}", text=f"text number {i} about stars", doc_id=f"d{i}", source="a.txt") for i in range(3)]
    (folder / "chunks.jsonl").write_text("".join(json.dumps(c.to_dict()) + "\n" for c in chunks), encoding="utf-8")
    np.save(folder / "embeddings.npy", emb.embed([c.text for c in chunks]).astype(np.float32))
    manifest = {"format_version": 1, "embedder": {"model_name": emb.model_name, "dim": emb.dim}, "n_chunks": 3,
                "domains": ["default"], "partitioned": False}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    index = Index.open(folder, embedder=emb)
    assert len(index) == 3 and index.check_contents is False
