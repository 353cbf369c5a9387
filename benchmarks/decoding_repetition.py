"""Repetition and accuracy of the bundled model's answers under 2-3 repetition penalties.

For each answerable demo question the same plain-RAG prompt (hybrid retrieval, top-5 evidence)
is answered greedily once per ``llm.repeat_penalty`` setting. Repetition: distinct-2 (unique
bigrams / bigrams) and the repeated-trigram rate (share of an answer's trigrams already seen
earlier in it), and the share of answers cut at the token limit (loops run to the limit).
Accuracy: normalised containment of a reference alias. Each setting is compared with 1.0 (off)
on the same questions (paired bootstrap 95% interval of the difference).

python benchmarks/decoding_repetition.py --penalties 1.0,1.1,1.3 --stride 1 --threads 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import markdown_table, write_section  # noqa: E402


def repeated_trigram_rate(text: str) -> float:
    words = text.lower().split()
    grams = [tuple(words[i : i + 3]) for i in range(len(words) - 2)]
    if not grams:
        return 0.0
    seen: set[tuple[str, ...]] = set()
    repeats = 0
    for g in grams:
        repeats += g in seen
        seen.add(g)
    return repeats / len(grams)


def paired_ci(a: np.ndarray, b: np.ndarray, seed: int = 0, n_boot: int = 5000) -> tuple[float, float, float]:
    """Mean of ``b - a`` and its paired bootstrap 95% interval."""
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diff), size=(n_boot, len(diff)))
    means = diff[idx].mean(axis=1)
    return float(diff.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def mean_ci(x: np.ndarray, seed: int = 0, n_boot: int = 5000) -> tuple[float, float, float]:
    return paired_ci(np.zeros(len(x)), x, seed, n_boot)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--penalties", default="1.0,1.1,1.3", help="comma-separated repeat_penalty values")
    parser.add_argument("--stride", type=int, default=1, help="every n-th answerable demo question")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--index", type=Path, default=Path("runs/demo-index"))
    args = parser.parse_args()

    from ragsieve.config import PipelineConfig, apply_overrides
    from ragsieve.demo import demo_corpus_dir, demo_questions
    from ragsieve.eval.qa import contains_answer
    from ragsieve.generate.answer import build_answer_messages
    from ragsieve.index import Index
    from ragsieve.llm import load_llm
    from ragsieve.pipeline import Pipeline
    from ragsieve.tasks.reflection import distinct_n
    from ragsieve.types import Trace

    penalties = [float(x) for x in args.penalties.split(",")]
    if 1.0 not in penalties:
        penalties.insert(0, 1.0)
    cfg = apply_overrides(PipelineConfig(index_dir=str(args.index), pipeline="plain"), {"llm.n_threads": args.threads})
    index = Index.build(demo_corpus_dir(), args.index, config=cfg)
    pipe = Pipeline(cfg, index=index)
    llm = load_llm(cfg.llm)
    llm.warm_up()
    questions = demo_questions()[:: args.stride]
    results: dict[float, dict[str, list[float]]] = {p: {"d2": [], "rep3": [], "cut": [], "acc": []} for p in penalties}
    start = time.perf_counter()
    for qi, q in enumerate(questions):
        trace = Trace(q["question"])
        hits = pipe.retrieve(q["question"], trace)[: cfg.retrieval.k]
        messages = build_answer_messages(q["question"], hits, cfg.generation.max_evidence_chars)
        for p in penalties:
            llm.repeat_penalty = p  # type: ignore[attr-defined]
            out = llm.generate(messages, max_tokens=args.max_tokens, temperature=0.0)
            r = results[p]
            r["d2"].append(distinct_n(out.text, 2) if len(out.text.split()) > 1 else 1.0)
            r["rep3"].append(repeated_trigram_rate(out.text))
            r["cut"].append(float(out.finish_reason == "length"))
            r["acc"].append(float(contains_answer(out.text, q["answer_aliases"])))
        print(f"{qi + 1}/{len(questions)} {time.perf_counter() - start:.0f}s", flush=True)

    base = results[1.0]
    rows = []
    for p in penalties:
        r = results[p]
        row: list[object] = [f"{p:g}"]
        for key in ("d2", "rep3", "cut", "acc"):
            m, lo, hi = mean_ci(np.asarray(r[key]))
            cell = f"{m:.3f} [{lo:.3f}, {hi:.3f}]"
            if p != 1.0:
                d, dlo, dhi = paired_ci(np.asarray(base[key]), np.asarray(r[key]))
                cell += f" (Δ {d:+.3f} [{dlo:+.3f}, {dhi:+.3f}])"
            row.append(cell)
        rows.append(row)
    body = (
        f"n = {len(questions)} answerable demo questions (`src/ragsieve/demo/questions.jsonl`, every "
        f"{args.stride}. one), plain-RAG prompt (hybrid retrieval, top-{cfg.retrieval.k} evidence), greedy decoding, "
        f"at most {args.max_tokens} new tokens. LLM: bundled SmolLM2-135M-Instruct via llama.cpp, {args.threads} "
        "threads. Means with bootstrap 95% intervals; Δ is the paired difference to 1.0 (off) on the same "
        "questions. distinct-2: unique bigrams / bigrams (higher = less repetition); repeated 3-grams: share of "
        "trigrams already seen in the same answer (lower is better); cut: answers that hit the token limit; "
        "accuracy: a reference alias occurs in the answer (normalised). 1-min load average at the end: "
        f"{os.getloadavg()[0]:.1f}.\n\n"
        + markdown_table(["repeat_penalty", "distinct-2", "repeated 3-grams", "cut at limit", "accuracy"], rows)
    )
    write_section("results.md", "decoding-repetition", "Decoding: repetition penalty (bundled model)", body)
    print(body)


if __name__ == "__main__":
    main()
