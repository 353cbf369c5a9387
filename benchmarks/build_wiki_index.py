"""Build a sentence index over the shared Wikipedia corpus and report ingestion throughput.

    python benchmarks/build_wiki_index.py --limit 50000     # routine run
    python benchmarks/build_wiki_index.py                   # full 300k (once)

The index lands in runs/indexes/wiki{N}k (gitignored) and is reused by the knowledge-
filtering and routing experiments.
"""

from __future__ import annotations

import argparse
import os
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
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    chunks = wiki_chunks(args.limit)
    t_load = time.perf_counter() - start
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
    rows = [
        ["sentences (chunks)", f"{n:,}"],
        ["read + make chunks (s)", round(t_load, 2)],
        ["embed + index + write (s)", round(total, 1)],
        ["throughput, embedding included (chunks/s)", round(n / total, 1)],
        ["index size on disk (MB)", round(size / 2**20, 1)],
        ["of which embeddings.npy (MB)", round(emb_bytes / 2**20, 1)],
        ["embedding backend / threads", f"{args.backend} / {args.threads}"],
        ["1-min load average at start / end", f"{load_before:.1f} / {os.getloadavg()[0]:.1f}"],
    ]
    body = (
        f"Corpus: `../shared/data/wiki_sentences/wiki300k.txt.gz`, first {n:,} sentences, one chunk per sentence. "
        f"Embedder: bundled all-MiniLM-L6-v2 ({args.backend} backend, CPU), batch 32; flat faiss + bm25s. "
        "One run (a build is minutes long; repeat runs varied with machine load, shown by the load average).\n\n"
        + markdown_table(["measure", "value"], rows)
    )
    name = f"ingest-wiki-{n // 1000}k"
    write_section("benchmarks.md", name, f"Ingestion throughput: Wikipedia {n // 1000}k sentences", body)
    print(body)


if __name__ == "__main__":
    main()
