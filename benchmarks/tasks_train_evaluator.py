"""Train the lightweight retrieval evaluator on PopQA long-tail (CRAG knowledge) and ship it.

Labels are automatic: a passage is relevant when a gold answer string occurs in it. Questions of
the fixed-seed evaluation sample used by ``tasks_popqa.py`` are excluded from training.
Writes ``src/ragsieve/tasks/data/retrieval_evaluator.json`` and a section of
docs/results/relevance-judge.md.

    python benchmarks/tasks_train_evaluator.py --n-train 300
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _report import ROOT, SHARED_DATA, markdown_table, write_section  # noqa: E402


def pick_thresholds(
    p: np.ndarray, y: np.ndarray, precision: float = 0.75, miss: float = 0.1
) -> tuple[float, float]:
    """upper: lowest score whose passages at/above it reach ``precision``; lower: highest score
    below which at most ``miss`` of the relevant passages fall."""
    grid = np.linspace(0.05, 0.95, 91)
    upper = 0.95
    for t in grid:
        sel = p >= t
        if sel.sum() >= 10 and y[sel].mean() >= precision:
            upper = float(t)
            break
    pos = np.sort(p[y == 1])
    lower = float(pos[int(miss * len(pos))]) if len(pos) else 0.05
    return upper, min(lower, upper - 0.05)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-train", type=int, default=300)
    ap.add_argument(
        "--n-eval", type=int, default=200, help="size of the held-out sample excluded from training"
    )
    ap.add_argument("--n-dev", type=int, default=100, help="further questions to report dev metrics on")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", default="/tmp/ragsieve-emb-cache")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from sklearn.metrics import roc_auc_score

    from ragsieve.config import EmbedderConfig
    from ragsieve.embed import load_embedder
    from ragsieve.tasks.evaluator import FEATURE_NAMES, TrainedRetrievalEvaluator
    from ragsieve.tasks.popqa import evaluator_training_data, load_popqa_items, split_items

    items = load_popqa_items(SHARED_DATA / "popqa" / "popqa_longtail_crag.jsonl")
    held, rest = split_items(items, args.n_eval, seed=args.seed)
    train_items = rest[: args.n_train]
    dev_items = rest[args.n_train : args.n_train + args.n_dev]
    emb = load_embedder(EmbedderConfig(cache_dir=args.cache_dir))
    emb.warm_up()
    t0 = time.time()
    X, y = evaluator_training_data(train_items, emb)  # noqa: N806
    Xd, yd = evaluator_training_data(dev_items, emb)  # noqa: N806
    feat_s = time.time() - t0
    y_arr, yd_arr = np.asarray(y), np.asarray(yd)
    ev = TrainedRetrievalEvaluator().fit(X, y_arr)
    p_train = ev.predict_proba(X)[:, 1]
    ev.upper, ev.lower = pick_thresholds(p_train, y_arr)
    p_dev = ev.predict_proba(Xd)[:, 1]
    out = ROOT / "src" / "ragsieve" / "tasks" / "data" / "retrieval_evaluator.json"
    ev.save(out)
    auc = roc_auc_score(yd_arr, p_dev)
    auc_cos = roc_auc_score(yd_arr, Xd[:, 0])
    acc = float(((p_dev >= 0.5) == (yd_arr == 1)).mean())
    prec_up = float(yd_arr[p_dev >= ev.upper].mean()) if (p_dev >= ev.upper).any() else float("nan")
    miss_low = float((p_dev[yd_arr == 1] < ev.lower).mean())
    rows = [[name, round(float(c), 3)] for name, c in zip(FEATURE_NAMES, ev.coef_, strict=True)]
    body = (
        "Data: `../shared/data/popqa/popqa_longtail_crag.jsonl`; CRAG's wiki and web knowledge cut into "
        f"passages of 3 sentences; label = a gold answer string occurs in the passage. "
        f"The {args.n_eval}-question evaluation sample of `tasks_popqa.py` (seed {args.seed}) is excluded.\n"
        f"Train: {len(train_items)} questions, "
        f"{len(y)} passages ({y_arr.mean():.1%} relevant). "
        f"Dev: {len(dev_items)} other questions, {len(yd)} passages.\n"
        f"Embedder: bundled all-MiniLM-L6-v2. Feature extraction took {feat_s:.0f} s.\n\n"
        f"Dev ROC-AUC {auc:.3f} (embedding cosine alone: {auc_cos:.3f}); accuracy at 0.5: {acc:.3f}. "
        f"Thresholds chosen on train: upper {ev.upper:.2f} "
        f"(dev precision of passages above it: {prec_up:.3f}), "
        f"lower {ev.lower:.2f} (dev share of relevant passages below it: {miss_low:.3f}).\n\n"
        + markdown_table(["feature", "coefficient"], rows + [["intercept", round(ev.intercept_, 3)]])
        + f"\n\nSaved to `{out.relative_to(ROOT)}`."
    )
    write_section(
        "results/relevance-judge.md",
        "tasks-evaluator-train",
        "Task-adaptive RAG: trained retrieval evaluator (PopQA)",
        body,
    )
    print(body)


if __name__ == "__main__":
    main()
