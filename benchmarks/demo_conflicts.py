"""False conflicts on the bundled demo corpus: the sieve up to its conflict stage (no LLM).

Builds the demo index (bundled corpus and embedder), asks each of the 52 bundled demo questions
(answerable and unanswerable), the questions ``ragsieve demo`` asks by default
(``ragsieve.demo.DEMO_SHOWCASE``) and the scanning-tunnelling-microscope question below of the
default sieve, up to and including its ``conflict`` stage (``benchmarks/conflicts.py``'s
``stages_through``: no stage before it calls the LLM), and counts the questions whose conflict
record states a disagreement. No demo question has sources that disagree (the corpus was
written to agree with itself), so every stated conflict is a false one; each is listed with what
it names.

python benchmarks/demo_conflicts.py [--index runs/demo-conflicts/index]

``--llm-reader --model smollm2|gemma``: the same, with the conflict stage's per-passage LLM
reader (``stages.conflict.llm = true``) and that bundled model (llama.cpp, 1 thread); its own
section per model.

python benchmarks/demo_conflicts.py --llm-reader --model gemma

``--reader minilm``: the same questions through the sieve's checks before generation (up to and
including ``select``), once with the passages read by the rules and once by the extractive reader
(``[reading] reader = "minilm"``), in one process on one index: false conflicts of each, and the
warm cost of the checks per question (every question asked once to warm up, then timed over
``--repeats`` passes; median and mean of the per-question milliseconds). Writes its section of
docs/results/reader.md.

python benchmarks/demo_conflicts.py --reader minilm [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, markdown_table, write_section  # noqa: E402

MICROSCOPE = "Who invented the scanning tunnelling microscope, and where?"


def questions() -> list[str]:
    from ragsieve.demo import DEMO_SHOWCASE, demo_questions

    asked = [q["question"] for q in demo_questions(include_unanswerable=True)]
    return list(dict.fromkeys([*asked, *DEMO_SHOWCASE, MICROSCOPE]))


def conflict_records(
    index_dir: Path, asked: list[str], llm_model: str | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """Each question's conflict record; ``llm_model``: read each passage with that bundled model
    (the conflict stage's LLM reader) instead of the rule reader."""
    from benchmarks.conflicts import stages_through
    from ragsieve.config import PipelineConfig
    from ragsieve.demo import demo_corpus_dir
    from ragsieve.index import Index
    from ragsieve.sieve.pipeline import Pipeline

    settings: dict[str, Any] = {"index_dir": str(index_dir)}
    if llm_model is not None:
        from benchmarks._models import model_settings

        llm = {**model_settings(llm_model), "n_threads": 1}
        settings |= {"llm": llm, "stages": {"conflict": {"llm": True}}}
    cfg = PipelineConfig.model_validate(settings)
    built = Index.build(demo_corpus_dir(), index_dir, config=cfg)
    pipe = Pipeline(cfg, index=built)
    if llm_model is not None:
        pipe.warm_up()  # loads the model: the stages below run without the pipeline's own warm-up
    out = []
    for q in asked:
        record: dict[str, Any] = next(
            (e for e in stages_through(pipe, q).events if e.get("stage") == "conflict" and "decision" in e), {}
        )
        out.append((q, record))
    return out


def reader_checks(args: argparse.Namespace) -> None:
    """False conflicts and the warm checks' cost per demo question, the rules against the reader."""
    import statistics

    from benchmarks._stats import rate_with_interval as pct
    from benchmarks.conflicts import stages_through
    from ragsieve.config import PipelineConfig
    from ragsieve.demo import demo_corpus_dir
    from ragsieve.index import Index
    from ragsieve.sieve.pipeline import Pipeline

    asked = questions()
    base = PipelineConfig.model_validate({"index_dir": str(args.index)})
    built = Index.build(demo_corpus_dir(), args.index, config=base)
    pipes = {
        reader: Pipeline(PipelineConfig.model_validate({"index_dir": str(args.index), "reading": {"reader": reader}}),
                         index=built)
        for reader in ("rules", "minilm")
    }  # fmt: skip
    conflicts: dict[str, list[str]] = {}
    for reader, pipe in pipes.items():  # warm-up pass (models, caches), and the conflict records
        conflicts[reader] = []
        for q in asked:
            trace = stages_through(pipe, q, last="select")
            record: dict[str, Any] = next(
                (e for e in trace.events if e.get("stage") == "conflict" and "decision" in e), {}
            )
            if record.get("conflict"):
                conflicts[reader].append(f"{q}: {record.get('message', '')}")
    times: dict[str, list[float]] = {r: [] for r in pipes}
    for _ in range(args.repeats):
        for reader, pipe in pipes.items():  # alternate, so load changes hit both alike
            for q in asked:
                t0 = time.perf_counter()
                stages_through(pipe, q, last="select")
                times[reader].append(1000 * (time.perf_counter() - t0))
    rows: list[list[object]] = [
        [reader, pct(len(conflicts[reader]), len(asked)), f"{statistics.median(times[reader]):.0f}",
         f"{statistics.mean(times[reader]):.0f}", str(len(times[reader]))]
        for reader in pipes
    ]  # fmt: skip
    ratio = statistics.median(times["minilm"]) / statistics.median(times["rules"])
    listed = "\n".join(f"- {reader}: {c}" for reader in pipes for c in conflicts[reader]) or "- none"
    load = os.getloadavg()
    body = (
        f"The default sieve's checks before generation (route through select: no LLM call) on {len(asked)} "
        "questions about the bundled demo corpus (the 52 bundled demo questions, `ragsieve demo`'s default "
        "questions and the scanning-tunnelling-microscope question), bundled embedder and judge, one index, "
        '`[reading] reader = "rules"` against `"minilm"` (the extractive reader reads the conflict stage\'s '
        "compared passages in one batch; select and verify reuse those readings). Warm: every question asked "
        f"once first, then {args.repeats} timed passes alternating the two. Load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (shared 2-core machine).\n\n"
        + markdown_table(["reader", "false conflicts", "warm checks, ms per question (median)", "mean", "runs"], rows)
        + f"\n\nThe reader's checks take {ratio:.2f}x the rules' (median). Stated conflicts (none of these "
        "questions has sources that disagree):\n\n" + listed
    )
    print(body)
    if not args.no_write:
        title = "Through the checks: demo questions, false conflicts and cost"
        write_section("results/reader.md", "reader-demo", title, body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, default=ROOT / "runs" / "demo-conflicts" / "index")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--llm-reader", action="store_true", help="read each passage with --model (an LLM run)")
    parser.add_argument("--model", choices=("smollm2", "gemma"), default="smollm2")
    parser.add_argument("--reader", choices=("rules", "minilm"), default="rules",
                        help="minilm: the rules against the extractive reader, false conflicts and warm cost")
    parser.add_argument("--repeats", type=int, default=3, help="with --reader minilm: timed passes")
    args = parser.parse_args()
    if args.reader == "minilm":
        reader_checks(args)
        return

    from benchmarks._models import model_label
    from benchmarks._stats import rate_with_interval as pct

    t0 = time.perf_counter()
    asked = questions()
    records = conflict_records(args.index, asked, args.model if args.llm_reader else None)
    stated = [(q, r) for q, r in records if r.get("conflict")]
    below = sum(
        1 for _, r in records for p in r.get("passages", []) if p.get("answer") and not p.get("compared", True)
    )
    rows: list[list[object]] = [[q, str(r.get("message", ""))] for q, r in stated] or [["(none)", ""]]
    reader = (
        f"the conflict stage's per-passage LLM reader (`stages.conflict.llm = true`) with {model_label(args.model)} "
        "(llama.cpp, 1 thread)"
        if args.llm_reader
        else "no LLM"
    )
    body = (
        f"The default sieve up to its conflict stage on {len(asked)} questions about the bundled demo corpus "
        "(the 52 bundled demo questions, `ragsieve demo`'s default questions and a question about the scanning "
        f"tunnelling microscope), bundled embedder and judge, {reader}; "
        f"{time.perf_counter() - t0:.0f} s. False conflicts (none of these questions has sources that disagree): "
        f"{pct(len(stated), len(asked))}. Passage answers read but below the bar for a disagreement (recorded "
        f"in the trace, not compared): {below}.\n\n" + markdown_table(["question", "stated conflict"], rows)
    )
    print(body)
    if not args.no_write:
        if args.llm_reader:
            title = f"False conflicts on the demo corpus, the LLM reader ({model_label(args.model)})"
            write_section("results/conflicts.md", f"demo-conflicts-llm-{args.model}", title, body)
        else:
            write_section("results/conflicts.md", "demo-conflicts", "False conflicts on the demo corpus", body)


if __name__ == "__main__":
    main()
