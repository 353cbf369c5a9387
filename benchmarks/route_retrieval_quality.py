"""Retrieval quality routed vs one global index: nDCG@10 per domain (ir_measures).

Builds one partitioned index over nfcorpus, arguana, cosqa and a Wikipedia-sentence sample
(the fourth, query-less domain), trains routers and compares, per query domain, searching
the global index with searching the partitions the router picks (with and without the
multi-domain/unsure fallback). Writes the ``route-retrieval-quality`` section of
docs/results/retrieval-and-routing.md.

    python benchmarks/route_retrieval_quality.py [--wiki 50000] [--mode sparse]
    python benchmarks/route_retrieval_quality.py --embedder real --mode hybrid   # dense/hybrid need real vectors

With ``--embedder real`` the documents are embedded with the bundled MiniLM (cached under
runs/cache/embeddings) and the Wikipedia sentences take their vectors from the full wiki index
built by ``benchmarks/build_wiki_index.py`` (runs/indexes/wiki300k).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import ROOT, markdown_table, write_section  # noqa: E402
from ragsieve.config import RetrievalConfig  # noqa: E402
from ragsieve.route import QueryRouter, RouteConfig, train_router  # noqa: E402
from route_data import (  # noqa: E402
    QUERY_DOMAINS,
    SyntheticEmbedder,
    domain_chunks,
    qrels,
    query_splits,
    random_unit_vectors,
    wiki_chunks,
)

logger = logging.getLogger("route_retrieval_quality")


def ndcg10(run: dict[str, dict[str, float]], rels: dict[str, dict[str, int]]) -> float:
    import ir_measures
    from ir_measures import nDCG

    qrels_list = [ir_measures.Qrel(q, d, s) for q, docs in rels.items() if q in run for d, s in docs.items()]
    run_list = [ir_measures.ScoredDoc(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    return float(ir_measures.calc_aggregate([nDCG @ 10], qrels_list, run_list)[nDCG @ 10])


MODE_WORDS = {
    "sparse": "sparse retrieval (BM25, bm25s defaults)",
    "dense": "dense retrieval (MiniLM, exact inner product)",
    "hybrid": "hybrid retrieval (BM25 + MiniLM, reciprocal-rank fusion, 50 candidates each)",
}


def real_vectors(embedder: Any, docs: list[Any], wiki: list[Any]) -> np.ndarray:
    """MiniLM vectors: documents embedded here (cached), Wikipedia rows read from the full wiki index."""
    from ragsieve.index import Index

    wiki_index = ROOT / "runs" / "indexes" / "wiki300k"
    if not Index.exists(wiki_index):
        raise SystemExit(f"{wiki_index} is missing: run `python benchmarks/build_wiki_index.py` first")
    full = Index.open(wiki_index, embedder=embedder).embeddings
    rows = [int(c.id.removeprefix("wiki-")) for c in wiki]
    t0 = time.perf_counter()
    doc_vectors = np.empty((len(docs), embedder.dim), dtype=np.float32)
    for start in range(0, len(docs), 1024):
        doc_vectors[start : start + 1024] = embedder.embed([c.text for c in docs[start : start + 1024]])
        done = min(start + 1024, len(docs))
        logger.info("embedded %d / %d documents (%.0fs)", done, len(docs), time.perf_counter() - t0)
    wiki_vectors = np.asarray(full[rows], dtype=np.float32)
    probe = embedder.embed([wiki[i].text for i in (0, len(wiki) // 2, len(wiki) - 1)])
    agreement = (probe * wiki_vectors[[0, len(wiki) // 2, len(wiki) - 1]]).sum(axis=1)
    if agreement.min() < 0.999:
        raise SystemExit(f"{wiki_index} rows do not match the sampled sentences (cosine {agreement.min():.3f})")
    return np.vstack([doc_vectors, wiki_vectors])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wiki", type=int, default=50_000)
    ap.add_argument("--mode", default="sparse", choices=["sparse", "dense", "hybrid"])
    ap.add_argument("--index-dir", default=str(ROOT / "runs" / "indexes" / "route-quality"))
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument(
        "--embedder",
        default="synthetic",
        choices=["synthetic", "real"],
        help="synthetic: placeholder vectors (sparse quality only); real: bundled MiniLM",
    )
    ap.add_argument("--threads", type=int, default=2, help="embedding threads (real embedder)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from ragsieve.index import Index

    if args.mode != "sparse" and args.embedder == "synthetic":
        raise SystemExit("dense and hybrid quality need --embedder real")
    index_dir = Path(args.index_dir)
    if args.embedder == "real":
        from ragsieve.config import EmbedderConfig
        from ragsieve.embed import load_embedder

        embedder = load_embedder(
            EmbedderConfig(threads=args.threads, batch_size=32, cache_dir=str(ROOT / "runs" / "cache" / "embeddings"))
        )
        if args.index_dir == ap.get_default("index_dir"):
            index_dir = index_dir.with_name("route-quality-real")
    else:
        embedder = SyntheticEmbedder()
    if args.rebuild or not Index.exists(index_dir):
        docs = [c for d in QUERY_DOMAINS for c in domain_chunks(d)]
        wiki = wiki_chunks(args.wiki)
        chunks = docs + wiki
        logger.info("building index over %d chunks", len(chunks))
        vectors = real_vectors(embedder, docs, wiki) if args.embedder == "real" else random_unit_vectors(len(chunks))
        Index.from_chunks(chunks, index_dir, embedder=embedder, embeddings=vectors)
    index = Index.open(index_dir, embedder=embedder)
    sizes = {d: sum(c.domain == d for c in index.chunks) for d in index.domains}
    train_q, test_q = query_splits()
    retrieval = RetrievalConfig(max_query_chars=100_000, candidates=50)

    labels = ROOT / "runs" / "cache" / "route" / "train_queries.jsonl"
    labels.parent.mkdir(parents=True, exist_ok=True)
    from ragsieve.io import atomic_write_jsonl

    atomic_write_jsonl(labels, ({"text": q.text, "domain": q.domain} for q in train_q))
    fallback = {"mass_threshold": 0.9, "unsure_threshold": 0.5}
    top1 = {"mass_threshold": 1e-9, "unsure_threshold": 0.0, "max_domains": 1}
    settings = {
        "(a) queries, logreg, fallback on": ("labels", RouteConfig(classifier="logreg", **fallback)),
        "(a) queries, logreg, top-1 only": ("labels", RouteConfig(classifier="logreg", **top1)),
        "(b) chunks, multinomial-nb, fallback on": ("chunks", RouteConfig(classifier="multinomial-nb", **fallback)),
        "(b) chunks, multinomial-nb, top-1 only": ("chunks", RouteConfig(classifier="multinomial-nb", **top1)),
        "(b) chunks, logreg, fallback on": ("chunks", RouteConfig(classifier="logreg", **fallback)),
    }
    rels = {d: qrels(d) for d in QUERY_DOMAINS}
    queries = {d: [q for q in test_q if q.domain == d and q.id in rels[d]] for d in QUERY_DOMAINS}

    def run_for(domains_of: dict[str, list[str] | None], domain: str) -> dict[str, dict[str, float]]:
        run = {}
        for q in queries[domain]:
            hits = index.search(q.text, k=10, mode=args.mode, domains=domains_of[q.id], retrieval=retrieval)
            run[q.id] = {h.chunk.id: h.score for h in hits}
        return run

    t0 = time.perf_counter()
    global_ndcg = {d: ndcg10(run_for({q.id: None for q in queries[d]}, d), rels[d]) for d in QUERY_DOMAINS}
    logger.info("global %s (%.0fs)", global_ndcg, time.perf_counter() - t0)
    global_mean = sum(global_ndcg.values()) / 3
    rows: list[list[object]] = [
        [
            "global index",
            *[global_ndcg[d] for d in QUERY_DOMAINS],
            global_mean,
            "100%",
            "(all partitions)",
            "yes",
        ]
    ]
    ratios = {}
    per_domain_ratio: dict[str, dict[str, float]] = {}
    for name, (source, cfg) in settings.items():
        train_router(index, cfg, labels=labels if source == "labels" else None)
        qr = QueryRouter(index, cfg)
        per_domain = {}
        correct = 0
        for d in QUERY_DOMAINS:
            decisions = {q.id: qr.route(q.text) for q in queries[d]}
            correct += sum(dec.domains is None or d in dec.domains for dec in decisions.values())
            per_domain[d] = ndcg10(run_for({k: v.domains for k, v in decisions.items()}, d), rels[d])
        total = qr.stats.total
        mean = sum(per_domain.values()) / 3
        ratios[name] = mean / global_mean
        per_domain_ratio[name] = {d: per_domain[d] / global_ndcg[d] for d in QUERY_DOMAINS}
        rows.append(
            [
                f"routed: {name}",
                *[per_domain[d] for d in QUERY_DOMAINS],
                mean,
                f"{ratios[name]:.1%}",
                f"{qr.stats.counts['single'] / total:.1%} / {qr.stats.counts['multi'] / total:.1%} / "
                f"{qr.stats.counts['fallback'] / total:.1%}",
                f"{correct / total:.1%}",
            ]
        )
        logger.info("%s", rows[-1])
    n_q = {d: len(queries[d]) for d in QUERY_DOMAINS}
    body = (
        f"nDCG@10 (ir_measures) per query domain, {MODE_WORDS[args.mode]} over one "
        f"index of {len(index.chunks):,} chunks in four domains "
        f"({', '.join(f'{d} {n:,}' for d, n in sizes.items())}; one chunk per corpus document, wiki = "
        "fixed-seed sample of Wikipedia sentences with no queries). Test queries: "
        f"{', '.join(f'{d} {n}' for d, n in n_q.items())} (the router table's test split; arguana = its "
        "held-out half). Routers (TF-IDF features, see the router table) trained on (a) the labelled "
        "query training split or (b) the corpus chunks only (<= 3000 per domain); multinomial-nb is the "
        "default when training from chunks, logreg from labelled questions. *Fallback on*: route to the top "
        "domains holding 0.9 of the probability (at most 3), global index when the top probability < 0.5. "
        "*Top-1 only*: the single most probable domain (a query with no word the router knows still goes to "
        "the global index). "
        + (
            "Vectors: bundled all-MiniLM-L6-v2 (ONNX backend) for every chunk and query.\n\n"
            if args.embedder == "real"
            else "This run holds placeholder vectors, so only the sparse retriever is evaluated; the dense and "
            "hybrid runs (`--embedder real`) are in their own sections.\n\n"
        )
        + markdown_table(
            [
                "search",
                *[f"nDCG@10 {d}" for d in QUERY_DOMAINS],
                "mean",
                "vs global",
                "single / multi / fallback",
                "true domain searched (fallback = yes)",
            ],
            rows,
        )
        + f"\n\nGoal: routed with fallback >= 97% of the global index's nDCG@10. "
        f"Measured: (a) {ratios['(a) queries, logreg, fallback on']:.1%}, (b) "
        f"{ratios['(b) chunks, multinomial-nb, fallback on']:.1%} of the mean; per domain "
        + "; ".join(
            f"{name.split(',')[0]}: " + ", ".join(f"{d} {r:.1%}" for d, r in per_domain_ratio[name].items())
            for name in ("(a) queries, logreg, fallback on", "(b) chunks, multinomial-nb, fallback on")
        )
        + "."
        + (
            ""
            if args.mode == "dense"
            else " Searching a partition alone also changes BM25's document frequencies (each partition has its "
            "own IDF), which moves scores even when the right partition is searched."
        )
    )
    write_section(
        "results/retrieval-and-routing.md",
        "route-retrieval-quality" + ("" if args.mode == "sparse" else f"-{args.mode}"),
        f"Routed vs global retrieval quality (nDCG@10, {args.mode})",
        body,
    )


if __name__ == "__main__":
    main()
