"""The ONNX embedder's int8 graph (``embedder.precision = "int8"``) against the fp32 one, side by side.

    python benchmarks/embed_int8.py [--repeats 3] [--queries 0]

Speed: texts/s of the embedder alone on the bundled demo corpus's chunks (cut as ``ragsieve ingest``
cuts them), both precisions interleaved at 1 and 2 threads, the best of ``--repeats`` runs (the
embedding cache is off, so every run embeds every text). Quality: dense-only nDCG@10 and
Recall@100 on BEIR NFCorpus's test queries, each document embedded by each precision and searched
exactly (cosine over every document, as the flat dense index does); ``--queries N`` samples N
queries with a fixed seed instead of all. Also the cosine between the two precisions' vectors of
the same texts. Writes the ``embed-int8`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import random
import sys as _sys
import time
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parent.parent))

import numpy as np

from benchmarks._report import markdown_table, write_section
from benchmarks.beir import beir_corpus, beir_qrels, beir_queries, evaluate_run
from ragsieve.config import ChunkingConfig, EmbedderConfig
from ragsieve.demo import demo_corpus_dir
from ragsieve.embed import load_embedder
from ragsieve.embed.base import Embedder
from ragsieve.ingest import chunk_text, load_folder

PRECISIONS = ("fp32", "int8")
SEED = 0


def demo_chunks() -> list[str]:
    """The demo corpus's chunks, cut with the default chunking settings."""
    cfg = ChunkingConfig()
    texts = []
    for doc in load_folder(demo_corpus_dir()):
        for segment in doc.parts():
            pieces = chunk_text(
                segment.text, cfg.max_tokens, cfg.overlap_tokens, cfg.unit,
                heading_chars=getattr(segment, "heading_chars", 0),
            )  # fmt: skip
            texts.extend(p.text for p in pieces)
    return texts


def embedder(precision: str, threads: int | None) -> Embedder:
    emb = load_embedder(EmbedderConfig(precision=precision, threads=threads))  # type: ignore[arg-type]
    emb.warm_up()
    emb.embed(["warm-up text"] * 8)
    return emb


def speed(texts: list[str], repeats: int) -> list[list[object]]:
    rows: list[list[object]] = []
    for threads in (1, 2):
        embedders = {p: embedder(p, threads) for p in PRECISIONS}
        best = {p: float("inf") for p in PRECISIONS}
        for _ in range(repeats):
            for p, emb in embedders.items():  # interleaved, so drift in the machine hits both
                start = time.perf_counter()
                emb.embed(texts)
                best[p] = min(best[p], time.perf_counter() - start)
        row: list[object] = [threads, len(texts)]
        row += [round(len(texts) / best[p], 1) for p in PRECISIONS]
        row.append(f"{best['fp32'] / best['int8']:.2f}x")
        rows.append(row)
        print(rows[-1], flush=True)
    return rows


def quality(n_queries: int) -> tuple[list[list[object]], int, int, float]:
    chunks = beir_corpus("nfcorpus")
    queries = beir_queries("nfcorpus")
    qrels = beir_qrels("nfcorpus")
    qids = sorted(q for q in queries if q in qrels)
    if n_queries and n_queries < len(qids):
        qids = sorted(random.Random(SEED).sample(qids, n_queries))
    rows: list[list[object]] = []
    docs: dict[str, np.ndarray] = {}
    for p in PRECISIONS:
        emb = embedder(p, None)
        start = time.perf_counter()
        doc_vecs = emb.embed([c.text for c in chunks])
        docs[p] = doc_vecs
        seconds = time.perf_counter() - start
        q_vecs = emb.embed([queries[q] for q in qids])
        scores = q_vecs @ doc_vecs.T
        run = {}
        for qid, row in zip(qids, scores, strict=True):
            top = np.argsort(-row)[:100]
            run[qid] = {chunks[i].id: float(row[i]) for i in top}
        measured = evaluate_run(qrels, run)
        rows.append([p, round(measured["nDCG@10"], 4), round(measured["R@100"], 4), round(seconds, 1)])
        print(rows[-1], flush=True)
    cosines = (docs["fp32"] * docs["int8"]).sum(axis=1)
    return rows, len(chunks), len(qids), float(cosines.min())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--queries", type=int, default=0, help="sample this many test queries (seed 0); 0: all")
    args = ap.parse_args()

    texts = demo_chunks()
    speed_rows = speed(texts, args.repeats)
    quality_rows, n_docs, n_queries, min_cos = quality(args.queries)
    sampled = f"{n_queries} test queries sampled with seed {SEED}" if args.queries else f"all {n_queries} test queries"
    body = "\n\n".join(
        [
            "The ONNX embedder (bundled all-MiniLM-L6-v2) with its exported fp32 graph and with the int8 graph "
            "`embedder.precision = \"int8\"` makes from it (onnxruntime `quantize_dynamic`, per-channel int8 "
            "weights). Speed: the embedder alone on the demo corpus's chunks (default chunking), both precisions "
            f"interleaved, best of {args.repeats} runs, no embedding cache.",
            markdown_table(["threads", "texts", "fp32 texts/s", "int8 texts/s", "int8 speed-up"], speed_rows),
            f"Quality: dense-only retrieval on BEIR NFCorpus ({n_docs} documents, {sampled}, qrels of the test "
            "split), exact cosine search over every document; the time is embedding every document with all "
            f"cores. Lowest cosine between a document's fp32 and int8 vectors: {min_cos:.4f}.",
            markdown_table(["precision", "nDCG@10", "Recall@100", "corpus embed s"], quality_rows),
        ]
    )
    write_section("benchmarks.md", "embed-int8", "Embedder: int8 ONNX graph vs fp32", body)


if __name__ == "__main__":
    main()
