"""Train the sieve's default decision model (``ragsieve/resources/decision_model.npz``).

Training data: the SQuAD 2.0 sample of ``benchmarks/calibration.py --set squad2`` (the same
seeded sample, ``prepare_squad2(n=--n, seed=--seed)``: half answerable, half annotator-written
near-miss unanswerable questions over all 131 paragraphs of three articles), and of it only the
**calibration part** of ``ragsieve.eval.fair.split_indices(n, 0.5, seed)``, the part that
benchmark fits its baselines and thresholds on. The test part, the demo set, HotpotQA and the
PoisonedRAG targets are never trained on: they are what the model is reported on.
``benchmarks/decision_sets.py --set squad2`` draws its report set from the questions outside the
training part (:func:`trained_question_ids`).

For each training question the sieve runs with ``decide.mode = "observe"`` (every check leaves
its signals, no check withdraws the draft, the draft is always returned), and the row is the
``decide`` record's signals with the label "the draft contains a gold answer" (citation markers
aside, as ``decision_sets.py`` judges drafts; an unanswerable question's draft is always wrong).
Questions a check stopped before generation (every candidate irrelevant, or all poisoning) have
no draft and give no row. Rows are cached in
``runs/decision/`` (the run resumes). The model is then fitted on every row and written with
the command, data, split, model and row counts in its header.

The default threshold (``threshold_`` in the header, ``threshold_rule`` says how) is chosen by
a rule fixed before any report set is looked at
(:func:`ragsieve.decision.withdrawn_right_threshold`), on these training rows only: from the
right drafts' out-of-fold confidences (5 stratified folds, seed 0), the highest threshold whose
one-sided 95% Clopper-Pearson upper bound on the share of right drafts withdrawn is at most 5%;
that needs at least 59 right drafts, and with fewer, the highest whose expected share is at most
5% (at least 19 right drafts; with fewer, 0: no draft withdrawn on its confidence).

    python benchmarks/train_decision.py --n 800 --model smollm2 --max-minutes 40
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from _report import ROOT  # noqa: E402

RUNS = ROOT / "runs" / "decision"
MODEL_PATH = ROOT / "src" / "ragsieve" / "resources" / "decision_model.npz"


def training_split(ids: Sequence[str], seed: int) -> list[str]:
    """The ids of the questions the model is trained on: the calibration part of
    ``split_indices(len(ids), 0.5, seed)`` over the sample's questions, in sample order."""
    from ragsieve.eval.fair import split_indices

    train_idx, _ = split_indices(len(ids), 0.5, seed)
    return [ids[int(i)] for i in sorted(train_idx)]


def split_description(n: int, seed: int) -> str:
    """The ``split`` a model trained with ``--n n --seed seed`` names in its header."""
    return f"calibration part of ragsieve.eval.fair.split_indices({n}, 0.5, {seed})"


def trained_question_ids(n: int, seed: int) -> list[str]:
    """The SQuAD 2.0 question ids a model trained with ``--n n --seed seed`` was trained on (its
    training split of ``calibration.squad2_sample``), read from the shared data without answering
    anything: what a report on SQuAD 2.0 must leave out."""
    from calibration import SQUAD2, squad2_sample
    from ragsieve.io import read_jsonl

    sample = squad2_sample(list(read_jsonl(SQUAD2 / "questions.jsonl")), n, seed)
    return training_split([q["id"] for q in sample], seed)


def bundled_model_training_ids() -> list[str]:
    """The SQuAD 2.0 question ids the bundled decision model was trained on, from the split its
    header names (:func:`split_description`); none when the header names no such split."""
    import re

    from ragsieve.decision import DecisionModel

    found = re.fullmatch(r"calibration part of ragsieve\.eval\.fair\.split_indices\((\d+), 0\.5, (\d+)\)",
                         str(DecisionModel.default().about_.get("split", "")))  # fmt: skip
    return trained_question_ids(int(found.group(1)), int(found.group(2))) if found else []


