"""The decide stage's model on question sets it was not trained on: the demo set, HotpotQA,
SQuAD 2.0 and the PoisonedRAG HotpotQA targets, against plain RAG on the same questions.

Per question of the chosen set (``--set``), answered by the chosen bundled model (``--model``):

* the sieve runs with ``decide.mode = "observe"``: every check leaves its signals and no check
  withdraws the draft; the row keeps the checks that fired, the draft and the ``decide`` record's
  signals; the draft is judged by the gold answer (a gold alias contained in it; an unanswerable
  question's draft is always wrong), never by a check;
* plain RAG answers the same question through the eval harness (``ragsieve.eval.harness``) with
  the fair baselines' signals scored at answer time (normalised top retrieval score, the answer's
  mean token log-probability).

Both are cached per question (``runs/decision/<set folder>/``; a killed or time-boxed run
resumes, ``--max-minutes`` bounds one run) and the report covers the questions both have
finished, stating how many of the planned ones that is. Questions are answered in a fixed-seed
random order, so a partial run is a random subset. The report (its own section of
``docs/results/calibration.md`` per set and model):

* the per-check table (``ragsieve.eval.checks``): how often each check fired on answerable and
  unanswerable questions and its precision as a veto;
* the drafts ranked by the decision model's confidence and by plain RAG's own two signals of the
  same drafts (top retrieval score, answer token probability): AURC with 95% bootstrap intervals
  and paired differences;
* the decision at the model's default threshold (how its header says it was chosen): answered
  drafts, accuracy on answerable questions against keeping every draft and against plain RAG
  (Wilson intervals; the difference with plain RAG with a paired bootstrap interval), right
  drafts withdrawn (Wilson interval) and, on the PoisonedRAG targets, answers stating the
  attacker's answer;
* the sieve against plain RAG ranked by its best confidence at the sieve's coverage: the
  finished questions split once, seeded, into a calibration and a test half
  (``ragsieve.eval.fair.split_indices``, as ``calibration.py`` does); the best of plain RAG's
  confidences (retrieval, log-probability, both combined by a logistic fit) is chosen by AURC on
  the calibration half; selective accuracy and AURC on the test half, paired bootstrap intervals;
* the threshold ``ragsieve calibrate`` certifies on the decision model's confidence (Learn then
  Test, ``ragsieve.calibrate``, delta 0.1) at alpha 0.1, 0.2 and 0.3 on the calibration half,
  with its coverage and realised risk on the test half.

The decision model was trained on the calibration part of a SQuAD 2.0 sample
(``benchmarks/train_decision.py``); on SQuAD 2.0 those training questions are excluded before
the report set is drawn (``--train-n``/``--train-seed`` name the training run and are checked
against the model's header). Nothing here was tuned on any of these sets.

    python benchmarks/decision_sets.py --set demo --max-minutes 20
    python benchmarks/decision_sets.py --set squad2 --n 300 --max-minutes 120
    python benchmarks/decision_sets.py --set hotpotqa --n 200 --model gemma --max-minutes 120
    python benchmarks/decision_sets.py --set poisonedrag --max-minutes 60
    python benchmarks/decision_sets.py --set squad2 --report-only --no-write
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import ROOT, markdown_table, write_section  # noqa: E402

RUNS = ROOT / "runs" / "decision"
SETS = ("demo", "hotpotqa", "squad2", "poisonedrag")
DEFAULT_N = {"hotpotqa": 200, "squad2": 300}
ALPHAS = (0.1, 0.2, 0.3)
DELTA = 0.1  # ragsieve calibrate's default
NO_DRAFT = float("-inf")  # rank of a question the sieve stopped before any draft, or withdrew


@dataclass
class QuestionSet:
    """One set's questions (in answering order), the configuration that answers them, and what
    the report says about where they come from."""

    items: list[Any]
    config: Any
    desc: str
    folder: Path
    note: str = ""
    poison_answers: dict[str, str] = field(default_factory=dict)


def _shuffled(items: list[Any], seed: int) -> list[Any]:
    # a fixed-seed random order, so that a run stopped early has answered a random subset
    random.Random(seed).shuffle(items)
    return items


def squad2_excluded(model_about: Mapping[str, Any], train_n: int, train_seed: int) -> list[str]:
    """The SQuAD 2.0 question ids the bundled decision model was trained on, after checking that
    its header names the training split ``train_decision.py --n train_n --seed train_seed`` makes."""
    from train_decision import split_description, trained_question_ids

    want = split_description(train_n, train_seed)
    if model_about.get("split") != want:
        raise SystemExit(
            f"the decision model's header names the split {model_about.get('split')!r}, not {want!r}; pass the "
            "--train-n/--train-seed it was trained with, so its training questions can be left out"
        )
    return trained_question_ids(train_n, train_seed)


def prepare_set(args: argparse.Namespace, model_about: Mapping[str, Any]) -> QuestionSet:
    from _models import model_settings
    from calibration import prepare_squad2
    from eval_sieve import prepare_demo, prepare_hotpotqa
    from ragsieve.config import PipelineConfig
    from ragsieve.eval.data import load_qa

    if args.set == "poisonedrag":
        return prepare_poisonedrag(args)
    cfg = PipelineConfig.model_validate({"llm": {"n_threads": args.threads, **model_settings(args.model)}})
    note = ""
    if args.set == "demo":
        out = RUNS / "demo"
        out.mkdir(parents=True, exist_ok=True)
        data, index_dir, desc = prepare_demo(out, cfg)
    elif args.set == "hotpotqa":
        out = RUNS / f"hotpotqa-{args.n}-{args.seed}"
        out.mkdir(parents=True, exist_ok=True)
        data, index_dir, desc = prepare_hotpotqa(out, cfg, args.n, args.seed)
    else:
        excluded = squad2_excluded(model_about, args.train_n, args.train_seed)
        out = RUNS / f"squad2-heldout-{args.n}-{args.seed}"
        out.mkdir(parents=True, exist_ok=True)
        data, index_dir, desc = prepare_squad2(out, cfg, args.n, args.seed, exclude=excluded)
        note = (
            f" **The {len(excluded)} questions the decision model was trained on are excluded**: the training "
            f"split of `train_decision.py --n {args.train_n} --seed {args.train_seed}` (its header: "
            f"{model_about.get('split')}, over `calibration.py`'s seed-{args.train_seed} "
            f"{args.train_n}-question sample; ids from `train_decision.trained_question_ids`); the report set was "
            "drawn from the other questions and shares none of them (checked)."
        )
    items = load_qa(data)
    if args.set == "squad2":
        overlap = {i.id for i in items} & set(excluded)
        if overlap:
            raise SystemExit(f"{len(overlap)} report questions are training questions; the exclusion failed")
    cfg = cfg.model_copy(update={"index_dir": str(index_dir)})
    return QuestionSet(_shuffled(items, args.seed), cfg, desc, out, note)


def prepare_poisonedrag(args: argparse.Namespace) -> QuestionSet:
    """Every PoisonedRAG HotpotQA target with its HotpotQA row over the corpus with PoisonedRAG's
    GPT-4 passages added (``voices_attack.py``'s targets and index, built once and shared)."""
    from ragsieve.config import validate_config
    from ragsieve.embed import load_embedder
    from ragsieve.eval.data import load_qa
    from ragsieve.io import atomic_write_jsonl
    from voices_attack import RUNS as ATTACK_RUNS
    from voices_attack import all_targets, indexes_for, ts

    rows = all_targets()
    base = validate_config(ts.llm_common(args.model, args.threads))
    indexes, _, _ = indexes_for(rows, load_embedder(base.embedder), writers=("gpt4",))
    out = RUNS / "poisonedrag-gpt4"
    out.mkdir(parents=True, exist_ok=True)
    data = out / "questions.jsonl"
    atomic_write_jsonl(data, [{"id": r["id"], "question": r["question"], "answers": r["answers"]} for r in rows])
    cfg = base.model_copy(update={"index_dir": str(indexes["gpt4"].dir)})
    desc = (
        f"`../shared/data/trust/poisonedrag`: all {len(rows)} PoisonedRAG HotpotQA targets that have their HotpotQA "
        "row; corpus = those questions' HotpotQA contexts plus PoisonedRAG's 5 GPT-4-written passages per target "
        f"(`voices_attack.py`'s `gpt4` index, `{ATTACK_RUNS.relative_to(ROOT)}`); yes/no answers from "
        "log-probabilities (`generation.polar_answers = \"label\"`, as `voices_attack.py` answers)"
    )
    return QuestionSet(_shuffled(load_qa(data), args.seed), cfg, desc, out,
                       poison_answers={r["id"]: r["poison_answer"] for r in rows})  # fmt: skip


def collect(args: argparse.Namespace, qs: QuestionSet) -> tuple[list[Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Answer what the caches lack (until the time box); the finished questions, their sieve rows
    and plain RAG's eval records."""
    from ragsieve.attack.metrics import attack_succeeded
    from ragsieve.eval.checks import fired_checks
    from ragsieve.eval.harness import EvalCache, default_specs, run_eval
    from ragsieve.eval.shared import SharedWork
    from ragsieve.io import read_jsonl

    cache = qs.folder / f"{args.model}-rows.jsonl"
    done: dict[str, dict[str, Any]] = {row["id"]: row for row in read_jsonl(cache)} if cache.exists() else {}
    plain_spec = next(s for s in default_specs(qs.config) if s.name == "plain")
    plain_cache = EvalCache(qs.folder / f"{args.model}-plain.jsonl").load()

    def plain_done(item: Any) -> bool:
        return plain_cache.get(plain_spec.key(item.id, item.question, None)) is not None

    observe = qs.config.model_copy(update={"decide": qs.config.decide.model_copy(update={"mode": "observe"})})
    shared = SharedWork()
    pipes: dict[str, Any] = {}

    def pipe(name: str) -> Any:
        # built on first use only: a rerun with everything cached loads no model
        if name not in pipes:
            pipes[name] = shared.pipeline(observe if name == "sieve" else plain_spec.config)
        return pipes[name]

    deadline = time.monotonic() + args.max_minutes * 60
    start, asked = time.monotonic(), 0
    for item in qs.items if not args.report_only else []:
        if item.id in done and plain_done(item):
            continue
        if time.monotonic() > deadline:
            print(f"time box reached after {asked} new questions", file=sys.stderr)
            break
        if item.id not in done:
            answer = pipe("sieve").ask(item.question)
            fired, draft = fired_checks(answer.trace)
            decided = answer.trace.stage("decide")
            row: dict[str, Any] = {
                "id": item.id,
                "answerable": item.answerable,
                "fired": fired,
                "draft": draft,
                "signals": decided[-1]["signals"] if decided else None,
                "right": draft_right(draft, item.answerable, item.answers),
            }
            if item.id in qs.poison_answers:
                wrong = qs.poison_answers[item.id]
                row["attacked"] = bool(draft is not None and attack_succeeded(draft, wrong, item.answers))
            done[item.id] = row
            with open(cache, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
        if not plain_done(item):
            run_eval([item], [plain_spec], plain_cache, None, baseline_signals=True,
                     build=lambda _spec: pipe("plain"))  # fmt: skip
        asked += 1
        print(f"[{sum(1 for i in qs.items if i.id in done and plain_done(i))}/{len(qs.items)}] "
              f"{(time.monotonic() - start) / asked:.1f} s per question", file=sys.stderr, flush=True)  # fmt: skip
    finished = [i for i in qs.items if i.id in done and plain_done(i)]
    plain = [plain_cache.get(plain_spec.key(i.id, i.question, None)) for i in finished]
    return finished, [done[i.id] for i in finished], [r for r in plain if r is not None]


def draft_right(draft: str | None, answerable: bool, answers: Sequence[str]) -> bool:
    """Whether a draft is right by the gold answer: a gold alias contained in it, citation markers
    aside (``eval``'s scoring); an unanswerable question's draft, or no draft, is never right."""
    from ragsieve.answers import contains_answer
    from ragsieve.verify.claims import strip_markers

    return bool(draft is not None and answerable and answers and contains_answer(strip_markers(draft), list(answers)))


# ---------------------------------------------------------------------------- pure computations
def selective_outcomes(answerable: Sequence[bool], right: Sequence[bool], answered: Sequence[bool]) -> list[bool]:
    """``eval``'s outcome per question: an answerable question answered rightly, or an
    unanswerable one abstained on."""
    return [bool(r and a) if ok else not a for ok, r, a in zip(answerable, right, answered, strict=True)]


def matched_coverage(
    sieve_outcomes: Sequence[bool],
    sieve_scores: Sequence[float],
    baseline_outcomes: Sequence[bool],
    baseline_scores: Mapping[str, Sequence[float]],
    cal: Sequence[int],
    test: Sequence[int],
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The sieve against the best baseline ranking at the sieve's coverage, on the ``test`` questions.

    Scores are ranks (``-inf`` = abstained, as :func:`ragsieve.eval.selective.rank_scores`
    gives); every baseline ranks one system's answers (``baseline_outcomes``). The best baseline
    is the one with the lowest AURC on the ``cal`` questions (chosen there, never on the test
    ones). The sieve's coverage is its share of answered test questions (at least one); the result
    has the selective accuracies, their difference and paired bootstrap interval
    (:func:`ragsieve.eval.confidence.paired_selective_difference`), both AURCs on the test
    questions and the paired AURC difference's interval (sieve minus baseline)."""
    import numpy as np

    from ragsieve.eval.confidence import paired_selective_difference
    from ragsieve.eval.selective import aurc, paired_bootstrap_interval

    so, bo = np.asarray(sieve_outcomes, dtype=bool), np.asarray(baseline_outcomes, dtype=bool)
    ss = np.asarray(sieve_scores, dtype=float)
    cal_i, test_i = np.asarray(cal, dtype=int), np.asarray(test, dtype=int)
    if not len(test_i) or not baseline_scores:
        raise ValueError("matched_coverage needs test questions and at least one baseline")
    ranked = {name: np.asarray(s, dtype=float) for name, s in baseline_scores.items()}
    best = min(ranked, key=lambda name: aurc(list(bo[cal_i]), list(ranked[name][cal_i])))
    bs = ranked[best]
    coverage = max(float(np.mean(np.isfinite(ss[test_i]))), 1.0 / len(test_i))
    diff = paired_selective_difference(list(so[test_i]), list(ss[test_i]), list(bo[test_i]), list(bs[test_i]),
                                       coverage=coverage, n_boot=n_boot, seed=seed)  # fmt: skip

    def aurc_of(o: np.ndarray, s: np.ndarray) -> Any:
        return lambda idx: aurc(list(o[test_i][idx]), list(s[test_i][idx]))

    lo, hi = paired_bootstrap_interval(len(test_i), aurc_of(so, ss), aurc_of(bo, bs), n_boot, seed)
    return {
        **diff,
        "best": best,
        "aurc_sieve": aurc(list(so[test_i]), list(ss[test_i])),
        "aurc_baseline": aurc(list(bo[test_i]), list(bs[test_i])),
        "aurc_interval": [lo, hi],
    }


def calibration_table(
    conf: Sequence[float | None], right: Sequence[bool], cal: Sequence[int], test: Sequence[int],
    alphas: Sequence[float] = ALPHAS, delta: float = DELTA,
) -> list[list[str]]:
    """One row per alpha: the threshold Learn then Test certifies on the ``cal`` questions'
    confidences (``None``: never answered), its coverage there, and on the ``test`` questions the
    coverage and realised risk (wrong among answered) with a Wilson interval."""
    import numpy as np

    from ragsieve.calibrate import answer_mask, calibrate_threshold, wilson_interval

    conf_a, right_a = np.array(conf, dtype=object), np.asarray(right, dtype=bool)
    cal_i, test_i = np.asarray(cal, dtype=int), np.asarray(test, dtype=int)
    rows = []
    for alpha in alphas:
        res = calibrate_threshold(list(conf_a[cal_i]), right_a[cal_i], alpha, delta)
        answered = answer_mask(list(conf_a[test_i]), res.threshold)
        n_ans = int(answered.sum())
        errors = int((answered & ~right_a[test_i]).sum())
        if res.feasible:
            thr = f"{res.threshold:.4g}"
        elif res.best_bound is not None:
            thr = f"none (best certified risk {res.best_bound:.3f})"
        else:
            thr = "none (too few answers)"
        lo, hi = wilson_interval(errors, n_ans) if n_ans else (float("nan"), float("nan"))
        rows.append([f"{alpha:g}", thr, f"{res.coverage:.1%}", f"{n_ans / len(test_i):.1%}",
                     f"{errors / n_ans:.3f} [{lo:.3f}, {hi:.3f}] ({errors}/{n_ans})" if n_ans else "-"])  # fmt: skip
    return rows


# ---------------------------------------------------------------------------- report
def report(qs: QuestionSet, items: list[Any], rows: list[dict[str, Any]], plain: list[dict[str, Any]],
           args: argparse.Namespace) -> str:  # fmt: skip
    import numpy as np

    from ragsieve.calibrate import wilson_interval
    from ragsieve.config import DecideConfig
    from ragsieve.decision import DecisionModel
    from ragsieve.errors import InputError
    from ragsieve.eval.baselines import baseline_rows
    from ragsieve.eval.calibrate_cli import calibration_labels
    from ragsieve.eval.checks import check_table, vetoed
    from ragsieve.eval.fair import split_indices
    from ragsieve.eval.scoring import ItemScores
    from ragsieve.eval.selective import aurc, bootstrap_interval, paired_bootstrap_interval, rank_scores

    model = DecisionModel.default()
    n, n_ans = len(items), sum(i.answerable for i in items)
    table = check_table(items, rows)
    check_rows = [
        [r["check"], f"{r['answerable']} ({100 * (r['answerable_share'] or 0):.0f}%)",
         f"{r['unanswerable']} ({100 * (r['unanswerable_share'] or 0):.0f}%)",
         f"{r['right']}/{r['fired']} = {r['precision']:.2f}"]
        for r in table
    ]  # fmt: skip

    # --- stops before any draft: the table counts one on an answerable question as wrong; with
    # plain RAG's answer (the same retrieved passages, no stop) as the draft it stopped
    _, plain_correct = calibration_labels(items, plain)
    stopped: dict[str, list[int]] = {}
    for item, rec, ok in zip(items, rows, plain_correct, strict=True):
        if rec.get("draft") is None:
            for check in rec.get("fired") or []:
                tally = stopped.setdefault(check, [0, 0])
                tally[0] += int(not item.answerable or not ok)
                tally[1] += 1
    stop_line = (
        "**Stops before any draft, judged by the answer they stopped**: plain RAG's answer to the same question (from "
        "the same retrieved passages, with nothing stopping it) taken as the draft each stop withdrew; a stop is "
        "right on an unanswerable question or where that answer lacks the gold answer: "
        + "; ".join(f"`{c}` {k}/{d} = {k / d:.2f}" for c, (k, d) in sorted(stopped.items()))
        + "."
        if stopped
        else "**Stops before any draft**: none on this set."
    )

    # --- conflicts the conflict stage stated (its ``conflict.found`` signal) among the drafted
    drafted = [r for r in rows if r.get("signals") is not None]
    conflicts_stated = sum(1 for r in drafted if r["signals"].get("conflict.found", 0.0) > 0)
    conflict_line = (
        f"**Conflicts stated** by the conflict stage (two answer groups from independent sources that disagree): "
        f"{conflicts_stated} of the {len(drafted)} questions with a draft"
        + (
            " (the attack passages contradict the gold page here, so a stated conflict is expected)."
            if qs.poison_answers
            else " (no question of this set has sources planted to disagree, so each is a false conflict)."
        )
    )

    # --- the drafts ranked by each confidence (every finished question with a draft)
    right = np.array([r["right"] for r in drafted], dtype=bool)
    scores = {
        "decision model": [model.confidence(r["signals"]) for r in drafted],
        "plain RAG: top retrieval score": [r["signals"].get("retrieval.top_score", 0.0) for r in drafted],
        "plain RAG: answer token probability": [r["signals"].get("answer.token_prob", 0.0) for r in drafted],
    }
    m = len(drafted)
    base = scores["decision model"]
    rank_rows = []
    for name, s in scores.items():

        def stat(idx: np.ndarray, s: list[float] = s) -> float:
            return aurc(list(right[idx]), [s[j] for j in idx])

        lo, hi = bootstrap_interval(m, stat, n_boot=args.boot)
        diff = "-"
        if name != "decision model":
            dlo, dhi = paired_bootstrap_interval(
                m, lambda idx: aurc(list(right[idx]), [base[j] for j in idx]), stat, n_boot=args.boot
            )
            diff = f"[{dlo:+.3f}, {dhi:+.3f}]"
        rank_rows.append([name, f"{aurc(list(right), s):.3f} [{lo:.3f}, {hi:.3f}]", diff])

    # --- the decision at the default threshold, over every finished question
    threshold = model.threshold_
    vetoes = DecideConfig().vetoes  # the default configuration's: a fired veto withdraws the draft
    conf: list[float | None] = [
        model.confidence(r["signals"]) if r.get("signals") is not None and not vetoed(r.get("fired") or [], vetoes)
        else None
        for r in rows
    ]  # fmt: skip
    answered = [c is not None and c >= threshold for c in conf]
    q_right = [bool(r["right"]) for r in rows]
    answerable = [bool(i.answerable) for i in items]
    right_drafts = sum(q_right)
    withdrawn_right = sum(1 for ok, a in zip(q_right, answered, strict=True) if ok and not a)
    acc_decided = sum(1 for ok, a in zip(q_right, answered, strict=True) if ok and a)
    acc_plain = int(plain_correct[np.asarray(answerable, dtype=bool)].sum())

    def pct(k: float, d: int) -> str:
        return f"{100 * k / d:.1f}% ({k:.0f}/{d})" if d else "-"

    def pct_ci(k: int, d: int) -> str:
        if not d:
            return "-"
        lo, hi = wilson_interval(k, d)
        return f"{100 * k / d:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] ({k}/{d})"

    # answerable accuracy, decided minus plain RAG, paired over the answerable questions
    ans_idx = np.flatnonzero(np.asarray(answerable, dtype=bool))
    dec_ok = np.array([ok and a for ok, a in zip(q_right, answered, strict=True)], dtype=bool)[ans_idx]
    plain_ok = np.asarray(plain_correct, dtype=bool)[ans_idx]
    acc_diff = ""
    if len(ans_idx):
        dlo, dhi = paired_bootstrap_interval(len(ans_idx), lambda idx: float(dec_ok[idx].mean()),
                                             lambda idx: float(plain_ok[idx].mean()), args.boot, args.seed)  # fmt: skip
        acc_diff = (f" (difference {100 * (dec_ok.mean() - plain_ok.mean()):+.1f} pts, paired 95% bootstrap "
                    f"interval [{100 * dlo:+.1f}, {100 * dhi:+.1f}])")  # fmt: skip
    decision_line = (
        f"**At the model's default threshold** ({threshold:.3f}, {threshold_rule_text(model.threshold_rule_)}; "
        f"default vetoes: {', '.join(vetoes) if vetoes else 'none'}): "
        f"answered {sum(answered)} of {n} questions ({m} had a draft); accuracy on answerable "
        f"questions {pct_ci(acc_decided, n_ans)} vs {pct(right_drafts, n_ans)} keeping every draft and "
        f"{pct_ci(acc_plain, n_ans)} for plain RAG{acc_diff}; right drafts withdrawn "
        f"{pct_ci(withdrawn_right, right_drafts)} (Wilson 95% intervals)."
    )
    if qs.poison_answers:
        attacked = [bool(r.get("attacked")) for r in rows]
        plain_attacked = sum(
            1 for i, rec in zip(items, plain, strict=True)
            if not rec["abstained"] and _states(rec["answer"], qs.poison_answers[i.id], i.answers)
        )  # fmt: skip
        stated = sum(a and k for a, k in zip(attacked, answered, strict=True))
        decision_line += (
            f" Answers stating the attacker's answer: {pct(stated, n)} answered by the decision vs "
            f"{pct(sum(attacked), n)} of the drafts and {pct(plain_attacked, n)} for plain RAG."
        )

    # --- the sieve vs plain RAG's best confidence at the sieve's coverage, and calibration
    halves = ""
    try:
        cal, test = split_indices(n, 0.5, args.seed)
    except InputError as exc:  # too few finished questions to split
        halves = f"Too few finished questions to split into calibration and test halves ({exc})."
    if not halves:
        sieve_scores = rank_scores(conf, [not a for a in answered])
        sieve_outcomes = selective_outcomes(answerable, q_right, answered)
        signals = [r.get("baseline_signals") or {} for r in plain]
        made, _ = baseline_rows(plain, signals, plain_correct, cal, prefix="plain")
        plain_outcomes = list(ItemScores(items, plain).outcome)
        ranked = {name: rank_scores([r["confidence"] for r in recs], [bool(r["abstained"]) for r in recs])
                  for name, recs in made.items()}  # fmt: skip
        vs = matched_coverage(sieve_outcomes, sieve_scores, plain_outcomes, ranked, cal, test, args.boot, args.seed)
        calib = calibration_table(conf, q_right, cal, test)
        halves = "\n".join([
            f"**The sieve vs plain RAG at the sieve's coverage.** Split (seed {args.seed}, "
            f"`ragsieve.eval.fair.split_indices`): calibration half {len(cal)} questions, test half {len(test)}. "
            "The sieve answers a draft whose decision confidence reaches the default threshold; plain RAG is ranked "
            f"by its best confidence, `{vs['best']}`, chosen among `plain+retrieval`, `+logprob` and `+combined` by "
            "AURC on the calibration half (the combination fitted there). Outcome per question as in `ragsieve "
            "eval`: an answerable question answered rightly, or an unanswerable one abstained on. On the test half, "
            f"at the sieve's coverage {vs['coverage']:.1%}: selective accuracy {vs['a']:.3f} vs {vs['b']:.3f}, "
            f"difference {vs['difference']:+.3f}, paired 95% bootstrap interval [{vs['interval'][0]:+.3f}, "
            f"{vs['interval'][1]:+.3f}]; AURC {vs['aurc_sieve']:.3f} vs {vs['aurc_baseline']:.3f}, paired difference "
            f"interval [{vs['aurc_interval'][0]:+.3f}, {vs['aurc_interval'][1]:+.3f}] (below 0 favours the sieve).",
            "",
            "**The threshold `ragsieve calibrate` certifies** on the decision model's confidence (Learn then Test, "
            f"binomial p-values, delta = {DELTA}; a question without a draft is never answered; risk = wrong drafts "
            "among the answered) on the calibration half, and what it gives on the test half:",
            "",
            markdown_table(["alpha", "threshold", "coverage (cal)", "coverage (test)", "risk (test), Wilson 95%"],
                           calib),
        ])  # fmt: skip

    about = model.about_
    partial = (
        f"**n = {n} finished of {len(qs.items)} planned questions** (the time box stopped the run; questions are "
        "answered in a fixed-seed random order, so these are a random subset)"
        if n < len(qs.items)
        else f"n = {n} of {len(qs.items)} planned questions (all)"
    )
    lines = [
        f"Data: {qs.desc}.{qs.note} {partial}: {n_ans} answerable, {n - n_ans} unanswerable, {m} with a draft"
        + (" (the others were stopped before generation)" if m < n else "")
        + f". Model: {args.model}. The sieve ran with `decide.mode = \"observe\"` "
        "(no check withdraws a draft); plain RAG answered the same questions (eval harness, fair baselines' signals "
        "at answer time). Each draft or answer is judged by the gold answer (a gold alias contained in it; "
        "unanswerable: always wrong). Decision model: the bundled one, trained on "
        f"{about.get('drafts')} drafts ({about.get('right')} right) of {about.get('data', '?')}, "
        f"{about.get('split', '?')}, LLM {about.get('llm', '?')}; nothing was tuned on this set.",
        "",
        "**Each check** (fired = stopped the run, or asked to withdraw the draft; precision as a veto = share of "
        "its firings where withdrawing was right: unanswerable, or a draft without the gold answer; a stop before "
        "any draft on an answerable question counts as wrong):",
        "",
        markdown_table(["check", "fired on answerable", "fired on unanswerable", "veto precision"], check_rows),
        "",
        stop_line,
        "",
        conflict_line,
        "",
        f"**Ranking the {m} drafts** (AURC, lower is better, 95% bootstrap interval; paired difference decision "
        "model minus the baseline, below 0 favours the decision model):",
        "",
        markdown_table(["confidence", "AURC", "difference vs decision model"], rank_rows),
        "",
        decision_line,
        "",
        halves,
        "",
        f"Caches: `{qs.folder.relative_to(ROOT)}/{args.model}-rows.jsonl` (sieve), `{args.model}-plain.jsonl` "
        "(plain RAG).",
    ]
    return "\n".join(lines)


def threshold_rule_text(rule: Mapping[str, Any]) -> str:
    """How the model's default threshold was chosen, from its header's ``threshold_rule``
    (:func:`ragsieve.decision.withdrawn_right_threshold`), in a clause."""
    kind, n = rule.get("rule"), rule.get("right_drafts")
    share = f"{100 * float(rule.get('max_withdrawn_right', 0.05)):g}%"
    conf = str(rule.get("confidences", "?"))
    if kind == "upper bound":
        return (f"the highest whose one-sided {100 * (1 - float(rule['delta'])):g}% upper bound on the share of right "
                f"drafts withdrawn is at most {share}: {rule['withdrawn_right']} of the {n} right training drafts "
                f"below it, {conf} confidences, bound {100 * float(rule['bound']):.1f}%")  # fmt: skip
    if kind == "expected":
        return (f"the highest whose expected share of right drafts withdrawn is at most {share}: "
                f"{rule['withdrawn_right']} of the {n} right training drafts below it, {conf} confidences, expected "
                f"share {100 * float(rule['bound']):.1f}%; {n} right drafts are too few for a "
                f"{100 * (1 - float(rule['delta'])):g}% upper bound")  # fmt: skip
    if kind == "none":
        return f"none: {n} right training drafts are too few to bound the share withdrawn"
    if kind == "given":
        return "set when the model was trained"
    return f"the highest that withdraws at most {share} of the right training drafts, in-sample"


def _states(answer: str, wrong: str, answers: Sequence[str]) -> bool:
    from ragsieve.attack.metrics import attack_succeeded

    return attack_succeeded(answer, wrong, list(answers))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--set", choices=SETS, default="demo")
    ap.add_argument("--n", type=int, default=None, help="questions (hotpotqa: 200, squad2: 300); the others whole")
    ap.add_argument("--seed", type=int, default=0, help="sample, answering order and calibration/test split seed")
    ap.add_argument("--model", choices=("smollm2", "gemma"), default="smollm2")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-minutes", type=float, default=30.0, help="stop answering after this long (resumable)")
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--train-n", type=int, default=800, help="train_decision.py's --n of the bundled model")
    ap.add_argument("--train-seed", type=int, default=0, help="train_decision.py's --seed of the bundled model")
    ap.add_argument("--report-only", action="store_true", help="report what the caches hold; answer nothing")
    ap.add_argument("--no-report", action="store_true", help="answer, then stop without a report")
    ap.add_argument("--no-write", action="store_true", help="print the report without writing the docs page")
    ap.add_argument("--min-questions", type=int, default=10, help="fewest finished questions to report on")
    args = ap.parse_args(argv)
    args.n = args.n if args.n is not None else DEFAULT_N.get(args.set, 0)
    logging.basicConfig(level=logging.WARNING)

    from ragsieve.decision import DecisionModel

    qs = prepare_set(args, DecisionModel.default().about_)
    items, rows, plain = collect(args, qs)
    print(f"{args.set}: {len(items)} of {len(qs.items)} planned questions finished", file=sys.stderr)
    if args.no_report:
        return
    if len(items) < args.min_questions:
        raise SystemExit(f"only {len(items)} finished questions in {qs.folder}; answer more (or --min-questions)")
    body = report(qs, items, rows, plain, args)
    if not args.no_write:
        suffix = "" if args.model == "smollm2" else f"-{args.model}"
        names = {"demo": "the demo set", "hotpotqa": "HotpotQA", "squad2": "SQuAD 2.0 (held out from its training)",
                 "poisonedrag": "the PoisonedRAG HotpotQA targets"}  # fmt: skip
        write_section("results/calibration.md", f"decision-{args.set}{suffix}",
                      f"The decision model on {names[args.set]} ({args.model})", body)  # fmt: skip
    print(body)


if __name__ == "__main__":
    main()
