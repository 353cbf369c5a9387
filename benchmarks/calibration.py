"""Calibrated abstention against fair confidence baselines, judged independently, on data the project did not write.

For one question set (``demo``; ``squad2``: SQuAD 2.0 near-miss unanswerable questions on three
Wikipedia articles, ``../shared/data/trust/squad2``; ``hotpotqa``: the HotpotQA sample of
``eval_sieve.py``), this script:

1. answers every question with the sieve, plain RAG and no retrieval (``ragsieve.eval.harness``;
   resumable cache ``runs/calibration/<set>/<model>.jsonl``);
2. splits the questions once, seeded, into a calibration half and a test half (stated in the
   report; every fitted or chosen thing below sees the calibration half only);
3. gives plain RAG and no retrieval the fair confidences of ``ragsieve.eval.baselines``
   (normalised top retrieval score, the answer's mean token log-probability under the model, and
   both combined by a logistic fit on the calibration half) and picks the best baseline by AURC on
   the calibration half;
4. reports, on the test half, the risk-coverage summary of the sieve and every baseline, and the
   sieve's selective accuracy minus the best baseline's at matched coverage with the paired
   bootstrap interval;
5. calibrates the sieve's ``Answer.confidence`` at alpha in {0.05, 0.1, 0.2} (Learn then Test,
   ``ragsieve.calibrate``) on the calibration half: the threshold, the coverage it buys, and the
   realised risk on the test half with its Wilson interval; plus the split simulation (how often the
   held-out risk exceeded alpha over ``--splits`` random calibration/test splits);
6. scores faithfulness with the independent judge (``ragsieve.eval.faithfulness.GoldEvidenceJudge``:
   the answer's numbers, dates and names, and the gold answer, against the evidence it cites).

It writes its own section of docs/results.md. Long LLM runs: run it in the background.

    python benchmarks/calibration.py --set squad2 --n 300
    python benchmarks/calibration.py --set hotpotqa --n 200
    python benchmarks/calibration.py --set demo --model gemma
    python benchmarks/calibration.py --set squad2 --n 300 --prepare-only   # build the index and question file
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from _report import ROOT, SHARED_DATA, markdown_table, write_section  # noqa: E402

RUNS = ROOT / "runs" / "calibration"
SETS = ("demo", "squad2", "hotpotqa")
ALPHAS = (0.05, 0.1, 0.2)
logger = logging.getLogger("calibration")


def prepare_squad2(out: Path, cfg: Any, n: int, seed: int) -> tuple[Path, Path, str]:
    """A seeded sample of ``n`` questions, half unanswerable, over all 131 paragraphs of the three articles."""
    from ragsieve.index import Index
    from ragsieve.io import atomic_write_jsonl, read_jsonl
    from ragsieve.types import Chunk

    root = SHARED_DATA / "trust" / "squad2"
    questions = list(read_jsonl(root / "questions.jsonl"))
    rng = random.Random(seed)
    answerable = [q for q in questions if q["answerable"]]
    unanswerable = [q for q in questions if not q["answerable"]]
    half = n // 2
    sample = rng.sample(answerable, n - half) + rng.sample(unanswerable, half)
    rng.shuffle(sample)
    rows = [
        {"id": q["id"], "question": q["question"], "answers": q["answers"], "answerable": q["answerable"],
         **({"evidence_ids": [q["gold_passage_id"]]} if q.get("gold_passage_id") and q["answerable"] else {})}
        for q in sample
    ]  # fmt: skip
    data = out / "questions.jsonl"
    atomic_write_jsonl(data, rows)
    index_dir = out / "index"
    if not (index_dir / "manifest.json").exists():
        chunks = [
            Chunk(id=p["id"], text=f"{p['title']}: {p['text']}", doc_id=p["id"], source=p.get("url") or "squad2",
                  title=p["title"])
            for p in read_jsonl(root / "corpus.jsonl")
        ]  # fmt: skip
        Index.from_chunks(chunks, index_dir, config=cfg)
    desc = (
        f"`../shared/data/trust/squad2` (SQuAD 2.0 dev, articles Normans, Computational complexity theory, Rhine; "
        f"see its PROVENANCE.md): seeded (seed {seed}) sample of {n - half} answerable + {half} unanswerable "
        "(annotator-written near misses) questions; index = all paragraphs of the three articles (title-prefixed)"
    )
    return data, index_dir, desc


def split_halves(ids: list[str], seed: int) -> tuple[list[int], list[int]]:
    order = list(range(len(ids)))
    random.Random(seed + 1).shuffle(order)
    half = len(order) // 2
    return sorted(order[:half]), sorted(order[half:])


def outcome_vector(items: list[Any], records: list[dict[str, Any]]) -> Any:
    from ragsieve.eval.scoring import ItemScores

    return ItemScores(items, records).outcome


def subset(seq: list[Any], idx: list[int]) -> list[Any]:
    return [seq[i] for i in idx]


def threshold_cell(res: Any) -> str:
    if res.feasible:
        return f"{res.threshold:.4g}"
    if res.best_bound is not None:
        return f"none (best certified risk {res.best_bound:.3f})"
    return "none (too few answers)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--set", choices=SETS, required=True)
    ap.add_argument("--n", type=int, default=300, help="questions (squad2, hotpotqa); the demo set is used whole")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", choices=("smollm2", "gemma"), default="smollm2")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--splits", type=int, default=500, help="random splits of the simulation")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--prepare-only", action="store_true", help="build the index and question file, answer nothing")
    ap.add_argument("--report-only", action="store_true", help="score what the cache holds; answer nothing new")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("faiss", "bm25s", "httpx", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    import numpy as np

    from eval_sieve import MODELS, model_settings, prepare_demo, prepare_hotpotqa
    from ragsieve.calibrate import answer_mask, calibrate_threshold, simulate_splits
    from ragsieve.config import PipelineConfig
    from ragsieve.eval.baselines import BaselineScorer, baseline_rows, best_baseline
    from ragsieve.eval.calibrate_cli import calibration_labels
    from ragsieve.eval.confidence import paired_selective_difference
    from ragsieve.eval.data import load_qa
    from ragsieve.eval.faithfulness import GoldEvidenceJudge, faithfulness_summary
    from ragsieve.eval.harness import EvalCache, cached_records, default_specs, run_eval
    from ragsieve.eval.selective import aurc, rank_scores, wilson_interval

    out = RUNS / args.set
    out.mkdir(parents=True, exist_ok=True)
    cfg = PipelineConfig.model_validate({"llm": {"n_threads": args.threads, **model_settings(args.model)}})
    if args.set == "demo":
        data, index_dir, desc = prepare_demo(out, cfg)
    elif args.set == "hotpotqa":
        data, index_dir, desc = prepare_hotpotqa(out, cfg, args.n, args.seed)
    else:
        data, index_dir, desc = prepare_squad2(out, cfg, args.n, args.seed)
    items = load_qa(data)
    print(
        f"{args.set}: {len(items)} questions ({sum(not i.answerable for i in items)} unanswerable), index {index_dir}"
    )
    if args.prepare_only:
        return
    cfg = cfg.model_copy(update={"index_dir": str(index_dir)})
    specs = default_specs(cfg)
    cache = EvalCache(out / f"{args.model}.jsonl").load()
    start = time.perf_counter()
    if not args.report_only:
        run_eval(items, specs, cache, None)
    done, records = cached_records(items, specs, cache, None)
    if len(done) < 20:
        raise SystemExit(f"only {len(done)} questions have every configuration's answer in {cache.path}")
    items = done
    cal, test = split_halves([i.id for i in items], args.seed)

    # fair baselines for plain RAG and no retrieval
    scorer = BaselineScorer(cfg)
    scorer.warm_up()
    rows: dict[str, list[dict[str, Any]]] = {}
    for name in ("plain", "no-retrieval"):
        recs = records[name]
        signals = [scorer.signals(r) for r in recs]
        _, correct = calibration_labels(items, recs)
        made, _ = baseline_rows(recs, signals, correct, cal, prefix=name)
        rows.update(made)
    outcomes = {name: outcome_vector(items, recs) for name, recs in {**records, **rows}.items()}
    best = best_baseline({k: outcomes[k] for k in rows}, rows, cal)

    def ranking(name: str, idx: list[int]) -> tuple[list[bool], list[float]]:
        recs = {**records, **rows}[name]
        return (
            list(outcomes[name][idx]),
            rank_scores([recs[i]["confidence"] for i in idx], [bool(recs[i]["abstained"]) for i in idx]),
        )

    table = []
    for name in ["sieve", "plain", *sorted(rows)]:
        o, s = ranking(name, test)
        table.append([name, f"{np.mean(o):.3f}", f"{aurc(o, s):.3f}"])
    sieve_cov = float(np.mean([not records["sieve"][i]["abstained"] for i in test]))
    o_s, s_s = ranking("sieve", test)
    o_b, s_b = ranking(best, test)
    diff = paired_selective_difference(o_s, s_s, o_b, s_b, coverage=sieve_cov, n_boot=args.bootstrap)

    # calibration of the sieve's confidence
    conf, correct = calibration_labels(items, records["sieve"])
    conf_a, correct_a = np.array(conf, dtype=object), np.asarray(correct)
    calib_rows = []
    for alpha in ALPHAS:
        res = calibrate_threshold(list(conf_a[cal]), correct_a[cal], alpha, args.delta)
        ans = answer_mask(list(conf_a[test]), res.threshold)
        n_ans = int(ans.sum())
        errors = int((ans & ~correct_a[test]).sum())
        lo, hi = wilson_interval(errors, n_ans) if n_ans else (float("nan"), float("nan"))
        sim = simulate_splits(conf, correct, alpha, args.delta, n_splits=args.splits, seed=args.seed)
        calib_rows.append([
            alpha,
            threshold_cell(res),
            f"{res.coverage:.1%}",
            f"{n_ans / len(test):.1%}",
            f"{errors / n_ans:.3f} [{lo:.3f}, {hi:.3f}]" if n_ans else "-",
            f"{sim.exceed_rate:.1%} [{sim.exceed_interval[0]:.1%}, {sim.exceed_interval[1]:.1%}]",
            f"{sim.pool_exceed_rate:.1%}",
            sim.infeasible,
        ])  # fmt: skip

    # independent faithfulness
    judge = GoldEvidenceJudge()
    faith: dict[str, Any] = {}
    for name in ("sieve", "plain"):
        verdicts = []
        for item, rec in zip(items, records[name], strict=True):
            if rec["abstained"] or rec.get("error"):
                continue
            cited = [scorer.index.get(c).text for c in rec["cited_ids"]]
            verdicts.append(judge.judge(rec["answer"], cited, item.answers if item.answerable else []))
        faith[name] = faithfulness_summary(verdicts)

    label = MODELS[args.model]["label"]
    body = [
        f"Data: {desc}. n = {len(items)} ({sum(not i.answerable for i in items)} unanswerable); model: {label}. "
        f"Calibration half {len(cal)} questions, test half {len(test)} (split seed {args.seed + 1}); every fit "
        "(the combined baseline's logistic regression, the choice of best baseline, the thresholds) used the "
        "calibration half only.",
        "",
        "Test half: share right (answered correctly or abstained on an unanswerable question) and AURC "
        "(lower is better) of each system ranked by its confidence; `plain+retrieval` / `+logprob` / `+combined` "
        "are plain RAG ranked by the normalised top retrieval score, the answer's mean token log-probability, "
        "and both combined.",
        "",
        markdown_table(["system", "right", "AURC"], table),
        "",
        f"Sieve vs the best baseline (`{best}`, chosen by AURC on the calibration half) at the sieve's coverage "
        f"{diff['coverage']:.1%}: selective accuracy {diff['a']:.3f} vs {diff['b']:.3f}, difference "
        f"{diff['difference']:+.3f}, paired 95% bootstrap interval [{diff['interval'][0]:+.3f}, "
        f"{diff['interval'][1]:+.3f}].",
        "",
        f"Calibrated abstention on the sieve's confidence (Learn then Test, binomial p-values, fixed-sequence "
        f"testing; delta = {args.delta}): threshold and coverage on the calibration half, coverage and realised "
        f"risk (Wilson 95%) on the test half; simulation over {args.splits} random 50/50 splits of all "
        f"{len(items)} questions: how often the held-out risk exceeded alpha, and how often the chosen threshold's "
        "risk on all questions did (what the guarantee bounds by delta).",
        "",
        markdown_table(
            [
                "alpha",
                "threshold",
                "coverage (cal)",
                "coverage (test)",
                "risk (test)",
                "held-out risk > alpha",
                "pool risk > alpha",
                "infeasible splits",
            ],
            calib_rows,
        ),  # fmt: skip
        "",
        "Faithfulness under the independent judge (answer-level: every number, date and name of the answer in the "
        "evidence it cites, and the gold answer in that evidence; not the sieve's verifier):",
        "",
        markdown_table(
            ["system", "faithful", "values cited", "gold in cited"],
            [
                [
                    name,
                    f"{s['faithful']['share']} (n={s['faithful']['n']})",
                    f"{s['values_cited']['share']} (n={s['values_cited']['n']})",
                    f"{s['cited_has_gold']['share']} (n={s['cited_has_gold']['n']})",
                ]
                for name, s in faith.items()
            ],
        ),  # fmt: skip
        "",
        f"Wall time {(time.perf_counter() - start) / 60:.1f} min.",
    ]
    text = "\n".join(body)
    section = f"calibration-{args.set}" + ("" if args.model == "smollm2" else f"-{args.model}")
    title = f"Calibrated abstention vs fair baselines: {args.set}" + (
        "" if args.model == "smollm2" else f" ({args.model})"
    )
    write_section("results/calibration.md", section, title, text)
    (out / f"{args.model}-calibration.json").write_text(
        json.dumps({"best_baseline": best, "difference": diff, "faithfulness": faith}, indent=1), encoding="utf-8"
    )
    print(text)


if __name__ == "__main__":
    main()
