"""Questions per minute of ``ragsieve eval --only sieve,plain`` with the configurations sharing
their retrieval, judging and embedding, against the two configurations run one after the other
(``--only sieve``, then ``--only plain``), on the same questions, and whether the answers are equal.

Both arms run in this process, as ``ragsieve eval`` runs them (the default faithfulness judge,
the fair baselines' signals scored at answer time, the bundled models unless ``--model``): the
shared arm over one :class:`ragsieve.eval.shared.SharedWork`; the separate arm over one per
configuration, each loading its own index, LLM and embedder as a separate command does. The
machine is shared, so the questions are taken in blocks and the arms alternate block by block
(each arm keeps its loaded models from block to block, as one run does); the 1-minute load
average is recorded before and after. The fair report printed after answering is left out of
both arms (it reads the records, the same for both).

    python benchmarks/eval_shared.py --limit 12 --block 4
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import markdown_table, write_section  # noqa: E402

# Fields of a record that depend on the clock, not on the answer.
TIMED = ("seconds", "stage_ms")
# What "the same answer" means: the text, the abstention and the citations.
ANSWER = ("answer", "abstained", "cited_ids")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, default=Path.home() / ".cache" / "ragsieve" / "demo-index")
    ap.add_argument("--limit", type=int, default=None, help="First N demo questions (default all 52).")
    ap.add_argument("--block", type=int, default=4, help="Questions per block; the arms alternate by block.")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the config's).")
    ap.add_argument("--no-write", action="store_true", help="Print the section without writing docs/benchmarks.md.")
    args = ap.parse_args()

    from ragsieve.config import PipelineConfig
    from ragsieve.demo import demo_data_path
    from ragsieve.eval.cli import make_judge
    from ragsieve.eval.data import load_qa
    from ragsieve.eval.harness import EvalCache, default_specs, run_eval
    from ragsieve.eval.shared import SharedWork

    data = Path(str(demo_data_path("questions.jsonl")))
    items = load_qa(data, args.limit)
    overrides: dict[str, Any] = {"index_dir": str(args.index)}
    if args.threads:
        overrides["llm"] = {"n_threads": args.threads}
    cfg = PipelineConfig.model_validate(overrides)
    specs = [s for s in default_specs(cfg) if s.name in ("sieve", "plain")]

    shared = SharedWork()
    alone = {s.name: SharedWork() for s in specs}
    judges = {"shared": make_judge("lexical-embedding", cfg, shared)}
    judges.update({name: make_judge("lexical-embedding", cfg, work) for name, work in alone.items()})
    seconds = {"shared": 0.0, "separate": 0.0}
    # the first block holds the model loading (once in the shared arm, once per configuration apart)
    first_block: dict[str, float] = {}
    records: dict[str, dict[str, list[dict[str, Any]]]] = {"shared": {}, "separate": {}}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        caches = {arm: EvalCache(Path(tmp) / f"{arm}.jsonl") for arm in ("shared", "sieve", "plain")}

        def shared_arm(block: list[Any]) -> None:
            out = run_eval(block, specs, caches["shared"], judges["shared"], shared=shared, baseline_signals=True)
            for name, recs in out.items():
                records["shared"].setdefault(name, []).extend(recs)

        def separate_arm(block: list[Any]) -> None:
            for spec in specs:
                out = run_eval(block, [spec], caches[spec.name], judges[spec.name], shared=alone[spec.name],
                               baseline_signals=True)  # fmt: skip
                records["separate"].setdefault(spec.name, []).extend(out[spec.name])

        arms = {"shared": shared_arm, "separate": separate_arm}
        for b, start in enumerate(range(0, len(items), args.block)):
            block = items[start : start + args.block]
            order = ("separate", "shared") if b % 2 == 0 else ("shared", "separate")
            for arm in order:
                t0 = time.perf_counter()
                arms[arm](block)
                seconds[arm] += time.perf_counter() - t0
            if b == 0:
                first_block = dict(seconds)
            print(f"block {b}: {start + len(block)}/{len(items)} questions, "
                  f"shared {seconds['shared']:.0f}s, separate {seconds['separate']:.0f}s", flush=True)  # fmt: skip
    load_after = os.getloadavg()[0]

    n = len(items)
    compared = equal = 0
    differing: list[str] = []
    for spec in specs:
        for one, both in zip(records["separate"][spec.name], records["shared"][spec.name], strict=True):
            compared += 1
            same = {k: v for k, v in one.items() if k not in TIMED} == {k: v for k, v in both.items() if k not in TIMED}
            answer_same = [one[k] for k in ANSWER] == [both[k] for k in ANSWER]
            equal += answer_same
            if not same:
                differing.append(f"{spec.name}/{one['item_id']}" + ("" if answer_same else " (answer)"))
    qpm = {arm: 60.0 * n / s for arm, s in seconds.items()}
    later = {arm: seconds[arm] - first_block[arm] for arm in seconds}
    work_shared = shared.counts()
    work_alone = {k: sum(w.counts()[k] for w in alone.values()) for k in work_shared}
    llm_threads = cfg.llm.n_threads if cfg.llm.n_threads else "default"
    body = (
        f"`ragsieve eval --only sieve,plain` as one run sharing retrieval, judging and embedding "
        f"(one `SharedWork`), against `--only sieve` then `--only plain` run one after the other (one `SharedWork` "
        f"each: its own index, LLM and embedder, as a separate command), on the first {n} of the 52 bundled demo "
        f"questions (`src/ragsieve/demo/questions.jsonl`), bundled SmolLM2-135M-Instruct (llama.cpp, greedy, "
        f"{llm_threads} threads), bundled MiniLM embedder, the demo index; default faithfulness judge "
        f"(lexical-embedding) and the fair baselines' signals at answer time, as the command runs them; model "
        f"loading included in both arms, the fair report after answering excluded. Arms alternate in blocks of "
        f"{args.block} questions. 1-minute load average before / after: {load_before:.1f} / {load_after:.1f} "
        f"(2 cores shared with other jobs: compare the arms, not absolute times).\n\n"
        + markdown_table(
            ["arm", "wall s", "questions / min", "searches", "passages judged", "texts embedded"],
            [
                ["sieve, then plain (separate)", f"{seconds['separate']:.0f}", f"{qpm['separate']:.2f}",
                 str(work_alone["searches"]), str(work_alone["judged_passages"]), str(work_alone["embedded_texts"])],
                ["sieve + plain (shared)", f"{seconds['shared']:.0f}", f"{qpm['shared']:.2f}",
                 str(work_shared["searches"]), str(work_shared["judged_passages"]),
                 str(work_shared["embedded_texts"])],
            ],  # fmt: skip
        )
        + f"\n\nShared / separate questions per minute: **{qpm['shared'] / qpm['separate']:.2f}x**. "
        f"The first block, which loads the models (once shared, once per configuration apart), took "
        f"{first_block['shared']:.0f} s shared / {first_block['separate']:.0f} s separate; the later blocks "
        f"{later['shared']:.0f} s / {later['separate']:.0f} s "
        f"(ratio {later['separate'] / max(1e-9, later['shared']):.2f}x after loading; plain RAG judges nothing, "
        f"so with these two configurations the saving per question is "
        f"the repeated searches and embeddings, and generation dominates). "
        f"Answers (text, abstention, citations) equal in {equal} of {compared} (configuration, question) pairs; "
        f"whole records (evidence, decisions, signals, confidence, faithfulness) differ in "
        f"{len(differing)}{': ' + ', '.join(differing[:10]) if differing else ''}."
    )
    if not args.no_write:
        write_section("benchmarks.md", "eval-shared", "`ragsieve eval`: configurations sharing their work", body)
    print(body)


if __name__ == "__main__":
    main()
