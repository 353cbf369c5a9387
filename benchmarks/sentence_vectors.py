"""Sentence vectors from the chunk's own forward pass against sentences embedded on their own.

    python benchmarks/sentence_vectors.py [--queries 100] [--candidates 20] [--precision int8]

The sieve's checks score a question against every sentence of a retrieved passage (the relevance
judge's best-sentence cosine, the verifier's evidence). Ingest stores those sentence vectors
either pooled from the chunk's own pass (``ingest.sentence_vectors = "one-pass"``: the mean of the
sentence's token vectors) or embedded one by one (``"separate"``: a second pass). On BEIR
NFCorpus, for ``--queries`` sampled queries of the dev split and of the test split (seed 0), the
``--candidates`` documents the dense search ranks first are the passages; for each, both kinds of
sentence vectors are scored against the question:

- agreement: how often both pick the same best sentence, the Spearman correlation of a passage's
  sentence scores, the cosine between the two vectors of a sentence;
- ranking: nDCG@10 of the candidates re-ranked by their best sentence's cosine (qrels graded);
- the trust check that reads them: the bundled retrieval evaluator (the sieve's relevance judge)
  scored with each kind, its ROC AUC for a judged-relevant candidate, and how often its verdict
  (keep at or above its upper threshold, drop below its lower one, else ambiguous) changes.

Writes the ``sentence-vectors`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import random
import sys as _sys
import time
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parent.parent))

import numpy as np

from benchmarks._report import markdown_table, publish_section
from benchmarks._stats import mean_t_interval, paired_bootstrap_interval, rate_with_interval
from benchmarks.beir import beir_corpus, beir_qrels, beir_queries
from ragsieve.config import EmbedderConfig
from ragsieve.embed import MemoEmbedder, load_embedder
from ragsieve.index.sentences import embed_chunks_with_sentences, own_sentences
from ragsieve.tasks.evaluator import TrainedRetrievalEvaluator

SEED = 0
SPLITS = ("dev", "test")
METHODS = ("separate", "one-pass")


def ndcg_at_10(ranked: list[str], judged: dict[str, int]) -> float:
    gains = [judged.get(d, 0) for d in ranked[:10]]
    dcg = sum((2**g - 1) / np.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted(judged.values(), reverse=True)[:10]
    idcg = sum((2**g - 1) / np.log2(i + 2) for i, g in enumerate(ideal))
    return float(dcg / idcg) if idcg > 0 else 0.0


def auc(scores: list[float], labels: list[int]) -> float:
    """ROC AUC by the rank-sum formula (ties count a half)."""
    from scipy.stats import rankdata

    s, y = np.asarray(scores), np.asarray(labels)
    pos, neg = int(y.sum()), int(len(y) - y.sum())
    if not pos or not neg:
        return float("nan")
    ranks = rankdata(s)
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def verdict(score: float, upper: float, lower: float) -> str:
    return "keep" if score >= upper else "drop" if score < lower else "ambiguous"


def main() -> None:
    from scipy.stats import spearmanr

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", type=int, default=100, help="queries sampled per split (seed 0); 0: all")
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--precision", choices=("fp32", "int8"), default="int8")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    started = time.perf_counter()
    chunks = beir_corpus("nfcorpus")
    texts = [c.text for c in chunks]
    ids = [c.id for c in chunks]
    emb = load_embedder(EmbedderConfig(precision=args.precision, threads=args.threads))
    emb.warm_up()
    t0 = time.perf_counter()
    doc_vecs, pooled = embed_chunks_with_sentences(texts, emb)
    one_pass_s = time.perf_counter() - t0
    print(f"{len(texts)} documents and their sentences in one pass: {one_pass_s:.0f} s", flush=True)
    evaluator = TrainedRetrievalEvaluator.bundled()
    upper, lower = float(evaluator.upper), float(evaluator.lower)

    separate: dict[int, np.ndarray] = {}  # document row -> its sentences embedded on their own
    sections: list[str] = []
    summary_rows: list[list[object]] = []
    for split in SPLITS:
        queries, qrels = beir_queries("nfcorpus", split), beir_qrels("nfcorpus", split)
        qids = sorted(q for q in queries if q in qrels)
        if args.queries and args.queries < len(qids):
            qids = sorted(random.Random(SEED).sample(qids, args.queries))
        q_vecs = emb.embed([queries[q] for q in qids])
        same_best = n_best = 0
        rhos: list[float] = []
        cosines: list[np.ndarray] = []
        ndcg = {m: [] for m in ("chunk", *METHODS)}  # type: dict[str, list[float]]
        judge_scores = {m: [] for m in METHODS}  # type: dict[str, list[float]]
        labels: list[int] = []
        changed = n_verdicts = 0
        for qid, qv in zip(qids, q_vecs, strict=True):
            top = [int(i) for i in np.argsort(-(doc_vecs @ qv))[: args.candidates]]
            todo = [r for r in top if r not in separate and own_sentences(texts[r])]
            flat = [s for r in todo for s in own_sentences(texts[r])]
            if flat:
                vecs = emb.embed(flat)
                at = 0
                for r in todo:
                    n = len(own_sentences(texts[r]))
                    separate[r], at = vecs[at : at + n], at + n
            best_score = {m: {} for m in METHODS}  # type: dict[str, dict[str, float]]
            memos = {m: MemoEmbedder(emb) for m in METHODS}
            for r in top:
                sentences = own_sentences(texts[r])
                if not sentences:  # one sentence: its vector is the chunk's, the same either way
                    for m in METHODS:
                        best_score[m][ids[r]] = float(doc_vecs[r] @ qv)
                    continue
                one = pooled[r]
                ok = np.isfinite(one).all(axis=1)
                one = np.where(ok[:, None], one, separate[r])  # what ingest stores: cut-off sentences embedded alone
                kinds = {"separate": separate[r], "one-pass": one}
                for m, vecs in kinds.items():
                    memos[m].remember(sentences, vecs)
                    best_score[m][ids[r]] = float((vecs @ qv).max())
                cosines.append((separate[r] * one).sum(axis=1))
                s_sep, s_one = separate[r] @ qv, one @ qv
                n_best += 1
                same_best += int(np.argmax(s_sep) == np.argmax(s_one))
                if len(sentences) >= 3:
                    rho = spearmanr(s_sep, s_one).statistic
                    if np.isfinite(rho):
                        rhos.append(float(rho))
            judged = qrels[qid]
            ndcg["chunk"].append(ndcg_at_10([ids[r] for r in top], judged))
            for m in METHODS:
                ranked = sorted(best_score[m], key=lambda d, m=m: -best_score[m][d])
                ndcg[m].append(ndcg_at_10(ranked, judged))
            passages = [texts[r] for r in top]
            for m in METHODS:
                memos[m].remember([queries[qid], *passages], np.vstack([qv[None, :], doc_vecs[top]]))
            per = {m: evaluator.score_passages(queries[qid], passages, memos[m]) for m in METHODS}
            for m in METHODS:
                judge_scores[m].extend(per[m])
            labels.extend(int(judged.get(ids[r], 0) > 0) for r in top)
            for a, b in zip(per["separate"], per["one-pass"], strict=True):
                n_verdicts += 1
                changed += int(verdict(a, upper, lower) != verdict(b, upper, lower))
        cos = np.concatenate(cosines)
        rho_mean, rho_half = mean_t_interval(rhos)
        d_rank = paired_bootstrap_interval(np.array(ndcg["separate"]), np.array(ndcg["one-pass"]))
        scores_sep, scores_one = np.array(judge_scores["separate"]), np.array(judge_scores["one-pass"])
        abs_diff = np.abs(scores_one - scores_sep)
        rows = [
            ["same best sentence", rate_with_interval(same_best, n_best)],
            [f"Spearman of sentence scores (passages of 3+ sentences, n = {len(rhos)})",
             f"{rho_mean:.3f} ± {rho_half:.3f}"],
            [f"cosine one-pass vs separate (n = {len(cos)} sentences): mean, 5th percentile",
             f"{cos.mean():.3f}, {np.percentile(cos, 5):.3f}"],
            ["nDCG@10, candidates by chunk cosine", f"{np.mean(ndcg['chunk']):.4f}"],
            ["nDCG@10, by best sentence: separate", f"{np.mean(ndcg['separate']):.4f}"],
            ["nDCG@10, by best sentence: one-pass", f"{np.mean(ndcg['one-pass']):.4f}"],
            ["one-pass - separate (paired bootstrap 95%)", f"{d_rank[0]:+.4f} [{d_rank[1]:+.4f}, {d_rank[2]:+.4f}]"],
            ["relevance judge AUC: separate", f"{auc(judge_scores['separate'], labels):.4f}"],
            ["relevance judge AUC: one-pass", f"{auc(judge_scores['one-pass'], labels):.4f}"],
            ["relevance judge score, mean one-pass - separate",
             f"{float(np.mean(scores_one - scores_sep)):+.4f} (mean abs {float(np.mean(abs_diff)):.4f})"],
            ["relevance judge verdict changed (keep / ambiguous / drop)", rate_with_interval(changed, n_verdicts)],
        ]  # fmt: skip
        sections.append(
            f"**{split} split**: {len(qids)} queries, {len(labels)} query-candidate pairs "
            f"({sum(labels)} judged relevant), {n_best} passages of two or more sentences.\n\n"
            + markdown_table(["measure", "value"], rows)
        )
        summary_rows.append([split, f"{d_rank[0]:+.4f}", f"{auc(judge_scores['separate'], labels):.4f}",
                             f"{auc(judge_scores['one-pass'], labels):.4f}"])  # fmt: skip
        print(sections[-1], flush=True)
    body = "\n\n".join(
        [
            f"NFCorpus ({len(texts)} documents, title and abstract), the `{args.precision}` ONNX embedder, "
            f"{args.queries or 'all'} queries per split sampled with seed {SEED}, the top {args.candidates} "
            "documents of an exact dense search as each query's candidates. *separate*: each sentence of a "
            "passage embedded on its own (what ingest stored before); *one-pass*: the mean of the sentence's "
            "token vectors from the passage's own forward pass, normalised (a sentence the pass cut off at the "
            "model's 256 tokens is embedded on its own, as ingest does). The relevance judge is the bundled "
            "retrieval evaluator, fed each kind of sentence vector through the memo the pipeline uses, with "
            f"its shipped thresholds (keep >= {upper:.2f}, drop < {lower:.2f}). The dev split chose the "
            "default; the test split reports it.",
            *sections,
            f"Whole corpus embedded with its sentences in one pass: {one_pass_s:.0f} s; run "
            f"{time.perf_counter() - started:.0f} s in all; load average (1/5/15 min) at the end "
            f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())} on the shared machine.",
        ]
    )
    publish_section("benchmarks.md", "sentence-vectors", "Sentence vectors: one pass vs a separate pass", body,
                    write=not args.no_write)  # fmt: skip


if __name__ == "__main__":
    main()
