"""Build training drafts for the decide stage's model: thousands of realistic retrieval problems
answered by one bundled model through the sieve in observe mode (:mod:`ragsieve.eval.drafts`).

Data: ``../shared/data/training/`` (its PROVENANCE.md): SQuADShifts ``new_wiki`` (7,938 rows,
48 Wikipedia articles) and ``nq_gold`` (2,905 Natural Questions rows with their gold passage).
``reddit`` and ``amazon_reviews`` are for evaluation under domain shift only: refused here.

Each set's distinct passages are one index (the bundled embedder); every row of the set is
planned, seeded, as an answerable, unanswerable (the gold passage hidden, the article's other
passages kept) or attacked problem (five passages of one of the project's attack writers planted
for that question only), half / a third / a sixth, the sets interleaved by size, and whole
articles held out as the validation split (a fifth of the titles). ``--plan-size`` problems are
planned (each set its share by size; the indexes hold their attacks and hiding) and ``--n`` takes
the first ``n`` of them: a random sample whatever ``n`` is, and the indexes do not depend on it.
The ``assert`` writer writes from its templates unless ``--assert-llm`` (SmolLM2 samples, as
``benchmarks/trust_sieve.py`` writes them; hours for every planned target on a 2-core machine).

Drafts are appended to ``<out>/drafts-<model>.w<worker>.jsonl`` as they are done, keyed by
question id, kind, model and a hash of the pipeline and plan settings: a rerun skips what is
done, so a killed or time-boxed run (``--max-minutes``) resumes. ``--workers 2`` runs two
processes (each loads its own LLM), at most two. ``--status`` prints what the cache holds.

    python benchmarks/build_drafts.py --model smollm2 --set new_wiki,nq_gold --n 4000
    python benchmarks/build_drafts.py --model gemma --set new_wiki,nq_gold --n 4000 --max-minutes 120
    python benchmarks/build_drafts.py --model smollm2 --set new_wiki,nq_gold --n 4000 --status
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _models import MODELS  # noqa: E402
from _report import SHARED_DATA, markdown_table, publish_section  # noqa: E402

TRAINING = SHARED_DATA / "training"
SET_FILES = {
    "new_wiki": TRAINING / "squadshifts" / "new_wiki.jsonl",
    "nq_gold": TRAINING / "nq_gold" / "nq_gold.jsonl",
}


def default_out() -> Path:
    from ragsieve.io import user_cache_dir

    return user_cache_dir() / "drafts"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="smollm2")
    ap.add_argument("--set", default="new_wiki,nq_gold", help="comma-separated training sets: new_wiki, nq_gold")
    ap.add_argument("--n", type=int, default=4000, help="drafts to build: the first n problems of the plan")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default ~/.cache/ragsieve/drafts)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--plan-size",
        type=int,
        default=6000,
        help="problems planned (and attacks and hiding indexed); --n may grow to it without a rebuild",
    )
    ap.add_argument("--workers", type=int, default=1, help="processes, at most 2 (each loads its own LLM)")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads per worker")
    ap.add_argument("--max-minutes", type=float, default=None, help="stop after this long (resumable)")
    ap.add_argument("--ablate", default="", help="comma-separated sieve stages to leave out (recorded in the hash)")
    ap.add_argument("--assert-llm", action="store_true", help="the assert writer samples SmolLM2, not templates")
    ap.add_argument("--status", action="store_true", help="print what the cache holds and exit")
    ap.add_argument(
        "--write-docs",
        action="store_true",
        help="with --status: write the counts as a section of docs/results/calibration.md",
    )
    args = ap.parse_args(argv)
    args.sets = [s.strip() for s in args.set.split(",") if s.strip()]
    from ragsieve.eval.drafts import check_training_set

    for name in args.sets:
        check_training_set(name)
        if name not in SET_FILES:
            ap.error(f"unknown training set {name!r}; choose from {', '.join(SET_FILES)}")
    if args.n > args.plan_size:
        ap.error(f"--n {args.n} is over --plan-size {args.plan_size}; raise --plan-size (a new index)")
    if not 1 <= args.workers <= 2:
        ap.error("--workers must be 1 or 2: the machine is shared")
    args.out = (args.out or default_out()).expanduser()
    return args


def make_builder(args: argparse.Namespace, embedder: Any = None) -> Any:
    from ragsieve.eval.drafts import DraftBuilder, load_training_rows

    assert_llm = None
    if args.assert_llm:
        from ragsieve.config import LLMConfig
        from ragsieve.llm import load_llm

        assert_llm = load_llm(LLMConfig(n_threads=args.threads))
    rows = {name: load_training_rows(SET_FILES[name], name) for name in args.sets}
    return DraftBuilder(
        rows, args.out / "work", seed=args.seed, embedder=embedder, assert_llm=assert_llm, capacity=args.plan_size
    )


def pipeline_config(args: argparse.Namespace) -> Any:
    from eval_sieve import model_settings
    from ragsieve.config import PipelineConfig

    ablate = [s.strip() for s in args.ablate.split(",") if s.strip()]
    return PipelineConfig.model_validate({
        "llm": {"n_threads": args.threads, **model_settings(args.model)},
        "decide": {"mode": "observe"},
        "ablate": ablate,
    })  # fmt: skip


def settings_per_set(args: argparse.Namespace, builder: Any, save: bool = False) -> dict[str, str]:
    """The settings hash per set; ``save``: also write what each hash stands for to
    ``<out>/settings/<hash>.json``, so drafts left under an older hash (a changed default of the
    pipeline) can be compared with the current ones."""
    from ragsieve.eval.drafts import settings_hash, settings_payload
    from ragsieve.io import atomic_write_json

    cfg = pipeline_config(args)
    out = {}
    for name in args.sets:
        out[name] = settings_hash(cfg, builder.plan_settings(name))
        if save and not (args.out / "settings" / f"{out[name]}.json").is_file():
            (args.out / "settings").mkdir(parents=True, exist_ok=True)
            atomic_write_json(args.out / "settings" / f"{out[name]}.json",
                              settings_payload(cfg, builder.plan_settings(name)))  # fmt: skip
    return out


def work(args: argparse.Namespace, worker: int, builder: Any = None) -> int:
    """One worker's share of the drafts (its own LLM and pipelines)."""
    from ragsieve.console import stage_progress
    from ragsieve.eval.drafts import DraftCache, build_drafts
    from ragsieve.llm import load_llm
    from ragsieve.sieve.pipeline import Pipeline

    builder = builder or make_builder(args)
    builder.warm_up()
    cfg = pipeline_config(args)
    settings = settings_per_set(args, builder, save=True)
    llm: list[Any] = []

    def pipeline_for(name: str) -> Any:
        if not llm:
            llm.append(load_llm(cfg.llm))
        return Pipeline(cfg, index=builder.index(name), llm=llm[0])

    deadline = time.monotonic() + args.max_minutes * 60 if args.max_minutes else None
    identity = f"{args.model}: {json.dumps(cfg.llm.model_dump(mode='json'), sort_keys=True)}"
    with stage_progress() as progress:
        return build_drafts(builder, builder.plan()[: args.n], pipeline_for, DraftCache(args.out, args.model),
                            args.model, model_identity=identity, settings=settings, worker=worker,
                            workers=args.workers, progress=progress, deadline=deadline)  # fmt: skip


