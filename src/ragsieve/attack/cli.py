"""``ragsieve attack``: red-team your own index with a knowledge-poisoning attack.

Examples::

    ragsieve attack poison --index ./my-index --questions qa.jsonl --n 5 --out ./my-index-poisoned \\
        --spread sources --writer template --seed 0
    ragsieve attack poison --index ./my-index --questions qa.jsonl --n 3 --out ./my-index-mirrors \\
        --writer mirror        # the gold passage copied to 3 other hosts, only the answer changed
    ragsieve attack poison --index ./my-index --questions qa.jsonl --n 5 --out ./my-index-spread \\
        --writer spread        # one claim in 5 registers far apart in embedding space
    ragsieve attack eval --index ./my-index --poisoned ./my-index-poisoned --questions qa.jsonl \\
        --defence plain --defence poison-judge --json

``qa.jsonl`` has one question per line: ``{"id": "q1", "question": "...", "answers": ["..."]}``
(``"answer": "..."`` is accepted too). The original index is only read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ragsieve.config import load_with_overrides
from ragsieve.console import INDEX_HELP, console, resolve_index_dir
from ragsieve.errors import InputError

app = typer.Typer(help="Knowledge-poisoning attacks: poison a copy of an index, measure each defence.",
                  no_args_is_help=True)


def _open_index(path: Path, config: Any) -> Any:
    from ragsieve.embed import load_embedder
    from ragsieve.index import Index

    index = Index.open(path, embedder=load_embedder(config.embedder))
    index.warm_up()
    return index


def _load_llm(config: Any) -> Any:
    from ragsieve.llm import load_llm

    return load_llm(config.llm)


def read_questions(path: Path) -> list[dict[str, Any]]:
    """``{"id", "question", "answers"}`` rows (``answer`` as a string is accepted)."""
    from ragsieve.io import read_jsonl

    if not path.is_file():
        raise InputError(f"questions file {path} does not exist; pass a JSONL file of id/question/answers")
    rows = []
    for i, row in enumerate(read_jsonl(path)):
        answers = row.get("answers", row.get("answer"))
        if isinstance(answers, str):
            answers = [answers]
        if not row.get("question") or not answers:
            raise InputError(f"line {i + 1} of {path} needs 'question' and 'answers' (or 'answer')")
        rows.append({"id": str(row.get("id", i)), "question": row["question"], "answers": list(answers)})
    return rows


@app.command()
def poison(
    index: Path | None = typer.Option(
        None, "--index", "-i", metavar="DIR", help="The index to attack (only read). " + INDEX_HELP
    ),
    questions: Path = typer.Option(..., "--questions", "-q", help="Target questions (JSONL)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for the poisoned copy of the index."),
    n: int = typer.Option(5, "--n", min=1, help="Poisoned passages per question."),
    spread: str = typer.Option("sources", help="sources (several new hosts), one (one new host) or inject "
                               "(into an existing source)."),
    writer: str = typer.Option("template", help="template, llm (question + LLM assertion), assert (an LLM "
                               "states the wrong answer about the question's subject without restating the "
                               "question; template fallback), assert-template (the same, templates only) or "
                               "mirror (copies of the retrieved gold passage on other hosts with only the "
                               "answer changed) or spread (the wrong answer stated in registers far apart in "
                               "embedding space: fact sheet, forum post, news report...; evades a check that "
                               "counts a tight cluster of passages as one voice)."),
    lead: str = typer.Option("question", help="What opens each passage: question (verbatim, PoisonedRAG's "
                             "black-box attack), statement (the question's words as a statement: an attacker "
                             "evading a restated-question check) or none."),
    seed: int = typer.Option(0, help="Seed of every random choice."),
    hosts: int = typer.Option(5, min=1, help="Attacker hosts for --spread sources."),
    llm_cache: Path | None = typer.Option(None, help="JSONL cache of the LLM writer's outputs."),
    config: Path | None = typer.Option(None, "--config", help="Pipeline config (embedder, LLM)."),
) -> None:
    """Write N poisoned passages per question and inject them into a copy of the index."""
    from ragsieve.attack.poison import (
        LEADS,
        WRITERS,
        AssertionWriter,
        LLMWriter,
        MirrorWriter,
        SpreadWriter,
        TemplateWriter,
        choose_targets,
        poison_index,
    )

    if spread not in ("sources", "one", "inject"):
        raise InputError(f"--spread must be sources, one or inject, got {spread!r}")
    if writer not in WRITERS:
        raise InputError(f"--writer must be one of {', '.join(WRITERS)}, got {writer!r}")
    if lead not in LEADS:
        raise InputError(f"--lead must be one of {', '.join(LEADS)}, got {lead!r}")
    cfg = load_with_overrides(config, {})
    idx = _open_index(resolve_index_dir(index, cfg.index_dir), cfg)
    targets = choose_targets(read_questions(questions), seed=seed)
    if not targets:
        raise InputError("no question got a same-type wrong answer; give more questions with varied answers")
    w: TemplateWriter | LLMWriter | MirrorWriter | SpreadWriter
    if writer == "template":
        w = TemplateWriter(seed=seed, lead=lead)  # type: ignore[arg-type]
    elif writer == "llm":
        w = LLMWriter(_load_llm(cfg), seed=seed, cache_path=llm_cache, lead=lead)  # type: ignore[arg-type]
    elif writer == "assert":
        w = AssertionWriter(_load_llm(cfg), seed=seed, cache_path=llm_cache)
    elif writer == "assert-template":
        w = AssertionWriter(seed=seed, templates_only=True)
    elif writer == "spread":
        w = SpreadWriter(idx.embedder, seed=seed)  # the index's embedder: the space the defence clusters in
    else:
        w = MirrorWriter(idx, seed=seed)
    copy = poison_index(idx, targets, n, out, w, spread=spread, seed=seed, n_hosts=hosts)  # type: ignore[arg-type]
    skipped = getattr(w, "skipped", [])
    why = "no retrieved gold passage to mirror" if writer == "mirror" else "every passage would state a gold answer"
    note = f"; {len(skipped)} questions skipped ({why})" if skipped else ""
    console.print(f"wrote {len(copy) - len(idx)} poisoned passages for {len(targets) - len(skipped)} questions "
                  f"into {out} ({len(idx)} original chunks; {index} unchanged){note}", markup=False, highlight=False)


@app.command("eval")
def eval_(
    index: Path | None = typer.Option(None, "--index", "-i", metavar="DIR", help="The clean index. " + INDEX_HELP),
    poisoned: Path = typer.Option(..., "--poisoned", "-p", help="The copy written by `attack poison`."),
    questions: Path | None = typer.Option(None, "--questions", "-q",
                                          help="Restrict to these question ids (default: every target)."),
    defence: list[str] = typer.Option(["plain", "poison-judge"], "--defence", "-d",
                                      help="Defence to run (repeat); see ragsieve.attack.evaluate.DEFENCES."),
    llm_cache: Path | None = typer.Option(None, help="JSONL cache of LLM outputs (resumable)."),
    log: Path | None = typer.Option(None, help="Write per-question answers and decisions here (JSONL)."),
    config: Path | None = typer.Option(None, "--config", help="Pipeline config (retrieval, embedder, LLM)."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
) -> None:
    """Attack success, retrieval-level success and clean accuracy per defence."""
    from ragsieve.attack.evaluate import CachedLLM, defence_config, evaluate_defence
    from ragsieve.attack.metrics import TABLE_HEADERS, summarize, table_row, where_stopped, where_stopped_line
    from ragsieve.attack.poison import load_attack
    from ragsieve.io import atomic_write_jsonl

    _, targets, passages = load_attack(poisoned)
    if questions is not None:
        wanted = {q["id"] for q in read_questions(questions)}
        targets = [t for t in targets if t.id in wanted]
        if not targets:
            raise InputError(f"none of the questions in {questions} is a target of the attack in {poisoned}")
    cfg = load_with_overrides(config, {})
    configs = {name: defence_config(name, cfg) for name in defence}
    clean_idx = _open_index(resolve_index_dir(index, cfg.index_dir), cfg)
    pois_idx = _open_index(poisoned, cfg)
    llm = CachedLLM(_load_llm(cfg), llm_cache)
    llm.warm_up()
    ids = {p.id for p in passages}
    results: dict[str, Any] = {}
    logs: list[dict[str, Any]] = []
    base = None
    for name, dcfg in configs.items():
        outcomes, rows = evaluate_defence(dcfg, clean_idx, pois_idx, targets, ids, llm)
        if name == "plain":
            base = outcomes
        results[name] = outcomes
        logs += [{"defence": name, **r} for r in rows]
    summaries = {name: summarize(o, baseline=base if base is not None and name != "plain" else None)
                 for name, o in results.items()}
    if log is not None:
        atomic_write_jsonl(log, logs)
    checks = {name: where_stopped([r for r in logs if r["defence"] == name]) for name in results}
    if as_json:
        console.print_json(json.dumps({"targets": len(targets), "defences": summaries, "checks": checks}))
        return
    table = Table(*TABLE_HEADERS, title=f"knowledge poisoning: {len(targets)} target questions")
    for name, s in summaries.items():
        table.add_row(*table_row(name, s))
    console.print(table)
    for name, c in checks.items():
        console.print(where_stopped_line(name, c), soft_wrap=True)
