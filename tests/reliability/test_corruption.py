"""Corruption matrix: every file of a small index x {truncate, zero-fill, garbage, delete}.

Each fault must give one IndexStoreError that names the damaged file, or, for the files whose
content is provably never read (lock files), the very same results as the intact index. A
re-ingest then repairs the index (or, for a damaged marker, is refused with the same message).
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from tests.helpers import HashEmbedder
from tests.reliability.support import FAST, write_corpus

from ragsieve.errors import IndexStoreError
from ragsieve.index import Index
from ragsieve.index.storage import partition_dirname

PARTS = ["global", *(f"partitions/{partition_dirname(d)}" for d in ("astronomy", "biology"))]
PART_FILES = [
    "ids.npy",
    "dense.faiss",
    "bm25/data.csc.index.npy",
    "bm25/indices.csc.index.npy",
    "bm25/indptr.csc.index.npy",
    "bm25/params.index.json",
    "bm25/vocab.index.json",
]
GEN_FILES = [
    "manifest.json",
    "chunks.jsonl",
    "embeddings.npy",
    "sentences/offsets.npy",
    "sentences/vectors.npy",
    *(f"{p}/{f}" for p in PARTS for f in PART_FILES),
]
# Lock files carry no data: their content is never read, only their flock state.
# The domain router that ingest trains: search never reads it; routing falls back to the global
# index with the reason when it is damaged (test_a_damaged_router_falls_back_to_the_global_index).
ROUTER_FILES = ["router/router.npz", "router/router.json"]
HARMLESS = [".writer.lock", "generations/{gen}.lock", *ROUTER_FILES]
FILES = [".ragsieve-index", "CURRENT", *HARMLESS, *(f"generations/{{gen}}/{f}" for f in GEN_FILES)]
FAULTS = ["truncate", "zero", "garbage", "delete"]
QUERIES = ["red planet storms", "energy of the cell", "light sugar"]


def apply_fault(path: Path, fault: str) -> None:
    size = path.stat().st_size
    if fault == "delete":
        path.unlink()
    elif fault == "truncate":
        with open(path, "r+b") as fh:
            fh.truncate(size // 2)
    elif fault == "zero":
        path.write_bytes(bytes(size))
    else:  # same size, so only content checks can notice
        path.write_bytes(random.Random(size).randbytes(size))


def results(index: Index) -> list[tuple[str, ...]]:
    out = []
    index.warm_up()
    for query in QUERIES:
        for mode in ("dense", "sparse", "hybrid"):
            for domains in (None, ["astronomy"], ["biology"]):
                hits = index.search(query, k=4, mode=mode, domains=domains)
                out.append(tuple(f"{h.chunk.id}:{h.score:.6f}" for h in hits))
    # what the sieve's checks read besides: the stored vectors of the chunks' sentences
    sentences, vectors = index.sentence_vectors(range(len(index)))
    out.append((*sentences, *(f"{v:.6f}" for v in vectors.ravel())))
    return out


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[tuple[str, ...]]]:
    root = tmp_path_factory.mktemp("matrix")
    corpus = write_corpus(root / "corpus")
    with Index.build(corpus, root / "idx", config=FAST, embedder=HashEmbedder()) as index:
        baseline = results(index)
        gen = index.generation
    (root / "idx" / "generations" / f"{gen}.lock").touch()
    return corpus, root / "idx", baseline


def test_the_matrix_covers_every_file_of_an_index(pristine):
    _, idx, _ = pristine
    gen = Index.open(idx, embedder=HashEmbedder()).generation
    on_disk = {p.relative_to(idx).as_posix() for p in idx.rglob("*") if p.is_file()}
    assert on_disk == {f.format(gen=gen) for f in FILES}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("name", FILES)
def test_a_damaged_file_is_named_or_harmless(pristine, tmp_path, name, fault):
    corpus, src, baseline = pristine
    idx = tmp_path / "idx"
    shutil.copytree(src, idx)
    gen = next(p.name for p in (idx / "generations").iterdir() if p.is_dir())
    rel = name.format(gen=gen)
    apply_fault(idx / rel, fault)
    embedder = HashEmbedder()

    if name in HARMLESS:
        with Index.open(idx, embedder=embedder) as index:
            assert results(index) == baseline
        return
    with pytest.raises(IndexStoreError) as caught, Index.open(idx, embedder=embedder) as index:
        results(index)
    message = str(caught.value)
    shown = rel.split(f"{gen}/")[-1]
    assert shown in message, message
    assert "re-ingest" in message or "ragsieve ingest" in message

    # The fix the message names works: re-ingesting restores the same results.
    if name == ".ragsieve-index" and fault != "delete":
        with pytest.raises(IndexStoreError, match="marker"):
            Index.build(corpus, idx, config=FAST, embedder=embedder)
        return
    if name == ".ragsieve-index":
        with pytest.raises(IndexStoreError, match="not a ragsieve index"):
            Index.build(corpus, idx, config=FAST, embedder=embedder)
        return
    with Index.build(corpus, idx, config=FAST, embedder=embedder) as rebuilt:
        assert results(rebuilt) == baseline


@pytest.mark.parametrize("name", GEN_FILES)
def test_verify_catches_a_changed_byte_that_keeps_the_size(pristine, tmp_path, name):
    _, src, _ = pristine
    idx = tmp_path / "idx"
    shutil.copytree(src, idx)
    gen = next(p.name for p in (idx / "generations").iterdir() if p.is_dir())
    path = idx / "generations" / gen / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IndexStoreError, match=name.replace(".", r"\.")):
        Index.open(idx, embedder=HashEmbedder(), verify=True)


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("name", ROUTER_FILES)
def test_a_damaged_router_falls_back_to_the_global_index(pristine, tmp_path, name, fault):
    from ragsieve.route import route_query

    _, src, _ = pristine
    idx = tmp_path / "idx"
    shutil.copytree(src, idx)
    apply_fault(idx / name, fault)
    with Index.open(idx, embedder=HashEmbedder()) as index:
        decision = route_query(index, QUERIES[0], {})
    record = decision.to_dict()
    if decision.fallback:
        # the reason names what is wrong and the fix
        assert "router" in record["reason"] and "ragsieve router train" in record["reason"]
    else:
        # what is left of the router still routes to a real domain
        assert set(decision.domains or []) <= {"astronomy", "biology", "chemistry"}
