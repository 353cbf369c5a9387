"""The ``ragsieve`` command line: a thin layer over the Python API.

Each stage's sub-command group (``router``, ``filters``, ``tasks``, ``coe``, ``importance``,
``trace``, ``attack``) and the ``serve`` and ``eval`` commands live in ``ragsieve.<package>.cli``
and are mounted in one place, :func:`mount_subcommands`. Every command module takes its
console from :mod:`ragsieve.console` and its config from :func:`ragsieve.config.load_with_overrides`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import typer
import typer.main
from rich.text import Text

from ragsieve.citations import Citation, format_citation
from ragsieve.console import (
    INDEX_ENV,
    INDEX_HELP,
    console,
    default_demo_index,
    err_console,
    resolve_index_dir,
    stage_progress,
)
from ragsieve.errors import InputError, RagsieveError
from ragsieve.options import (
    SIEVE_STAGES,
    ChunkUnit,
    DenseKind,
    FilterName,
    FusionName,
    PipelineName,
    RetrievalModeName,
    SelectName,
    StoreBackendName,
)
from ragsieve.present import scaled_scores

__all__ = [
    "INDEX_ENV", "app", "cli_command", "default_demo_index", "hit_block", "main", "render_answer", "resolve_index_dir",
]

app = typer.Typer(
    name="ragsieve",
    help="Retrieval-augmented generation that checks the knowledge it retrieves.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def choices(name: str, options: Any) -> Any:
    """A ``str`` enum of a config ``Literal``'s values: typer lists them in ``--help`` and
    refuses any other value, and the set is declared once, in :mod:`ragsieve.options`."""
    return Enum(name, {value: value for value in get_args(options)}, type=str)


if TYPE_CHECKING:  # the enums are built at run time; to a type checker each is an Enum
    from ragsieve.config import PipelineConfig

    RetrievalMode = Enum
    Fusion = Enum
    PipelineChoice = Enum
    SelectChoice = Enum
    ChunkChoice = Enum
    StoreChoice = Enum
    DenseChoice = Enum
    FilterChoice = Enum
else:
    RetrievalMode = choices("RetrievalMode", RetrievalModeName)
    Fusion = choices("Fusion", FusionName)
    PipelineChoice = choices("PipelineChoice", PipelineName)
    SelectChoice = choices("SelectChoice", SelectName)
    ChunkChoice = choices("ChunkChoice", ChunkUnit)
    StoreChoice = choices("StoreChoice", StoreBackendName)
    DenseChoice = choices("DenseChoice", DenseKind)
    FilterChoice = choices("FilterChoice", FilterName)


def _value(choice: Enum | None) -> Any:
    return None if choice is None else choice.value


def mount_subcommands(root: typer.Typer) -> None:
    """Mount every sub-command module's commands on ``root`` (each ``*/cli.py`` is imported
    only here, when the command line is built, so ``import ragsieve.cli`` stays light)."""
    from ragsieve.attack.cli import app as attack_app
    from ragsieve.audit.cli import audit_command
    from ragsieve.coe.cli import app as coe_app
    from ragsieve.eval.calibrate_cli import calibrate_command
    from ragsieve.eval.cli import eval_command
    from ragsieve.filtering.cli import app as filters_app
    from ragsieve.importance.cli import app as importance_app
    from ragsieve.index.cli import app as router_app
    from ragsieve.index.cli import index_app
    from ragsieve.mcp.cli import mcp_command
    from ragsieve.serve.cli import app as trace_app
    from ragsieve.serve.cli import serve as serve_command
    from ragsieve.tasks.cli import app as tasks_app

    groups = {
        "router": router_app,
        "index": index_app,
        "filters": filters_app,
        "tasks": tasks_app,
        "coe": coe_app,
        "importance": importance_app,
        "trace": trace_app,
        "attack": attack_app,
    }
    for name, group in groups.items():
        root.add_typer(group, name=name)
    root.command("serve")(serve_command)
    root.command("mcp")(mcp_command)
    root.command("eval")(eval_command)
    root.command("calibrate")(calibrate_command)
    root.command("audit")(audit_command)


def _setup_logging(verbose: bool) -> None:
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr, force=True)
    for noisy in ("faiss", "bm25s", "sentence_transformers", "httpx", "urllib3", "transformers", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# ---------------------------------------------------------------------- commands
def _print_version(value: bool) -> None:
    if value:
        # The installed distribution's version (ragsieve.__version__ says the same; the package
        # itself sits above the command line in the layers).
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"ragsieve {version('ragsieve')}")
        except PackageNotFoundError:
            typer.echo("ragsieve (version unknown: not installed as a distribution; run `pip install -e .`)")
        raise typer.Exit()


@app.callback()
def _main(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log what each stage does."),
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    _setup_logging(verbose)


def _tag_rules(tags_file: Path | None) -> dict[str, list[str]] | None:
    if tags_file is None:
        return None
    from ragsieve.ingest.tags import read_tags_file

    return read_tags_file(tags_file)


@app.command()
def ingest(
    path: Path = typer.Argument(..., help="Folder (or file) to ingest."),
    index: Path = typer.Option(..., "--index", help="Index directory to create or update."),
    config: Path | None = typer.Option(None, "--config", help="TOML/YAML config file."),
    partition_by: str | None = typer.Option(
        None,
        "--partition-by",
        help="How chunks get their domain: 'folder' (the top folder; the default), a metadata field, or "
        "'none' (one domain). Glob rules in ingest.domain_rules of --config win over this.",
    ),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Chunk size in tokens."),
    overlap: int | None = typer.Option(None, "--overlap", help="Overlap between chunks in tokens."),
    unit: ChunkChoice | None = typer.Option(None, "--unit", help="Chunk by token window (default) or by sentence."),
    text_field: str | None = typer.Option(None, "--text-field", help="JSON/CSV field holding the text."),
    id_field: str | None = typer.Option(None, "--id-field", help="JSON/CSV field holding the record id."),
    dense_kind: DenseChoice | None = typer.Option(None, "--dense", help="faiss index: flat (exact), ivf or hnsw."),
    follow_symlinks: bool = typer.Option(
        False, "--follow-symlinks", help="Also ingest symlinks that point outside the folder."
    ),
    lock_timeout: float | None = typer.Option(
        None, "--lock-timeout", help="Seconds to wait for another ingest writing the same index."
    ),
    threads: int | None = typer.Option(
        None, "--threads", min=1, help="CPU threads for the embedder (default: all cores)."
    ),
    store: StoreChoice | None = typer.Option(
        None, "--store", help="Where the chunks live: the index folder (default) or Milvus."
    ),
    store_uri: str | None = typer.Option(
        None, "--store-uri", help="Milvus Lite file or server URL (default: milvus.db in the index folder)."
    ),
    collection: str | None = typer.Option(None, "--collection", help="Milvus collection name."),
    workers: int | None = typer.Option(
        None, "--workers", min=1, help="Load, chunk and embed on a local Dask cluster of N worker processes."
    ),
    cluster: str | None = typer.Option(
        None, "--cluster", metavar="ADDRESS", help="Dask scheduler address (tcp://host:8786) to ingest on."
    ),
    partition_files: int = typer.Option(
        32, "--partition-files", min=1, help="Files per partition (the unit of parallel and resumed work)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the build report as JSON."),
    audit: bool = typer.Option(
        False, "--audit", help="Then audit the new generation and save it with the index (`ragsieve audit "
        "--save`): after a re-ingest only what changed is checked against what was there."),
    tags_file: Path | None = typer.Option(
        None, "--tags-file", metavar="FILE",
        help="TOML/YAML file of path globs and the document tags each gives (what access keys grant; "
        "docs/sharing.md). Sets ingest.tag_rules.",
    ),
) -> None:
    """Load, chunk, embed and index a folder; re-running updates only what changed.

    The index folder must be new, empty or an existing ragsieve index; any other folder is refused.
    With --store milvus, --workers or --cluster the corpus is ingested in partitions kept in
    <index>/ingest-work, so an interrupted run resumes where it stopped.
    """
    from ragsieve.config import load_with_overrides
    from ragsieve.index import BuildReport, Index
    cfg = load_with_overrides(
        config,
        {
            "ingest.partition_by": partition_by,
            "ingest.chunking.max_tokens": max_tokens,
            "ingest.chunking.overlap_tokens": overlap,
            "ingest.chunking.unit": _value(unit),
            "ingest.text_field": text_field,
            "ingest.id_field": id_field,
            "dense_index.kind": _value(dense_kind),
            "ingest.follow_symlinks": follow_symlinks or None,
            "ingest.lock_timeout_s": lock_timeout,
            "embedder.threads": threads,
            "store.backend": _value(store),
            "store.uri": store_uri,
            "store.collection": collection,
            "ingest.tag_rules": _tag_rules(tags_file),
        },
    )
    if cfg.store.backend != "folder" or workers or cluster:
        if audit:
            raise InputError("--audit audits a folder index built here; run `ragsieve audit --save` after a "
                             "--store milvus, --workers or --cluster ingest")
        _ingest_partitioned(path, index, cfg, workers, cluster, partition_files, as_json)
        return
    report = BuildReport()
    with stage_progress() as progress:
        built = Index.build(path, index, config=cfg, progress=progress, report=report)
    audited = _audit_after_ingest(built, index) if audit else None
    if as_json:
        extra = {"audit": audited} if audited is not None else {}
        console.print_json(json.dumps({**report.to_dict(), "index": built.stats(), **extra}))
        return
    n_files = report.files_added + report.files_updated + report.files_unchanged
    console.print(Text("indexed ", style="green") + Text(
        f"{report.chunks} chunks from {n_files} files into {index} "
        f"({report.files_added} added, {report.files_updated} updated, {report.files_unchanged} unchanged, "
        f"{report.files_removed} removed; {_embedded_words(report, progress)}; {report.seconds:.1f}s in all)"
    ), highlight=False)
    console.print(f"domains: {', '.join(built.domains)}", markup=False, highlight=False)
    if report.skipped:
        err_console.print(Text(f"skipped {len(report.skipped)} file(s), link(s) or record(s):", style="yellow"))
        for p, reason in report.skipped:
            err_console.print(f"  {p}: {reason}", markup=False, highlight=False)


def _audit_after_ingest(built: Any, index: Path) -> dict[str, Any]:
    """Audit the generation an ingest published, reusing the last saved audit for what did not
    change, and save it (docs/audit.md); what the summary and ``--json`` say of it."""
    from ragsieve.audit import audit_with_state
    from ragsieve.audit.saved import latest_state, save_audit

    previous, note = latest_state(index, built.generation)
    if note:
        err_console.print(f"note: {note}", markup=False, highlight=False)
    with stage_progress() as progress:
        report, state = audit_with_state(built, previous=previous, progress=progress)
    saved = save_audit(index, report, state)
    counts = ", ".join(f"{n} {k}" for k, n in report.counts().items() if k in report.checks)
    how = (f"{report.candidates.get('changed_passages', 0)} passages new or changed checked against the index"
           if previous is not None else "every passage checked")
    err_console.print(f"audited generation {report.generation}: {counts} ({how}; {report.seconds:.1f} s); "
                      f"saved to {saved}; `ragsieve audit --index {index}` shows the findings",
                      markup=False, highlight=False)
    return {"counts": report.counts(), "candidates": report.candidates, "saved": str(saved)}


def _embedded_words(report: Any, progress: Any) -> str:
    """How many chunks were embedded and how fast, at the rate the progress line showed: both read
    one :class:`ragsieve.console.StageRates` (chunks since the first progress report over the time
    since it), so the summary and the last progress line never disagree."""
    from ragsieve.console import rate_text

    rates = getattr(progress, "rates", None)
    rate = rates.rate("embed") if rates is not None else None
    if rate is None and report.embed_seconds:
        rate = report.chunks_embedded / report.embed_seconds
    words = f"{report.chunks_embedded} embedded in {report.embed_seconds:.1f}s of embedding"
    return words + (f" at {rate_text(rate).replace('/s', ' chunks/s')}" if rate and report.chunks_embedded else "")


def _ingest_partitioned(
    path: Path, index: Path, cfg: PipelineConfig, workers: int | None, cluster: str | None, per: int, as_json: bool
) -> None:
    from ragsieve.cluster import dask_client, threads_per_worker
    from ragsieve.config import apply_overrides
    from ragsieve.store.ingest import ingest_partitioned

    if workers and cfg.embedder.threads is None:
        cfg = apply_overrides(cfg, {"embedder.threads": threads_per_worker(workers)})
    with dask_client(workers, cluster, "ingesting") as client, stage_progress() as progress:
        report = ingest_partitioned(path, index, cfg, client=client, files_per_partition=per, progress=progress)
    if as_json:
        console.print_json(json.dumps(report.to_dict()))
        return
    console.print(Text("indexed ", style="green") + Text(
        f"{report.chunks} chunks from {report.files} files into {index} ({cfg.store.backend}; "
        f"{report.partitions} partitions, {report.partitions_reused} reused; {report.compute_seconds:.1f}s "
        f"loading and embedding on {report.workers or 1} worker(s), {report.write_seconds:.1f}s writing)"
    ), highlight=False)
    if report.skipped:
        err_console.print(Text(f"skipped {len(report.skipped)} file(s), link(s) or record(s):", style="yellow"))
        for p, reason in report.skipped:
            err_console.print(f"  {p}: {reason}", markup=False, highlight=False)


def _store_options(store: StoreChoice | None, store_uri: str | None) -> dict[str, Any]:
    return {"store.backend": _value(store), "store.uri": store_uri}


INDEX_OPTION = typer.Option(None, "--index", metavar="DIR", help=INDEX_HELP)
STORE_OPTION = typer.Option(None, "--store", help="Where the chunks live: the index folder (default) or Milvus.")
STORE_URI_OPTION = typer.Option(None, "--store-uri", help="Milvus Lite file or server URL.")


@app.command()
def search(
    query: str = typer.Argument(..., help="Search text."),
    index: Path | None = INDEX_OPTION,
    mode: RetrievalMode = typer.Option(RetrievalMode("hybrid"), "--mode", help="Retriever(s) to rank with."),
    k: int = typer.Option(10, "-k", help="Number of results."),
    where: list[str] = typer.Option([], "--where", help="Metadata filter key=value (repeatable)."),
    route: str = typer.Option("all", "--route", help="all, auto (router) or a domain name."),
    fusion: Fusion | None = typer.Option(None, "--fusion", help="How hybrid mode merges the two rankings."),
    config: Path | None = typer.Option(None, "--config", help="TOML/YAML config file."),
    store: StoreChoice | None = STORE_OPTION,
    store_uri: str | None = STORE_URI_OPTION,
    raw_scores: bool = typer.Option(
        False, "--raw-scores", help="Show each retriever's raw score (RRF, cosine, BM25) instead of the 0-1 scale."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print results as JSON."),
) -> None:
    """Rank chunks for a query and show each retriever's score.

    Scores are on a 0-1 scale, as `ask` shows them: fusion and keyword (BM25) scores divided by the
    best hit's, so the top hit reads 1.00; dense scores are cosines. --raw-scores shows the
    retrievers' own numbers; --json carries both.
    """
    from ragsieve.index import parse_where, validate_k
    from ragsieve.sieve.pipeline import Pipeline
    from ragsieve.types import Trace

    k = validate_k(k)
    from ragsieve.config import apply_overrides, load_with_overrides
    cfg = load_with_overrides(
        config,
        {"retrieval.mode": mode.value, "retrieval.fusion": _value(fusion), "stages.route.domain": route}
        | _store_options(store, store_uri),
    )
    cfg = apply_overrides(cfg, {"index_dir": str(resolve_index_dir(index, cfg.index_dir))})
    pipe = Pipeline.from_config(cfg)
    trace = Trace(query=query)
    pipe.warm_up_index()
    domains = pipe.resolve_domains(query, trace)
    start = time.perf_counter()
    hits = pipe.retrieve(query, trace, k=k, domains=domains, where=parse_where(where) or None)[:k]
    elapsed = (time.perf_counter() - start) * 1000
    note = None
    if not hits and mode.value == "sparse":
        from ragsieve.index.store import sparse_query_note

        note = sparse_query_note(query)
    if as_json:
        # Each hit's raw scores and the same scores on the 0-1 scale the terminal shows.
        rows = [h.to_dict() for h in hits]
        payload: dict[str, Any] = {
            "query": query,
            "hits": [{**row, "scaled_scores": scaled} for row, scaled in zip(rows, scaled_scores(rows), strict=True)],
            "trace": trace.to_dict(),
        }
        if note:
            payload["note"] = note
        console.print_json(json.dumps(payload))
        return
    scale = "raw scores" if raw_scores else "scores 0-1, best = 1.00"
    console.print(
        _clip(f"{len(hits)} results for {query!r} ({mode.value}, {elapsed:.1f} ms; {scale})", _width()),
        markup=False,
        highlight=False,
    )
    if note:
        import textwrap

        console.print("\n".join(textwrap.wrap(f"note: {note}", _width())), markup=False, highlight=False)
    root = _corpus_root(pipe)
    scaled = scaled_scores([h.to_dict() for h in hits])
    for h, row in zip(hits, scaled, strict=True):
        _print_block(hit_block(h, _width(), None if raw_scores else row), h.chunk, root)


# Search results are printed as blocks no wider than this, so they read in an 80-column terminal.
MAX_WIDTH = 80


def _width() -> int:
    return max(40, min(console.width, MAX_WIDTH))


def _clip(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def hit_block(hit: Any, width: int = MAX_WIDTH, scaled: dict[str, float] | None = None) -> list[str]:
    """Three lines for a search hit: rank and citation; domain, source and scores; first line of its text.

    ``scaled`` is the hit's scores on the 0-1 scale (:func:`ragsieve.present.scaled_scores` over
    all the hits: fusion and keyword scores divided by the best hit's, dense cosines as they are);
    without it the retrievers' raw scores are shown (``ragsieve search --raw-scores``).
    """
    import textwrap

    indent = " " * 5
    inner = width - len(indent)
    if scaled is None:
        scores = [f"fused {hit.scores.get('fused', hit.score):.4f}"]
        scores += [f"{name} {hit.scores[name]:.3f}" for name in ("dense", "sparse") if name in hit.scores]
    else:
        order = ["fused", "dense", "sparse"] + [k for k in scaled if k not in ("fused", "dense", "sparse")]
        scores = [f"{name} {scaled[name]:.2f}" for name in order if name in scaled]
    where = " · ".join(part for part in (hit.chunk.domain, hit.chunk.source) if part)
    first_line = next((line for line in hit.chunk.text.splitlines() if line.strip()), "")
    return [
        "",
        # The citation (path#page=N, path#heading, the record's URL) in full: wrapped, never cut.
        *textwrap.wrap(
            format_citation(Citation.from_chunk(hit.chunk)), width, initial_indent=f"{hit.rank:>3}. ",
            subsequent_indent=indent, break_on_hyphens=False,
        ),
        indent + _clip("  ".join(scores) + (f"  ({where})" if where else ""), inner),
        indent + _clip(first_line, inner),
    ]


def _clip_line(text: str, width: int) -> str:
    text = " ".join(text.splitlines())
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


# How the CLI and the page name evidence the selection did not need (it was not rejected).
NOT_NEEDED = "not needed"


def distinct_digits(*values: float, least: int = 2, most: int = 6) -> int:
    """The fewest decimals (at least ``least``) that print ``values`` as different numbers when
    they differ, so that ``best 0.4137 < 0.4142`` never reads ``0.41 < 0.41``.

    Example:
        >>> distinct_digits(0.4137, 0.4142)
        3
        >>> distinct_digits(0.5, 0.5)
        2
    """
    for digits in range(least, most + 1):
        shown = {f"{v:.{digits}f}" for v in values}
        if len(shown) == len(set(values)):
            return digits
    return most


def _wrap_full(text: str, width: int, first: str, rest: str) -> list[str]:
    """``text`` wrapped at spaces, never cut: a word longer than the line (an id, a path) is
    broken only after a ``/`` (continued on the next line, indented), and printed whole when it
    has no ``/`` to break at, even when that line then runs past ``width``."""
    import textwrap

    lines = textwrap.wrap(
        text, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False, break_long_words=False
    ) or [first.rstrip()]
    out: list[str] = []
    for line in lines:
        while len(line) > width:
            cut = line.rfind("/", len(rest), width)
            if cut <= len(rest):
                break
            out.append(line[: cut + 1])
            line = rest + line[cut + 1 :]
        out.append(line)
    return out


def _says(text: str, reason: str) -> bool:
    """Whether ``text`` (an abstention) already says ``reason`` (a sentence), whatever its case."""
    return reason.strip().rstrip(".").lower() in " ".join(text.split()).lower()


def answer_lines(
    answer: Any, width: int = 80, raw_scores: bool = False, allow_link_hosts: Sequence[str] = ()
) -> list[tuple[str, str | None]]:
    """The answer and its trace as ``(line, chunk id)`` pairs: the chunk id on a line that
    cites that chunk (so a terminal can make it a link), else None. See :func:`render_answer`.

    Laid out from :func:`ragsieve.present.present_answer`, the view the page and the service
    show too: the same statuses in the same order, scores on the same 0-1 scale, images and links
    to addresses outside the corpus made inert (``allow_link_hosts``: ``present.allow_link_hosts``)."""
    import textwrap

    from ragsieve.present import present_answer

    view = present_answer(answer, allow_link_hosts=allow_link_hosts)
    t = getattr(answer, "trace", None)
    out: list[tuple[str, str | None]] = []

    def add(lines: list[str], chunk_id: str | None = None) -> None:
        out.extend((line, chunk_id) for line in lines)

    def wrap(text: str, first: str = "   ", rest: str = "     ") -> list[str]:
        return _wrap_full(text, width, first, rest)

    add(textwrap.wrap(f"Q: {view.question}", width, subsequent_indent="   "))
    head = "A (abstained): " if view.outcome == "abstained" else "A: "
    # The answer whole: wrapped at the width, never cut.
    add(_wrap_full(head + (view.text or "(empty)"), width, "", "   "))
    for src in view.sources:
        if src.cited:  # the cited sources, each in full (wrapped, never cut)
            add(_wrap_full(src.citation, width, f"   [{src.n}] ", " " * 7), src.id)
    if view.caveat:
        add(wrap("caveat: " + view.caveat))
    if view.citation_note:
        add(wrap("note: " + view.citation_note))
        for s in view.sentences:
            if s.uncited:
                add(wrap(s.text, "     no source: ", " " * 7))
    if view.outcome == "abstained" and view.abstain_reason and not _says(view.text, view.abstain_reason):
        add(wrap(f"why: {view.abstain_reason}"))
    for draft in view.withdrawn:
        add(wrap(f"withdrawn draft, replaced by the {draft.replaced_by}: {draft.reason}"))
        # The draft's sentences with the verifier's verdicts when it checked them, else its text.
        for sentence in draft.sentences or [{"text": draft.text, "supported": None, "support": None}]:
            support = sentence.get("support")
            verdict = sentence.get("supported")
            tag = "" if verdict is None else ("supported" if verdict else "unsupported")
            score = f" {support:.2f}" if isinstance(support, float) else ""
            add(wrap(f"{tag}{score} {sentence['text']}".strip(), "     ", " " * 7))
    if view.confidence_note:
        add(wrap(view.confidence_note))
    if view.route:
        add(wrap(view.route))
    for fact in view.facts:
        add(wrap(fact))
    if view.candidates and not view.search_only:
        scale = ("the retriever's raw score" if raw_scores
                 else "retrieval score on a 0-1 scale, the top candidate = 1.00")
        add(textwrap.wrap(
            f"candidates ({len(view.candidates)}; * = in the answer's evidence; score = {scale}):", width,
            subsequent_indent="  ",
        ))
        for ev in (t.stage("judge")[:1] if t is not None else []):
            if "upper" in ev:
                digits = distinct_digits(float(ev["upper"]), float(ev["lower"]))
                add(textwrap.wrap(
                    f" judge {ev['judge']} (0-1): relevant at or above {ev['upper']:.{digits}f}, "
                    f"irrelevant below {ev['lower']:.{digits}f}", width, subsequent_indent="   ",
                ))
        # Status, score and the full id (wrapped, never cut); then why (for a removed, flagged or
        # unneeded one) and the first line of its text.
        for c in view.candidates:
            mark = "*" if c.in_evidence else " "
            # Ids of file chunks start with their source: print the source only when it adds to the id.
            where = c.id if c.id.startswith(c.source) else f"{c.id} ({c.source})"
            raw = c.raw_scores.get("fused", c.raw_scores.get("score"))
            shown = f"{raw:.4f}" if raw_scores and raw is not None else f"{c.score:.2f}"
            add(_wrap_full(where, width, f"{mark}{c.status:<10} {shown} ", " " * 17), c.id)
            text = c.text.strip()
            first = text.splitlines()[0] if text else ""
            add([_clip_line(" " * 17 + (f"[{c.why}] " if c.why else "") + first, width)])
    if view.sentences and any(s.supported is not None for s in view.sentences):
        add([f"answer sentences (judge: {view.claim_judge}; support on a 0-1 scale):"])
        for s in view.sentences:
            tag = "no check   " if s.supported is None else ("supported  " if s.supported else "unsupported")
            score = "    " if s.support is None else f"{s.support:.2f}"
            add(_wrap_full(f"{tag} {score} {s.text}", width, "  ", " " * 19))
    for note in view.notes:
        add(textwrap.wrap(note, width, subsequent_indent="  "))
    stage_ms = [(tm.stage, tm.ms) for tm in view.timings if tm.stage in SIEVE_STAGES]
    total = sum(v for _, v in stage_ms)
    # Stages that took under a millisecond are left out; the rest wrap rather than being cut.
    parts = " ".join(f"{k} {v:.0f}" for k, v in stage_ms if v >= 1.0)
    calls = f"{view.llm_calls} LLM call{'s' if view.llm_calls != 1 else ''}"
    add(textwrap.wrap(f"{total:.0f} ms, {calls}: {parts}", width, subsequent_indent="  "))
    return out


def render_answer(answer: Any, width: int = 80, raw_scores: bool = False) -> list[str]:
    """The answer and its trace as terminal lines of at most ``width`` characters: the answer
    (or the abstention and why), the cited sources in full, two lines per candidate, one per
    answer sentence, timings. Ids and citations are wrapped, never cut."""
    return [line for line, _ in answer_lines(answer, width, raw_scores)]


def _corpus_root(pipe: Any) -> Any:
    """The ingested folder of the pipeline's index (citations link under it), or None."""
    try:
        return getattr(getattr(pipe, "index", None), "corpus_root", None)
    except Exception:  # a link is a convenience: no link rather than a failed command
        return None


