"""End-to-end `ask` latency on the bundled demo corpus with the bundled models, by stage.

python benchmarks/ask_latency.py --questions 20 --threads 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# Lets `python benchmarks/<script>.py` import its siblings as the `benchmarks` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import markdown_table, write_section
from ragsieve.config import PipelineConfig, apply_overrides
from ragsieve.demo import demo_corpus_dir, demo_questions
from ragsieve.index import Index
from ragsieve.sieve.pipeline import Pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--index", type=Path, default=None)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    index_dir = args.index or Path(tempfile.mkdtemp()) / "demo-index"
    cfg = apply_overrides(PipelineConfig(index_dir=str(index_dir), pipeline="plain"), {"llm.n_threads": args.threads})
    t0 = time.perf_counter()
    index = Index.build(demo_corpus_dir(), index_dir, config=cfg)
    build_s = time.perf_counter() - t0
    pipe = Pipeline(cfg, index=index)
    t0 = time.perf_counter()
    pipe.warm_up()
    warm_s = time.perf_counter() - t0
    questions = [q["question"] for q in demo_questions()[: args.questions]]
    totals, stages = [], {}
    tokens = []
    for q in questions:
        t = time.perf_counter()
        answer = pipe.ask(q)
        totals.append((time.perf_counter() - t) * 1000)
        for stage, ms in answer.trace.timings_ms.items():
            stages.setdefault(stage, []).append(ms)
        tokens.append((answer.trace.prompt_tokens, answer.trace.completion_tokens))
    rows = [["total", f"{np.percentile(totals, 50):.0f}", f"{np.percentile(totals, 95):.0f}"]]
    rows += [[s, f"{np.percentile(v, 50):.1f}", f"{np.percentile(v, 95):.1f}"] for s, v in stages.items()]
    pt = np.median([p for p, _ in tokens])
    ct = np.median([c for _, c in tokens])
    body = (
        f"Demo corpus ({len(index)} chunks, 3 domains), first {len(questions)} questions of "
        "`src/ragsieve/demo/questions.jsonl`, direct RAG (hybrid retrieval, top-5 evidence, greedy decoding, at most "
        f"128 new tokens). LLM: bundled SmolLM2-135M-Instruct Q4_1 via llama.cpp, {args.threads} threads. Embedder: "
        f"bundled all-MiniLM-L6-v2. Index build {build_s:.1f} s, model warm-up {warm_s:.1f} s (not in the table). "
        f"Median prompt / completion tokens: {pt:.0f} / {ct:.0f}. 1-min load average at the end: "
        f"{os.getloadavg()[0]:.1f}.\n\n" + markdown_table(["stage", "p50 ms", "p95 ms"], rows)
    )
    write_section("benchmarks.md", "ask-latency", "End-to-end ask latency (demo corpus, bundled models)", body)
    print(body)


if __name__ == "__main__":
    main()
