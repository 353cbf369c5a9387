"""Cost of fused prediction over 8 knowledge pieces vs one plain prediction.

For each of ``--queries`` SST-2 dev texts and 8 knowledge sentences (drawn with a fixed seed
from ../shared/data/wiki_sentences), times with the bundled SmolLM2 (llama.cpp, 1 thread):

- plain: one label distribution without knowledge;
- fused, prefix reuse: 8 label distributions, one per piece, with the instruction+text
  prefix kept in the KV cache between the 8 prompts (what fusion does);
- fused, no reuse: the same 8 prompts with the KV cache cleared before each;
- concatenated: one prompt with all 8 pieces (direct RAG).

Each measurement is repeated ``--repeats`` times, interleaved, and reported as min/median
of the per-query ratios to the plain prediction.

    python benchmarks/filtering_cost.py --queries 10 --repeats 3
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import sys
from pathlib import Path

# Lets `python benchmarks/<script>.py` import its siblings as the `benchmarks` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import read_jsonl  # noqa: E402
from benchmarks._report import SHARED_DATA, markdown_table, write_section  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    from ragsieve.filtering.scoring import scorer_for_task
    from ragsieve.llm.llama_cpp import LlamaCppLLM

    rng = random.Random(args.seed)
    texts = [row["text"] for row in read_jsonl(SHARED_DATA / "sst-2" / "dev.jsonl")]
    texts = rng.sample(texts, args.queries)
    with gzip.open(SHARED_DATA / "wiki_sentences" / "wiki300k.txt.gz", "rt", encoding="utf-8") as fh:
        wiki = [next(fh).strip() for _ in range(5000)]
    knowledge = [rng.sample(wiki, 8) for _ in texts]

    cached = LlamaCppLLM(n_threads=1, prefix_cache=True)
    fresh = LlamaCppLLM(n_threads=1, prefix_cache=False)
    cached.warm_up()
    fresh.warm_up()
    scorer = scorer_for_task("sst-2").fit_calibration(cached)

    def timed(fn: Callable[[], object]) -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    names = [
        "plain",
        "fused (8 pieces, prefix reuse)",
        "fused (8 pieces, no reuse)",
        "concatenated (8 pieces)",
    ]
    ratios: dict[str, list[float]] = {n: [] for n in names}
    secs: dict[str, list[float]] = {n: [] for n in names}
    n_tok: list[int] = []
    for text, ks in zip(texts, knowledge, strict=True):
        n_tok.append(sum(cached.count_tokens(k) for k in ks))
        best = {n: float("inf") for n in names}
        for _ in range(args.repeats):
            cached.next_token_logprobs("Hello.", ["A"])
            best["plain"] = min(best["plain"], timed(lambda t=text: scorer.predict_proba(cached, t)))
            best[names[1]] = min(
                best[names[1]],
                timed(lambda t=text, k=ks: scorer.predict_proba_many(cached, t, [[x] for x in k])),
            )
            best[names[2]] = min(
                best[names[2]],
                timed(lambda t=text, k=ks: scorer.predict_proba_many(fresh, t, [[x] for x in k])),
            )
            cached.next_token_logprobs("Hello.", ["A"])
            best[names[3]] = min(best[names[3]], timed(lambda t=text, k=ks: scorer.predict_proba(cached, t, k)))
        for n in names:
            secs[n].append(best[n])
            ratios[n].append(best[n] / best["plain"])
    rows = [
        [
            n,
            f"{1000 * min(secs[n]):.0f}",
            f"{1000 * statistics.median(secs[n]):.0f}",
            f"{min(ratios[n]):.2f}",
            f"{statistics.median(ratios[n]):.2f}",
        ]
        for n in names
    ]
    table = markdown_table(["prediction", "min ms", "median ms", "min × plain", "median × plain"], rows)
    print(table)
    body = (
        f"Model: bundled SmolLM2-135M-Instruct (Q4_1, llama.cpp, n_threads=1). {args.queries} SST-2 "
        f"dev texts (seed {args.seed}), 8 wiki_sentences pieces each (median "
        f"{statistics.median(n_tok):.0f} knowledge tokens per query); per query the best of "
        f"{args.repeats} interleaved repeats, then min/median over queries. Prompts put instruction "
        "and text first and the knowledge last, so fused prediction re-decodes only each piece's "
        "tokens. The machine is shared and loaded: compare the ratios, not the absolute times.\n\n" + table
    )
    if not args.no_write:
        write_section("benchmarks.md", "filtering-cost", "Knowledge filtering: cost of fused prediction", body)


if __name__ == "__main__":
    main()