def _linked(line: str, uri: str | None, style: str = "") -> Text:
    """``line`` as rich text, its non-blank part an OSC-8 hyperlink to ``uri`` (rich writes the
    link only to a terminal; a file or a pipe gets the plain text)."""
    text = Text(line, style=style)
    if uri:
        start = len(line) - len(line.lstrip())
        text.stylize(f"link {uri}", start, len(line))
    return text


def _print_block(lines: list[str], chunk: Any, root: Any) -> None:
    """A search hit's lines, its citation lines linked to the cited file or address."""
    from ragsieve.citations import citation_uri

    uri = citation_uri(Citation.from_chunk(chunk), root)
    for i, line in enumerate(lines):
        # hit_block: a blank line, the citation (one or more lines), the scores, the text.
        is_citation = 0 < i < len(lines) - 2
        console.print(_linked(line, uri if is_citation else None), soft_wrap=True, no_wrap=True)


def _print_answer(
    answer: Any, root: Any = None, raw_scores: bool = False, allow_link_hosts: Sequence[str] = ()
) -> None:
    from ragsieve.citations import citation_uri

    width = min(console.width or 80, 80)
    chunks = {h.chunk.id: h.chunk for h in answer.evidence}
    for i, (line, chunk_id) in enumerate(answer_lines(answer, width, raw_scores, allow_link_hosts)):
        style = "bold" if i == 0 else ""
        if line.startswith("A (abstained)"):
            style = "bold yellow"
        elif line.startswith("A: "):
            style = "bold green"
        chunk = chunks.get(chunk_id) if chunk_id else None
        uri = citation_uri(Citation.from_chunk(chunk), root) if chunk is not None else None
        console.print(_linked(line, uri, style), soft_wrap=True, no_wrap=True)


