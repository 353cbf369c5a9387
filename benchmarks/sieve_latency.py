"""Each stage's share of `ask` latency: plain RAG and the sieve side by side in one run.

Both presets share one index, embedder and LLM; questions alternate plain/sieve so machine load
hits both alike. Each question is asked ``--repeats`` times per preset after one warm-up ask per
preset; the table gives min/median over all asks, and the sieve/plain ratio of per-question
medians with a bootstrap 95% interval over questions.

python benchmarks/sieve_latency.py --answerable 4 --unanswerable 2 --repeats 2 --threads 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import markdown_table, write_section  # noqa: E402
from benchmarks._stats import mean_bootstrap_interval  # noqa: E402


def report(
    args: argparse.Namespace,
    pipes: dict[str, Any],
    questions: list[str],
    totals: dict[str, dict[int, list[float]]],
    stages: dict[str, dict[str, list[float]]],
    abstained: int,
    n_chunks: int,
    rounds: int,
) -> None:
    """Write the section from the asks so far (after every repeat, so a cut-short run still reports)."""
    from ragsieve.config import SIEVE_STAGES

    rows = []
    for name in pipes:
        all_ms = np.concatenate([np.asarray(v) for v in totals[name].values()])
        med_total = float(np.median(all_ms))
        rows.append([name, "total", f"{all_ms.min():.0f}", f"{med_total:.0f}", "100%"])
        for stage in SIEVE_STAGES:
            if not any(s.name == stage for s in pipes[name].stages):
                continue
            v = np.asarray(stages[name][stage])
            rows.append(
                [name, stage, f"{v.min():.0f}", f"{np.median(v):.0f}", f"{100 * v.mean() / all_ms.mean():.0f}%"]
            )
    per_q = np.asarray([np.median(totals["sieve"][i]) / np.median(totals["plain"][i]) for i in range(len(questions))])
    ratio, lo, hi = mean_bootstrap_interval(per_q)
    body = (
        f"Demo corpus ({n_chunks} chunks), {args.answerable} answerable + {args.unanswerable} unanswerable demo "
        f"questions, {rounds} of {args.repeats} repeats per preset done, after one warm-up ask each. "
        "Bundled SmolLM2-135M-Instruct "
        f"(llama.cpp, {args.threads} threads, greedy, at most 128 new tokens) and all-MiniLM-L6-v2; sieve defaults "
        f"(evaluator judge, rule-feature ScopeCoE, lexical-embedding claim judge). The sieve abstained on "
        f"{abstained} of {len(questions)} questions (an abstention by the judge skips generation). Share = a "
        "stage's mean time / the mean total. 1-min load average at the end: "
        f"{os.getloadavg()[0]:.1f} (this machine is shared; compare the presets, not absolute times).\n\n"
        + markdown_table(["preset", "stage", "min ms", "median ms", "share"], rows)
        + f"\n\nSieve / plain seconds per question (mean over questions of the ratio of medians): **{ratio:.2f}x** "
        f"(bootstrap 95% interval {lo:.2f}-{hi:.2f}, n = {len(questions)} questions); goal: <= 3x "
        f"({'met' if hi <= 3.0 else 'not met' if lo > 3.0 else 'not shown either way'})."
    )
    write_section("benchmarks.md", "sieve-latency", "Sieve vs plain RAG: each stage's share of ask latency", body)
    print(body, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--answerable", type=int, default=4, help="answerable demo questions (spread over the 40)")
    parser.add_argument("--unanswerable", type=int, default=2, help="unanswerable demo questions")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--index", type=Path, default=Path("runs/demo-index"))
    args = parser.parse_args()

    from ragsieve.config import SIEVE_STAGES, PipelineConfig, apply_overrides
    from ragsieve.demo import demo_corpus_dir, demo_questions
    from ragsieve.index import Index
    from ragsieve.llm import load_llm
    from ragsieve.sieve.pipeline import Pipeline

    base = apply_overrides(PipelineConfig(index_dir=str(args.index)), {"llm.n_threads": args.threads})
    index = Index.build(demo_corpus_dir(), args.index, config=base)
    llm = load_llm(base.llm)
    llm.warm_up()
    pipes = {p: Pipeline(base.model_copy(update={"pipeline": p}), index=index, llm=llm) for p in ("plain", "sieve")}
    answerable = demo_questions()
    step = max(len(answerable) // max(args.answerable, 1), 1)
    unanswerable = [q for q in demo_questions(include_unanswerable=True) if q.get("answerable") is False]
    questions = [q["question"] for q in answerable[::step][: args.answerable]]
    questions += [q["question"] for q in unanswerable[: args.unanswerable]]
    for pipe in pipes.values():
        pipe.ask(questions[0])  # loads the router, the judges and the task classifier

    totals: dict[str, dict[int, list[float]]] = {p: {i: [] for i in range(len(questions))} for p in pipes}
    stages: dict[str, dict[str, list[float]]] = {p: {} for p in pipes}
    abstained = 0
    start = time.perf_counter()
    for r in range(args.repeats):
        for i, q in enumerate(questions):
            order = ("plain", "sieve") if (i + r) % 2 == 0 else ("sieve", "plain")
            for name in order:
                t0 = time.perf_counter()
                answer = pipes[name].ask(q)
                totals[name][i].append((time.perf_counter() - t0) * 1000.0)
                for stage in SIEVE_STAGES:
                    stages[name].setdefault(stage, []).append(answer.trace.timings_ms.get(stage, 0.0))
                abstained += int(name == "sieve" and r == 0 and answer.abstained)
            print(f"repeat {r + 1} question {i + 1}/{len(questions)} {time.perf_counter() - start:.0f}s", flush=True)

        report(args, pipes, questions, totals, stages, abstained, len(index), rounds=r + 1)


if __name__ == "__main__":
    main()
