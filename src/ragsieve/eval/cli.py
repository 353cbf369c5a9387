"""``ragsieve eval``: measure the sieve, plain RAG, no retrieval and ablations on a question file."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import typer

from ragsieve.console import INDEX_HELP
from ragsieve.errors import InputError
from ragsieve.eval.fair import OLD_BASELINE_LABEL

logger = logging.getLogger(__name__)

JUDGES = ("llm-logprob", "lexical-embedding", "none")


def make_judge(name: str, config: Any, shared: Any = None) -> Any:
    """The fixed faithfulness judge: one for every configuration, so their scores compare.
    ``shared`` (a :class:`ragsieve.eval.shared.SharedWork`): its model or embedding memo, the one
    the configurations use, rather than another copy."""
    if name == "none":
        return None
    from ragsieve.verify import LexicalEmbeddingJudge, LLMLogprobJudge

    if name == "llm-logprob":
        from ragsieve.llm import load_llm

        return LLMLogprobJudge(shared.llm(config.llm) if shared is not None else load_llm(config.llm))
    if name == "lexical-embedding":
        from ragsieve.embed import load_embedder

        return LexicalEmbeddingJudge(
            shared.embedder(config.embedder) if shared is not None else load_embedder(config.embedder)
        )
    raise InputError(f"unknown faithfulness judge {name!r}; use one of {', '.join(JUDGES)}")


def parse_ablations(values: list[str]) -> list[list[str]]:
    """``--ablate verify --ablate judge,filter`` -> ``[["verify"], ["judge", "filter"]]``."""
    from ragsieve.config import SIEVE_STAGES

    out = []
    for value in values:
        stages = [s.strip() for s in value.split(",") if s.strip()]
        unknown = [s for s in stages if s not in SIEVE_STAGES]
        if not stages or unknown:
            raise InputError(
                f"--ablate {value!r} names no known stage; use comma-separated stages from {', '.join(SIEVE_STAGES)}"
            )
        out.append(stages)
    return out


def chosen_specs(cfg: Any, ablate: list[str], only: str | None) -> list[Any]:
    """The configurations ``--ablate`` and ``--only`` ask for, built on ``cfg``."""
    from ragsieve.eval.harness import default_specs

    specs = default_specs(cfg, parse_ablations(ablate))
    if not only:
        return specs
    wanted = [s.strip() for s in only.split(",") if s.strip()]
    missing = [w for w in wanted if w not in {s.name for s in specs}]
    if missing:
        have = ", ".join(s.name for s in specs)
        raise InputError(f"--only names unknown configuration {missing[0]!r}; choose from {have}")
    return [s for s in specs if s.name in wanted]


def eval_command(
    data: Path = typer.Option(..., "--data", help="JSONL with question and answer/answers/golden_answers."),
    index: Path | None = typer.Option(None, "--index", metavar="DIR", help=INDEX_HELP),
    ablate: list[str] = typer.Option([], "--ablate", help="Sieve row without these stages, e.g. verify,judge."),
    only: str | None = typer.Option(None, "--only", help="Comma-separated configurations to run (default all)."),
    limit: int | None = typer.Option(None, "--limit", help="Evaluate the first N questions."),
    judge: str = typer.Option(
        "lexical-embedding",
        "--judge",
        help="Faithfulness judge: lexical-embedding (default; also the sieve's own verifier) or llm-logprob "
        "(yes/no log-probabilities of the configured LLM: at chance with the bundled 135M model, see "
        "docs/results.md; use it with a stronger served model).",
    ),
    cache: Path | None = typer.Option(None, "--cache", help="Resumable JSONL of per-question outputs."),
    plot: Path | None = typer.Option(None, "--plot", help="Write the risk-coverage curves to this PNG."),
    model: str | None = typer.Option(None, "--model", help="GGUF path (llama-cpp) or model name (openai)."),
    chat_format: str | None = typer.Option(None, "--chat-format", help="llama.cpp chat format, e.g. gemma."),
    llm_url: str | None = typer.Option(None, "--llm-url", help="OpenAI-compatible server base URL."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads for llama.cpp."),
    config: Path | None = typer.Option(None, "--config", help="TOML/YAML config file."),
    boot: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for the 95% intervals."),
    as_json: bool = typer.Option(False, "--json", help="Print the scores as JSON."),
    workers: int | None = typer.Option(
        None,
        "--workers",
        min=1,
        help="Answer the questions on a local Dask cluster of N worker processes (each loads the "
        "models once; --threads sets each one's LLM threads).",
    ),
    cluster: str | None = typer.Option(
        None, "--cluster", metavar="ADDRESS", help="Dask scheduler address (tcp://host:8786) to answer on."
    ),
    partition_questions: int | None = typer.Option(
        None, "--partition-questions", min=1, help="Questions per Dask task (default: about 4 tasks per worker)."
    ),
    fair: bool = typer.Option(
        True,
        "--fair/--no-fair",
        help="Also compare with plain RAG ranked by fair confidences (retrieval score, answer log-probability), "
        "judge faithfulness independently and report calibrated abstention on a held-out half.",
    ),
    risk: float | None = typer.Option(
        None, "--risk", help="Target risk of the held-out calibration report (default: the config's, else 0.1)."
    ),
    delta: float | None = typer.Option(None, "--delta", help="Its delta (default: the config's, else 0.1)."),
    splits: int = typer.Option(200, "--splits", min=0, help="Random splits of the calibration simulation."),
    share_work: bool = typer.Option(
        True,
        "--share-work/--no-share-work",
        help="Answer each question's configurations over one index, LLM and embedding memo, with the question's "
        "searches and judge scores computed once (default); --no-share-work builds each configuration on its own. "
        "The answers are the same either way.",
    ),
) -> None:
    """Score the sieve, plain RAG, no retrieval and ablations: accuracy, coverage, AURC, faithfulness, cost."""
    from ragsieve.cluster import dask_client
    from ragsieve.config import apply_overrides, load_with_overrides
    from ragsieve.console import console, resolve_index_dir, stage_progress
    from ragsieve.eval.data import load_qa
    from ragsieve.eval.harness import EvalCache, default_cache_path, pending_items, run_eval
    from ragsieve.eval.report import plot_risk_coverage
    from ragsieve.eval.scoring import score_all
    from ragsieve.eval.shared import SharedWork

    if judge not in JUDGES:
        raise InputError(f"unknown faithfulness judge {judge!r}; use one of {', '.join(JUDGES)}")
    overrides: dict[str, Any] = {
        "index_dir": str(index) if index else None,
        "llm.model": model,
        "llm.chat_format": chat_format,
        "llm.n_threads": threads,
    }
    if llm_url:
        overrides.update({"llm.backend": "openai", "llm.base_url": llm_url})
    cfg = load_with_overrides(config, overrides)
    specs = chosen_specs(cfg, ablate, only)
    if any(not s.no_retrieval for s in specs):
        # The same fallback as every command that reads an index (--index, $RAGSIEVE_INDEX,
        # the config's index_dir, the demo index); `--only no-retrieval` needs none.
        index = resolve_index_dir(index, cfg.index_dir)
        cfg = apply_overrides(cfg, {"index_dir": str(index)})
        specs = chosen_specs(cfg, ablate, only)
    items = load_qa(data, limit)
    cache_path = cache or default_cache_path(data, index)
    store = EvalCache(cache_path).load()
    # Dask workers get a copy of the judge: it cannot hold this process's loaded models then.
    shared = SharedWork() if share_work else None
    fixed_judge = make_judge(judge, cfg, shared if workers is None and cluster is None else None)
    answered = len(pending_items(items, specs, store, fixed_judge.name if fixed_judge is not None else None))
    start = time.perf_counter()
    label = f"evaluating {len(specs)} configurations"
    with dask_client(workers, cluster, "evaluating") as client, stage_progress() as progress:
        progress(label, 0, len(items) * len(specs))
        records = run_eval(
            items,
            specs,
            store,
            fixed_judge,
            progress=lambda done, total: progress(label, done, total),
            client=client,
            partition_size=partition_questions,
            baseline_signals=fair,
            shared=shared,
            share=share_work,
        )
    elapsed = time.perf_counter() - start
    throughput = questions_per_minute(answered, elapsed)
    baseline = "plain" if "plain" in records else None
    scores = score_all(items, records, baseline=baseline, n_boot=boot)
    judge_name = fixed_judge.name if fixed_judge is not None else "none"
    report: dict[str, Any] | None = None
    fair_missing = _fair_missing(fair, cfg, len(items), any(s.name in records for s in specs))
    if fair_missing is None:
        report, fair_missing = _fair(items, records, cfg, risk, delta, splits, boot, shared)
    if plot is not None:
        plot_risk_coverage(_with_best_baseline(scores, report), plot, title=f"{data.name}, n={len(items)}")
    self_judged = judge_name == cfg.stages.verify.claim_judge
    if as_json:
        from ragsieve.eval.checks import check_table

        payload = {
            "data": str(data),
            "n": len(items),
            "faithfulness_judge": judge_name,
            # the sieve's verify stage uses the same judge: its faithfulness figure grades itself
            "faithfulness_judge_role": "self-judged" if self_judged else "independent of the sieve's verifier",
            "vs_baseline_label": OLD_BASELINE_LABEL,
            "model": cfg.llm.model or "bundled SmolLM2-135M-Instruct",
            "cache": str(cache_path),
            "seconds": round(elapsed, 1),
            # questions answered in this run (not read from the cache), every configuration each
            "questions_answered": answered,
            "questions_per_minute": throughput,
            "shared_work": share_work,
            "configurations": {s.name: {**scores[s.name], "spec": s.to_dict()} for s in specs},
            "fair": report,
            "checks": {
                name: check_table(items, recs) for name, recs in records.items() if len(recs) == len(items)
            },
            "fair_missing": fair_missing,
        }
        console.print_json(json.dumps(payload))
        return
    _print_table(console, scores, len(items), judge_name + (" = self-judged" if self_judged else ""), cache_path,
                 elapsed, fair_missing)  # fmt: skip
    console.print(throughput_line(answered, len(specs), elapsed, share_work), markup=False, highlight=False)
    if report is not None:
        _print_fair(console, report)
    _print_checks(console, items, records)


def _print_checks(console: Any, items: list[Any], records: dict[str, list[dict[str, Any]]]) -> None:
    """The per-check table of every configuration in which a check fired."""
    from ragsieve.eval.checks import check_table, check_table_lines

    for name, recs in records.items():
        if len(recs) != len(items) or not any(r.get("fired") for r in recs):
            continue
        console.print(f"\nChecks of {name}: how often each fired, and its precision as a veto "
                      "(share of its withdrawals the gold answer shows right to make)",
                      markup=False, highlight=False)  # fmt: skip
        for line in check_table_lines(check_table(items, recs)):
            console.print(line, markup=False, highlight=False)


# The fair comparison splits the questions into a calibration and a test part: fewer than this
# leaves a part too small to fit a threshold on.
MIN_FAIR_QUESTIONS = 4


def _fair_missing(wanted: bool, cfg: Any, n: int, evaluated: bool) -> str | None:
    """Why the fair comparison cannot be made, or ``None`` when it can."""
    if not wanted:
        return "--no-fair was given"
    if not cfg.index_dir:
        return "it ranks plain RAG by its retrieval score, and no index was evaluated"
    if n < MIN_FAIR_QUESTIONS:
        return f"it needs at least {MIN_FAIR_QUESTIONS} questions to split into a calibration and a test part; got {n}"
    if not evaluated:
        return "no configuration was evaluated"
    return None


def questions_per_minute(answered: int, seconds: float) -> float | None:
    """Questions answered per minute of answering, ``None`` when none was answered (all cached)."""
    if answered <= 0 or seconds <= 0:
        return None
    return round(60.0 * answered / seconds, 2)


def throughput_line(answered: int, configurations: int, seconds: float, shared: bool) -> str:
    """The throughput sentence under the tables."""
    rate = questions_per_minute(answered, seconds)
    if rate is None:
        return "Throughput: every output came from the cache; no question was answered in this run."
    how = "sharing retrieval, judging and embedding" if shared else "each configuration on its own"
    return (
        f"Throughput: {rate:.2f} questions per minute ({answered} question{'s' if answered != 1 else ''} x "
        f"{configurations} configuration{'s' if configurations != 1 else ''} in {seconds:.0f}s, {how})."
    )


def _fair(
    items: Any,
    records: Any,
    cfg: Any,
    risk: float | None,
    delta: float | None,
    splits: int,
    boot: int,
    shared: Any = None,
) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`ragsieve.eval.fair.fair_report` with the configured model and index (an LLM judge
    only when a served model is configured), or ``None`` and why it could not be made. ``shared``:
    the evaluation's :class:`ragsieve.eval.shared.SharedWork`, whose index and model it reuses."""
    from ragsieve.errors import RagsieveError
    from ragsieve.eval.baselines import BaselineScorer
    from ragsieve.eval.fair import fair_report

    llm_judge = None
    try:
        scorer = (
            BaselineScorer(cfg, index=shared.index(cfg), llm=shared.llm(cfg.llm))
            if shared is not None
            else BaselineScorer(cfg)
        )
        scorer.warm_up()
        if cfg.llm.backend == "openai":
            from ragsieve.eval.faithfulness import LLMAnswerJudge

            llm_judge = LLMAnswerJudge(scorer.llm)
        return fair_report(
            items, records, scorer=scorer, llm_judge=llm_judge,
            risk=risk or cfg.calibration.risk or 0.1, delta=delta or cfg.calibration.delta or 0.1,
            n_splits=splits, n_boot=boot,
        ), None  # fmt: skip
    except RagsieveError as exc:
        logger.warning("no fair-baseline report: %s", exc)
        return None, str(exc)


