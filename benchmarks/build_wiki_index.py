"""Build a sentence index over the shared Wikipedia corpus and report ingestion throughput.

    python benchmarks/build_wiki_index.py --limit 50000     # routine run
    python benchmarks/build_wiki_index.py                   # full 300k (once)

The index lands in runs/indexes/wiki{N}k (gitignored) and is reused by the knowledge-
filtering and routing experiments.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import time
from pathlib import Path

# Lets `python benchmarks/<script>.py` import its siblings as the `benchmarks` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import markdown_table, write_section
from benchmarks.wiki import wiki_chunks, wiki_index_dir
from ragsieve.config import EmbedderConfig
from ragsieve.embed import load_embedder
from ragsieve.index import Index


def dir_size(path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=None, help="first N sentences (default: all 300k)")
    parser.add_argument("--threads", type=int, default=2, help="embedding threads (ONNX Runtime or torch)")
    parser.add_argument("--backend", default="onnx", choices=["onnx", "sentence-transformers"])
    parser.add_argument("--queries", type=int, default=200, help="search queries timed per mode (0: none)")
    args = parser.parse_args()

    if args.backend == "sentence-transformers":
        import torch

        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    chunks = wiki_chunks(args.limit)
    t_load = time.perf_counter() - start
    # the default precision (int8 for a new index with the onnx backend)
    embedder = load_embedder(EmbedderConfig(backend=args.backend, batch_size=32, threads=args.threads))
    embedder.warm_up()
    stages: dict[str, float] = {}

    def progress(stage: str, done: int, total: int) -> None:
        stages.setdefault(stage + "_start", time.perf_counter())
        if done == total:
            stages[stage] = time.perf_counter() - stages[stage + "_start"]

    start = time.perf_counter()
    index = Index.from_chunks(chunks, wiki_index_dir(args.limit), embedder=embedder, progress=progress)
    total = time.perf_counter() - start
    n = len(index)
    size = dir_size(index.dir)
    emb_bytes = (index.generation_dir / "embeddings.npy").stat().st_size
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10  # KiB on Linux
    latency: list[list[str]] = []
    if args.queries:
        # queries: other sentences of the corpus, embedded beforehand (the same on every mode)
        picked = random.Random(5).sample(range(n), min(args.queries, n))
        texts = [" ".join(str(chunks[i].text).split()[:12]) for i in picked]
        vectors = embedder.embed(texts)
        index.search(texts[0], 10, "hybrid", query_vector=vectors[0])  # warm the search structures
        for mode in ("dense", "sparse", "hybrid"):
            times = []
            for text, vec in zip(texts, vectors, strict=True):
                t0 = time.perf_counter()
                index.search(text, 10, mode, query_vector=vec)
                times.append((time.perf_counter() - t0) * 1000)
            cuts = statistics.quantiles(times, n=20)
            latency.append([mode, f"{statistics.median(times):.2f}", f"{cuts[18]:.2f}"])
    rows = [
        ["sentences (chunks)", f"{n:,}"],
        ["read + make chunks (s)", round(t_load, 2)],
        ["embed + index + write (s)", round(total, 1)],
        ["throughput, embedding included (chunks/s)", round(n / total, 1)],
        ["index size on disk (MB)", round(size / 2**20, 1)],
        ["of which embeddings.npy (MB)", round(emb_bytes / 2**20, 1)],
        ["embedding backend / precision / threads",
         f"{args.backend} / {getattr(embedder, 'precision', '-')} / {args.threads}"],
        ["peak RSS of the process (MB)", round(peak_rss, 1)],
        ["1-min load average at start / end", f"{load_before:.1f} / {os.getloadavg()[0]:.1f}"],
    ]
    body = (
        f"Corpus: `../shared/data/wiki_sentences/wiki300k.txt.gz`, first {n:,} sentences, one chunk per sentence. "
        f"Embedder: bundled all-MiniLM-L6-v2 ({args.backend} backend, CPU), batch 32; flat faiss + bm25s. "
        "One run (a build is minutes long; repeat runs varied with machine load, shown by the load average).\n\n"
        + markdown_table(["measure", "value"], rows)
    )
    if latency:
        body += (
            f"\n\nSearch latency at this size, k = 10, {len(texts)} queries (the first 12 words of other corpus "
            "sentences; query vectors computed beforehand), one search at a time, after one warm-up search:\n\n"
            + markdown_table(["mode", "p50 ms", "p95 ms"], latency)
        )
    name = f"ingest-wiki-{n // 1000}k"
    write_section("benchmarks.md", name, f"Ingestion throughput: Wikipedia {n // 1000}k sentences", body)
    print(body)


if __name__ == "__main__":
    main()
