"""``ragsieve calibrate``: choose the abstention threshold on labelled questions and write it to the config.

The configured pipeline answers every question of an ``eval``-format JSONL (through
:func:`ragsieve.eval.harness.run_eval` and its resumable cache, so answers ``ragsieve eval``
already computed for the same configuration are reused). Each answered question is labelled
right or wrong exactly as ``eval`` scores it (an answer to an unanswerable question is wrong;
a question the pipeline abstained on is never answered whatever the threshold), and
:func:`ragsieve.calibrate.calibrate_threshold` picks the lowest threshold on
``Answer.confidence`` whose selective risk is at most ``--risk`` with probability at least
``1 - --delta`` (Learn then Test). The threshold goes into the config's ``[calibration]``
section (``calibration.abstain_below``); the rule a pipeline applies is
``abstain when confidence is None or confidence < abstain_below``.

Mount: ``app.command("calibrate")(calibrate_command)`` (or ``app.add_typer(calibrate_cli.app)``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ragsieve.console import INDEX_HELP, resolve_index_dir, stage_progress
from ragsieve.errors import ConfigError, InputError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["app", "calibrate_command", "calibration_labels", "lookup_or_answer", "write_calibration"]

app = typer.Typer(help="Choose the abstention threshold that keeps the error rate of answers under a target.")

# Faithfulness judges a cached ``eval`` record may have been keyed with (None: no judge).
_CACHE_JUDGES: tuple[str | None, ...] = (None, "lexical-embedding", "llm-logprob")


def calibration_labels(
    items: Sequence[Any], records: Sequence[dict[str, Any]]
) -> tuple[list[float | None], np.ndarray]:
    """Per question: the confidence the threshold is applied to (``None`` when the pipeline
    abstained or failed: never answered) and whether its answer is right (``eval``'s scoring:
    an answerable question answered with a gold answer contained in the text)."""
    from ragsieve.eval.scoring import ItemScores

    scores = ItemScores(items, records)
    conf: list[float | None] = []
    for rec, abstained in zip(records, scores.abstained, strict=True):
        c = rec.get("confidence")
        conf.append(None if abstained or rec.get("error") or c is None else float(c))
    correct = scores.answerable & scores.contains & ~scores.abstained
    return conf, correct


def lookup_or_answer(items: Sequence[Any], spec: Any, cache: Any, run: Any = None, **run_kwargs: Any) -> list[dict]:
    """Records of ``spec`` for ``items``: a cached one under any faithfulness judge's key (an
    ``eval`` run of the same configuration), else answered now without a judge and cached."""
    from ragsieve.eval.harness import run_eval

    run = run or run_eval

    def cached(item: Any) -> dict[str, Any] | None:
        for judge in _CACHE_JUDGES:
            rec = cache.get(spec.key(item.id, item.question, judge))
            if rec is not None:
                return rec
        return None

    missing = [i for i in items if cached(i) is None]
    if missing:
        run(missing, [spec], cache, None, **run_kwargs)
    out = []
    for item in items:
        rec = cached(item)
        if rec is None:  # pragma: no cover - run_eval always caches what it answers
            raise InputError(f"no answer was recorded for question {item.id!r}; rerun ragsieve calibrate")
        out.append(rec)
    return out


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a valid TOML basic string


_TOML_TABLE = re.compile(r"^\s*\[\s*calibration\s*\]\s*(#.*)?$")
_TOML_HEADER = re.compile(r"^\s*\[")


def write_calibration(path: Path, section: dict[str, Any]) -> None:
    """Set the ``calibration`` section of the config file ``path`` (created if missing), leaving
    the rest of the file as it is (TOML: only the ``[calibration]`` table is replaced, comments
    elsewhere are kept; YAML and JSON files are rewritten). The result is validated."""
    from ragsieve.config import load_config
    from ragsieve.io import atomic_write_text

    values = {k: v for k, v in section.items() if v is not None}
    suffix = path.suffix
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if suffix == ".toml":
        kept: list[str] = []
        skipping = False
        for line in old.splitlines():
            if _TOML_TABLE.match(line):
                skipping = True
                continue
            if skipping and _TOML_HEADER.match(line):
                skipping = False
            if not skipping:
                kept.append(line)
        while kept and not kept[-1].strip():
            kept.pop()
        table = ["[calibration]"] + [f"{k} = {_toml_value(v)}" for k, v in values.items()]
        text = "\n".join(kept + ([""] if kept else []) + table) + "\n"
    elif suffix in {".yaml", ".yml", ".json"}:
        if suffix == ".json":
            data = json.loads(old) if old.strip() else {}
        else:
            import yaml

            data = (yaml.safe_load(old) if old.strip() else None) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path} does not hold a mapping; fix it or pass another --config")
        data["calibration"] = values
        if suffix == ".json":
            text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        else:
            import yaml

            text = yaml.safe_dump(data, sort_keys=False)
    else:
        raise ConfigError(f"config file {path} has suffix {suffix!r}; use .toml, .yaml, .yml or .json")
    tmp = path.with_name(f".{path.name}.check{suffix}")
    try:
        tmp.write_text(text, encoding="utf-8")
        load_config(tmp)  # refuse to write a config that would not load
    finally:
        tmp.unlink(missing_ok=True)
    atomic_write_text(path, text)


def calibrate_command(
    data: Path = typer.Option(..., "--data", help="Labelled questions (the `ragsieve eval` JSONL format)."),
    index: Path | None = typer.Option(None, "--index", metavar="DIR", help=INDEX_HELP),
    risk: float = typer.Option(0.1, "--risk", help="Target error rate among answered questions (alpha)."),
    delta: float = typer.Option(0.1, "--delta", help="Allowed probability that the promise fails (1 - confidence)."),
    config: Path | None = typer.Option(
        None, "--config", help="Config file to read and to write the threshold into (default: ./ragsieve.toml)."
    ),
    pipeline: str | None = typer.Option(None, "--pipeline", help="Preset to calibrate (default: the config's)."),
    method: str = typer.Option("ltt-binomial", "--method", help="ltt-binomial (default), ltt-hb or crc."),
    max_withdrawn: float | None = typer.Option(
        None,
        "--max-withdrawn",
        help="Also certify that at most this share of right answers is withdrawn (e.g. 0.05); "
        "both promises then hold together with probability 1 - delta.",
    ),
    limit: int | None = typer.Option(None, "--limit", help="Use the first N questions."),
    cache: Path | None = typer.Option(None, "--cache", help="Resumable JSONL of answers (shared with eval)."),
    model: str | None = typer.Option(None, "--model", help="GGUF path (llama-cpp) or model name (openai)."),
    chat_format: str | None = typer.Option(None, "--chat-format", help="llama.cpp chat format, e.g. gemma."),
    llm_url: str | None = typer.Option(None, "--llm-url", help="OpenAI-compatible server base URL."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads for llama.cpp."),
    splits: int = typer.Option(500, "--splits", min=0, help="Random calibration/test splits to simulate (0: none)."),
    cal_frac: float = typer.Option(0.5, "--cal-frac", help="Share of questions calibrated on in each split."),
    write: bool = typer.Option(True, "--write/--no-write", help="Write the threshold into the config file."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Choose the abstention threshold with a finite-sample guarantee (Learn then Test) and write it to the config."""
    from rich.console import Console

    from ragsieve.calibrate import calibrate_threshold, simulate_splits
    from ragsieve.config import CalibrationConfig, PipelineConfig, apply_overrides, load_config
    from ragsieve.eval.data import load_qa
    from ragsieve.eval.harness import EvalCache, EvalSpec, default_cache_path

    target = config or Path("ragsieve.toml")
    base = load_config(target) if target.exists() else PipelineConfig()
    overrides: dict[str, Any] = {
        "index_dir": str(index) if index else None,
        "pipeline": pipeline,
        "llm.model": model,
        "llm.chat_format": chat_format,
        "llm.n_threads": threads,
    }
    if llm_url:
        overrides.update({"llm.backend": "openai", "llm.base_url": llm_url})
    cfg = apply_overrides(base, overrides)
    # The threshold is chosen on the pipeline's own answers, before any earlier threshold.
    cfg = cfg.model_copy(update={"calibration": CalibrationConfig()})
    if cfg.pipeline == "sieve" and "decide" not in cfg.ablate and cfg.decide.threshold is None:
        # the decide stage answers every draft with its confidence (threshold 0), so the threshold
        # is chosen over all of them rather than only above the model's default; with it written
        # to calibration.abstain_below the decide stage abstains below it
        cfg = cfg.model_copy(update={"decide": cfg.decide.model_copy(update={"threshold": 0.0})})
    # The same fallback as every command that reads an index.
    index = resolve_index_dir(index, cfg.index_dir)
    cfg = apply_overrides(cfg, {"index_dir": str(index)})
    items = load_qa(data, limit)
    spec = EvalSpec(cfg.pipeline, cfg)
    store = EvalCache(cache or default_cache_path(data, index)).load()
    # rich directly (not ragsieve.cli's helpers), so this module stands on its own wherever it is mounted
    console = Console()
    label = f"answering with {cfg.pipeline}"
    with stage_progress() as progress:
        progress(label, 0, len(items))
        records = lookup_or_answer(items, spec, store, progress=lambda done, total: progress(label, done, total))
    conf, correct = calibration_labels(items, records)
    result = calibrate_threshold(conf, correct, risk, delta, method, withdrawn=max_withdrawn)
    sim = None
    if splits and len(items) >= 4:
        sim = simulate_splits(
            conf, correct, risk, delta, splits, cal_frac, seed=0, method=method, withdrawn=max_withdrawn
        )
    written = None
    if write and result.feasible:
        section = CalibrationConfig(
            abstain_below=result.threshold,
            risk=risk,
            delta=delta,
            method=method,
            n=result.n,
            coverage=round(result.coverage, 6),
            bound=None if result.bound is None else round(result.bound, 6),
            withdrawn=max_withdrawn,
            withdrawn_bound=(None if max_withdrawn is None else round(float(result.details["withdrawn_bound"]), 6)),
            data=str(data),
        )
        write_calibration(target, section.model_dump())
        written = str(target)
    payload = {
        "data": str(data),
        "pipeline": cfg.pipeline,
        "n": len(items),
        "answered_by_pipeline": sum(c is not None for c in conf),
        "result": result.to_dict(),
        "simulation": None if sim is None else {k: v for k, v in sim.to_dict().items() if k != "test_risks"},
        "written_to": written,
        "rule": "abstain when confidence is None or confidence < calibration.abstain_below",
    }
    if as_json:
        console.print_json(json.dumps(payload))
        return
    if result.feasible:
        console.print(
            f"[green]Answer when confidence >= {result.threshold:.4g}[/green]: covers {result.coverage:.1%} of "
            f"{result.n} questions ({result.n_answered} answered), empirical risk {result.empirical_risk:.3f}, "
            f"{1 - delta:.0%} upper bound {result.bound:.3f} <= target {risk}."
        )
        if max_withdrawn is not None:
            console.print(
                f"Right answers withdrawn: {result.details['withdrawn']} of {result.details['right_with_confidence']}, "
                f"upper bound {result.details['withdrawn_bound']:.3f} <= target {max_withdrawn} (both promises "
                f"together with probability >= {1 - delta:.0%})."
            )
    else:
        console.print(result.message, style="yellow", markup=False, highlight=False)  # plain text: brackets stay
    if sim is not None:
        lo, hi = sim.exceed_interval
        console.print(
            f"Simulated {sim.n_splits} random {cal_frac:.0%}/{1 - cal_frac:.0%} splits: held-out risk exceeded "
            f"{risk} in {sim.exceed_rate:.1%} (95% {lo:.1%}-{hi:.1%}; delta = {delta:.0%}); the chosen threshold's "
            f"risk on all {len(items)} questions exceeded it in {sim.pool_exceed_rate:.1%}; mean held-out "
            f"coverage {sim.mean_coverage:.1%}, no threshold found in {sim.infeasible} splits."
        )
    if written:
        console.print(f"Wrote calibration.abstain_below = {result.threshold:.6g} to {written}.")
    elif write:
        console.print("Nothing written: the config keeps its previous calibration section.")


app.command("calibrate")(calibrate_command)