def _with_best_baseline(scores: dict[str, Any], report: dict[str, Any] | None) -> dict[str, Any]:
    """The curves to plot: on the test part of the split, every configuration with a confidence
    and the best baseline; without a report, every configuration on all questions."""
    if not report or not report.get("best_baseline"):
        return scores
    best = report["best_baseline"]
    curves = {f"{name} (test part)": row for name, row in report["vs_best_baseline"].items()}
    curves[f"{best}, best baseline (test part)"] = report["baselines"][best]
    return curves


def _print_fair(console: Any, report: dict[str, Any]) -> None:
    """The fair comparison, in lines that fit an 80-column terminal."""
    split = report["split"]
    console.print(
        f"Fair baselines (fit on {split['calibration']} questions, reported on the other {split['test']}): "
        "AURC, lower is better", markup=False, highlight=False
    )
    for name, row in report["baselines"].items():
        lo, hi = row["aurc_interval"]
        mark = "  <- best" if name == report["best_baseline"] else ""
        console.print(f"  {name:<24} {row['aurc']:.3f} [{lo:.3f},{hi:.3f}]{mark}", markup=False, highlight=False)
    for name, row in report["vs_best_baseline"].items():
        lo, hi = row["interval"]
        console.print(
            f"  {name} vs best baseline at {100 * row['coverage']:.0f}% coverage: sel-acc "
            f"{100 * row['a']:.0f} vs {100 * row['b']:.0f}, Δ {100 * row['difference']:+.0f} "
            f"[{100 * lo:+.0f},{100 * hi:+.0f}] (AURC {row['aurc']:.3f})", markup=False, highlight=False
        )
        where = row.get("abstention_at_coverage")
        if where:
            mine, theirs = where[name], where[row["baseline"]]
            console.print(
                f"    abstained on unanswerable / answerable: {100 * mine['unanswerable']:.0f}% / "
                f"{100 * mine['answerable']:.0f}%; best baseline at that coverage "
                f"{100 * theirs['unanswerable']:.0f}% / {100 * theirs['answerable']:.0f}%",
                markup=False, highlight=False,
            )
    console.print("Faithfulness, independent judge (answer values and gold answer in cited evidence):")
    for kind in ("independent", "llm_judge"):
        for name, s in (report["faithfulness"].get(kind) or {}).items():
            parts = [f"{key} {_share(s[key])}" for key in ("faithful", "values_cited", "cited_has_gold")]
            console.print(f"  {name:<14} " + ", ".join(parts) + (" (LLM judge)" if kind == "llm_judge" else ""),
                          markup=False, highlight=False)
    if report.get("signals"):
        console.print("Sieve confidence signals, AURC: " + ", ".join(
            f"{k} {v['aurc']:.3f}" for k, v in report["signals"].items()), markup=False, highlight=False)  # fmt: skip
    cal = report.get("calibration")
    if cal and "error" not in cal:
        res = cal["calibration"]
        if res["feasible"]:
            lo, hi = cal["test_risk_interval"]
            line = (
                f"Calibrated at risk {res['risk']}: threshold {res['threshold']:.3f} on {cal['n_calibration']} "
                f"questions; held-out coverage {100 * cal['test_coverage']:.0f}%, risk {cal['test_risk']:.3f} "
                f"[{lo:.3f},{hi:.3f}]"
            )
        else:
            line = f"Calibration: {res['message']}"
        console.print(line)
        sim = cal.get("simulation")
        if sim:
            console.print(
                f"  {sim['n_splits']} random splits: held-out risk > {res['risk']} in {100 * sim['exceed_rate']:.1f}% "
                f"(delta {100 * res['delta']:.0f}%)", markup=False, highlight=False
            )
    elif cal:
        console.print(f"Calibration: {cal['error']}", markup=False, highlight=False)


