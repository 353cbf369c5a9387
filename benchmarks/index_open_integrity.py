"""What the integrity check on open costs: ``Index.open`` with and without the sha256 check of the
files a query reads (chunks, stored vectors, the global index's ids, dense vectors and BM25 files),
on its first open in a process and on a re-open (each file is hashed once per process), beside
``verify=True`` (every file hashed on every open).

    python benchmarks/index_open_integrity.py --limit 20000 --limit 100000 --repeats 5

Chunks are the first ``--limit`` sentences of ../shared/data/wiki_sentences; vectors are random
unit vectors of dimension 384 (what the bundled MiniLM gives): open costs do not depend on their
values. Each size is built once into a temporary folder under runs/; every open is timed
``--repeats`` times, the page cache warm (each variant is opened once untimed first), so the
figures are CPU cost (hashing), not disk reads.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, markdown_table, write_section
from benchmarks._stats import mean_t_interval
from benchmarks.index_storage_overhead import RandomEmbedder
from benchmarks.wiki import wiki_chunks
from ragsieve import io
from ragsieve.index import Index


def _open_s(index_dir: Path, embedder: RandomEmbedder, *, check: bool, verify: bool, fresh: bool) -> float:
    if fresh:
        io.forget_verified_files()  # what a new process starts with
    t0 = time.perf_counter()
    Index.open(index_dir, embedder=embedder, check_contents=check, verify=verify).close()
    return time.perf_counter() - t0


def _checked_files(index_dir: Path, embedder: RandomEmbedder) -> list[tuple[Path, int, str]]:
    """The files (path, size, sha256) the default open hashes."""
    with Index.open(index_dir, embedder=embedder, check_contents=False) as index:
        checksums = index.manifest["checksums"]
        wanted = [rel for rel in checksums if rel in ("chunks.jsonl", "embeddings.npy") or rel.startswith("global/")]
        return [(index.generation_dir / rel, int(checksums[rel]["size"]), str(checksums[rel]["sha256"]))
                for rel in wanted]


def _hashed_mb(index_dir: Path, embedder: RandomEmbedder) -> float:
    return sum(size for _, size, _ in _checked_files(index_dir, embedder)) / 2**20


def _hash_s(index_dir: Path, embedder: RandomEmbedder) -> float:
    files = _checked_files(index_dir, embedder)
    t0 = time.perf_counter()
    for path, size, digest in files:
        assert io.file_checksum_problem(path, size, digest, cached=False) is None
    return time.perf_counter() - t0


def _load() -> str:
    import os

    return f"{os.getloadavg()[0]:.1f}"


def _sha256_mb_s() -> float:
    import hashlib

    block = b"\x5a" * (64 << 20)
    t0 = time.perf_counter()
    hashlib.sha256(block).digest()
    return 64 / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, action="append", help="sentences per index (repeatable)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    limits = args.limit or [20000]
    embedder = RandomEmbedder()
    work = ROOT / "runs"
    work.mkdir(exist_ok=True)
    variants = [
        ("sizes only (`check_contents=False`, the earlier default)", False, False, True),
        ("**default, first open in a process** (sha256 of the files a query reads)", True, False, True),
        ("default, re-open in the same process (hashed once per process)", True, False, False),
        ("`verify=True` (sha256 of every file, every open)", False, True, True),
    ]
    rows: list[list[object]] = []
    for limit in limits:
        chunks = wiki_chunks(limit)
        vectors = embedder.embed([c.text for c in chunks])
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            index_dir = Path(tmp) / "idx"
            Index.from_chunks(chunks, index_dir, embedder=embedder, embeddings=vectors).close()
            size_mb = sum(p.stat().st_size for p in index_dir.rglob("*") if p.is_file()) / 2**20
            times: dict[str, list[float]] = {name: [] for name, *_ in variants}
            hashing: list[float] = []
            hashed_mb = _hashed_mb(index_dir, embedder)
            for round_ in range(args.repeats + 1):  # round 0 warms the page cache, untimed
                # Interleaved, so a change of machine load hits every variant alike.
                for name, check, verify, fresh in variants:
                    seconds = _open_s(index_dir, embedder, check=check, verify=verify, fresh=fresh)
                    if round_:
                        times[name].append(seconds)
                if round_:
                    hashing.append(_hash_s(index_dir, embedder))
            base = statistics.fmean(times[variants[0][0]])
            for name, *_ in variants:
                m, h = mean_t_interval(times[name])
                rows.append([f"{len(chunks):,}", f"{size_mb:,.0f}", name, f"{m * 1000:,.0f}", f"± {h * 1000:,.0f}",
                             f"{m / base:.2f}×"])
            m, h = mean_t_interval(hashing)
            rows.append([f"{len(chunks):,}", f"{size_mb:,.0f}",
                         f"the check alone: sha256 of the {hashed_mb:,.0f} MB a query reads", f"{m * 1000:,.0f}",
                         f"± {h * 1000:,.0f}", ""])
        print(rows[-len(variants) - 1:])
    table = markdown_table(["chunks", "index MB", "open", "mean (ms)", "95% CI", "vs sizes only"], rows)
    body = (
        "Data: the first N sentences of `../shared/data/wiki_sentences/wiki300k.txt.gz`, one chunk each; random "
        "unit vectors (dim 384) stand in for embeddings; one domain (flat faiss + bm25s). n = "
        f"{args.repeats} timed opens per row, the four kinds interleaved round by round after one untimed round "
        f"(warm page cache); intervals are 95% t-intervals over the opens. Load average during the run: {_load()} "
        "on 2 cores shared with other work, so whole-open times are noisy; the last row of each size times the "
        f"check alone (sha256 runs at about {_sha256_mb_s():,.0f} MB/s here).\n\n{table}\n\n"
        "The default open hashes what a query reads: `chunks.jsonl`, `embeddings.npy` and the global index's "
        "`ids.npy`, `dense.faiss` and BM25 files (a domain partition's files when it first loads), each once per "
        "process: a re-open, or the service's reload of an unchanged generation, only compares sizes and "
        "modification times. That is what refuses a same-size change (two vectors swapped) without `--verify`. "
        "`verify=True` (`ragsieve info --verify`) still hashes every file on every call."
    )
    write_section("benchmarks.md", "index-open-integrity", "Index open: cost of the integrity check", body)
    print(body)


if __name__ == "__main__":
    main()
