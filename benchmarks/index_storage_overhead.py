"""What crash safety and integrity checks cost: build and open times of an index with the
generation layout, split into the checksum (sha256 of every file) and fsync parts, and the
price of ``verify=True`` on open.

    python benchmarks/index_storage_overhead.py --limit 20000 --repeats 5

Chunks are the first ``--limit`` sentences of ../shared/data/wiki_sentences; vectors are random
unit vectors of dimension 384 (what the bundled MiniLM gives), since storage costs do not depend
on their values and no embedding time should blur the numbers. Each repeat builds a fresh index
in a temporary folder on the same disk as runs/.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, markdown_table, write_section
from benchmarks._stats import mean_t_interval
from benchmarks.wiki import wiki_chunks
from ragsieve.index import Index, storage


class RandomEmbedder:
    """Names a model and a dimension; vectors are given to the build, so embed() is never timed."""

    model_name = "benchmark/random-unit-vectors"
    dim = 384

    def warm_up(self) -> None:
        pass

    def embed(self, texts: list[str]) -> np.ndarray:
        rng = np.random.default_rng(len(texts))
        v = rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "random"}


def timed(fn: Callable[..., Any], bucket: list[float]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            bucket.append(time.perf_counter() - t0)

    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    chunks = wiki_chunks(args.limit)
    embedder = RandomEmbedder()
    vectors = embedder.embed([c.text for c in chunks])
    work = ROOT / "runs"
    work.mkdir(exist_ok=True)

    build_s: list[float] = []
    checksum_s: list[float] = []
    fsync_s: list[float] = []
    open_s: list[float] = []
    verify_s: list[float] = []
    size_mb = 0.0
    for _ in range(args.repeats):
        sums: list[float] = []
        syncs: list[float] = []
        real_checksum, real_fsync = storage.checksum_tree, storage.fsync_tree
        storage.checksum_tree = timed(real_checksum, sums)  # type: ignore[assignment]
        storage.fsync_tree = timed(real_fsync, syncs)  # type: ignore[assignment]
        try:
            with tempfile.TemporaryDirectory(dir=work) as tmp:
                t0 = time.perf_counter()
                Index.from_chunks(chunks, Path(tmp) / "idx", embedder=embedder, embeddings=vectors).close()
                build_s.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                Index.open(Path(tmp) / "idx", embedder=embedder).close()
                open_s.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                with Index.open(Path(tmp) / "idx", embedder=embedder, verify=True) as idx:
                    verify_s.append(time.perf_counter() - t0)
                    size_mb = sum(p.stat().st_size for p in idx.generation_dir.rglob("*") if p.is_file()) / 2**20
        finally:
            storage.checksum_tree, storage.fsync_tree = real_checksum, real_fsync
        checksum_s.append(sum(sums))
        fsync_s.append(sum(syncs))

    def row(name: str, xs: list[float]) -> list[object]:
        m, h = mean_t_interval(xs)
        return [name, f"{m * 1000:,.0f}", f"± {h * 1000:,.0f}"]

    table = markdown_table(
        ["step", "mean (ms)", "95% CI"],
        [
            row("build (from_chunks, vectors given), total", build_s),
            row("  of which sha256 of every file", checksum_s),
            row("  of which fsync of every file and folder", fsync_s),
            row("open (sizes checked)", open_s),
            row("open with verify=True (sha256 of every file)", verify_s),
        ],
    )
    share = statistics.fmean(c + f for c, f in zip(checksum_s, fsync_s, strict=True)) / statistics.fmean(build_s)
    body = (
        f"Data: first {len(chunks):,} sentences of `../shared/data/wiki_sentences/wiki300k.txt.gz`, one chunk each; "
        f"random unit vectors (dim 384) stand in for embeddings. Index size {size_mb:,.1f} MB (one generation, "
        f"flat faiss + bm25s, one domain). n = {args.repeats} builds, each into a fresh folder under runs/ "
        "(same disk); intervals are 95% t-intervals over the repeats.\n\n"
        f"{table}\n\nChecksums and fsync together take {share:.0%} of the build time here. Opening checks only "
        "file sizes; `verify=True` (`ragsieve info --verify`) reads and hashes every file once."
    )
    write_section("benchmarks.md", "index-storage-overhead", "Index storage: cost of checksums, fsync and verify", body)
    print(body)


if __name__ == "__main__":
    main()
