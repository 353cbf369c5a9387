"""The ``ragsieve`` command line: a thin layer over the Python API.

Each stage mounts its own sub-command group (``router``, ``filters``, ``tasks``, ``coe``,
``importance``) from ``ragsieve.<stage>.cli``.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from ragsieve.config import SIEVE_STAGES, PipelineConfig, apply_overrides, load_config
from ragsieve.errors import RagsieveError

app = typer.Typer(
    name="ragsieve",
    help="Retrieval-augmented generation that checks the knowledge it retrieves.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

# Stage sub-command groups: (module, attribute, command name).
SUBAPPS = [
    ("ragsieve.route.cli", "app", "router"),
    ("ragsieve.filtering.cli", "app", "filters"),
    ("ragsieve.tasks.cli", "app", "tasks"),
    ("ragsieve.coe.cli", "app", "coe"),
    ("ragsieve.importance.cli", "app", "importance"),
    ("ragsieve.attack.cli", "app", "attack"),
]


def _mount_subapps() -> None:
    for module_name, attr, name in SUBAPPS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # that stage has no CLI in this build
            raise
        app.add_typer(getattr(module, attr), name=name)


def _setup_logging(verbose: bool) -> None:
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr, force=True)
    for noisy in ("faiss", "bm25s", "sentence_transformers", "httpx", "urllib3", "transformers", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _config(config_path: Path | None, overrides: dict[str, Any]) -> PipelineConfig:
    base = load_config(config_path) if config_path else PipelineConfig()
    return apply_overrides(base, overrides)


class _ProgressReporter:
    """Adapts the index builder's ``(stage, done, total)`` callback to rich progress bars."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, Any] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        labels = {"load": "loading files", "embed": "embedding chunks", "index": "building indexes"}
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(labels.get(stage, stage), total=total)
        self.progress.update(self.tasks[stage], completed=done, total=total)


class _RateColumn(ProgressColumn):
    """Items per second (chunks, files) of a task."""

    def render(self, task: Any) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f}/s" if speed else "", style="progress.data.speed")


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=False,
    )


# ---------------------------------------------------------------------- commands
@app.callback()
def _main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log what each stage does.")) -> None:
    _setup_logging(verbose)


