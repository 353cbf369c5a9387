"""Cost of LLM label scoring with and without KV-cache prefix reuse.

Writes the section "LLM scoring cost" of docs/benchmarks.md. Model: the bundled
SmolLM2-135M-Instruct Q4_1 through llama.cpp, n_threads=1. Prompts: the "sentiment"
classifier preset on one fixed review with 8 fixed knowledge sentences (no data set).
The last two cases are the knowledge-filtering access pattern: for each of 3 reviews one
label-scoring call, then the in-context filter (4 demonstrations) on the 8 sentences, with
only the live cache (``prefix_states=0``) and with saved prefixes (``prefix_states=4``).

Run: python benchmarks/llm_scoring.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from _report import markdown_table, write_section
from ragsieve.filtering import Candidate, ICLFilter
from ragsieve.generate.classify import LabelClassifier
from ragsieve.llm.llama_cpp import LlamaCppLLM

TEXT = "a gorgeous , witty , seductive movie that never loses its sense of fun ."
KNOWLEDGE = [
    "The film premiered at the Cannes Film Festival.",
    "Critics praised the lead performance as charming.",
    "The director previously made two documentaries.",
    "Some viewers found the second half slow.",
    "The soundtrack was released on vinyl.",
    "The movie was shot on location in Lisbon.",
    "It received a standing ovation at its first screening.",
    "The screenplay was adapted from a short story.",
]
REVIEWS = [
    TEXT,
    "the plot is thin and the jokes fall flat .",
    "an uneven but often moving portrait of a family .",
]
DEMOS = [
    {"query": "a dull , lifeless film .", "knowledge": "The river flows into the Baltic Sea.", "harmful": True},
    {"query": "a joyous celebration of music .", "knowledge": "The band won a Grammy award.", "harmful": False},
    {"query": "too long and too loud .", "knowledge": "The stadium seats 40,000 people.", "harmful": True},
    {"query": "a charming , funny romance .", "knowledge": "Audiences laughed throughout.", "harmful": False},
]
CONTINUATIONS = [
    "It is a positive review.",
    "It is a negative review.",
    "The review is mixed.",
    "positive",
    "negative",
]


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float, float]:
    """(min wall, median wall, median process CPU) seconds over ``repeats`` runs."""
    wall, cpu = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return min(wall), statistics.median(wall), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    reuse = LlamaCppLLM(n_threads=1, prefix_cache=True, prefix_states=0)
    fresh = LlamaCppLLM(n_threads=1, prefix_cache=False)
    reuse.warm_up()
    fresh.warm_up()
    clf = LabelClassifier.from_preset("sentiment", calibrate=False)
    words = [clf.verbalizer_words()[lab] for lab in clf.labels]
    prompts = [clf.build_prompt(TEXT, [k]) for k in KNOWLEDGE]
    n_full = len(reuse.prompt_tokens(prompts[0]))
    ids = [reuse.prompt_tokens(p) for p in prompts]
    shared = min(
        next((i for i, (a, b) in enumerate(zip(ids[0], other, strict=False)) if a != b), len(other))
        for other in ids[1:]
    )
    # warm caches and code paths once
    fresh.next_token_logprobs(prompts[0], words)
    reuse.next_token_logprobs(prompts[0], words)

    def one_call() -> None:
        fresh.next_token_logprobs(prompts[0], words)

    def eight_fresh() -> None:
        for p in prompts:
            fresh.next_token_logprobs(p, words)

    def eight_reuse() -> None:
        reuse.reset_cache()
        for p in prompts:
            reuse.next_token_logprobs(p, words)

    def cont_fresh() -> None:
        fresh.continuation_logprobs(prompts[0], CONTINUATIONS)

    def cont_reuse() -> None:
        reuse.reset_cache()
        reuse.continuation_logprobs(prompts[0], CONTINUATIONS)

    saving = LlamaCppLLM(n_threads=1, prefix_states=4)
    saving.warm_up()
    icl = ICLFilter(task="sst-2", calibration="none", demos=DEMOS)

    def filtering_pattern(llm: LlamaCppLLM) -> None:
        llm.reset_cache()
        icl.warm_up(llm)
        for review in REVIEWS:
            llm.next_token_logprobs(clf.build_prompt(review, None), words)
            icl.score_many(review, [Candidate(k) for k in KNOWLEDGE])

    cases = [
        ("1 label-scoring call (next-token, 2 labels), empty cache", one_call, 1),
        ("8 calls, 8 knowledge variants of one text, no prefix reuse", eight_fresh, 8),
        ("8 calls, 8 knowledge variants of one text, prefix reuse", eight_reuse, 8),
        ("continuation_logprobs, 5 continuations of one prompt, no prefix reuse", cont_fresh, 5),
        ("continuation_logprobs, 5 continuations of one prompt, prefix reuse", cont_reuse, 5),
        (
            "3 reviews x (1 label call + ICL filter on 8 pieces), live cache only (prefix_states=0)",
            lambda: filtering_pattern(reuse),
            27,
        ),
        (
            "3 reviews x (1 label call + ICL filter on 8 pieces), saved prefixes (prefix_states=4)",
            lambda: filtering_pattern(saving),
            27,
        ),
    ]
    rows = []
    results: dict[str, tuple[float, float, float]] = {}
    load_before = os.getloadavg()[0]
    for name, fn, n_calls in cases:
        best, med, cpu = timed(fn, args.repeats)
        results[name] = (best, med, cpu)
        ms = [round(v * 1000, 1) for v in (best, med, med / n_calls, cpu)]
        rows.append([name, n_calls, *ms])
    load_after = os.getloadavg()[0]

    def speedup(slow: str, fast: str) -> str:
        (b0, m0, c0), (b1, m1, c1) = results[slow], results[fast]
        return f"{b0 / b1:.2f}x (min wall), {m0 / m1:.2f}x (median wall), {c0 / c1:.2f}x (median CPU)"

    speed_k = speedup(cases[1][0], cases[2][0])
    speed_c = speedup(cases[3][0], cases[4][0])
    speed_s = speedup(cases[5][0], cases[6][0])
    body = (
        "Model: bundled SmolLM2-135M-Instruct Q4_1 (GGUF) via llama-cpp-python, `n_threads=1`, `n_ctx=2048`. "
        f"Prompts: the `sentiment` classifier preset on one fixed review with one of 8 fixed knowledge "
        f"sentences; rendered prompt {n_full} tokens, of which {shared} are shared by all 8 variants "
        "(system prompt, instruction and text). Times are wall-clock over "
        f"{args.repeats} repeats (min / median, ms) and median process CPU time (ms); the machine is "
        "shared by other jobs, so wall times are inflated: compare rows of this run only.\n\n"
        + markdown_table(["case", "calls", "min ms", "median ms", "median ms / call", "median CPU ms"], rows)
        + f"\n\n1-minute load average {load_before:.1f} before and {load_after:.1f} after the run "
        f"({os.cpu_count()} cores). Prefix reuse speeds up 8 knowledge variants by {speed_k}, and 5 "
        f"continuations of one prompt by {speed_c}. Saved prefixes speed up the filtering pattern by "
        f"{speed_s}: without them every review re-decodes the 4 demonstrations, because its label call "
        "evicted them from the live cache. Scores with and without reuse are equal "
        "(`tests/llm/test_llama_cpp.py::test_prefix_reuse_gives_same_scores_as_fresh_state`, "
        "`::test_saved_prefix_states_give_same_scores_and_stay_bounded`)."
    )
    path = write_section("benchmarks.md", "llm-scoring", "LLM scoring cost", body)
    print(body)
    print(f"written to {path}")


if __name__ == "__main__":
    main()
