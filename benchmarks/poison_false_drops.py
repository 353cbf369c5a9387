"""What the poison check drops from honest corpora: false drops of the default check and of the
paraphrase signal, on corpora with no attack in them.

Every candidate the check drops here is honest (nothing was planted), so the drop rate is the
check's false-positive rate, and on BEIR the qrels say what those drops cost: nDCG@10 of the
hybrid top 10 with the dropped candidates removed, and the share of queries that lose a judged
relevant document. Corpora: the bundled demo corpus with its questions, BEIR nfcorpus
(medical) and arguana (arguments, where near-duplicate documents are common); none of them was
used to choose the paraphrase threshold (0.9, read off the HotpotQA and PopQA attack sets).

The check sees the hybrid top 10 (``sieve.candidates``) directly, without the relevance judge
in front of it, so the counts are an upper bound on what the sieve's poison stage would drop.

    python benchmarks/poison_false_drops.py
    python benchmarks/poison_false_drops.py --sets demo --no-write
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, markdown_table, write_section  # noqa: E402
from benchmarks.beir import beir_corpus, beir_index_dir, beir_qrels, beir_queries, evaluate_run  # noqa: E402

logger = logging.getLogger("poison_false_drops")
# each row's check is the poison stage of that attack-benchmark defence (ragsieve.attack.evaluate.DEFENCES)
CHECKS = {"default": "sieve", "paraphrase": "sieve+paraphrase"}


def open_index(name: str, embedder: Any) -> tuple[Any, dict[str, str], dict[str, dict[str, int]] | None]:
    """The index, the queries (id -> text) and, on BEIR, the test qrels."""
    from ragsieve.errors import IndexStoreError
    from ragsieve.index import Index

    if name == "demo":
        from ragsieve.demo import demo_corpus_dir, demo_data_path
        from ragsieve.io import read_jsonl

        folder = ROOT / "runs" / "poison-false-drops" / "demo-index"
        try:
            index = Index.open(folder, embedder=embedder)
        except IndexStoreError:
            index = Index.build(demo_corpus_dir(), folder, embedder=embedder)
        rows = list(read_jsonl(str(demo_data_path("questions.jsonl"))))
        return index, {str(r.get("id", i)): r["question"] for i, r in enumerate(rows)}, None
    try:
        index = Index.open(beir_index_dir(name), embedder=embedder)
    except IndexStoreError:
        index = Index.from_chunks(beir_corpus(name), beir_index_dir(name), embedder=embedder)
    qrels = beir_qrels(name)
    queries = {q: t for q, t in beir_queries(name).items() if q in qrels}
    return index, queries, qrels


def same_text(a: Any, b: Any, jaccard: float = 0.95) -> bool:
    """Whether two candidates carry the same text (word-set Jaccard at or above ``jaccard``)."""
    from ragsieve.answers import normalize_answer

    x, y = set(normalize_answer(a.chunk.text).split()), set(normalize_answer(b.chunk.text).split())
    return bool(x | y) and len(x & y) / len(x | y) >= jaccard


def measure(name: str, embedder: Any, k: int) -> list[list[object]]:
    from ragsieve.attack.evaluate import defence_config
    from ragsieve.config import RetrievalConfig
    from ragsieve.sieve.pipeline import Pipeline
    from ragsieve.sieve.poison import PoisonStage

    index, queries, qrels = open_index(name, embedder)
    index.warm_up()
    judges = {}
    for label, defence in CHECKS.items():
        stage = next(st for st in Pipeline(defence_config(defence), index=index).stages if isinstance(st, PoisonStage))
        stage.warm_up()  # the index's embedder for the paraphrase signal
        judges[label] = stage.judge
    retrieval = RetrievalConfig(max_query_chars=100_000)
    runs: dict[str, dict[str, dict[str, float]]] = {"none": {}, **{label: {} for label in judges}}
    dropped: dict[str, list[int]] = {label: [] for label in judges}
    lost: dict[str, int] = {label: 0 for label in judges}
    lost_text: dict[str, int] = {label: 0 for label in judges}
    seconds: dict[str, float] = {label: 0.0 for label in judges}
    for qid, text in queries.items():
        hits = index.search(text, k=k, mode="hybrid", retrieval=retrieval)
        runs["none"][qid] = {h.chunk.doc_id: float(k - i) for i, h in enumerate(hits)}
        for label, judge in judges.items():
            t0 = time.perf_counter()
            verdicts = judge.judge(text, hits)
            seconds[label] += time.perf_counter() - t0
            kept = [h for h, v in zip(hits, verdicts, strict=True) if not v.dropped]
            dropped[label].append(len(hits) - len(kept))
            runs[label][qid] = {h.chunk.doc_id: float(k - i) for i, h in enumerate(kept)}
            if qrels is not None:
                gone = [h for h in hits if h.chunk.doc_id not in runs[label][qid]]
                relevant = [h for h in gone if qrels.get(qid, {}).get(h.chunk.doc_id, 0) > 0]
                lost[label] += bool(relevant)
                # a dropped copy whose text survives in a kept candidate costs the generator nothing
                lost_text[label] += any(not any(same_text(h, k) for k in kept) for h in relevant)
    base = evaluate_run(qrels, runs["none"])["nDCG@10"] if qrels is not None else None
    rows: list[list[object]] = []
    for label in judges:
        n = len(dropped[label])
        with_drop = sum(d > 0 for d in dropped[label])
        ndcg = evaluate_run(qrels, runs[label])["nDCG@10"] if qrels is not None else None
        rows.append([
            name, label, n, f"{with_drop / n:.1%} ({with_drop})", f"{sum(dropped[label]) / n:.2f}",
            f"{lost[label] / n:.1%} ({lost[label]})" if qrels is not None else "–",
            f"{lost_text[label] / n:.1%} ({lost_text[label]})" if qrels is not None else "–",
            f"{base:.4f} -> {ndcg:.4f}" if base is not None and ndcg is not None else "–",
            f"{seconds[label] * 1000 / n:.1f}",
        ])
        logger.info("%s", rows[-1])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="demo,nfcorpus,arguana")
    ap.add_argument("--k", type=int, default=10, help="candidates the check sees (sieve.candidates)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    from ragsieve.config import EmbedderConfig
    from ragsieve.embed import load_embedder

    embedder = load_embedder(EmbedderConfig(cache_dir=str(ROOT / "runs" / "poison-false-drops" / "emb-cache")))
    embedder.warm_up()
    rows = [r for name in args.sets.split(",") if name for r in measure(name, embedder, args.k)]
    body = (
        "No attack in these corpora, so every drop is a false positive. `default` = the sieve's poison check "
        "with its defaults (restated question, word-Jaccard >= 0.95 near-copies deduplicated); `paraphrase` = "
        "the `sieve+paraphrase` setting (near-paraphrases by embedding cosine >= 0.9 join a cluster, clusters "
        f"dropped whole). The check sees the hybrid top {args.k} of each query directly (no relevance judge in "
        "front), an upper bound on the sieve's drops. Demo: the bundled questions over the demo corpus; BEIR: "
        "test queries with qrels, one chunk per document. nDCG@10 is that of the top 10 with the dropped "
        "documents removed (ir_measures); 'lost a relevant doc' = a dropped document has a positive qrel; "
        "'... its text' = and no kept candidate carries the same text (word Jaccard >= 0.95): a deduplicated "
        "exact copy loses an id, not content. "
        "Embedding of the candidates comes from a cache after the first run, so ms/query is the check's own "
        "cost.\n\n"
        + markdown_table(["corpus", "check", "queries", "queries with a drop", "drops / query",
                          "lost a relevant doc", "lost a relevant doc's text", "nDCG@10 (top 10 -> kept)",
                          "ms / query"], rows)
    )
    if args.no_write:
        print(body)
    else:
        write_section("results/knowledge-poisoning.md", "poison-false-drops",
                      "Poison check: false drops on corpora without an attack", body)


if __name__ == "__main__":
    main()