def _share(s: dict[str, Any]) -> str:
    return "–" if s["share"] is None else f"{100 * s['share']:.0f}% (n={s['n']})"


def _print_table(
    console: Any, scores: dict[str, Any], n: int, judge: str, cache: Path, secs: float, fair_missing: str | None = None
) -> None:
    """Two narrow tables (quality, then cost and the comparison) so each fits an 80-column terminal."""
    from rich.table import Table

    from ragsieve.eval.report import COLUMNS, format_rows

    width = max(40, min(console.width or 80, 80))
    quality = [c for c in COLUMNS if c[2] != "cost"]
    cost = [c for c in COLUMNS if c[2] == "cost"]
    for title, cols, last in (
        (f"ragsieve eval: {n} question{'s' if n != 1 else ''}; rates in % (faithfulness judge: {judge})", quality,
         False),
        ("cost per question; sel-acc Δ vs plain RAG without a confidence", cost, True),
    ):
        header, rows = format_rows(scores, with_intervals=False, columns=cols)
        if not last:
            header, rows = header[:-1], [r[:-1] for r in rows]
        table = Table(title=title, title_justify="left")
        for col in header:
            table.add_column(col, no_wrap=True)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    for name, m in scores.items():
        ivs = m.get("intervals", {})
        parts = [
            f"{k} [{100 * ivs[k][0]:.0f},{100 * ivs[k][1]:.0f}]"
            for k in ("accuracy", "coverage", "faithfulness")
            if k in ivs
        ]
        if "aurc" in ivs:
            parts.append(f"aurc [{ivs['aurc'][0]:.3f},{ivs['aurc'][1]:.3f}]")
        # Wrapped at the spaces between intervals only: a bracket is never split across lines.
        for line in wrap_lines(f"  {name}: 95% intervals " + ", ".join(parts), width, "      "):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    note = (
        "sel-acc Δ: selective accuracy minus plain RAG's (without a confidence) at the lower of the two coverages "
        "(paired bootstrap 95% interval); "
        + ("the fair comparison is below. " if fair_missing is None else f"no fair comparison: {fair_missing}. ")
        + "abst U/A: abstention on unanswerable / "
        "answerable questions. cite P/R: citation precision / "
        f"recall against gold evidence. Outputs cached in {cache} ({secs:.0f}s)."
    )
    for line in wrap_lines(note, width):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def wrap_lines(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` wrapped at spaces to ``width`` (a path longer than a line stays whole)."""
    import textwrap

    return textwrap.wrap(
        text, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )
