"""Query latency of ragsieve's search vs calling faiss and bm25s directly on the same index.

    python benchmarks/search_latency.py --index runs/indexes/wiki300k --queries 200 --repeats 5

Both paths run interleaved query by query in one process, so machine noise hits them
alike. Query embedding is excluded from both (vectors computed once up front) and
reported separately; bm25s query tokenisation is included in both.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

# Lets `python benchmarks/<script>.py` import its siblings as the `benchmarks` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, markdown_table, publish_section
from ragsieve.config import RetrievalConfig
from ragsieve.index import Index
from ragsieve.index.backends import bm25_tokenize


def percentile(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--index", type=Path, default=ROOT / "runs" / "indexes" / "wiki300k")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import faiss
    import torch

    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    index = Index.open(args.index)
    index.warm_up()
    rng = random.Random(args.seed)
    rows_idx = rng.sample(range(len(index)), args.queries)
    queries = [" ".join(index.chunks[i].text.split()[:8]) for i in rows_idx]
    t0 = time.perf_counter()
    qvecs = index.embedder.embed(queries)
    embed_ms = (time.perf_counter() - t0) * 1000 / len(queries)
    t0 = time.perf_counter()
    for q in queries[:50]:
        index.embedder.embed([q])
    embed_single_ms = (time.perf_counter() - t0) * 1000 / 50

    part = index._global_partition()
    faiss_index, bm25 = part.dense.index, part.sparse.retriever
    k = args.k
    retrieval = RetrievalConfig()
    pool = max(retrieval.candidates, k)

    def raw(mode: str, q: str, v: np.ndarray) -> None:
        if mode in ("dense", "hybrid"):
            d, i = faiss_index.search(v.reshape(1, -1), k if mode == "dense" else pool)
        if mode in ("sparse", "hybrid"):
            toks = bm25_tokenize([q])
            bm25.retrieve(toks, k=k if mode == "sparse" else pool, show_progress=False, n_threads=1)

    def ours(mode: str, q: str, v: np.ndarray) -> None:
        index.search(q, k=k, mode=mode, retrieval=retrieval, query_vector=v)

    results: dict[tuple[str, str], list[list[float]]] = {}
    for mode in ("dense", "sparse", "hybrid"):
        for _ in range(args.repeats):
            lat = {"raw": [], "ours": []}
            for q, v in zip(queries, qvecs, strict=True):
                for name, fn in (("raw", raw), ("ours", ours)):
                    t = time.perf_counter()
                    fn(mode, q, v)
                    lat[name].append((time.perf_counter() - t) * 1000)
            for name in lat:
                results.setdefault((mode, name), []).append(lat[name])
    rows = []
    for mode in ("dense", "sparse", "hybrid"):
        raw_p50 = [percentile(r, 50) for r in results[(mode, "raw")]]
        our_p50 = [percentile(r, 50) for r in results[(mode, "ours")]]
        our_p95 = [percentile(r, 95) for r in results[(mode, "ours")]]
        ratios = [o / r for o, r in zip(our_p50, raw_p50, strict=True)]
        rows.append(
            [
                mode,
                f"{min(our_p50):.2f} / {np.median(our_p50):.2f}",
                f"{min(our_p95):.2f} / {np.median(our_p95):.2f}",
                f"{min(raw_p50):.2f} / {np.median(raw_p50):.2f}",
                f"{min(ratios):.3f} / {np.median(ratios):.3f}",
            ]
        )
    body = (
        f"Index: `{args.index.relative_to(ROOT) if args.index.is_relative_to(ROOT) else args.index}` "
        f"({len(index):,} chunks, flat inner-product faiss + bm25s), k={k}, {args.queries} queries (first 8 words of "
        f"randomly drawn corpus sentences, seed {args.seed}), {args.repeats} repeats, "
        "1 thread each for torch/faiss/bm25s. Raw = the same faiss index's `search` and bm25s `retrieve` "
        "(with query tokenisation) called directly; hybrid raw "
        f"= both libraries at the fusion pool depth ({pool}) without fusion. Cells: min / median over repeats of the "
        "per-repeat p50 (or p95). Query embedding (excluded above): "
        f"{embed_single_ms:.1f} ms one at a time, {embed_ms:.2f} ms/query batched. "
        f"1-min load average at the end: {os.getloadavg()[0]:.1f}.\n\n"
        + markdown_table(["mode", "ragsieve p50 ms", "ragsieve p95 ms", "raw p50 ms", "ratio ragsieve/raw (p50)"], rows)
    )
    publish_section("benchmarks.md", "search-latency", "Query latency and overhead over faiss/bm25s", body)


if __name__ == "__main__":
    main()
