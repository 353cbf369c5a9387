"""The decide stage's model on questions it was not trained on: the demo set.

The sieve runs every demo question (``src/ragsieve/demo/questions.jsonl``, answerable and
unanswerable rows) with ``decide.mode = "observe"``: every check leaves its signals and no check
withdraws the draft. Each draft is judged by the gold answer (a gold alias contained in the
draft; an unanswerable question's draft is always wrong), never by a check. Then, on the same
drafts:

* the per-check table (``ragsieve.eval.checks``): how often each check fired on answerable and
  unanswerable questions and its precision as a veto (share of its withdrawals the gold answer
  shows right to make); a question a check stopped before any draft counts as that check firing;
* three confidences ranking the drafts: the bundled decision model's, and plain RAG's own two
  (the top retrieval score, the answer's mean token probability), each by AURC with a 95%
  bootstrap interval and the paired AURC difference;
* the decision at the model's default threshold: answered, accuracy on answerable questions
  (a right draft answered / answerable questions) against the drafts kept unconditionally, and
  the share of right drafts withdrawn.

The decision model was trained on the calibration part of a SQuAD 2.0 sample
(``benchmarks/train_decision.py``); nothing here was tuned on the demo set.

    python benchmarks/decision_demo.py --max-minutes 20
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from _report import ROOT, markdown_table, write_section  # noqa: E402

RUNS = ROOT / "runs" / "decision"


def collect(args: argparse.Namespace) -> tuple[list[Any], list[dict[str, Any]]]:
    from eval_sieve import model_settings, prepare_demo
    from ragsieve.answers import contains_answer
    from ragsieve.config import PipelineConfig
    from ragsieve.eval.checks import fired_checks
    from ragsieve.eval.data import load_qa
    from ragsieve.io import read_jsonl
    from ragsieve.sieve.pipeline import Pipeline

    out = RUNS / "demo"
    out.mkdir(parents=True, exist_ok=True)
    cfg = PipelineConfig.model_validate({"llm": {"n_threads": args.threads, **model_settings(args.model)}})
    data, index_dir, _ = prepare_demo(out, cfg)
    items = load_qa(data)
    cache = out / f"{args.model}-rows.jsonl"
    done: dict[str, dict[str, Any]] = {row["id"]: row for row in read_jsonl(cache)} if cache.exists() else {}
    run_cfg = cfg.model_copy(update={"index_dir": str(index_dir)})
    run_cfg = run_cfg.model_copy(update={"decide": run_cfg.decide.model_copy(update={"mode": "observe"})})
    pipe = Pipeline(run_cfg)
    deadline = time.monotonic() + args.max_minutes * 60
    for item in items:
        if item.id in done:
            continue
        if time.monotonic() > deadline:
            print(f"time box reached after {len(done)} of {len(items)} questions", file=sys.stderr)
            break
        answer = pipe.ask(item.question)
        fired, draft = fired_checks(answer.trace)
        decided = answer.trace.stage("decide")
        row = {
            "id": item.id,
            "answerable": item.answerable,
            "fired": fired,
            "draft": draft,
            "signals": decided[-1]["signals"] if decided else None,
            "right": bool(draft is not None and item.answerable and contains_answer(draft, item.answers)),
        }
        done[item.id] = row
        with open(cache, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
    kept = [i for i in items if i.id in done]
    return kept, [done[i.id] for i in kept]


def report(items: list[Any], rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    import numpy as np

    from ragsieve.decision import DecisionModel
    from ragsieve.eval.checks import check_table
    from ragsieve.eval.selective import aurc, bootstrap_interval, paired_bootstrap_interval

    model = DecisionModel.default()
    n, n_ans = len(items), sum(i.answerable for i in items)
    table = check_table(items, rows)
    check_rows = [
        [r["check"], f"{r['answerable']} ({100 * (r['answerable_share'] or 0):.0f}%)",
         f"{r['unanswerable']} ({100 * (r['unanswerable_share'] or 0):.0f}%)",
         f"{r['right']}/{r['fired']} = {r['precision']:.2f}"]
        for r in table
    ]  # fmt: skip
    drafted = [(i, r) for i, r in zip(items, rows, strict=True) if r.get("signals") is not None]
    right = np.array([r["right"] for _, r in drafted], dtype=bool)
    # a question stopped before any draft is answered by no ranking: it counts as abstained (score -1)
    scores = {
        "decision model": [model.confidence(r["signals"]) for _, r in drafted],
        "plain RAG: top retrieval score": [r["signals"].get("retrieval.top_score", 0.0) for _, r in drafted],
        "plain RAG: answer token probability": [r["signals"].get("answer.token_prob", 0.0) for _, r in drafted],
    }
    m = len(drafted)
    out_rows = []
    base = scores["decision model"]
    for name, s in scores.items():
        a = aurc(list(right), list(s))

        def stat(idx: np.ndarray, s: list[float] = s) -> float:
            return aurc(list(right[idx]), [s[j] for j in idx])

        lo, hi = bootstrap_interval(m, stat, n_boot=args.boot)
        if name == "decision model":
            diff = "-"
        else:
            dlo, dhi = paired_bootstrap_interval(
                m, lambda idx: aurc(list(right[idx]), [base[j] for j in idx]), stat, n_boot=args.boot
            )
            diff = f"[{dlo:+.3f}, {dhi:+.3f}]"
        out_rows.append([name, f"{a:.3f} [{lo:.3f}, {hi:.3f}]", diff])
    threshold = model.threshold_
    answered = [c >= threshold for c in base]
    right_drafts = int(right.sum())
    withdrawn_right = sum(1 for ok, ans in zip(right, answered, strict=True) if ok and not ans)
    acc_decided = sum(1 for ok, ans in zip(right, answered, strict=True) if ok and ans) / n_ans
    acc_drafts = right_drafts / n_ans
    about = model.about_
    lines = [
        f"Data: the demo questions (`src/ragsieve/demo/questions.jsonl`), {n} questions ({n_ans} answerable, "
        f"{n - n_ans} unanswerable), {m} with a draft (the others were stopped before generation); model: "
        f"{args.model}. The sieve ran with `decide.mode = \"observe\"` (no check withdraws a draft); each draft is "
        "judged by the gold answer (a gold alias contained in it; unanswerable: always wrong). Decision model: the "
        f"bundled one, trained on {about.get('drafts')} drafts ({about.get('right')} right) of "
        f"{about.get('data', '?')}, "
        f"{about.get('split', '?')}, LLM {about.get('llm', '?')}; nothing was tuned on the demo set.",
        "",
        "**Each check** (fired = stopped the run, or asked to withdraw the draft; precision as a veto = share of "
        "its firings where withdrawing was right: unanswerable, or a draft without the gold answer; a stop before "
        "any draft on an answerable question counts as wrong):",
        "",
        markdown_table(["check", "fired on answerable", "fired on unanswerable", "veto precision"], check_rows),
        "",
        f"**Ranking the {m} drafts** (AURC, lower is better, 95% bootstrap interval; paired difference decision "
        "model minus the baseline, below 0 favours the decision model):",
        "",
        markdown_table(["confidence", "AURC", "difference vs decision model"], out_rows),
        "",
        f"**At the model's default threshold** ({threshold:.3f}, the highest that withdraws at most 5% of the right "
        f"training drafts): answered {sum(answered)} of {m} drafts; accuracy on answerable questions "
        f"{100 * acc_decided:.1f}% vs {100 * acc_drafts:.1f}% keeping every draft; right drafts withdrawn "
        f"{withdrawn_right} of {right_drafts}. n is small: these figures are indicative, not a verdict on the goals.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--model", choices=("smollm2", "gemma"), default="smollm2")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-minutes", type=float, default=30.0)
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    sys.path.insert(0, str(Path(__file__).parent))
    items, rows = collect(args)
    if args.no_report:
        return
    body = report(items, rows, args)
    suffix = "" if args.model == "smollm2" else f"-{args.model}"
    title = f"The decision model on the demo set ({args.model})"
    write_section("results/calibration.md", f"decision-demo{suffix}", title, body)
    print(body)


if __name__ == "__main__":
    main()
