"""The sieve vs plain RAG vs no retrieval, measured with ``ragsieve eval`` on three question sets.

Sets (each gets its own index under ``runs/eval/<set>/``, built once):

* ``demo``: the bundled demo questions (answerable and unanswerable rows) over the demo corpus;
* ``hotpotqa``: a seeded sample of HotpotQA dev (distractor), half bridge and half comparison
  questions, over every paragraph of the sampled questions (gold and distractor) in one index;
  gold evidence = the supporting paragraphs;
* ``popqa``: PopQA long-tail questions (the fixed-seed 200-question sample that the trained
  retrieval evaluator never saw), over CRAG's knowledge strings of those questions cut into
  3-sentence passages (Wikipedia strips and web knowledge) in one index.

Outputs go to a resumable cache (``runs/eval/<set>/<model>.jsonl``), so a killed run resumes;
``--report-only`` scores whatever every configuration has finished (the n actually run is
stated) and writes the section of docs/results/sieve-vs-plain-rag.md.

    python benchmarks/eval_sieve.py --set demo
    python benchmarks/eval_sieve.py --set hotpotqa --n 200
    nohup nice -n 10 python benchmarks/eval_sieve.py --set popqa --n 200 > runs/popqa.log 2>&1 &
    python benchmarks/eval_sieve.py --set popqa --n 200 --report-only
    python benchmarks/eval_sieve.py --set demo --model gemma   # Gemma-3-270M bundle
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

from _data import read_jsonl  # noqa: E402
from _models import MODELS, model_label, model_settings  # noqa: E402
from _report import ROOT, SHARED_DATA, write_section  # noqa: E402

RUNS = ROOT / "runs" / "eval"
SETS = ("demo", "hotpotqa", "popqa")
logger = logging.getLogger("eval_sieve")


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    from ragsieve.io import atomic_write_jsonl

    atomic_write_jsonl(path, rows)
    return path


def prepare_demo(out: Path, cfg: Any) -> tuple[Path, Path, str]:
    from ragsieve.demo import demo_corpus_dir, demo_data_path
    from ragsieve.index import Index

    index_dir = out / "index"
    if not Index.exists(index_dir):
        Index.build(demo_corpus_dir(), index_dir, config=cfg)
    data = Path(str(demo_data_path("questions.jsonl")))
    return data, index_dir, "`src/ragsieve/demo/questions.jsonl` (all rows, answerable and unanswerable)"


def prepare_hotpotqa(out: Path, cfg: Any, n: int, seed: int) -> tuple[Path, Path, str]:
    from ragsieve.index import Index
    from ragsieve.types import Chunk

    src = SHARED_DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"
    rows = list(read_jsonl(src))
    rng = random.Random(seed)
    bridge = rng.sample(range(0, 250), n // 2)
    comparison = rng.sample(range(250, 500), n - n // 2)
    sample = [rows[i] for i in sorted(bridge + comparison)]
    chunks: list[Chunk] = []
    seen: dict[str, str] = {}
    qa = []
    for r in sample:
        gold = []
        for c in r["contexts"]:
            key = c["title"] + "\n" + c["paragraph_text"]
            if key not in seen:
                seen[key] = f"p{len(chunks)}"
                text = " ".join(c["paragraph_text"].split())
                chunks.append(Chunk(id=seen[key], text=f"{c['title']}: {text}", doc_id=seen[key], source="hotpotqa",
                                    title=c["title"]))
            if c["is_supporting"]:
                gold.append(seen[key])
        qa.append({"id": r["id"], "question": r["question"], "answers": r["answers"], "evidence_ids": gold,
                   "type": r["type"]})
    index_dir = out / "index"
    if not Index.exists(index_dir):
        Index.from_chunks(chunks, index_dir, config=cfg)
    data = _write_jsonl(out / "questions.jsonl", qa)
    desc = (
        f"`../shared/data/hotpotqa/hotpotqa_dev_distractor_500.jsonl` (IRCoT's processed dev set; see its "
        f"PROVENANCE.md): seeded (seed {seed}) sample of {n // 2} bridge + {n - n // 2} comparison questions; "
        f"index = all {len(chunks)} paragraphs of the sampled questions (title-prefixed); gold evidence = "
        "supporting paragraphs"
    )
    return data, index_dir, desc


def prepare_popqa(out: Path, cfg: Any, n: int, seed: int) -> tuple[Path, Path, str]:
    from ragsieve.index import Index
    from ragsieve.tasks.popqa import load_popqa_items, split_items

    items = load_popqa_items(SHARED_DATA / "popqa" / "popqa_longtail_crag.jsonl")
    sample = split_items(items, max(n, 200), seed=seed)[0][:n]
    chunks = [c for it in sample for c in it.chunks]
    index_dir = out / "index"
    if not Index.exists(index_dir):
        Index.from_chunks(chunks, index_dir, config=cfg)
    qa = [{"id": it.id, "question": it.question, "answers": it.answers} for it in sample]
    data = _write_jsonl(out / "questions.jsonl", qa)
    desc = (
        "`../shared/data/popqa/popqa_longtail_crag.jsonl` (PopQA long tail, s_pop < 100; see its PROVENANCE.md): "
        f"the fixed-seed (seed {seed}) {n}-question sample held out from the retrieval evaluator's training; "
        f"index = CRAG's knowledge strings of those questions cut into 3-sentence passages ({len(chunks)} passages)"
    )
    return data, index_dir, desc


def fmt_pct(m: dict[str, Any], key: str) -> str:
    v = m.get(key)
    if v is None:
        return "–"
    lo, hi = m.get("intervals", {}).get(key, [None, None])
    ci = f" [{100 * lo:.0f}, {100 * hi:.0f}]" if lo is not None and hi is not None else ""
    return f"{100 * v:.1f}{ci}"


def fmt_diff(m: dict[str, Any], key: str, scale: float = 100.0, digits: int = 1) -> str:
    d = m.get("vs_baseline", {}).get(key)
    if not d or d.get("difference") is None:
        return "–"
    lo, hi = d["interval"]
    return f"{scale * d['difference']:+.{digits}f} [{scale * lo:+.{digits}f}, {scale * hi:+.{digits}f}]"


def render(scores: dict[str, dict[str, Any]], n_run: int, n_target: int, desc: str, model: str, judge: str) -> str:
    rows = []
    for name, m in scores.items():
        aurc_ci = m.get("intervals", {}).get("aurc", [None, None])
        aurc = "–" if m.get("aurc") is None else f"{m['aurc']:.3f}"
        if aurc_ci[0] is not None:
            aurc += f" [{aurc_ci[0]:.3f}, {aurc_ci[1]:.3f}]"
        abst = (
            f"{fmt_pct(m, 'abstain_unanswerable')} / {fmt_pct(m, 'abstain_answerable')}"
            if m.get("abstain_unanswerable") is not None
            else fmt_pct(m, "abstain_answerable")
        )
        cite = "–"
        if m.get("citation_precision") is not None:
            cite = f"{100 * m['citation_precision']:.0f} / {100 * (m.get('citation_recall') or 0):.0f}"
        rows.append(
            [
                name,
                fmt_pct(m, "accuracy"),
                fmt_pct(m, "coverage"),
                fmt_pct(m, "answered_accuracy"),
                aurc,
                f"{fmt_pct(m, 'faithfulness')} ({fmt_pct(m, 'faithfulness_grounded').split(' [')[0]})",
                abst,
                cite,
                f"{m['llm_calls_per_question']:.1f} / {m['tokens_per_question']:.0f} / {m['seconds_per_question']:.2f}",
            ]
        )
    head = ["configuration", "accuracy %", "coverage %", "answered acc. %", "AURC", "faithfulness % (grounded only)",
            "abstain % (unans. / ans.)" if any(m.get("abstain_unanswerable") is not None for m in scores.values())
            else "abstain % (answerable)", "citation P / R %", "LLM calls / tokens / s per q"]
    from _report import markdown_table

    table = markdown_table(head, rows)
    paired = []
    for name, m in scores.items():
        sel = m.get("vs_baseline", {}).get("selective_accuracy_matched")
        if not sel:
            continue
        paired.append(
            [
                name,
                f"{100 * sel['coverage']:.0f}%",
                f"{100 * sel['value']:.1f} vs {100 * sel['baseline']:.1f}",
                fmt_diff(m, "selective_accuracy_matched"),
                fmt_diff(m, "accuracy"),
                fmt_diff(m, "faithfulness"),
                fmt_diff(m, "aurc", 1.0, 3),
                fmt_diff(m, "seconds_per_question", 1.0, 2),
            ]
        )
    paired_table = markdown_table(
        ["vs plain RAG, same items", "matched coverage", "selective acc. % (this vs plain)", "Δ selective acc. pts",
         "Δ accuracy pts", "Δ faithfulness pts", "Δ AURC", "Δ s per q"],
        paired,
    )
    partial = (
        f"**n = {n_run} of the {n_target} planned questions** (the run did not finish in the time available; "
        "questions are answered in a fixed-seed random order, so these are a random subset, and every "
        "configuration has exactly these questions, so the comparisons stay paired). "
        if n_run < n_target
        else f"n = {n_run} questions. "
    )
    return (
        f"Data: {desc}. Model: {model}. {partial}Faithfulness judge (the same for every configuration): "
        f"`{judge}`; a sentence is faithful when the judge's support for it given the evidence it cites is >= 0.5 "
        "(a sentence citing nothing is unfaithful); the score is the mean share of faithful sentences over answered "
        "questions, an answer given without evidence (closed book) scoring 0; in brackets the same over answers "
        "that used evidence only. Accuracy: normalised gold-answer containment, abstentions count as wrong on "
        "answerable questions. AURC: area under the risk-coverage curve (outcomes ranked by `Answer.confidence`, "
        "abstentions last; lower is better). 95% percentile-bootstrap intervals over questions (1000 resamples); "
        "paired differences use the same resampled questions for both configurations. Matched coverage = the lower "
        "of the two configurations' coverages; plain RAG is ranked there by its own confidence (ties, e.g. no "
        "confidence, count in expectation).\n\n" + table + "\n\n" + paired_table
    )


def stage_latency(records: dict[str, list[dict[str, Any]]], n: int, set_name: str, model: str) -> str | None:
    """Each stage's mean ms and share of the mean ask time per configuration (records that
    carry per-stage timings), with the sieve / plain ratio of mean seconds per question."""
    import numpy as np

    from _report import markdown_table

    rows = []
    for name, recs in records.items():
        timed = [r for r in recs if r.get("stage_ms") is not None and not r.get("error")]
        if not timed:
            continue
        total = float(np.mean([1000 * r["seconds"] for r in timed]))
        stages: dict[str, list[float]] = {}
        for r in timed:
            for stage, ms in r["stage_ms"].items():
                if stage != "pipeline":
                    stages.setdefault(stage, []).append(ms)
        for stage, values in stages.items():
            mean = float(np.sum(values)) / len(timed)  # a stage that did not run counts as 0 ms
            rows.append([name, stage, f"{mean:.0f}", f"{float(np.median(values)):.0f}", f"{100 * mean / total:.0f}%"])
        median_total = float(np.median([1000 * r["seconds"] for r in timed]))
        rows.append([name, "**total ask**", f"{total:.0f}", f"{median_total:.0f}", f"100% (n = {len(timed)})"])
    if not rows:
        return None
    ratio = ""
    if "sieve" in records and "plain" in records:
        s_sec = np.array([r["seconds"] for r in records["sieve"]])
        p_sec = np.array([r["seconds"] for r in records["plain"]])
        rng = np.random.default_rng(0)
        draws = (rng.integers(0, len(s_sec), len(s_sec)) for _ in range(1000))
        boot = [s_sec[i].mean() / p_sec[i].mean() for i in draws]
        ratio = (f"\n\nSieve / plain RAG mean seconds per question: **{s_sec.mean() / p_sec.mean():.2f}x** "
                 f"(bootstrap 95% interval {np.percentile(boot, 2.5):.2f}-{np.percentile(boot, 97.5):.2f}, "
                 f"n = {len(s_sec)} paired questions); goal <= 3x.")
    return (
        f"From the per-question records of `benchmarks/eval_sieve.py --set {set_name}` ({model}; n = {n} questions "
        "per configuration, llama.cpp 1 thread, run while other jobs shared the 2 cores: compare shares and "
        "ratios, not absolute times). Mean = mean over questions of a stage's milliseconds (0 where it did not "
        "run, e.g. generation after an abstention); median over the questions where it ran. `need` includes the "
        "retrieval probe it makes; `verify` includes a regeneration when one happens.\n\n"
        + markdown_table(["configuration", "stage", "mean ms", "median ms", "share of mean ask time"], rows)
        + ratio
    )


def second_judge_table(
    args: Any, cfg: Any, index_dir: Path, items: list[Any], records: dict[str, list[dict[str, Any]]],
    scores: dict[str, Any],
) -> str:
    """Faithfulness of the same answers under a second judge (re-scored from the cache)."""
    from _report import markdown_table
    from ragsieve.eval.cli import make_judge
    from ragsieve.eval.harness import rejudge_faithfulness
    from ragsieve.eval.scoring import score_all
    from ragsieve.index import Index

    index = Index.open(index_dir)
    judge = make_judge(args.second_judge, cfg)
    again = score_all(items, rejudge_faithfulness(records, judge, lambda cid: index.get(cid).text),
                      baseline="plain" if "plain" in records else None)
    rows = []
    for name, m in again.items():
        if name == "no-retrieval":
            continue
        rows.append([name, fmt_pct(m, "faithfulness"), fmt_pct(scores[name], "faithfulness"),
                     fmt_diff(m, "faithfulness")])
    return (
        f"Faithfulness of the same answered questions under a second judge, `{judge.name}` (re-scored from the "
        "cached sentences and cited evidence; nothing re-generated). How well each judge separates supported from "
        "unsupported claims is measured in \"Verification: claim judges on the demo corpus\"; the sieve's verify "
        "stage uses `lexical-embedding` itself, so under that judge the sieve is partly graded by its own check.\n\n"
        + markdown_table(["configuration", f"faithfulness % ({judge.name})",
                          f"faithfulness % ({scores_judge(records)})", f"Δ vs plain pts ({judge.name})"], rows)
    )


def scores_judge(records: dict[str, list[dict[str, Any]]]) -> str:
    for recs in records.values():
        for r in recs:
            if r.get("judge"):
                return str(r["judge"])
    return "none"


def held_out_accuracy(path: Path, items: list[Any], records: dict[str, list[dict[str, Any]]]) -> str:
    """Accuracy of each configuration vs plain RAG on the questions listed in ``path`` and on the
    others (paired bootstrap of the difference), so a setting designed on some questions is also
    judged on questions it was not designed on."""
    from ragsieve.attack.metrics import paired_bootstrap
    from ragsieve.eval.scoring import ItemScores

    listed = {line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}
    correct = {name: ItemScores(items, recs).correct for name, recs in records.items()}
    lines = [f"Accuracy on the questions listed in `{path.as_posix()}` ({len(listed)} ids) and on the others, "
             "vs plain RAG (paired bootstrap, 2000 resamples):", ""]
    for label, pick in (("not listed", False), ("listed", True)):
        idx = [i for i, item in enumerate(items) if (item.id in listed) == pick]
        if not idx or "plain" not in correct:
            continue
        for name, vec in correct.items():
            if name == "plain":
                continue
            d, lo, hi = paired_bootstrap([bool(vec[i]) for i in idx], [bool(correct["plain"][i]) for i in idx])
            lines.append(f"- {label} (n = {len(idx)}): {name} {vec[idx].mean() * 100:.1f} % vs plain "
                         f"{correct['plain'][idx].mean() * 100:.1f} %, difference {d * 100:+.1f} pts "
                         f"[{lo * 100:+.1f}, {hi * 100:+.1f}]")
    return "\n".join(lines)


def checks_acted(records: dict[str, list[dict[str, Any]]]) -> str:
    """Per configuration, how many candidates each check kept / flagged / dropped (means per
    question) and how the questions ended (abstention reasons by check)."""
    from collections import Counter

    lines = []
    for name, recs in records.items():
        have = [r for r in recs if r.get("decisions") is not None]
        if not have or name == "no-retrieval":
            continue
        tot: Counter[str] = Counter()
        for r in have:
            tot.update(r["decisions"])
        ends = Counter((r.get("abstain_reason") or "").split(":")[0] for r in have if r.get("abstained"))
        acts = ", ".join(f"{k} {v / len(have):.1f}" for k, v in sorted(tot.items()))
        why = ", ".join(f"{k or 'other'} {v}" for k, v in ends.most_common()) or "none"
        lines.append(f"- {name} (n = {len(have)}): per question {acts or 'no recorded decisions'}; "
                     f"abstentions by check: {why}.")
    return ("Which checks acted (mean candidates per question by check:verdict, from the traces):\n\n"
            + "\n".join(lines)) if lines else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--set", choices=SETS, required=True)
    ap.add_argument("--n", type=int, default=200, help="questions (hotpotqa, popqa); the demo set is used whole")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", choices=sorted(MODELS), default="smollm2")
    ap.add_argument(
        "--judge", default="llm-logprob",
        help="fixed faithfulness judge; keep it different from the sieve's own verify judge (lexical-embedding)",
    )
    ap.add_argument("--only", default="sieve,plain,no-retrieval", help="configurations to run")
    ap.add_argument("--ablate", action="append", default=[], help="sieve rows without these stages")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads per model")
    ap.add_argument("--report-only", action="store_true", help="score what the cache holds; answer nothing new")
    ap.add_argument("--second-judge", default="lexical-embedding",
                    help="also score faithfulness of the same answers with this judge ('none': skip)")
    ap.add_argument("--plot", type=Path, default=None, help="also write the risk-coverage curves (PNG)")
    ap.add_argument("--section", default=None, help="results-page section name (default: eval-sieve-<set>[-<model>])")
    ap.add_argument(
        "--exclude-ids", type=Path, default=None,
        help="a file of question ids (one per line), e.g. the questions a setting was designed on: also report "
             "the accuracy difference vs plain RAG on the questions not listed",
    )
    args = ap.parse_args()
    if args.exclude_ids is not None and not args.exclude_ids.is_file():
        raise SystemExit(f"--exclude-ids {args.exclude_ids} is not a file; pass a file of question ids, one per line "
                         "(benchmarks/attack_poisoning.py writes runs/attack/<set>/target_ids.txt)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("faiss", "bm25s", "httpx", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    from ragsieve.config import PipelineConfig
    from ragsieve.eval.cli import make_judge, parse_ablations
    from ragsieve.eval.data import load_qa
    from ragsieve.eval.harness import EvalCache, cached_records, default_specs, run_eval
    from ragsieve.eval.report import plot_risk_coverage
    from ragsieve.eval.scoring import score_all

    out = RUNS / args.set
    out.mkdir(parents=True, exist_ok=True)
    llm = {"n_threads": args.threads, **model_settings(args.model)}
    cfg = PipelineConfig.model_validate({"llm": llm})
    if args.set == "demo":
        data, index_dir, desc = prepare_demo(out, cfg)
    elif args.set == "hotpotqa":
        data, index_dir, desc = prepare_hotpotqa(out, cfg, args.n, args.seed)
    else:
        data, index_dir, desc = prepare_popqa(out, cfg, args.n, args.seed)
    cfg = cfg.model_copy(update={"index_dir": str(index_dir)})
    specs = default_specs(cfg, parse_ablations(args.ablate))
    wanted = [w.strip() for w in args.only.split(",")] + [s.name for s in specs if s.name.startswith("sieve -")]
    specs = [s for s in specs if s.name in wanted]
    items = load_qa(data)
    # A fixed-seed random order, so that a run stopped early has answered a random subset (the demo file
    # lists its unanswerable questions last; the HotpotQA sample lists bridge before comparison questions).
    random.Random(args.seed).shuffle(items)
    cache = EvalCache(out / f"{args.model}.jsonl").load()
    judge = make_judge(args.judge, cfg)
    judge_name = judge.name if judge is not None else "none"
    cached_before = len(cache.records)
    start = time.perf_counter()
    if not args.report_only:

        def progress(done: int, total: int) -> None:
            if done % len(specs) == 0:
                logger.info("%s: %d/%d outputs (%.0fs)", args.set, done, total, time.perf_counter() - start)

        run_eval(items, specs, cache, judge, progress=progress)
    wall = time.perf_counter() - start
    new_outputs = len(cache.records) - cached_before
    done_items, records = cached_records(items, specs, cache, judge_name)
    if not done_items:
        raise SystemExit(f"no question has outputs from every configuration yet in {cache.path}")
    scores = score_all(done_items, records, baseline="plain" if "plain" in records else None)
    if args.plot is not None:
        plot_risk_coverage(scores, args.plot, title=f"{args.set}, {args.model}, n={len(done_items)}")
    body = render(scores, len(done_items), len(items), desc, model_label(args.model), judge_name)
    if args.second_judge != "none" and args.second_judge != judge_name:
        body += "\n\n" + second_judge_table(args, cfg, index_dir, done_items, records, scores)
    if args.exclude_ids is not None:
        body += "\n\n" + held_out_accuracy(args.exclude_ids, done_items, records)
    acted = checks_acted(records)
    if acted:
        body += "\n\n" + acted
    if args.plot is not None and args.plot.resolve().is_relative_to((ROOT / "docs").resolve()):
        rel = args.plot.resolve().relative_to((ROOT / "docs").resolve())
        body += f"\n\n![Risk-coverage curves, {args.set}]({rel.as_posix()})"
    if new_outputs:
        body += (
            f"\n\nWall time of the run that wrote this section: {wall / 60:.1f} min for {new_outputs} new outputs "
            f"({len(specs)} configurations; {cached_before} outputs were already cached), llama.cpp with "
            f"{args.threads} thread(s), on a machine shared with other jobs."
        )
    section = args.section or f"eval-sieve-{args.set}" + ("" if args.model == "smollm2" else f"-{args.model}")
    title = f"The sieve vs plain RAG: {args.set}" + ("" if args.model == "smollm2" else f" ({args.model})")
    if args.section:
        title += f" ({', '.join(s.name for s in specs)})"
    write_section("results/sieve-vs-plain-rag.md", section, title, body)
    latency = stage_latency(records, len(done_items), args.set, model_label(args.model))
    if latency:
        write_section("benchmarks.md", f"{section}-stages", f"Stage latency: {title[len('The '):]}", latency)
    (out / f"{args.model}-scores.json").write_text(json.dumps(scores, indent=1), encoding="utf-8")
    print(body)


if __name__ == "__main__":
    main()
