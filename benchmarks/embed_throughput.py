"""Embedding throughput: the ONNX Runtime backend vs sentence-transformers (torch), side by side.

    python benchmarks/embed_throughput.py [--sentences 2000] [--docs 200] [--repeats 3]

Both backends embed the same texts with the bundled all-MiniLM-L6-v2, interleaved, at 1 and 2
threads; per setting the min and median time over repeats. Writes the ``embed-throughput``
section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys as _sys
import time
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parent.parent))

import numpy as np

from benchmarks._data import read_jsonl
from benchmarks._report import SHARED_DATA, markdown_table, write_section
from ragsieve.config import EmbedderConfig
from ragsieve.embed import load_embedder


def load_texts(n_sentences: int, n_docs: int) -> dict[str, list[str]]:
    with gzip.open(SHARED_DATA / "wiki_sentences" / "wiki300k.txt.gz", "rt", encoding="utf-8") as fh:
        sentences = [line.strip() for _, line in zip(range(n_sentences), fh, strict=False)]
    docs = []
    for _, row in zip(range(n_docs), read_jsonl(SHARED_DATA / "beir-nfcorpus" / "corpus.jsonl.gz"), strict=False):
        docs.append(f"{row.get('title', '')}. {row['text']}")
    return {"Wikipedia sentences": sentences, "nfcorpus abstracts (truncated at 256 tokens)": docs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sentences", type=int, default=2000)
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import torch

    sets = load_texts(args.sentences, args.docs)
    rows = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        embedders = {
            backend: load_embedder(EmbedderConfig(backend=backend, batch_size=32, threads=threads))
            for backend in ("sentence-transformers", "onnx")
        }
        for emb in embedders.values():
            emb.warm_up()
            emb.embed(["warm-up text"] * 32)
        for name, texts in sets.items():
            times: dict[str, list[float]] = {b: [] for b in embedders}
            vectors: dict[str, np.ndarray] = {}
            for _ in range(args.repeats):
                for backend, emb in embedders.items():
                    start = time.perf_counter()
                    vectors[backend] = emb.embed(texts)
                    times[backend].append(time.perf_counter() - start)
            gap = float(np.abs(vectors["onnx"] - vectors["sentence-transformers"]).max())
            for backend in embedders:
                best, med = min(times[backend]), statistics.median(times[backend])
                ref_best = min(times["sentence-transformers"])
                ref_med = statistics.median(times["sentence-transformers"])
                rows.append(
                    [
                        name,
                        threads,
                        backend,
                        len(texts),
                        round(len(texts) / best, 1),
                        round(len(texts) / med, 1),
                        f"{ref_best / best:.2f}",
                        f"{ref_med / med:.2f}",
                        f"{gap:.1e}" if backend == "onnx" else "",
                    ]
                )
                print(rows[-1], flush=True)
    body = (
        "Bundled all-MiniLM-L6-v2, batch 32, no embedding cache. Each backend embeds the same texts "
        f"{args.repeats} times, interleaved with the other backend; texts/s from the fastest and the median "
        "repeat, speed-up = sentence-transformers time / this backend's time in the same run. "
        f"1-min load average at the end: {os.getloadavg()[0]:.1f}.\n\n"
        + markdown_table(
            [
                "texts",
                "threads",
                "backend",
                "n",
                "texts/s (best)",
                "texts/s (median)",
                "speed-up (best)",
                "speed-up (median)",
                "max abs difference to torch",
            ],
            rows,
        )
    )
    write_section("benchmarks.md", "embed-throughput", "Embedding throughput: ONNX Runtime vs torch", body)


if __name__ == "__main__":
    main()