def _work(args: argparse.Namespace, worker: int) -> int:
    logging.basicConfig(level=logging.WARNING)
    return work(args, worker)


def status(args: argparse.Namespace, builder: Any) -> None:
    """What the cache holds for this plan and model: counts per set, kind, split and label, and
    the build rate; with ``--write-docs``, as a section of docs/results/calibration.md."""
    from ragsieve.eval.drafts import DraftCache, plan_counts, rate_line

    settings = settings_per_set(args, builder)
    planned = builder.plan()[: args.n]
    plan = plan_counts(planned)
    # every draft of the model counts; the pipeline's defaults may change while a build runs (a new
    # settings hash: what changed is in <out>/settings/), and the table says under how many hashes
    records = list(DraftCache(args.out, args.model).records())
    current = sum(settings.get(r.set) == r.settings for r in records)
    earlier = len(records) - current
    print(f"{len(records)} drafts in the cache, {current} under the current settings, {earlier} under earlier ones")
    unanswerable = [r for r in records if r.kind == "unanswerable"]
    in_view = sum(r.answer_in_view for r in unanswerable)
    counts: Counter[tuple[str, str, str, str]] = Counter((r.set, r.kind, r.split, r.label) for r in records)
    rate = rate_line(len(records), len(planned), sum(r.seconds for r in records))
    print("planned:", json.dumps(plan, sort_keys=True))
    for key, n in sorted(counts.items()):
        print("  ".join(key), n)
    print(f"{rate} (seconds of one process per draft; cache {args.out})")
    if not args.write_docs:
        return
    kinds = ("answerable", "unanswerable", "attacked")
    plan_rows = [[name, row["all"], *(row.get(k, 0) for k in kinds), row.get("train", 0), row.get("validation", 0)]
                 for name, row in sorted(plan.items())]  # fmt: skip
    built_rows = []
    for name in sorted(plan):
        for kind in kinds:
            for split in ("train", "validation"):
                got = [counts[(name, kind, split, label)] for label in ("right", "wrong", "non-answer")]
                if sum(got):
                    built_rows.append([name, kind, split, sum(got), *got])
    body = (
        "**Drafts being built; no model trained yet.** Training drafts for a decision model per generator "
        f"(`ragsieve.eval.drafts`), answered by `{args.model}` through the sieve in observe mode. Data: "
        "`../shared/data/training/` (`new_wiki`: SQuADShifts new Wikipedia articles; `nq_gold`: Natural Questions "
        "with the gold passage); `reddit` and `amazon_reviews` are never used for training. Each set's passages are "
        "one index; unanswerable = the gold passage hidden (the article's other passages kept); attacked = five "
        "passages of one of the attack writers (template, assert (its templates), mirror, spread) planted for "
        "that question only. Split: whole articles, a seeded fifth of the titles held out as validation "
        f"(seed {args.seed}). Cache: `{args.out}` (outside git). Built with `python benchmarks/build_drafts.py "
        f"--model {args.model} --set {args.set} --n {args.n}` (resumable; this section: the same with "
        "`--status --write-docs`).\n\n"
        f"Planned (the first {args.n} problems of the seeded plan):\n\n"
        + markdown_table(["set", "problems", *kinds, "train", "validation"], plan_rows)
        + f"\n\nBuilt so far (label by the gold answers, eval's containment; {len(records)} drafts, {earlier} of "
        "them under earlier pipeline defaults: the settings hash changed while building, `<cache>/settings/` "
        f"says how). Of {len(unanswerable)} unanswerable drafts, {in_view} could still retrieve a passage "
        "containing a gold answer (another passage of the article states it; `answer_in_view`).\n\n"
        + (markdown_table(["set", "kind", "split", "drafts", "right", "wrong", "non-answer"], built_rows)
           if built_rows else "none yet")
        + f"\n\nRate: {rate} (mean seconds of one process per draft, niced, on a shared 2-core machine).\n"
    )  # fmt: skip
    publish_section("results/calibration.md", f"decision-training-drafts-{args.model}",
                    f"Decision training drafts ({args.model}): being built", body)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    builder = make_builder(args)
    if args.status:
        status(args, builder)
        return
    from ragsieve.console import stage_progress

    start = time.monotonic()
    with stage_progress() as progress:
        builder.warm_up(progress)  # the indexes, once, before any worker opens them
    print(f"indexes ready in {time.monotonic() - start:.0f} s under {args.out / 'work'}", file=sys.stderr, flush=True)
    start = time.monotonic()
    if args.workers == 1:
        built = work(args, 0, builder)
    else:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(args.workers) as pool:
            built = sum(pool.starmap(_work, [(args, w) for w in range(args.workers)]))
    took = time.monotonic() - start
    per = f"{took / built:.1f} s wall per draft" if built else "nothing left to build"
    print(f"built {built} drafts in {took:.0f} s ({per}); cache: {args.out}", file=sys.stderr)
    status(args, builder)


if __name__ == "__main__":
    main()