def training_rows(args: argparse.Namespace) -> tuple[list[dict[str, Any]], str]:
    from _models import model_settings
    from calibration import prepare_squad2
    from ragsieve.answers import contains_answer
    from ragsieve.config import PipelineConfig
    from ragsieve.eval.data import load_qa
    from ragsieve.io import read_jsonl
    from ragsieve.sieve.pipeline import Pipeline
    from ragsieve.verify.claims import strip_markers

    out = RUNS / f"squad2-{args.n}-{args.seed}"
    out.mkdir(parents=True, exist_ok=True)
    cfg = PipelineConfig.model_validate({"llm": {"n_threads": args.threads, **model_settings(args.model)}})
    data, index_dir, desc = prepare_squad2(out, cfg, args.n, args.seed)
    items = load_qa(data)
    train_ids = set(training_split([i.id for i in items], args.seed))
    train = [i for i in items if i.id in train_ids]
    cache = out / f"{args.model}-rows.jsonl"
    done: dict[str, dict[str, Any]] = {row["id"]: row for row in read_jsonl(cache)} if cache.exists() else {}
    run_cfg = cfg.model_copy(update={"index_dir": str(index_dir)})
    run_cfg = run_cfg.model_copy(update={"decide": run_cfg.decide.model_copy(update={"mode": "observe"})})
    pipe = Pipeline(run_cfg)
    deadline = time.monotonic() + args.max_minutes * 60
    for item in train:
        if item.id in done:
            continue
        if time.monotonic() > deadline:
            print(f"time box reached after {len(done)} of {len(train)} training questions", file=sys.stderr)
            break
        answer = pipe.ask(item.question)
        decided = answer.trace.stage("decide")
        row: dict[str, Any] = {"id": item.id, "answerable": item.answerable}
        if decided and not answer.abstained:
            draft = str(decided[-1].get("draft", ""))
            row |= {
                "signals": decided[-1]["signals"],
                "draft": draft,
                "right": bool(item.answerable and item.answers and contains_answer(strip_markers(draft), item.answers)),
            }
        else:
            row |= {"stopped_by": answer.abstain_reason}
        done[item.id] = row
        with open(cache, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
    return [r for r in done.values() if "signals" in r], desc


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--n", type=int, default=800, help="size of the SQuAD 2.0 sample (calibration.py's --n)")
    ap.add_argument("--seed", type=int, default=0, help="sample and split seed (calibration.py's --seed)")
    ap.add_argument("--model", choices=("smollm2", "gemma"), default="smollm2")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-minutes", type=float, default=60.0, help="stop answering after this long (resumable)")
    ap.add_argument("--C", type=float, default=1.0, help="inverse L2 strength (fixed before training)")
    ap.add_argument("--out", type=Path, default=MODEL_PATH)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    sys.path.insert(0, str(Path(__file__).parent))

    from ragsieve.decision import DecisionModel

    rows, desc = training_rows(args)
    n_right = sum(r["right"] for r in rows)
    print(f"{len(rows)} training drafts ({n_right} right, {len(rows) - n_right} wrong)")
    model = DecisionModel(c=args.C).fit([r["signals"] for r in rows], [r["right"] for r in rows])
    command = "python benchmarks/train_decision.py " + " ".join(argv if argv is not None else sys.argv[1:])
    model.save(
        args.out,
        command=command.strip(),
        data=desc,
        split=split_description(args.n, args.seed),
        llm=args.model,
        drafts=len(rows),
        right=n_right,
        date=time.strftime("%Y-%m-%d"),
    )
    print(f"wrote {args.out}")
    print(f"default threshold {model.threshold_} ({json.dumps(model.threshold_rule_)})")
    weights = zip(model.signals, model.coef_[: len(model.signals)], strict=True)
    for name, coef in sorted(weights, key=lambda x: -abs(x[1])):
        print(f"  {name:28s} {coef:+.3f}")


if __name__ == "__main__":
    main()