# One question's total time in `ragsieve ask` (every LLM and embedding call, retries included).
ASK_DEADLINE_S = 120.0
ASK_DEADLINE_FIX = (
    "ask again when the machine is less busy, or use a faster model (--model, --llm-url) or fewer checks (--ablate)"
)


def _ablate_list(ablate: str | None) -> list[str] | None:
    return [x.strip() for x in ablate.split(",") if x.strip()] if ablate else None


@app.command()
def ask(
    question: str = typer.Argument(..., help="The question."),
    index: Path | None = INDEX_OPTION,
    no_retrieval: bool = typer.Option(False, "--no-retrieval", help="Answer from the model alone."),
    k: int | None = typer.Option(None, "-k", help="Evidence pieces to use."),
    mode: RetrievalMode | None = typer.Option(None, "--mode", help="Retriever(s) to rank with."),
    route: str | None = typer.Option(None, "--route", help="all, auto (router) or a domain name."),
    pipeline: PipelineChoice | None = typer.Option(
        None, "--pipeline", help="sieve (default: every check, verified), plain (RAG) or task-adaptive."
    ),
    ablate: str | None = typer.Option(
        None, "--ablate", help="Comma-separated stages to switch off: " + ", ".join(SIEVE_STAGES) + "."
    ),
    select: SelectChoice | None = typer.Option(
        None, "--select", help="How evidence is chosen from the hits (default: the pipeline's own)."
    ),
    model: str | None = typer.Option(None, "--model", help="GGUF path (llama-cpp) or model name (openai)."),
    llm_url: str | None = typer.Option(None, "--llm-url", help="OpenAI-compatible server base URL."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads for llama.cpp."),
    config: Path | None = typer.Option(None, "--config", help="TOML/YAML config file."),
    store: StoreChoice | None = STORE_OPTION,
    store_uri: str | None = STORE_URI_OPTION,
    raw_scores: bool = typer.Option(
        False, "--raw-scores", help="Show the candidates' raw retrieval scores instead of the 0-1 scale."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the answer and full trace as JSON."),
) -> None:
    """Answer a question from the index, checking the evidence and the answer (the sieve).

    One question takes at most 2 minutes in all: past 120 s the model stops at its next token (the
    pipeline at its next stage) and the command ends with an error saying so; every LLM and
    embedding call over HTTP shares the same deadline, retries included.
    """
    from ragsieve.cancel import time_limit
    from ragsieve.errors import check_question
    from ragsieve.http import question_deadline
    from ragsieve.sieve.pipeline import build_pipeline

    check_question(question)  # before any model loads: a byte that is not UTF-8 fails here, by name
    overrides: dict[str, Any] = {
        "index_dir": str(index) if index else None,
        "retrieval.k": k,
        "retrieval.mode": _value(mode),
        "pipeline": _value(pipeline),
        "ablate": _ablate_list(ablate),
        "stages.select.method": _value(select),
        "llm.model": model,
        "llm.n_threads": threads,
        **_store_options(store, store_uri),
    }
    if llm_url:
        overrides.update({"llm.backend": "openai", "llm.base_url": llm_url})
    from ragsieve.config import apply_overrides, load_with_overrides
    cfg = load_with_overrides(config, overrides)
    if not no_retrieval:
        cfg = apply_overrides(cfg, {"index_dir": str(resolve_index_dir(index, cfg.index_dir))})
    with time_limit(ASK_DEADLINE_S, "the question", ASK_DEADLINE_FIX), question_deadline(ASK_DEADLINE_S):
        pipe = build_pipeline(cfg)
        answer = pipe.ask(question, no_retrieval=no_retrieval, k=k, route=route)
    hosts = cfg.present.allow_link_hosts
    if as_json:
        from ragsieve.citations import evidence_documents, inert_links
        from ragsieve.present import present_answer

        # the checks' reasons in words beside their codes (kind, numbers), as the terminal shows them,
        # and the answer with images and links to addresses outside the corpus made inert
        view = present_answer(answer, allow_link_hosts=hosts)
        shown = inert_links(answer.text, evidence_documents(answer.evidence), hosts).text
        console.print_json(json.dumps(
            {**answer.to_dict(), "answer": shown, "inert_links": view.inert_links, "reasons": view.reasons},
            default=str,
        ))
    else:
        _print_answer(answer, None if no_retrieval else _corpus_root(pipe), raw_scores, hosts)
    _flush_output()  # on its way now, whatever the model loading on its thread does next


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
    filter_name: FilterChoice = typer.Option(FilterChoice("none"), "--filter", help="Knowledge filter."),
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
    from ragsieve.config import load_with_overrides
    cfg = load_with_overrides(config, {"llm.model": model, "llm.n_threads": threads})
    llm = load_llm(cfg.llm)
    llm.warm_up()
    kwargs: dict[str, Any] = {"calibrate": calibrate}
    if template:
        kwargs["template"] = template
    clf = LabelClassifier(label_list, **kwargs)
    if calibrate:
        clf.fit_calibration(llm)
    if index is not None or filter_name is not FilterChoice("none") or fusion:
        from ragsieve.filtering.cli import classify_filtered

        classify_filtered(
            llm,
            clf,
            text,
            index_dir=index,
            filter_name=filter_name.value,
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
        console.print(f"{label:>20} {p:6.3f} {'█' * int(p * 40)}", markup=False, highlight=False)
    console.print(Text("prediction: ") + Text(best, style="bold") + Text(f" ({ms:.0f} ms)"), highlight=False)


@app.command()
def info(
    index: Path | None = INDEX_OPTION,
    verify: bool = typer.Option(False, "--verify", help="Check every file's sha256 against the manifest."),
    config: Path | None = typer.Option(None, "--config", help="TOML/YAML config file (embedder settings)."),
    store: StoreChoice | None = STORE_OPTION,
    store_uri: str | None = STORE_URI_OPTION,
    collection: str | None = typer.Option(None, "--collection", help="Milvus collection name."),
    as_json: bool = typer.Option(False, "--json", help="Print the index's statistics as JSON."),
) -> None:
    """Show what an index holds (and, with --verify, that every file is intact)."""
    from ragsieve.config import load_with_overrides
    from ragsieve.index import Index
    from ragsieve.store.open import effective_store_config
    cfg = load_with_overrides(config, {**_store_options(store, store_uri), "store.collection": collection})
    folder = resolve_index_dir(index, cfg.index_dir)
    if effective_store_config(cfg, folder).backend == "milvus":
        if verify:
            raise InputError(
                "--verify checks the folder index's file checksums; a Milvus store keeps none, so drop --verify"
            )
        from ragsieve.embed import load_embedder
        from ragsieve.store.milvus import MilvusStore
        from ragsieve.store.open import open_store

        milvus = open_store(cfg, folder, load_embedder(cfg.embedder))
        try:
            stats = milvus.stats() if isinstance(milvus, MilvusStore) else {}
        finally:
            milvus.close()
        _print_stats({**stats, "backend": "milvus"}, folder, as_json)
        return
    with Index.open(folder, verify=verify, embedder_config=cfg.embedder) as opened:
        stats = {**opened.stats(), "backend": "folder"}
    if verify:
        stats["verified"] = True
    _print_stats(stats, folder, as_json)


def _print_stats(stats: dict[str, Any], folder: Path, as_json: bool) -> None:
    from ragsieve.console import print_result

    print_result(stats, as_json, title=f"index {folder}")


@app.command()
def demo(
    question: list[str] = typer.Option(
        [],
        "--question",
        "-q",
        help="Question to ask the demo corpus (repeatable); default: one it answers, one it should abstain on.",
    ),
    index: Path | None = typer.Option(None, "--index", help="Where to build the demo index."),
    pipeline: PipelineChoice = typer.Option(PipelineChoice("sieve"), "--pipeline", help="Pipeline preset."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads for llama.cpp."),
) -> None:
    """Build an index of the bundled demo corpus and answer questions with the bundled models."""
    from ragsieve.demo import DEMO_SHOWCASE, demo_corpus_dir
    from ragsieve.errors import check_question
    from ragsieve.index import BuildReport, Index
    from ragsieve.sieve.pipeline import Pipeline

    for q in question:
        check_question(q)  # before the demo index is built
    index_dir = index or default_demo_index()
    from ragsieve.config import PipelineConfig, apply_overrides
    cfg = apply_overrides(
        PipelineConfig(index_dir=str(index_dir)), {"llm.n_threads": threads, "pipeline": pipeline.value}
    )
    report = BuildReport()
    with stage_progress() as progress:
        built = Index.build(demo_corpus_dir(), index_dir, config=cfg, progress=progress, report=report)
    console.print(demo_header(report, built, index_dir, cfg.pipeline), markup=False, highlight=False)
    pipe = Pipeline(cfg, index=built)
    for q in question or list(DEMO_SHOWCASE):
        console.print()
        _print_answer(pipe.ask(q), built.corpus_root)


def demo_header(report: Any, built: Any, index_dir: Path, pipeline: str) -> str:
    """The first line ``ragsieve demo`` prints: the index it built and the pipeline it runs."""
    return (
        f"demo index: {report.chunks} chunks in {len(built.domains)} domains at {index_dir} "
        f"({report.chunks_embedded} embedded, {report.seconds:.1f}s); pipeline: {pipeline}"
    )


_TYPE_METAVARS = {Path: "PATH", str: "TEXT", int: "INT", float: "NUMBER"}


def _metavar(param: Any) -> str | None:
    """A readable metavar for a parameter typer would show as ``<str>``; None to keep typer's."""
    if getattr(param, "is_flag", False) or getattr(param, "is_bool_flag", False):
        return ""
    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", None)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "[" + "|".join(str(member.value) for member in annotation) + "]"
    for arg in getattr(annotation, "__args__", ()) or ():  # list[str] for repeatable options
        if arg in _TYPE_METAVARS:
            return _TYPE_METAVARS[arg]
    if param.param_type_name == "argument":
        return str(param.name).upper()
    return _TYPE_METAVARS.get(annotation) if isinstance(annotation, type) else None


def _whole_option_names() -> None:
    """Keep option names whole in every command's ``--help``, however narrow the terminal.

    typer lays each option out as a row of a rich table (its names, then its type, then its
    help) without column settings, and rich narrows every wrappable column of a table too wide
    for the terminal, cutting a long name with an ellipsis (``--max-connections-per-cli…``). The
    options table typer builds gets its name columns marked ``no_wrap`` (rich then narrows only
    the type and help columns, which fold and wrap); the commands table already is.
    """
    import typer.rich_utils as rich_utils
    from rich.table import Table

    if getattr(rich_utils.Table, "_ragsieve_whole_names", False):
        return

    class HelpTable(Table):
        _ragsieve_whole_names = True

        def add_row(self, *renderables: Any, **kwargs: Any) -> None:
            super().add_row(*renderables, **kwargs)
            for column in self.columns[:-2]:  # an option row ends with its type and its help
                column.no_wrap = True

    rich_utils.Table = HelpTable  # type: ignore[misc]


def readable_help(command: Any) -> Any:
    """Give every parameter of ``command`` and its sub-commands a real metavar.

    typer's help prints the Python type (``<str>``, ``<bool>``) where a parameter has no
    metavar; this names the value instead (``TEXT``, ``PATH``, the choices of an enum) and
    shows nothing for flags. Arguments are named by their metavar alone. Its help keeps option
    names whole (:func:`_whole_option_names`, applied when a help is first laid out: typer's rich
    layout module costs a command that prints no help some 50 ms of CPU to import).
    """
    if hasattr(command, "format_help"):
        command.format_help = _whole_names_first(command.format_help)
    for param in command.params:
        if param.metavar is None:
            metavar = _metavar(param)
            if metavar is not None:
                param.metavar = metavar
        if param.param_type_name == "argument" and hasattr(param, "display_type_rich"):
            # The argument's name already says what it is; typer would add its Python type.
            param.display_type_rich = lambda ctx: None
    if getattr(command, "commands", None) and hasattr(command, "no_args_is_help"):
        command.no_args_is_help = True  # `ragsieve filters` shows the group's help, not "Missing command"
    if hasattr(command, "get_help_option"):
        command.get_help_option = _flag_metavar(command.get_help_option)
    for sub in getattr(command, "commands", {}).values():
        readable_help(sub)
    return command


def _whole_names_first(format_help: Any) -> Any:
    """Wrap a command's ``format_help`` to keep option names whole (:func:`_whole_option_names`) first."""

    def wrapped(ctx: Any, formatter: Any) -> Any:
        _whole_option_names()
        return format_help(ctx, formatter)

    return wrapped


def _flag_metavar(get_help_option: Any) -> Any:
    """Wrap a command's ``get_help_option`` (built per call, so not in ``params``) to show no metavar."""

    def wrapped(ctx: Any) -> Any:
        option = get_help_option(ctx)
        if option is not None and option.metavar is None:
            option.metavar = ""
        return option

    return wrapped


_COMMAND: Any = None

# The sub-commands that live in their own modules, each loaded only when it runs (or its own
# --help is asked for): `ragsieve --help` lists them from these lines without importing numpy,
# fastapi or the stages. tests/test_cli_usage.py checks each line is the command's own help.
LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "router": ("ragsieve.index.cli", "app", "Query-to-domain router of a domain-partitioned index."),
    "index": ("ragsieve.index.cli", "index_app", "Generations of an index: list them, switch the live one."),
    "filters": ("ragsieve.filtering.cli", "app",
                "Knowledge filtering: perplexity labels (D_kf), proxy training, filter quality."),
    "tasks": ("ragsieve.tasks.cli", "app", "Task-adaptive RAG: task classifier and retrieval evaluator."),
    "coe": ("ragsieve.coe.cli", "app", "Chain of evidence: features, judgements, perturbations."),
    "importance": ("ragsieve.importance.cli", "app",
                   "Data importance: learn, store and inspect a weight per data source."),
    "trace": ("ragsieve.serve.cli", "app", "Look at request traces."),
    "attack": ("ragsieve.attack.cli", "app",
               "Knowledge-poisoning attacks: poison a copy of an index, measure each defence."),
    "serve": ("ragsieve.serve.cli", "serve",
              "Serve the index over HTTP: OpenAI-compatible chat, /v1/ask, /v1/search, /metrics and a trace page."),
    "mcp": ("ragsieve.mcp.cli", "mcp_command",
            "Serve the index to assistants over the Model Context Protocol: tools ask (the checked answer) and "
            "search."),
    "eval": ("ragsieve.eval.cli", "eval_command",
             "Score the sieve, plain RAG, no retrieval and ablations: accuracy, coverage, AURC, faithfulness, cost."),
    "calibrate": ("ragsieve.eval.calibrate_cli", "calibrate_command",
                  "Choose the abstention threshold with a finite-sample guarantee (Learn then Test) and write it "
                  "to the config."),
    "audit": ("ragsieve.audit.cli", "audit_command",
              "Audit an index for mirrored documents, coordinated voices, conflicting documents and (with "
              "--questions) sources that hurt."),
}


def load_subcommand(name: str) -> Any:
    """The click command of sub-command ``name`` (a group or a single command), with readable help."""
    import importlib

    module, attribute, _ = LAZY_COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        # A group even when it holds one command (`trace view`), as when it is mounted.
        built: Any = typer.main.get_group(target)
    else:
        single = typer.Typer()
        single.command(name)(target)
        built = typer.main.get_command(single)
    command = readable_help(built)
    command.name = name
    # Built on its own, a Typer adds shell-completion options; mounted, a sub-command has none.
    command.params = [p for p in command.params if p.name not in ("install_completion", "show_completion")]
    return command


def _lazy_command(name: str) -> Any:
    # typer's own command class: typer vendors click (typer._click), so `click` itself may not
    # be installed at all.
    from typer.core import TyperCommand

    class LazyCommand(TyperCommand):
        """Stands for a sub-command in the command list; parsing its arguments loads the real one."""

        def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
            return load_subcommand(name).make_context(info_name, args, parent=parent, **extra)

    help_line = LAZY_COMMANDS[name][2]
    return LazyCommand(name, help=help_line, short_help=help_line, add_help_option=False)


def cli_command(lazy: bool = False) -> Any:
    """The click command behind ``ragsieve``, with every stage's sub-commands mounted.

    ``lazy=True`` (what the ``ragsieve`` entry point runs) mounts each sub-command module as a
    stand-in that imports it only when that command runs, so ``ragsieve --help`` stays fast.
    """
    global _COMMAND
    if lazy:
        root = readable_help(typer.main.get_command(app)) if _COMMAND is None else None
        if root is None:
            return _COMMAND
        for name in LAZY_COMMANDS:
            root.add_command(_lazy_command(name), name)
        return root
    if _COMMAND is None:
        mount_subcommands(app)
        _COMMAND = readable_help(typer.main.get_command(app))
    return _COMMAND


def _flush_output() -> None:
    """Hand what the command printed to the OS now (a closed pipe is no error here)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: usage errors show usage, ragsieve errors one line, never a traceback.

    click's standalone mode handles every usage error itself (missing argument, no command,
    bad choice: usage and the message, exit 2; ``--help``: exit 0) whichever click typer bundles.
    ``RAGSIEVE_DEBUG=1`` lets unexpected exceptions through with their traceback. A command that
    succeeds returns normally, so ``main([...])`` can be called from Python.
    """
    command = cli_command(lazy=True)
    try:
        command.main(args=argv, prog_name="ragsieve", standalone_mode=True)
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    except RagsieveError as exc:
        # The message as plain text: markup in it (`pip install 'ragsieve[serve]'`) is not Rich's.
        err_console.print(Text("error: ", style="bold red") + Text(str(exc)), highlight=False, soft_wrap=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        err_console.print("aborted")
        raise SystemExit(130) from None
    except Exception as exc:
        if os.environ.get("RAGSIEVE_DEBUG"):
            raise
        err_console.print(
            Text("internal error: ", style="bold red")
            + Text(f"{type(exc).__name__}: {exc}\n"
                   "This is a bug in ragsieve; rerun with RAGSIEVE_DEBUG=1 for the traceback and report it."),
            highlight=False, soft_wrap=True,
        )
        raise SystemExit(1) from None
    finally:
        _flush_output()


if __name__ == "__main__":
    main()
