"""Abstention on SQuAD 2.0 near misses through the whole sieve, reading with the rules or the extractive reader.

The default sieve (``pipeline = "sieve"``, every default) answers the same seeded SQuAD 2.0 questions
twice, once with ``[reading] reader = "rules"`` (the default) and once with ``"minilm"`` (the
fine-tuned extractive reader), through the eval harness (``ragsieve.eval.harness``: one shared index,
LLM and search per question; generation and decisions each setting's own). Data, sample and index are
``calibration.py``'s (``--set squad2``: ``../shared/data/trust/squad2``, seed 0, 300 questions, half
annotator-written near-miss unanswerable ones, drawn outside the questions the bundled decision model
was trained on; index = all paragraphs of the three articles). The questions are answered in the
sample's own (seeded, shuffled) order, so a run stopped early has answered a random subset.

Reported per model and setting: the share of unanswerable questions abstained on, the share of
answerable ones abstained on, and accuracy on the answerable ones (a gold alias contained in an
answer that is no abstention), each with its Wilson 95% interval; then minilm minus rules on the
same questions (paired bootstrap 95% interval, and the discordant questions). Nothing is tuned.

Resumable: one JSON line per question and setting in ``runs/reader_abstention/<model>.jsonl``.

    nice -n 10 python benchmarks/reader_abstention.py --model smollm2 --limit 100 --no-report
    nice -n 10 python benchmarks/reader_abstention.py --model gemma --limit 80 --no-report
    python benchmarks/reader_abstention.py --report-only          # both models, what the caches hold
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from _models import MODELS, model_label, model_settings  # noqa: E402
from _report import ROOT, markdown_table, publish_section  # noqa: E402
from _stats import paired_bootstrap_interval, rate_with_interval  # noqa: E402

RUNS = ROOT / "runs" / "reader_abstention"
READERS = ("rules", "minilm")
GOAL_UNANSWERABLE = 0.60  # near misses abstained, at least
GOAL_ANSWERABLE = 0.15  # answerable abstained, at most
logger = logging.getLogger("reader_abstention")


def reader_specs(cfg: Any) -> list[Any]:
    """The default sieve on ``cfg``, once per reader (spec names ``rules`` and ``minilm``)."""
    from ragsieve.eval.harness import EvalSpec, default_specs

    sieve = default_specs(cfg)[0].config
    return [
        EvalSpec(name, sieve.model_copy(update={"reading": sieve.reading.model_copy(update={"reader": name})}))
        for name in READERS
    ]


def setup(model: str, n: int, seed: int) -> tuple[list[Any], list[Any], Any, str]:
    """The questions (sample order), the two specs, the answer cache of ``model`` and the data description."""
    from calibration import prepare_squad2
    from ragsieve.config import PipelineConfig
    from ragsieve.eval.data import load_qa
    from ragsieve.eval.harness import EvalCache
    from train_decision import bundled_model_training_ids

    data_dir = RUNS / f"squad2-{n}-{seed}"
    data_dir.mkdir(parents=True, exist_ok=True)
    cfg = PipelineConfig.model_validate({"llm": {"n_threads": 1, **model_settings(model)}})
    data, index_dir, desc = prepare_squad2(data_dir, cfg, n, seed, exclude=bundled_model_training_ids())
    items = load_qa(data)
    cfg = cfg.model_copy(update={"index_dir": str(index_dir)})
    cache = EvalCache(RUNS / f"{model}.jsonl").load()
    return items, reader_specs(cfg), cache, desc


def paired_cell(a: np.ndarray, b: np.ndarray, seed: int) -> str:
    """``b - a`` in points with its paired bootstrap 95% interval, and the discordant pairs."""
    if len(a) == 0:
        return "n/a"
    from scipy.stats import binomtest

    d, lo, hi = paired_bootstrap_interval(a.astype(float), b.astype(float), seed=seed)
    only_b = int((b & ~a).sum())
    only_a = int((a & ~b).sum())
    # exact McNemar test: the discordant questions split evenly under no difference
    p = binomtest(only_b, only_a + only_b).pvalue if only_a + only_b else 1.0
    return (
        f"{100 * d:+.1f} pts [{100 * lo:+.1f}, {100 * hi:+.1f}] (only minilm {only_b}, only rules {only_a}; "
        f"McNemar p = {p:.2g})"
    )


def model_report(model: str, items: list[Any], records: dict[str, list[dict[str, Any]]], seed: int) -> dict[str, Any]:
    """Figures and table rows of one model's answered questions."""
    from ragsieve.eval.scoring import ItemScores

    scores = {name: ItemScores(items, records[name]) for name in READERS}
    answerable = scores["rules"].answerable
    n_ans, n_un = int(answerable.sum()), int((~answerable).sum())
    rows, figures = [], {}
    for name in READERS:
        s = scores[name]
        k_un = int(s.abstained[~answerable].sum())
        k_ans = int(s.abstained[answerable].sum())
        k_right = int(s.correct[answerable].sum())
        errors = sum(bool(r.get("error")) for r in records[name])
        secs = float(np.median([r["seconds"] for r in records[name]])) if records[name] else float("nan")
        figures[name] = {"un": (k_un, n_un), "ans": (k_ans, n_ans), "right": (k_right, n_ans)}
        rows.append([
            f"{model}, {name}",
            rate_with_interval(k_un, n_un),
            rate_with_interval(k_ans, n_ans),
            rate_with_interval(k_right, n_ans),
            f"{secs:.1f}",
            errors,
        ])  # fmt: skip
    r, m = scores["rules"], scores["minilm"]
    paired = [
        f"{model}",
        paired_cell(r.abstained[~answerable], m.abstained[~answerable], seed),
        paired_cell(r.abstained[answerable], m.abstained[answerable], seed),
        paired_cell(r.correct[answerable], m.correct[answerable], seed),
    ]
    same_text = sum(a["answer"] == b["answer"] and a["abstained"] == b["abstained"]
                    for a, b in zip(records["rules"], records["minilm"], strict=True))  # fmt: skip
    un_k, un_n = figures["minilm"]["un"]
    ans_k, ans_n = figures["minilm"]["ans"]
    met = un_n > 0 and ans_n > 0 and un_k / un_n >= GOAL_UNANSWERABLE and ans_k / ans_n <= GOAL_ANSWERABLE
    return {"rows": rows, "paired": paired, "same": same_text, "n": len(items), "n_un": n_un, "n_ans": n_ans,
            "figures": figures, "met": met}  # fmt: skip


