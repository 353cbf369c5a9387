"""Retrieval quality of dense, sparse and hybrid search on BEIR-style datasets.

    python benchmarks/retrieval_quality.py --datasets nfcorpus arguana

nDCG@10 and Recall@100 (ir_measures) on each dataset's test queries; results go to
docs/results/retrieval-and-routing.md. Indexes are cached under runs/indexes/beir-<name>.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# Lets `python benchmarks/<script>.py` import its siblings as the `benchmarks` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import markdown_table, write_section
from benchmarks.beir import beir_corpus, beir_index_dir, beir_qrels, beir_queries, evaluate_run
from ragsieve.config import RetrievalConfig
from ragsieve.embed import load_embedder
from ragsieve.errors import IndexStoreError
from ragsieve.index import Index


def open_or_build(name: str, embedder) -> Index:
    try:
        return Index.open(beir_index_dir(name), embedder=embedder)
    except IndexStoreError:
        return Index.from_chunks(beir_corpus(name), beir_index_dir(name), embedder=embedder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--datasets", nargs="+", default=["nfcorpus", "arguana"])
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    embedder = load_embedder()
    embedder.warm_up()
    rows = []
    for name in args.datasets:
        index = open_or_build(name, embedder)
        queries = beir_queries(name)
        qrels = beir_qrels(name)
        qids = [q for q in queries if q in qrels]
        qvecs = embedder.embed([queries[q] for q in qids])
        for mode in ("dense", "sparse", "hybrid"):
            retrieval = RetrievalConfig(candidates=100, max_query_chars=100_000)
            start = time.perf_counter()
            run = {}
            for qid, qvec in zip(qids, qvecs, strict=True):
                hits = index.search(queries[qid], k=100, mode=mode, retrieval=retrieval, query_vector=qvec)
                run[qid] = {h.chunk.id: h.score for h in hits}
            ms = (time.perf_counter() - start) * 1000 / len(qids)
            scores = evaluate_run(qrels, run)
            rows.append(
                [
                    name,
                    mode,
                    len(index),
                    len(qids),
                    round(scores["nDCG@10"], 4),
                    round(scores["R@100"], 4),
                    round(ms, 1),
                ]
            )
            print(rows[-1], flush=True)
    body = (
        "Test queries and qrels of each dataset in `../shared/data` (nfcorpus: BEIR test split; arguana: rebuilt "
        "from the original corpus, not byte-identical to BEIR's, see its PROVENANCE.md). One chunk per document "
        "(title + text). Dense: bundled all-MiniLM-L6-v2, exact inner product (faiss flat). Sparse: bm25s "
        "(k1=1.5, b=0.75, English stopwords, Snowball stemmer). Hybrid: reciprocal-rank fusion (k=60) of the top 100 "
        "of each. Hybrid results are cut at 100, so Recall@100 compares like for like. ms/query excludes query "
        "embedding (queries embedded in one batch beforehand).\n\n"
        + markdown_table(["dataset", "mode", "docs", "queries", "nDCG@10", "Recall@100", "ms/query"], rows)
    )
    write_section(
        "results/retrieval-and-routing.md",
        "retrieval-quality-beir",
        "Retrieval quality: dense vs sparse vs hybrid (BEIR)",
        body,
    )


if __name__ == "__main__":
    main()
