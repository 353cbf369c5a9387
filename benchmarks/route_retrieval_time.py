"""Retrieval time routed vs one global index at growing corpus sizes (up to >= 1M chunks).

For each size an index is built with :meth:`Index.from_chunks` (global dense+sparse index
plus one partition per domain). The three query domains (nfcorpus, arguana, cosqa) keep
their real documents; the wiki domain grows from a 50k-sentence sample to all 300k real
Wikipedia sentences, then synthetic filler sentences (random word sequences drawn from the
Wikipedia vocabulary, fixed seed) are added to it to pass 1M chunks.

Dense vectors are **synthetic** (random unit vectors, 384-d like MiniLM) for every chunk:
embedding 1M texts with MiniLM on this 2-core CPU is infeasible, and the exact (flat)
faiss search costs the same whatever the vector values. BM25 runs on the real texts.

Each test query is timed twice per arm, interleaved and in alternating order; a query's
time is the minimum of its repeats; the table shows the median (p50) and p90 over queries.
The routed arm includes the router (TF-IDF + LogisticRegression trained on the labelled
query split, multi-domain routing with the unsure fallback). Both arms use the same query
vector, so query embedding is excluded from both; it is measured separately with the
bundled MiniLM and a ratio including it is shown.

Writes the ``route-retrieval-time`` section of docs/benchmarks.md.

    python benchmarks/route_retrieval_time.py [--sizes 50000 300000 1000000] [--queries-per-domain 100]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import ROOT, markdown_table, write_section  # noqa: E402
from ragsieve.config import RetrievalConfig  # noqa: E402
from ragsieve.route import QueryRouter, RouteConfig, train_router  # noqa: E402
from ragsieve.types import Chunk  # noqa: E402
from route_data import (  # noqa: E402
    CACHE,
    QUERY_DOMAINS,
    SyntheticEmbedder,
    domain_chunks,
    query_splits,
    random_unit_vectors,
    wiki_chunks,
    wiki_texts,
)

logger = logging.getLogger("route_retrieval_time")


def filler_chunks(n: int, seed: int = 0) -> list[Chunk]:
    """``n`` synthetic sentences of 10-30 words drawn from the Wikipedia vocabulary."""
    rng = np.random.default_rng(seed)
    vocab = np.array(sorted({w for t in wiki_texts()[:50_000] for w in t.split() if w.isalpha()}))
    lengths = rng.integers(10, 31, size=n)
    words = vocab[rng.integers(0, len(vocab), size=int(lengths.sum()))]
    out = []
    pos = 0
    for i, n_words in enumerate(lengths.tolist()):
        text = " ".join(words[pos : pos + n_words].tolist())
        pos += n_words
        out.append(Chunk(id=f"filler-{i}", text=text, doc_id=f"filler-{i}", source="filler", domain="wiki"))
    return out


def corpus(total_wiki: int, base: list[Chunk]) -> list[Chunk]:
    if total_wiki <= 300_000:
        return base + wiki_chunks(total_wiki)
    return base + wiki_chunks(300_000) + filler_chunks(total_wiki - 300_000)


def time_arms(
    index: object, qr: QueryRouter, queries: list[str], vectors: np.ndarray, repeats: int
) -> tuple[np.ndarray, np.ndarray]:
    rc = RetrievalConfig(max_query_chars=100_000)
    glob = np.full((len(queries), repeats), np.inf)
    routed = np.full((len(queries), repeats), np.inf)

    def run_global(i: int) -> float:
        t0 = time.perf_counter()
        index.search(queries[i], k=10, mode="hybrid", domains=None, retrieval=rc, query_vector=vectors[i])  # type: ignore[attr-defined]
        return time.perf_counter() - t0

    def run_routed(i: int) -> float:
        t0 = time.perf_counter()
        decision = qr.route(queries[i])
        index.search(  # type: ignore[attr-defined]
            queries[i], k=10, mode="hybrid", domains=decision.domains, retrieval=rc, query_vector=vectors[i]
        )
        return time.perf_counter() - t0

    for i in range(min(20, len(queries))):  # warm caches, page in mmapped data
        run_global(i)
        run_routed(i)
    for r in range(repeats):
        for i in range(len(queries)):
            if (i + r) % 2:
                glob[i, r] = run_global(i)
                routed[i, r] = run_routed(i)
            else:
                routed[i, r] = run_routed(i)
                glob[i, r] = run_global(i)
    return glob.min(axis=1) * 1000, routed.min(axis=1) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--sizes",
        nargs="*",
        type=int,
        default=[50_000, 300_000, 1_000_000],
        help="wiki-domain sizes (sentences; above 300k the rest is synthetic filler)",
    )
    ap.add_argument("--queries-per-domain", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--work-dir", default=str(ROOT / "runs" / "indexes" / "route-timing"))
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("ragsieve.route.runtime").setLevel(logging.WARNING)
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    import faiss

    faiss.omp_set_num_threads(1)
    from ragsieve.index import Index

    train_q, test_q = query_splits()
    rng = np.random.default_rng(0)
    picked = []
    for d in QUERY_DOMAINS:
        qs = [q for q in test_q if q.domain == d]
        picked += [
            qs[i] for i in sorted(rng.choice(len(qs), min(args.queries_per_domain, len(qs)), replace=False))
        ]
    queries = [q.text for q in picked]
    qvecs = SyntheticEmbedder().embed(queries)
    labels = CACHE / "train_queries.jsonl"
    from ragsieve.io import atomic_write_jsonl

    atomic_write_jsonl(labels, ({"text": q.text, "domain": q.domain} for q in train_q))

    base = [c for d in QUERY_DOMAINS for c in domain_chunks(d)]
    embedder = SyntheticEmbedder()
    cfg = RouteConfig(mass_threshold=0.9, unsure_threshold=0.5)
    rows = []
    for size in args.sizes:
        chunks = corpus(size, base)
        n = len(chunks)
        work = Path(args.work_dir) / f"n{n}"
        t0 = time.perf_counter()
        index = Index.from_chunks(chunks, work, embedder=embedder, embeddings=random_unit_vectors(n))
        build_s = time.perf_counter() - t0
        del chunks
        index.warm_up()
        train_router(index, cfg, labels=labels)
        qr = QueryRouter(index, cfg)
        logger.info("n=%d built in %.0fs; timing %d queries", n, build_s, len(queries))
        g, r = time_arms(index, qr, queries, qvecs, args.repeats)
        stats = qr.stats
        rows.append(
            [
                f"{n:,}",
                f"{size:,}" if size <= 300_000 else f"300,000 + {size - 300_000:,} filler",
                float(np.median(g)),
                float(np.percentile(g, 90)),
                float(np.median(r)),
                float(np.percentile(r, 90)),
                float(np.median(r) / np.median(g)),
                float(np.median(r / g)),
                f"{stats.rate('single'):.0%} / {stats.rate('multi'):.0%} / {stats.rate('fallback'):.0%}",
                build_s,
            ]
        )
        logger.info("%s", rows[-1])
        del index, qr
        shutil.rmtree(work, ignore_errors=True)

    emb_ms = measure_query_embedding(queries)
    last = rows[-1]
    incl = (last[4] + emb_ms) / (last[2] + emb_ms)
    n_q = {d: sum(q.domain == d for q in picked) for d in QUERY_DOMAINS}
    body = (
        "Hybrid retrieval (faiss flat inner product + BM25, RRF, k=10, 50 candidates per retriever; "
        "faiss and "
        "bm25s single-threaded) over one index with a global partition and one partition per domain. "
        f"Queries: {len(queries)} test queries ({', '.join(f'{d} {k}' for d, k in n_q.items())}, fixed-seed "
        "sample of the router table's test split). Corpus: nfcorpus 3,633 + arguana 12,124 + cosqa "
        "6,267 real "
        "documents, plus the wiki domain (real Wikipedia sentences, fixed-seed sample up to all "
        "300,000, then "
        "**synthetic filler** sentences of 10-30 random Wikipedia-vocabulary words added to the "
        "wiki domain to "
        "pass 1M). **Dense vectors are synthetic** random unit vectors for every chunk and query "
        "(embedding 1M "
        "texts with MiniLM on this CPU is infeasible; exact flat search costs the same for any values). "
        "Routed = router decision (logreg on TF-IDF, trained on the labelled query split; top "
        "domains holding "
        "0.9 of the probability, global index below p=0.5) + search of the chosen partitions. Per query the "
        f"minimum of {args.repeats} interleaved repeats; p50/p90 over queries. Query embedding is "
        f"excluded from "
        f"both arms; measured separately, the bundled MiniLM takes p50 {emb_ms:.1f} ms per query here, which "
        f"would make the largest size's p50 ratio {incl:.3f}.\n\n"
        + markdown_table(
            [
                "chunks",
                "wiki domain",
                "global p50 ms",
                "global p90 ms",
                "routed p50 ms",
                "routed p90 ms",
                "ratio of p50s",
                "median per-query ratio",
                "single / multi / fallback",
                "build s",
            ],
            rows,
        )
        + "\n\nGoal: ratio <= 0.4 at >= 1M chunks (the paper reports about 50% less retrieval time)."
    )
    write_section("benchmarks.md", "route-retrieval-time", "Routed vs global retrieval time", body)


def measure_query_embedding(queries: list[str]) -> float:
    import torch

    from ragsieve.config import EmbedderConfig
    from ragsieve.embed import load_embedder

    torch.set_num_threads(1)
    emb = load_embedder(EmbedderConfig())
    emb.warm_up()
    times = []
    for q in queries[:: max(1, len(queries) // 60)]:
        t0 = time.perf_counter()
        emb.embed([q])
        times.append((time.perf_counter() - t0) * 1000)
    return float(np.median(times))


if __name__ == "__main__":
    main()
