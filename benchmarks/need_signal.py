"""Which signal should decide whether to retrieve: the model's confidence or the retrieval scores?

The sieve's ``need`` stage asks the task router first; for a request the router would answer
closed-book it needs a second signal. Two candidates, measured on the same questions:

* **model confidence**: exp(mean token log-prob) of the model's own closed-book answer
  (one scoring pass; high = the model knows, no retrieval needed);
* **retrieval relevance**: the retrieval evaluator's best score over the top-10 hybrid hits of a
  probe retrieval (high = the index has a relevant passage, retrieve).

Both rank the questions; retrieving for the top share r of a ranking and answering the rest
closed-book gives an accuracy at each retrieval rate (plain RAG's cached answer where it
retrieves, the cached no-retrieval answer elsewhere). The area under that accuracy curve over
r in [0, 1] compares the signals (paired bootstrap over questions), next to a random order and
the oracle (retrieve exactly where plain RAG is right and closed book is wrong).

Answers come from the cache of ``benchmarks/eval_sieve.py`` (run that first, same ``--set``);
this script only scores them.

    python benchmarks/need_signal.py --set popqa --n 200
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import markdown_table, write_section  # noqa: E402


def accuracy_curve(order: np.ndarray, rag: np.ndarray, closed: np.ndarray) -> np.ndarray:
    """Accuracy when the first ``m`` questions of ``order`` retrieve, for m = 0..n."""
    gain = (rag - closed)[order]
    return (closed.sum() + np.concatenate([[0.0], np.cumsum(gain)])) / len(rag)


def area(curve: np.ndarray) -> float:
    return float(np.trapezoid(curve, dx=1.0 / (len(curve) - 1)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=("demo", "hotpotqa", "popqa"), required=True)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--judge", default="llm-logprob", help="the faithfulness judge eval_sieve.py ran with")
    args = ap.parse_args()

    import eval_sieve
    from ragsieve.answers import contains_answer
    from ragsieve.config import PipelineConfig
    from ragsieve.eval.data import load_qa
    from ragsieve.eval.harness import EvalCache, default_specs
    from ragsieve.sieve.pipeline import Pipeline
    from ragsieve.sieve.state import PipelineState
    from ragsieve.types import Trace

    out = eval_sieve.RUNS / args.set
    cfg = PipelineConfig.model_validate({"llm": {"n_threads": args.threads}})
    prepare = {"demo": lambda: eval_sieve.prepare_demo(out, cfg),
               "hotpotqa": lambda: eval_sieve.prepare_hotpotqa(out, cfg, args.n, args.seed),
               "popqa": lambda: eval_sieve.prepare_popqa(out, cfg, args.n, args.seed)}[args.set]
    data, index_dir, desc = prepare()
    cfg = cfg.model_copy(update={"index_dir": str(index_dir)})
    specs = {s.name: s for s in default_specs(cfg)}
    cache = EvalCache(out / "smollm2.jsonl").load()
    items = [i for i in load_qa(data) if i.answerable]
    pipe = Pipeline(cfg.model_copy(update={"pipeline": "sieve"}))
    pipe.warm_up()
    rows: list[dict[str, Any]] = []
    for item in items:
        recs = {name: cache.get(specs[name].key(item.id, item.question, args.judge))
                for name in ("plain", "no-retrieval")}
        if any(r is None or r.get("error") for r in recs.values()):
            continue
        closed_text = str(recs["no-retrieval"]["answer"])  # type: ignore[index]
        confidence = pipe.answer_likelihood(item.question, closed_text)
        state = PipelineState(item.question)
        hits = pipe.retrieve(item.question, Trace(item.question), k=cfg.sieve.candidates)
        relevance = max(pipe.judge_scores(item.question, hits, state), default=0.0)
        rows.append({
            "rag": float(contains_answer(str(recs["plain"]["answer"]), item.answers)),  # type: ignore[index]
            "closed": float(contains_answer(closed_text, item.answers)),
            "confidence": confidence if confidence is not None else 0.0,
            "relevance": relevance,
        })
    if not rows:
        raise SystemExit(f"no question has cached plain and no-retrieval answers in {cache.path}; "
                         "run eval_sieve.py first")
    rag = np.array([r["rag"] for r in rows])
    closed = np.array([r["closed"] for r in rows])
    conf = np.array([r["confidence"] for r in rows])
    rel = np.array([r["relevance"] for r in rows])
    n = len(rows)
    rng = np.random.default_rng(args.seed)

    def orders(idx: np.ndarray) -> dict[str, np.ndarray]:
        g = rag[idx] - closed[idx]
        return {
            # low confidence retrieves first; high relevance retrieves first; stable ties
            "model confidence": np.argsort(conf[idx], kind="stable"),
            "retrieval relevance": np.argsort(-rel[idx], kind="stable"),
            "oracle": np.argsort(-g, kind="stable"),
        }

    full = {k: accuracy_curve(o, rag, closed) for k, o in orders(np.arange(n)).items()}
    boot: dict[str, list[float]] = {k: [] for k in (*full, "random", "relevance - confidence")}
    for _ in range(1000):
        idx = rng.integers(0, n, n)
        curves = {k: accuracy_curve(o, rag[idx], closed[idx]) for k, o in orders(idx).items()}
        for k, c in curves.items():
            boot[k].append(area(c))
        boot["random"].append(float((closed[idx].mean() + rag[idx].mean()) / 2))
        boot["relevance - confidence"].append(area(curves["retrieval relevance"]) - area(curves["model confidence"]))
    table = []
    rates = (0.25, 0.5, 0.75)
    for name, curve in full.items():
        at = [f"{curve[round(r * n)]:.3f}" for r in rates]
        lo, hi = np.percentile(boot[name], [2.5, 97.5])
        table.append([name, *at, f"{area(curve):.3f} [{lo:.3f}, {hi:.3f}]"])
    rand_lo, rand_hi = np.percentile(boot["random"], [2.5, 97.5])
    expected = [f"{closed.mean() + r * (rag.mean() - closed.mean()):.3f}" for r in rates]
    table.append(["random order (expected)", *expected,
                  f"{(closed.mean() + rag.mean()) / 2:.3f} [{rand_lo:.3f}, {rand_hi:.3f}]"])
    d_lo, d_hi = np.percentile(boot["relevance - confidence"], [2.5, 97.5])
    d = area(full["retrieval relevance"]) - area(full["model confidence"])
    body = (
        f"Data: {desc}; answerable questions with cached plain-RAG and no-retrieval answers from "
        f"`benchmarks/eval_sieve.py --set {args.set}` (n = {n}). Model: bundled SmolLM2-135M-Instruct (llama.cpp, "
        f"{args.threads} thread); retrieval evaluator: the bundled CRAG-style evaluator over the top "
        f"{cfg.sieve.candidates} hybrid hits. Closed-book accuracy {closed.mean():.3f}, plain RAG {rag.mean():.3f}. "
        "Accuracy when the signal's top share of questions retrieves (plain RAG's answer) and the rest is "
        "answered closed-book; area = mean accuracy over retrieval rates 0-100% (higher is better), 95% "
        "bootstrap intervals over questions (1000 resamples).\n\n"
        + markdown_table(["signal", "acc. at 25% retrieved", "at 50%", "at 75%", "area [95% CI]"], table)
        + f"\n\nRetrieval relevance minus model confidence, area: {d:+.3f} [{d_lo:+.3f}, {d_hi:+.3f}] (paired)."
    )
    write_section("results/retrieval-need.md", f"need-signal-{args.set}",
                  f"Retrieval need: model confidence vs retrieval relevance ({args.set})", body)
    print(body)


if __name__ == "__main__":
    main()