def unweighed_sentence() -> str:
    """Which of the reader's signals the bundled decision model leaves unweighed (read from the model)."""
    from ragsieve.decision import DecisionModel

    reader = [s for s in DecisionModel.default().unweighed() if s.startswith("reader.")]
    if not reader:
        return ""
    return (
        "Where the reader acts: its readings drive the conflict comparison, the contradiction check and `select`; "
        f"its signals ({', '.join(f'`{s}`' for s in reader)}) reach the decide stage, but the bundled decision "
        "model was trained without them and leaves them unweighed, so they move no confidence. Nothing was "
        "retrained or tuned for this run."
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--model", choices=(*MODELS, "both"), default="both", help="model to answer with (or report)")
    ap.add_argument("--n", type=int, default=300, help="calibration.py's sample size (the sample drawn)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None, help="answer only the first N sampled questions")
    ap.add_argument("--report-only", action="store_true", help="report what the caches hold; answer nothing")
    ap.add_argument("--no-report", action="store_true", help="answer, then stop without a report")
    ap.add_argument("--min-questions", type=int, default=10, help="fewest answered questions to report a model")
    ap.add_argument("--no-write", action="store_true", help="print the section, do not write the docs")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("faiss", "bm25s", "httpx", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    from ragsieve.eval.harness import cached_records, run_eval

    models = list(MODELS) if args.model == "both" else [args.model]
    if not args.report_only:
        for model in models:
            items, specs, cache, _ = setup(model, args.n, args.seed)
            todo = items[: args.limit] if args.limit else items
            start = time.perf_counter()

            def progress(done: int, total: int, model: str = model, start: float = start) -> None:
                if done % len(READERS) == 0:
                    logger.info("%s: %d/%d question-settings, %.0f s", model, done, total, time.perf_counter() - start)

            run_eval(todo, specs, cache, None, progress=progress)
    if args.no_report:
        return

    reports: dict[str, dict[str, Any]] = {}
    desc = ""
    for model in models:
        items, specs, cache, desc = setup(model, args.n, args.seed)
        done, records = cached_records(items, specs, cache, None)
        if len(done) < args.min_questions:
            print(f"{model}: only {len(done)} questions answered in both settings in {cache.path}; not reported")
            continue
        # the answered questions are a prefix of the sample order unless a run skipped one
        prefix = [i.id for i in items[: len(done)]] == [i.id for i in done]
        reports[model] = {**model_report(model, done, records, args.seed), "prefix": prefix}
    if not reports:
        raise SystemExit("nothing to report")

    lines = [
        f"Data: {desc} (`calibration.py --set squad2`'s sample; the SQuAD 2.0 questions the bundled decision "
        "model was trained on are never drawn; the extractive reader was trained on SQuADShifts new_wiki and NQ, "
        'never on SQuAD 2.0). The default sieve answered the same questions with `[reading] reader = "rules"` '
        '(the default) and `"minilm"` (the extractive reader), every other setting the default, through the '
        "eval harness; questions taken in the sample's seeded shuffled order and stopped by a time box, so "
        "each model's n below is "
        + "; ".join(
            f"{m}: the first {r['n']} of the 300 sampled questions ({r['n_un']} unanswerable, {r['n_ans']} "
            f"answerable){'' if r['prefix'] else ', not a prefix'}"
            for m, r in reports.items()
        )
        + " (a random subset of the sample, not the whole of it). Abstained: the sieve's answer is an abstention "
        "(any stop or withdrawal); accuracy: an answerable question answered with a gold alias contained in the "
        "answer; Wilson 95% intervals. Nothing was tuned on these questions.",
        "",
        markdown_table(
            [
                "model, reader",
                "abstained (unanswerable)",
                "abstained (answerable)",
                "accuracy (answerable)",
                "median s per answer",
                "errors",
            ],
            [row for r in reports.values() for row in r["rows"]],
        ),  # fmt: skip
        "",
        "**minilm minus rules on the same questions** (paired bootstrap 95% interval; in brackets the questions "
        "where only one setting abstained, or only one answered right, and the exact McNemar test on them):",
        "",
        markdown_table(
            ["model", "abstained (unanswerable)", "abstained (answerable)", "accuracy (answerable)"],
            [r["paired"] for r in reports.values()],
        ),
        "",
        "Same answer (text and abstention) in both settings: "
        + "; ".join(f"{m} {r['same']}/{r['n']}" for m, r in reports.items())
        + ".",
        "",
        f"**Goal** (near misses abstained >= {GOAL_UNANSWERABLE:.0%} with <= {GOAL_ANSWERABLE:.0%} of answerable "
        "questions abstained, reading with the reader): "
        + "; ".join(
            f"{m}: {'met' if r['met'] else 'not met'} ("
            f"{r['figures']['minilm']['un'][0]}/{r['figures']['minilm']['un'][1]} near misses, "
            f"{r['figures']['minilm']['ans'][0]}/{r['figures']['minilm']['ans'][1]} answerable abstained)"
            for m, r in reports.items()
        )
        + ".",
        "",
        unweighed_sentence(),
        "",
        "Models: " + "; ".join(f"{m}: {model_label(m)}" for m in reports) + ". Answers cached in "
        "`runs/reader_abstention/<model>.jsonl` (one line per question and setting).",
    ]
    publish_section("results/reader.md", "reader-abstention",
                    "Through the sieve: SQuAD 2.0 near misses abstained, rules vs reader", "\n".join(lines),
                    write=not args.no_write)  # fmt: skip


if __name__ == "__main__":
    main()
