"""``ragsieve audit``: find what is wrong in a corpus once, before any question is asked.

Examples::

    ragsieve audit --index ./my-index
    ragsieve audit --index ./my-index --json > findings.json
    ragsieve audit --index ./my-index --html audit.html --fail-on conflict
    ragsieve audit --index ./my-index --exclude findings.json --out ./my-index-clean
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.text import Text

from ragsieve.console import INDEX_HELP, console, err_console, print_result, resolve_index_dir, stage_progress
from ragsieve.errors import InputError

_KINDS_HELP = "mirror, coordinated-voice, conflict or harmful-source"


def audit_command(
    index: Path | None = typer.Option(None, "--index", "-i", help=INDEX_HELP),
    questions: Path | None = typer.Option(
        None, "--questions", help="Labelled questions (the JSONL `ragsieve importance fit` reads): adds the "
        "sources that hurt."),
    check: list[str] | None = typer.Option(
        None, "--check", help=f"Run only these checks (repeatable): {_KINDS_HELP}."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (schema: docs/audit.md)."),
    html: Path | None = typer.Option(None, "--html", help="Also write a self-contained HTML report to FILE."),
    fail_on: list[str] | None = typer.Option(
        None, "--fail-on", metavar="KIND", help=f"Exit 1 when a finding of KIND exists (repeatable): {_KINDS_HELP}."),
    exclude: Path | None = typer.Option(
        None, "--exclude", metavar="FINDINGS.json", help="Write a new index without the documents the findings "
        "in this file (an edited `--json` report) suggest excluding; needs --out."),
    out: Path | None = typer.Option(None, "--out", help="Folder for the new index --exclude writes."),
    no_reader: bool = typer.Option(False, "--no-reader", help="Do not run the extractive reader on conflicts."),
    top: int = typer.Option(20, "--top", min=1, help="Findings shown in the terminal summary."),
) -> None:
    """Audit an index for mirrored documents, coordinated voices, conflicting documents and
    (with --questions) sources that hurt."""
    from ragsieve.audit.run import check_kinds

    fail_kinds = check_kinds(fail_on or [], "--fail-on")
    checks = check_kinds(check, "--check") if check else None
    if exclude is not None and out is None:
        raise InputError("--exclude writes a new index and needs --out NEW_FOLDER; the audited index is never changed")
    if out is not None and exclude is None:
        raise InputError("--out names the folder of the index --exclude writes; pass --exclude FINDINGS.json too")
    from ragsieve.index import Index

    directory = resolve_index_dir(index)
    with Index.open(directory) as idx:
        if exclude is not None and out is not None:
            from ragsieve.audit.exclude import documents_to_exclude, write_without

            docs = documents_to_exclude(exclude)
            new = write_without(idx, docs, out)
            err_console.print(
                f"wrote a new index at {out} without {len(docs)} documents ({len(new)} of {len(idx)} passages); "
                f"{directory} is unchanged", markup=False, highlight=False)
            new.close()
            return
        from ragsieve.audit.run import audit_index

        with stage_progress(not as_json or err_console.is_terminal) as progress:
            report = audit_index(idx, checks=checks, questions=questions, use_reader=not no_reader,
                                 progress=progress)
    if html is not None:
        from ragsieve.audit.html import render_html
        from ragsieve.io import atomic_write_text

        atomic_write_text(html, render_html(report))
    if as_json:
        print_result(report.to_dict(), as_json=True)
    else:
        _summary(report, top)
    failing = [k for k in fail_kinds if report.of_kind(k)]
    if failing:
        err_console.print(f"failing: findings of kind {', '.join(failing)}", markup=False, highlight=False)
        raise typer.Exit(1)


def _summary(report: object, top: int) -> None:
    from ragsieve.audit.report import AuditReport

    assert isinstance(report, AuditReport)
    counts = ", ".join(f"{n} {k}" for k, n in report.counts().items() if k in report.checks)
    console.print(Text(f"audited {report.passages} passages in {report.documents} documents "
                       f"({report.seconds:.1f} s): {counts}"))
    for note in report.notes:
        console.print(Text(f"note: {note}", style="dim"))
    if not report.findings:
        console.print(Text("no finding", style="green"))
        return
    styles = {"high": "bold red", "medium": "yellow"}
    for n, f in enumerate(report.findings[:top], 1):
        head = Text(f"{n}. ") + Text(f.kind, style="bold") + Text(" ") + Text(f.severity, style=styles[f.severity])
        console.print(head + Text(f" {f.score:.2f}  {f.evidence}"), soft_wrap=True, markup=False, highlight=False)
        for m in f.members[:6]:
            console.print(Text(f"   {m.citation or m.doc_id} ({m.host}): ", style="dim") + Text(m.sentence[:200]),
                          soft_wrap=True, markup=False, highlight=False)
    if len(report.findings) > top:
        console.print(Text(f"... {len(report.findings) - top} more (--top, --json or --html for all)", style="dim"))
