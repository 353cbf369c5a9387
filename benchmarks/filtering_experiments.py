"""Knowledge filtering experiments (Qiang et al.): Table 3, Table 4, dense vs BM25, label variants.

Two stages, so that the expensive LLM work is done once and every table row reuses it:

``cache``: for one dataset and retriever, draw the k-shot training queries (per class,
recorded seed) and a fixed-seed test sample, retrieve the top-30 knowledge sentences, and
with the bundled SmolLM2 compute (a) for the training queries the label distribution
without knowledge and with each of the 30 pieces (-> D_kf, saved as JSONL), and (b) for
each test item the label distribution without knowledge, with each of the top ``--pool``
pieces, with the top-8 concatenated, the direct and in-context filter scores of each
piece (raw, plus the content-free reference for calibration), and the label distribution
with each filter's kept pieces concatenated. Results go to ``runs/filtering/<dataset>-<retriever>.json``
(written atomically every few items; a rerun resumes).

``report``: trains the proxy on D_kf (predicted-label and gold-label variants), applies
every filter and fusion to the cached numbers and writes docs/results/knowledge-filtering.md sections.

    python benchmarks/filtering_experiments.py cache --dataset sst-2 --retriever dense --n-test 500
    python benchmarks/filtering_experiments.py report
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Lets `python benchmarks/<script>.py` import its siblings as the `benchmarks` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import read_jsonl  # noqa: E402
from benchmarks._report import (  # noqa: E402
    ROOT,
    SHARED_DATA,
    markdown_table,
    write_section,  # noqa: E402
)

DRY = False


def write_or_print_section(doc: str, name: str, title: str, body: str) -> None:
    """Write the docs section, or with ``--dry`` only print it."""
    if DRY:
        print(f"## {title}\n\n{body}\n")
    else:
        write_section(doc, name, title, body)


logger = logging.getLogger("filtering_experiments")

OUT = ROOT / "runs" / "filtering"
DATASETS = {"sst-2": "dev", "sst-5": "test", "mr": "test", "trec": "test", "cola": "test"}
TOP_K = 30
STRIDE = 30
MAX_KEEP = 8


def index_dir() -> Path:
    full = ROOT / "runs" / "indexes" / "wiki300k"
    from ragsieve.index import Index

    return full if Index.exists(full) else ROOT / "runs" / "indexes" / "wiki10k"


def read_split(dataset: str, split: str) -> list[dict[str, str]]:
    path = SHARED_DATA / dataset / f"{split}.jsonl"
    return list(read_jsonl(path))


def kshot(rows: list[dict[str, str]], labels: list[str], k: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for label in labels:
        pool = [r for r in rows if r["label"] == label]
        out += rng.sample(pool, min(k, len(pool)))
    rng.shuffle(out)
    return out


def sample_test(rows: list[dict[str, str]], n: int, seed: int) -> list[dict[str, str]]:
    if n >= len(rows):
        return rows
    # random order, so any prefix of the sample is itself a fixed-seed random sample
    return [rows[i] for i in random.Random(seed).sample(range(len(rows)), n)]


# --------------------------------------------------------------------------- cache
class Knowledge:
    """Dense retrieval through the ragsieve Index (when built); BM25 through the Index, or
    through bm25s over the same wiki subset (every ``STRIDE``-th sentence) when the Index is
    not built yet. Similarities and proxy features embed the retrieved texts on the fly."""

    def __init__(self) -> None:
        from ragsieve.embed import load_embedder
        from ragsieve.index import Index

        path = index_dir()
        self.index = Index.open(path) if Index.exists(path) else None
        if self.index is not None:
            self.index.warm_up()
            self.embedder = self.index.embedder
            self.name = path.name
        else:
            self.embedder = load_embedder(None)
            self.embedder.warm_up()
            self.name = f"bm25s over every {STRIDE}th wiki_sentences line"
        self._bm25: Any = None

    def _own_bm25(self) -> Any:
        if self._bm25 is None:
            import gzip

            import bm25s

            with gzip.open(SHARED_DATA / "wiki_sentences" / "wiki300k.txt.gz", "rt", encoding="utf-8") as fh:
                self._texts = [(i + 1, line.strip()) for i, line in enumerate(fh) if i % STRIDE == 0]
            self._bm25 = bm25s.BM25()
            self._bm25.index(
                bm25s.tokenize([t for _, t in self._texts], stopwords="en", show_progress=False), show_progress=False
            )
        return self._bm25

    def retriever_name(self, retriever: str) -> str:
        if self.index is None:
            return f"bm25s over every {STRIDE}th wiki_sentences line"
        if retriever == "dense":
            return f"MiniLM over the ragsieve index `{self.name}`"
        return f"BM25 (bm25s, stemmed) over the ragsieve index `{self.name}`"

    def search(self, query: str, retriever: str) -> list[dict[str, Any]]:
        if self.index is not None:
            # Both retrievers search the same sentences, so dense vs BM25 compares retrievers only.
            hits = self.index.search(query, k=TOP_K, mode="dense" if retriever == "dense" else "sparse")
            return [{"id": h.chunk.id, "text": h.chunk.text, "score": float(h.score)} for h in hits]
        if retriever == "dense":
            raise SystemExit(f"dense retrieval needs the index {index_dir()}; run benchmarks/filtering_build_index.py")
        import bm25s

        bm = self._own_bm25()
        docs, scores = bm.retrieve(
            bm25s.tokenize([query], stopwords="en", show_progress=False), k=TOP_K, show_progress=False
        )
        return [
            {"id": f"wiki-{self._texts[int(d)][0]}", "text": self._texts[int(d)][1], "score": float(sc)}
            for d, sc in zip(docs[0], scores[0], strict=True)
        ]

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.embedder.embed(texts), dtype=np.float32)


def cmd_cache(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    from ragsieve.config import LLMConfig
    from ragsieve.filtering import (
        Candidate,
        DirectFilter,
        ICLFilter,
        KfDataset,
        PerplexityAnnotator,
        ProxyFilter,
        ensemble_combine,
        get_task,
    )
    from ragsieve.filtering.filters import CONTENT_FREE
    from ragsieve.filtering.scoring import scorer_for_task
    from ragsieve.io import atomic_write_json
    from ragsieve.llm import load_llm

    task = get_task(args.dataset)
    OUT.mkdir(parents=True, exist_ok=True)
    cache_path = OUT / f"{args.dataset}-{args.retriever}.json"
    dkf_path = OUT / f"{args.dataset}-dkf-{args.dkf_retriever or args.retriever}.jsonl"
    kn = Knowledge()
    embedder = kn.embedder
    llm = load_llm(LLMConfig(n_threads=1, n_ctx=2048))
    llm.warm_up()
    scorer = scorer_for_task(args.dataset).fit_calibration(llm)

    def dist(text: str, knowledge: list[str] | None = None) -> list[float]:
        d = scorer.predict_proba(llm, text, knowledge)
        return [d[label] for label in task.labels]

    train = kshot(read_split(args.dataset, "train"), task.labels, args.shots, args.seed)
    test = sample_test(read_split(args.dataset, DATASETS[args.dataset]), args.n_test, args.test_seed)

    # ---- D_kf from the k-shot training queries (dense retrieval, top-30), built once per dataset
    if not dkf_path.exists():
        t0 = time.perf_counter()
        ann = PerplexityAnnotator(args.dataset, theta=args.theta, variant="predicted")
        pairs = []
        for i, row in enumerate(train):
            hits = kn.search(row["text"], args.dkf_retriever or args.retriever)[: args.dkf_top]
            vecs = kn.embed([row["text"]] + [h["text"] for h in hits])
            sims = (vecs[1:] @ vecs[0]).astype(float).tolist()
            pairs += ann.annotate(
                llm,
                scorer,
                task,
                row["text"],
                [h["text"] for h in hits],
                gold=row["label"],
                similarities=sims,
                scores=[h["score"] for h in hits],
                retriever=args.dkf_retriever or args.retriever,
            )
            logger.info("D_kf %d/%d", i + 1, len(train))
        meta = {
            "dataset": args.dataset,
            "shots_per_class": args.shots,
            "seed": args.seed,
            "theta": args.theta,
            "variant": "predicted",
            "model": llm.model_name,
            "retriever": args.dkf_retriever or args.retriever,
            "top_k": args.dkf_top,
            "index": kn.name,
            "labels": task.labels,
            "seconds": round(time.perf_counter() - t0, 1),
        }
        KfDataset(pairs, meta).save(dkf_path)
    dkf = KfDataset.load(dkf_path)

    direct = DirectFilter(args.dataset, calibration="none")
    direct.warm_up(llm)
    icl = ICLFilter(args.dataset, calibration="none", n_demos=args.n_demos, seed=args.seed).fit(dkf)
    icl.warm_up(llm)
    proxy = ProxyFilter().warm_up(embedder).fit(dkf)

    cache: dict[str, Any] = {"meta": {}, "items": []}
    if cache_path.exists():
        cache = json.loads(cache_path.read_text(encoding="utf-8"))
    done = {it["text"] for it in cache["items"]}
    cache["meta"] = {
        "dataset": args.dataset,
        "split": DATASETS[args.dataset],
        "retriever": args.retriever,
        "n_test": len(test),
        "test_seed": args.test_seed,
        "pool": args.pool,
        "model": llm.model_name,
        "index": kn.retriever_name(args.retriever),
        "dkf": dkf_path.name,
        "icl_demos": icl.demos_,
        "cf_label": [1.0] * len(task.labels),  # distributions are stored calibrated
        "labels": task.labels,
    }
    t_start = time.perf_counter()
    n_new = 0

    def concat(text: str, hits: list[dict[str, Any]], kept: list[int], memo: dict[tuple[int, ...], Any]) -> Any:
        key = tuple(kept)
        if key not in memo:
            memo[key] = dist(text, [hits[i]["text"] for i in kept]) if kept else None
        return memo[key]

    for row in test:
        if args.stop_at and len(cache["items"]) >= args.stop_at:
            break
        if row["text"] in done:
            continue
        text = row["text"]
        hits = kn.search(text, args.retriever)
        pool = hits[: args.pool]
        vecs = kn.embed([text] + [h["text"] for h in pool])
        q_emb, k_emb = vecs[0], vecs[1:]
        sims = (k_emb @ q_emb).astype(float).tolist()
        p0 = dist(text)
        dists = [dist(text, [h["text"]]) for h in pool]
        memo: dict[tuple[int, ...], Any] = {}
        top8 = list(range(min(MAX_KEEP, len(hits))))
        concat(text, hits, top8, memo)
        cands = [Candidate(h["text"], rank=i + 1, similarity=sims[i]) for i, h in enumerate(pool)]
        d_raw = [direct._raw(text, c.text) for c in cands] + [direct._raw(text, CONTENT_FREE)]
        i_raw = [icl._raw(text, c.text) for c in cands] + [icl._raw(text, CONTENT_FREE)]
        p_proxy = proxy.score_many(
            text, [c._replace(embedding=e) for c, e in zip(cands, k_emb, strict=True)], query_embedding=q_emb
        )
        from ragsieve.filtering.filters import contextual_calibration

        p_direct = np.array([contextual_calibration(p, d_raw[-1]) for p in d_raw[:-1]])
        p_icl = np.array([contextual_calibration(p, i_raw[-1]) for p in i_raw[:-1]])
        p_ens, _ = ensemble_combine(p_proxy, p_icl, args.ensemble_theta)
        concat_kept = {}
        for name, ph in (("direct", p_direct), ("icl", p_icl), ("proxy", p_proxy), ("ensemble", p_ens)):
            if name not in args.concat_filters.split(","):
                continue
            kept = [i for i in range(len(pool)) if ph[i] >= 0.5][:MAX_KEEP]
            concat_kept[name] = concat(text, pool, kept, memo)
        cache["items"].append(
            {
                "text": text,
                "gold": row["label"],
                "hits": hits,
                "sims": sims,
                "p0": p0,
                "dists": dists,
                "concat_top8": memo[tuple(top8)],
                "direct_raw": d_raw,
                "icl_raw": i_raw,
                "concat_kept": concat_kept,
                "n_concat_calls": len(memo),
            }
        )
        n_new += 1
        if n_new % args.save_every == 0:
            atomic_write_json(cache_path, cache)
            el = time.perf_counter() - t_start
            logger.info(
                "%s %s: %d/%d items, %.1fs/item",
                args.dataset,
                args.retriever,
                len(cache["items"]),
                len(test),
                el / n_new,
            )
        if args.max_minutes and time.perf_counter() - t_start > args.max_minutes * 60:
            logger.info("time budget reached after %d new items", n_new)
            break
    cache["meta"]["seconds_per_item"] = (time.perf_counter() - t_start) / max(n_new, 1)
    atomic_write_json(cache_path, cache)


# --------------------------------------------------------------------------- report
def acc_ci(correct: np.ndarray) -> str:
    n = len(correct)
    p = float(np.mean(correct)) if n else float("nan")
    half = 1.96 * math.sqrt(max(p * (1 - p), 1e-12) / max(n, 1))
    return f"{100 * p:.1f} ± {100 * half:.1f}"


def prf(pred_harmful: np.ndarray, true_harmful: np.ndarray) -> tuple[float, float, float]:
    tp = float(np.sum(pred_harmful & true_harmful))
    p = tp / max(float(np.sum(pred_harmful)), 1.0)
    r = tp / max(float(np.sum(true_harmful)), 1.0)
    f = 2 * p * r / max(p + r, 1e-12)
    return p, r, f


def _calib(raw: np.ndarray, cf: np.ndarray) -> np.ndarray:
    q = raw / np.maximum(cf, 1e-9)
    return q / q.sum(axis=-1, keepdims=True)


PROXY_ROWS = {
    ("predicted", "train"): "proxy",
    ("gold", "train"): "proxy (gold-label D_kf)",
    ("predicted", "uniform"): "proxy (uniform prior)",
    ("gold", "uniform"): "proxy (gold-label D_kf, uniform prior)",
}
FILTER_ROWS = ("direct", "icl", *PROXY_ROWS.values(), "ensemble", "ensemble (uniform-prior proxy)")


class Evaluated:
    """Everything the tables need for one cache file."""

    def __init__(self, cache: dict[str, Any], dkf: Any, embedder: Any, args: argparse.Namespace) -> None:
        from ragsieve.filtering import ProxyFilter, ensemble_combine, fuse, relabel
        from ragsieve.filtering.filters import contextual_calibration

        meta = cache["meta"]
        self.meta = meta
        labels = meta["labels"]
        cf = np.asarray(meta["cf_label"])
        items = cache["items"]
        self.n = len(items)
        self.texts = [it["text"] for it in items]
        gold = np.array([labels.index(it["gold"]) for it in items])
        # proxies trained on both label variants of D_kf
        pairs_pred = list(dkf)
        pairs_gold = relabel(pairs_pred, "gold", dkf.meta.get("theta", 1.0), labels)
        self.dkf_n = len(pairs_pred)
        self.proxy_decided: list[float] = []
        self.dkf_harmful = {
            "predicted": float(np.mean([p.harmful for p in pairs_pred])),
            "gold": float(np.mean([p.harmful for p in pairs_gold])),
        }
        proxies = {
            (v, prior): ProxyFilter(prior=prior).warm_up(embedder).fit(ps)
            for v, ps in (("predicted", pairs_pred), ("gold", pairs_gold))
            for prior in ("train", "uniform")
        }
        pool = meta["pool"]
        rows: dict[str, list[int]] = {}
        ph_all: dict[str, list[np.ndarray]] = {}
        truth: dict[str, list[np.ndarray]] = {"predicted": [], "gold": []}

        def add(name: str, dist: Any) -> None:
            rows.setdefault(name, []).append(int(np.argmax(dist)))

        q_embs = embedder.embed([it["text"] for it in items])
        for it, q_emb in zip(items, q_embs, strict=True):
            p0 = _calib(np.asarray(it["p0"]), cf)
            dists = _calib(np.asarray(it["dists"]), cf)
            sims = np.asarray(it["sims"][:pool])
            y0 = int(np.argmax(p0))
            g = labels.index(it["gold"])
            # held-out perplexity labels of the pool pieces (label-dist PPL, theta)
            theta = dkf.meta.get("theta", 1.0)
            truth["predicted"].append(np.array([(p0[y0] / max(d[int(np.argmax(d))], 1e-12)) > theta for d in dists]))
            truth["gold"].append(np.array([(p0[g] / max(d[g], 1e-12)) > theta for d in dists]))
            d_raw, i_raw = np.asarray(it["direct_raw"]), np.asarray(it["icl_raw"])
            k_emb = embedder.embed([h["text"] for h in it["hits"][:pool]])
            from ragsieve.filtering import Candidate

            cands = [
                Candidate(h["text"], rank=i + 1, embedding=e)
                for i, (h, e) in enumerate(zip(it["hits"][:pool], k_emb, strict=True))
            ]
            ph = {
                "direct": np.array([contextual_calibration(p, d_raw[-1]) for p in d_raw[:-1]]),
                "direct (uncalibrated)": d_raw[:-1],
                "icl": np.array([contextual_calibration(p, i_raw[-1]) for p in i_raw[:-1]]),
            }
            for (variant, prior), proxy in proxies.items():
                ph[PROXY_ROWS[variant, prior]] = proxy.score_many(it["text"], cands, query_embedding=q_emb)
            ph["ensemble"], used_proxy = ensemble_combine(ph["proxy"], ph["icl"], args.ensemble_theta)
            ph["ensemble (uniform-prior proxy)"], _ = ensemble_combine(
                ph["proxy (uniform prior)"], ph["icl"], args.ensemble_theta
            )
            self.proxy_decided.append(float(np.mean(used_proxy)))
            for k, v in ph.items():
                ph_all.setdefault(k, []).append(np.asarray(v))
            add("no retrieval", p0)
            add("direct RAG (top-8 concatenated)", _calib(np.asarray(it["concat_top8"]), cf))
            for name in ("direct", "icl", "proxy", "ensemble"):
                if name not in it["concat_kept"]:
                    continue
                c = it["concat_kept"][name]
                add(f"{name} filter, kept concatenated", p0 if c is None else _calib(np.asarray(c), cf))
            add(
                "fusion, no filter (P_harmless = 1)",
                fuse(dists, sims, np.ones(len(dists)), args.alpha, p0).proba,
            )
            for name in FILTER_ROWS:
                keep = ph[name] >= 0.5
                r = fuse(dists[keep], sims[keep], ph[name][keep], args.alpha, fallback=p0)
                add(f"{name} filter + fusion", r.proba)
            # oracle: keep only pieces the held-out gold-label PPL marks harmless
            keep = ~truth["gold"][-1]
            add(
                "oracle (gold-PPL harmless) + fusion",
                fuse(dists[keep], sims[keep], np.ones(int(keep.sum())), args.alpha, fallback=p0).proba,
            )
        self.acc = {name: (np.array(pred) == gold) for name, pred in rows.items()}
        self.ph = {k: np.concatenate(v) for k, v in ph_all.items()}
        self.truth = {k: np.concatenate(v) for k, v in truth.items()}


def cmd_report(args: argparse.Namespace) -> None:
    global DRY
    DRY = args.dry
    import torch

    torch.set_num_threads(1)
    from ragsieve.filtering import KfDataset

    kn = Knowledge()
    embedder = kn.embedder
    evals: dict[tuple[str, str], Evaluated] = {}
    out_dir = Path(args.out_dir) if args.out_dir else OUT
    for path in sorted(out_dir.glob("*-*.json")):
        ds, retr = path.stem.rsplit("-", 1)
        cache = json.loads(path.read_text(encoding="utf-8"))
        if not cache["items"]:
            continue
        dkf = KfDataset.load(out_dir / cache["meta"]["dkf"])
        evals[(ds, retr)] = Evaluated(cache, dkf, embedder, args)
    if not evals:
        raise SystemExit("no caches under runs/filtering; run the cache stage first")

    common = (
        "Model: bundled SmolLM2-135M-Instruct (Q4_1 GGUF, llama.cpp, n_threads=1); labels scored by the "
        "`LabelClassifier` presets (next-token log-probs, contextual calibration). Knowledge: "
        "../shared/data/wiki_sentences; "
        + "; ".join(
            f"{ds} `{retr}` = {e.meta['index']}" for (ds, retr), e in sorted(evals.items(), key=lambda kv: kv[0])
        )
        + f"; top-{TOP_K} retrieved, the filters and "
        f"fusion act on the top-`pool` pieces, at most {MAX_KEEP} kept. D_kf: LM-BFF-style "
        f"{args.shots} training queries per class (seed {args.seed}), top pieces from the column's "
        f"retriever, perplexity labels with θ = {args.theta} (label-dist PPL = 1/p(label)). Fusion "
        f"α = {args.alpha}; ensemble confidence θ = {args.ensemble_theta}; keep when P_harmless ≥ 0.5. "
        "Test items: a fixed-seed random sample (seed 0) of the split; accuracy ± 95% normal-approximation "
        "CI. All rows of a column are computed on the same items from one cache of LLM outputs, written by "
        "`python benchmarks/filtering_experiments.py cache --dataset D --retriever R --n-test 500` "
        "(resumable; `--stop-at N` bounds a run); this command then reads the caches."
        + (f" {args.note}" if args.note else "")
    )
    # Table 3 (dense)
    names = list(next(iter(evals.values())).acc)
    dense = list(evals.items())
    headers = ["method"] + [f"{ds} {r} ({e.meta['split']}, n={e.n}, pool={e.meta['pool']})" for (ds, r), e in dense]
    table = [[name] + [acc_ci(e.acc[name]) for _, e in dense] for name in names]
    dkf_rows = [
        [
            f"{ds} ({e.meta['dkf']})",
            e.dkf_n,
            f"{100 * e.dkf_harmful['predicted']:.1f}%",
            f"{100 * e.dkf_harmful['gold']:.1f}%",
        ]
        for (ds, _), e in dense
    ]
    body = (
        common
        + "\n\nAccuracy (%):\n\n"
        + markdown_table(headers, table)
        + "\n\nD_kf size and share of Harmful pairs per label variant:\n\n"
        + markdown_table(["dataset", "pairs", "Harmful (predicted-label PPL)", "Harmful (gold-label PPL)"], dkf_rows)
    )
    write_or_print_section(
        "results/knowledge-filtering.md", "filtering-table3", "Knowledge filtering: accuracy (Table 3 analogue)", body
    )

    # Table 4: P/R/F1 on Harmful vs held-out perplexity labels (test pool pieces)
    t4 = []
    for (ds, r), e in dense:
        for variant in ("predicted", "gold"):
            for name in ("direct (uncalibrated)", *FILTER_ROWS):
                p, rec, f = prf(e.ph[name] < 0.5, e.truth[variant])
                t4.append(
                    [
                        f"{ds} {r}",
                        variant,
                        name,
                        f"{100 * p:.1f}",
                        f"{100 * rec:.1f}",
                        f"{100 * f:.1f}",
                        f"{100 * np.mean(e.ph[name] < 0.5):.1f}%",
                        f"{100 * np.mean(e.truth[variant]):.1f}%",
                    ]
                )
    body = (
        common + "\n\nHeld-out labels: perplexity labels of the test items' pool pieces (same θ), computed from "
        "the cached label distributions; each row compares a filter's Harmful decisions (P_harmless < 0.5) "
        "with them. `proxy` is trained on predicted-label D_kf, `proxy (gold-label D_kf)` on the gold-label "
        "variant; `uniform prior` rows shift the same proxy's calibrated probabilities to equal "
        'Harmful/Harmless priors (`ProxyFilter(prior="uniform")`), and `ensemble (uniform-prior proxy)` '
        "uses that proxy in the ensemble rule; direct/ICL filters are training-free (ICL demos drawn from "
        "predicted-label D_kf). "
        + "; ".join(
            f"{ds} {r}: the ensemble took the proxy's decision for "
            f"{100 * float(np.mean(e.proxy_decided)):.0f}% of the pieces"
            for (ds, r), e in dense
        )
        + ".\n\n"
        + markdown_table(
            [
                "dataset",
                "held-out label variant",
                "filter",
                "P",
                "R",
                "F1",
                "predicted Harmful",
                "true Harmful",
            ],
            t4,
        )
    )
    write_or_print_section(
        "results/knowledge-filtering.md",
        "filtering-table4",
        "Knowledge filtering: Harmful-label quality (Table 4 analogue)",
        body,
    )

    # Dense vs BM25
    pairs = sorted({ds for ds, r in evals if r == "bm25"})
    if pairs:
        rows = []
        for ds in pairs:
            for retr in ("dense", "bm25"):
                e = evals.get((ds, retr))
                if e is None:
                    continue
                rows.append(
                    [
                        ds,
                        retr,
                        e.n,
                        acc_ci(e.acc["no retrieval"]),
                        acc_ci(e.acc["direct RAG (top-8 concatenated)"]),
                        acc_ci(e.acc["ensemble filter + fusion"]),
                    ]
                )
            dense_e, bm25_e = evals.get((ds, "dense")), evals.get((ds, "bm25"))
            if dense_e is not None and bm25_e is not None and dense_e.n != bm25_e.n:
                # the same fixed-seed sample: compare the retrievers on the items both finished
                common_texts = set(dense_e.texts) & set(bm25_e.texts)
                for retr, e in (("dense", dense_e), ("bm25", bm25_e)):
                    mask = np.array([t in common_texts for t in e.texts])
                    rows.append(
                        [
                            ds,
                            f"{retr} (items both finished)",
                            int(mask.sum()),
                            acc_ci(e.acc["no retrieval"][mask]),
                            acc_ci(e.acc["direct RAG (top-8 concatenated)"][mask]),
                            acc_ci(e.acc["ensemble filter + fusion"][mask]),
                        ]
                    )
        body = (
            common
            + "\n\n"
            + markdown_table(
                [
                    "dataset",
                    "retriever",
                    "n",
                    "no retrieval",
                    "direct RAG (top-8 concat)",
                    "ensemble + fusion",
                ],
                rows,
            )
        )
        write_or_print_section(
            "results/knowledge-filtering.md",
            "filtering-retrievers",
            "Knowledge filtering: dense vs BM25 (Figure 6 analogue)",
            body,
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cache")
    c.add_argument("--dataset", choices=sorted(DATASETS), required=True)
    c.add_argument("--retriever", choices=["dense", "bm25"], default="dense")
    c.add_argument("--n-test", type=int, default=500)
    c.add_argument("--pool", type=int, default=8)
    c.add_argument("--max-minutes", type=float, default=0.0)
    c.add_argument("--save-every", type=int, default=1)
    c.add_argument("--stop-at", type=int, default=0, help="stop once the cache holds this many items (0: n-test)")
    c.add_argument("--dkf-retriever", choices=["dense", "bm25"], default=None, help="default: --retriever")
    c.add_argument("--dkf-top", type=int, default=10, help="pieces per training query annotated for D_kf")
    c.add_argument("--concat-filters", default="ensemble", help="filters whose kept set is also concatenated")
    rp = sub.add_parser("report")
    rp.add_argument("--out-dir", default=None, help="read caches from here (default runs/filtering)")
    rp.add_argument("--note", default="", help="sentence appended to every section (e.g. on sample sizes)")
    rp.add_argument("--dry", action="store_true", help="print the sections instead of writing their results page")
    for p in (c, rp):
        p.add_argument("--shots", type=int, default=16)
        p.add_argument("--seed", type=int, default=42)
        p.add_argument("--test-seed", type=int, default=0)
        p.add_argument("--theta", type=float, default=1.0)
        p.add_argument("--n-demos", type=int, default=4)
        p.add_argument("--alpha", type=float, default=0.5)
        p.add_argument("--ensemble-theta", type=float, default=0.8)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    {"cache": cmd_cache, "report": cmd_report}[args.cmd](args)


if __name__ == "__main__":
    main()