@app.command()
def ingest(
    path: Path = typer.Argument(..., help="Folder (or file) to ingest."),
    index: Path = typer.Option(..., "--index", help="Index directory to create or update."),
    config: Path | None = typer.Option(None, "--config", help="TOML/YAML config file."),
    partition_by: str | None = typer.Option(None, "--partition-by", help="'folder' or a metadata field."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Chunk size in tokens."),
    overlap: int | None = typer.Option(None, "--overlap", help="Overlap between chunks in tokens."),
    unit: str | None = typer.Option(None, "--unit", help="'window' (default) or 'sentence'."),
    text_field: str | None = typer.Option(None, "--text-field", help="JSON/CSV field holding the text."),
    id_field: str | None = typer.Option(None, "--id-field", help="JSON/CSV field holding the record id."),
    dense_kind: str | None = typer.Option(None, "--dense", help="faiss index: flat (exact), ivf or hnsw."),
    as_json: bool = typer.Option(False, "--json", help="Print the build report as JSON."),
) -> None:
    """Load, chunk, embed and index a folder; re-running updates only what changed."""
    from ragsieve.index import BuildReport, Index

    cfg = _config(
        config,
        {
            "ingest.partition_by": partition_by,
            "ingest.chunking.max_tokens": max_tokens,
            "ingest.chunking.overlap_tokens": overlap,
            "ingest.chunking.unit": unit,
            "ingest.text_field": text_field,
            "ingest.id_field": id_field,
            "dense_index.kind": dense_kind,
        },
    )
    report = BuildReport()
    with _progress() as progress:
        built = Index.build(path, index, config=cfg, progress=_ProgressReporter(progress), report=report)
    if as_json:
        console.print_json(json.dumps({**report.to_dict(), "index": built.stats()}))
        return
    rate = report.chunks_embedded / report.seconds if report.seconds else 0.0
    console.print(
        f"[green]indexed[/] {report.chunks} chunks from {report.files_seen - len(report.skipped)} files into {index} "
        f"({report.files_added} added, {report.files_updated} updated, {report.files_unchanged} unchanged, "
        f"{report.files_removed} removed; {report.chunks_embedded} embedded at {rate:.0f} chunks/s, "
        f"{report.seconds:.1f}s)"
    )
    console.print(f"domains: {', '.join(built.domains)}")
    if report.skipped:
        err_console.print(f"[yellow]skipped {len(report.skipped)} file(s):[/]")
        for p, reason in report.skipped:
            err_console.print(f"  {p}: {reason}")


@app.command()
def search(
    query: str = typer.Argument(..., help="Search text."),
    index: Path = typer.Option(..., "--index", help="Index directory."),
    mode: str = typer.Option("hybrid", "--mode", help="dense, sparse or hybrid."),
    k: int = typer.Option(10, "-k", help="Number of results."),
    where: list[str] = typer.Option([], "--where", help="Metadata filter key=value (repeatable)."),
    route: str = typer.Option("all", "--route", help="all, auto (router) or a domain name."),
    fusion: str | None = typer.Option(None, "--fusion", help="rrf or weighted."),
    config: Path | None = typer.Option(None, "--config", help="TOML/YAML config file."),
    as_json: bool = typer.Option(False, "--json", help="Print results as JSON."),
) -> None:
    """Rank chunks for a query and show each retriever's score."""
    from ragsieve.index import parse_where
    from ragsieve.pipeline import Pipeline
    from ragsieve.types import Trace

    cfg = _config(config, {"index_dir": str(index), "retrieval.mode": mode, "retrieval.fusion": fusion, "route": route})
    pipe = Pipeline.from_config(cfg)
    trace = Trace(query=query)
    pipe.warm_up_index()
    domains = pipe.resolve_domains(query, trace)
    start = time.perf_counter()
    hits = pipe.retrieve(query, trace, k=k, domains=domains, where=parse_where(where) or None)[:k]
    elapsed = (time.perf_counter() - start) * 1000
    if as_json:
        console.print_json(json.dumps({"query": query, "hits": [h.to_dict() for h in hits], "trace": trace.to_dict()}))
        return
    table = Table(title=f"{len(hits)} results for {query!r} ({mode}, {elapsed:.1f} ms)")
    for col in ("#", "id", "domain", "fused", "dense", "sparse", "text"):
        table.add_column(col, overflow="fold")
    for h in hits:
        table.add_row(
            str(h.rank),
            h.chunk.id,
            h.chunk.domain,
            f"{h.scores.get('fused', h.score):.4f}",
            f"{h.scores['dense']:.3f}" if "dense" in h.scores else "-",
            f"{h.scores['sparse']:.3f}" if "sparse" in h.scores else "-",
            h.chunk.text[:160],
        )
    console.print(table)


def _clip_line(text: str, width: int) -> str:
    text = " ".join(text.splitlines())
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _clip_middle(text: str, width: int) -> str:
    """Shorten an id in the middle so its start (folder) and end (chunk number) stay readable."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def _candidate_status(decisions: list[dict[str, Any]], cid: str) -> str:
    """``dropped (check: reason)`` if any check dropped the candidate, else ``flagged (...)``,
    else ``kept``."""
    mine = [d for d in decisions if d.get("id") == cid]
    for verdict in ("dropped", "flagged"):
        hit = next((d for d in mine if d["verdict"] == verdict), None)
        if hit is not None:
            return f"{verdict} ({hit['check']}: {hit['reason']})"
    return "kept" if mine else "not judged"


def render_answer(answer: Any, width: int = 80) -> list[str]:
    """The answer and its trace as terminal lines of at most ``width`` characters: the answer
    (or the abstention and why), one line per candidate, one per answer sentence, timings."""
    import textwrap

    t = answer.trace
    lines = textwrap.wrap(f"Q: {answer.question}", width, subsequent_indent="   ")
    head = "A (abstained): " if answer.abstained else "A: "
    lines += textwrap.wrap(head + (answer.text or "(empty)"), width, subsequent_indent="   ")
    facts = []
    if answer.abstained and answer.abstain_reason:
        facts.append(f"why: {answer.abstain_reason}")
    if answer.confidence is not None:
        facts.append(f"confidence {answer.confidence:.2f}")
    for ev in t.stage("route")[:1]:
        facts.append("searched " + ", ".join(ev.get("searched") or ["<global>"]))
    for ev in t.stage("need")[:1]:
        facts.append(("retrieved" if ev.get("retrieve") else "no retrieval") + f": {ev.get('reason', '')}")
    for fact in facts:
        lines += textwrap.wrap(fact, width, initial_indent="   ", subsequent_indent="     ")
    retrieved: list[dict[str, Any]] = next((e["candidates"] for e in t.stage("retrieve") if e.get("candidates")), [])
    if retrieved:
        used = {h.chunk.id for h in answer.evidence}
        lines.append(f"candidates ({len(retrieved)}; * = in the answer's evidence):")
        for ev in t.stage("judge")[:1]:
            lines.append(
                _clip_line(
                    f" judge {ev['judge']}: relevant >= {ev['upper']:.2f}, irrelevant < {ev['lower']:.2f}", width
                )
            )
        for c in retrieved:
            status = _candidate_status(t.decisions, c["id"])
            mark = "*" if c["id"] in used else " "
            source = str(c.get("source", ""))
            # Ids of file chunks start with their source: print the source only when it adds to the id.
            where = str(c["id"]) if str(c["id"]).startswith(source) else f"{c['id']} {source}"
            room = max(width - len(status) - 2 - 7 - 16, 12)  # leave at least 16 columns of text
            prefix = f"{mark}{status} {_clip_middle(where, room)} {c.get('score', 0.0):.3f} "
            first = (c.get("text") or "").strip().splitlines()[0] if (c.get("text") or "").strip() else ""
            lines.append(_clip_line(prefix + first, width))
    if answer.claims:
        lines.append(f"answer sentences (judge: {answer.claims[0].judge}):")
        for v in answer.claims:
            cited = ",".join(v.cited_ids) if v.cited_ids else f"against {v.against}"
            tag = "supported  " if v.supported else "unsupported"
            lines.append(_clip_line(f"  {tag} {v.score:.2f} [{cited}] {v.sentence}", width))
    for ev in t.stage("regenerate"):
        if ev.get("skipped"):
            lines.append(_clip_line(f"regeneration skipped: {ev.get('reason', '')}", width))
        else:
            lines.append(_clip_line(f"regenerated with {', '.join(ev['evidence'])}: {ev['reason']}", width))
    stage_ms = [(k, v) for k, v in t.timings_ms.items() if k in SIEVE_STAGES]
    total = sum(v for _, v in stage_ms)
    parts = " ".join(f"{k} {v:.0f}" for k, v in stage_ms)
    calls = f"{t.llm_calls} LLM call{'s' if t.llm_calls != 1 else ''}"
    lines.append(_clip_line(f"{total:.0f} ms, {calls}: {parts}", width))
    return lines


def _print_answer(answer: Any) -> None:
    width = min(console.width or 80, 80)
    for i, line in enumerate(render_answer(answer, width)):
        style = "bold" if i == 0 else None
        if line.startswith("A (abstained)"):
            style = "bold yellow"
        elif line.startswith("A: "):
            style = "bold green"
        console.print(Text(line, style=style or ""), soft_wrap=True, overflow="crop", no_wrap=True)


def _ablate_list(ablate: str | None) -> list[str] | None:
    return [x.strip() for x in ablate.split(",") if x.strip()] if ablate else None


@app.command()
def ask(
    question: str = typer.Argument(..., help="The question."),
    index: Path | None = typer.Option(None, "--index", help="Index directory."),
    no_retrieval: bool = typer.Option(False, "--no-retrieval", help="Answer from the model alone."),
    k: int | None = typer.Option(None, "-k", help="Evidence pieces to use."),
    mode: str | None = typer.Option(None, "--mode", help="dense, sparse or hybrid retrieval."),
    route: str | None = typer.Option(None, "--route", help="all, auto (router) or a domain name."),
    pipeline: str | None = typer.Option(
        None, "--pipeline", help="sieve (default: every check, verified), plain (RAG) or task-adaptive."
    ),
    ablate: str | None = typer.Option(
        None, "--ablate", help="Comma-separated stages to switch off: " + ", ".join(SIEVE_STAGES) + "."
    ),
    select: str | None = typer.Option(None, "--select", help="top-k or scope-coe (plain pipeline)."),
    model: str | None = typer.Option(None, "--model", help="GGUF path (llama-cpp) or model name (openai)."),
    llm_url: str | None = typer.Option(None, "--llm-url", help="OpenAI-compatible server base URL."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads for llama.cpp."),
    config: Path | None = typer.Option(None, "--config", help="TOML/YAML config file."),
    as_json: bool = typer.Option(False, "--json", help="Print the answer and full trace as JSON."),
) -> None:
    """Answer a question from the index, checking the evidence and the answer (the sieve)."""
    from ragsieve.pipeline import build_pipeline

    overrides: dict[str, Any] = {
        "index_dir": str(index) if index else None,
        "retrieval.k": k,
        "retrieval.mode": mode,
        "pipeline": pipeline,
        "ablate": _ablate_list(ablate),
        "select": select,
        "llm.model": model,
        "llm.n_threads": threads,
    }
    if llm_url:
        overrides.update({"llm.backend": "openai", "llm.base_url": llm_url})
    cfg = _config(config, overrides)
    if not no_retrieval and not cfg.index_dir:
        raise RagsieveError("no index given; pass --index DIR (build one with `ragsieve ingest`) or --no-retrieval")
    pipe = build_pipeline(cfg)
    answer = pipe.ask(question, no_retrieval=no_retrieval, k=k, route=route)
    if as_json:
        console.print_json(json.dumps(answer.to_dict(), default=str))
    else:
        _print_answer(answer)


@app.command()
def classify(
    text: str = typer.Argument(..., help="Text to classify."),
    labels: str = typer.Option(..., "--labels", help="Comma-separated labels, e.g. positive,negative."),
    knowledge: list[str] = typer.Option([], "--knowledge", help="Knowledge sentence to condition on (repeatable)."),
    template: str | None = typer.Option(
        None,
        "--template",
        help="Prompt preset (sentiment, sentiment-5, question-category, acceptability, generic) "
        "or a str.format template with {text}, {knowledge}, {options}.",
    ),
    calibrate: bool = typer.Option(True, "--calibrate/--no-calibrate", help="Contextual calibration."),
    model: str | None = typer.Option(None, "--model", help="GGUF path."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads for llama.cpp."),
    config: Path | None = typer.Option(None, "--config", help="TOML/YAML config file."),
    as_json: bool = typer.Option(False, "--json", help="Print the distribution as JSON."),
    index: Path | None = typer.Option(None, "--index", help="Retrieve knowledge from this index (for --filter)."),
    filter_name: str = typer.Option("none", "--filter", help="Knowledge filter: none, direct, icl, proxy, ensemble."),
    fusion: bool = typer.Option(False, "--fusion/--no-fusion", help="Fuse one distribution per kept piece."),
    proxy: Path | None = typer.Option(None, "--proxy", help="Proxy filter folder (`ragsieve filters train`)."),
    dkf: Path | None = typer.Option(None, "--dkf", help="D_kf JSONL for in-context filter demonstrations."),
) -> None:
    """A probability distribution over labels from next-token log-probabilities."""
    from ragsieve.errors import InputError
    from ragsieve.generate.classify import LabelClassifier
    from ragsieve.llm import load_llm

    label_list = [x.strip() for x in labels.split(",") if x.strip()]
    if len(label_list) < 2 or len(set(label_list)) != len(label_list):
        raise InputError("--labels needs at least two distinct comma-separated labels, e.g. positive,negative")
    if not text.strip():
        raise InputError("the text to classify is empty")
    cfg = _config(config, {"llm.model": model, "llm.n_threads": threads})
    llm = load_llm(cfg.llm)
    llm.warm_up()
    kwargs: dict[str, Any] = {"calibrate": calibrate}
    if template:
        kwargs["template"] = template
    clf = LabelClassifier(label_list, **kwargs)
    if calibrate:
        clf.fit_calibration(llm)
    if index is not None or filter_name != "none" or fusion:
        from ragsieve.filtering.cli import classify_filtered

        classify_filtered(
            llm,
            clf,
            text,
            index_dir=index,
            filter_name=filter_name,
            fusion=fusion,
            template=template,
            proxy=proxy,
            dkf=dkf,
            as_json=as_json,
            out=console,
        )
        return
    start = time.perf_counter()
    dist = clf.predict_proba(llm, text, knowledge=knowledge or None)
    ms = (time.perf_counter() - start) * 1000
    if as_json:
        console.print_json(json.dumps({"text": text, "labels": dist, "calibrated": calibrate, "ms": round(ms, 2)}))
        return
    best = max(dist, key=lambda lab: dist[lab])
    for label, p in sorted(dist.items(), key=lambda kv: -kv[1]):
        console.print(f"{label:>20} {p:6.3f} {'█' * int(p * 40)}")
    console.print(f"prediction: [bold]{best}[/] ({ms:.0f} ms)")


@app.command()
def info(index: Path = typer.Option(..., "--index", help="Index directory.")) -> None:
    """Show what an index holds."""
    from ragsieve.index import Index

    console.print_json(json.dumps(Index.open(index).stats()))


def default_demo_index() -> Path:
    from ragsieve.io import user_cache_dir

    return user_cache_dir() / "demo-index"


@app.command()
def demo(
    question: list[str] = typer.Option(
        [],
        "--question",
        "-q",
        help="Question to ask the demo corpus (repeatable); default: one it answers, one it should abstain on.",
    ),
    index: Path | None = typer.Option(None, "--index", help="Where to build the demo index."),
    pipeline: str = typer.Option("sieve", "--pipeline", help="sieve (default), plain or task-adaptive."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads for llama.cpp."),
) -> None:
    """Build an index of the bundled demo corpus and answer questions with the bundled models."""
    from ragsieve.demo import DEMO_SHOWCASE, demo_corpus_dir
    from ragsieve.index import BuildReport, Index
    from ragsieve.pipeline import Pipeline

    index_dir = index or default_demo_index()
    cfg = apply_overrides(PipelineConfig(index_dir=str(index_dir)), {"llm.n_threads": threads, "pipeline": pipeline})
    report = BuildReport()
    with _progress() as progress:
        built = Index.build(
            demo_corpus_dir(), index_dir, config=cfg, progress=_ProgressReporter(progress), report=report
        )
    console.print(
        f"demo index: {report.chunks} chunks in {len(built.domains)} domains at {index_dir} "
        f"({report.chunks_embedded} embedded, {report.seconds:.1f}s); pipeline: {cfg.pipeline}"
    )
    pipe = Pipeline(cfg, index=built)
    for q in question or list(DEMO_SHOWCASE):
        console.print()
        _print_answer(pipe.ask(q))


_MOUNTED = False


def main(argv: list[str] | None = None) -> None:
    """Console entry point: clear one-line errors instead of tracebacks."""
    global _MOUNTED
    if not _MOUNTED:
        _mount_subapps()
        _MOUNTED = True
    try:
        app(args=argv, prog_name="ragsieve", standalone_mode=False)
    except RagsieveError as exc:
        err_console.print(f"[bold red]error:[/] {exc}")
        raise SystemExit(2) from None
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("aborted")
        raise SystemExit(130) from None
    except SystemExit:
        raise
    except Exception as exc:  # click usage errors surface here in non-standalone mode
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            raise SystemExit(exc.exit_code) from None
        raise


if __name__ == "__main__":
    main()
