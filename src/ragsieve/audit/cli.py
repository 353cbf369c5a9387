"""``ragsieve audit``: find what is wrong in a corpus once, before any question is asked.

Examples::

    ragsieve audit --index ./my-index
    ragsieve audit --index ./my-index --json > findings.json
    ragsieve audit --index ./my-index --html audit.html --fail-on conflict
    ragsieve audit --index ./my-index --exclude findings.json          # a staged generation
    ragsieve index use GENERATION --index ./my-index                   # switch to it
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
        None, "--exclude", metavar="FINDINGS.json", help="Write a new generation of the index without the "
        "documents the findings in this file (an edited `--json` report) suggest excluding; the live generation "
        "stays live until `ragsieve index use GENERATION` (or --switch)."),
    switch: bool = typer.Option(False, "--switch", help="With --exclude: make the new generation live at once "
                                "(the one live until now is kept; `ragsieve index use` switches back)."),
    out: Path | None = typer.Option(None, "--out", help="With --exclude: build a separate new index in this "
                                    "folder instead of a generation of the audited one."),
    save: bool = typer.Option(False, "--save", help="Keep the report with the index (audits/GENERATION.json): "
                              "the sieve's audit prior reads it, and the next audit reuses it for what did not "
                              "change."),
    full: bool = typer.Option(False, "--full", help="Audit every passage again, even when a saved audit of an "
                              "earlier generation (--save) would let it check only what changed."),
    no_reader: bool = typer.Option(False, "--no-reader", help="Do not run the extractive reader on conflicts."),
    top: int = typer.Option(20, "--top", min=1, help="Findings shown in the terminal summary."),
) -> None:
    """Audit an index for mirrored documents, coordinated voices, conflicting documents and
    (with --questions) sources that hurt."""
    from ragsieve.audit.run import check_kinds

    fail_kinds = check_kinds(fail_on or [], "--fail-on")
    checks = check_kinds(check, "--check") if check else None
    if out is not None and exclude is None:
        raise InputError("--out names the folder of the index --exclude writes; pass --exclude FINDINGS.json too")
    if switch and (exclude is None or out is not None):
        raise InputError("--switch makes the generation --exclude writes live; pass --exclude FINDINGS.json "
                         "(without --out)")
    from ragsieve.index import Index

    directory = resolve_index_dir(index)
    with Index.open(directory) as idx:
        if exclude is not None:
            from ragsieve.audit.exclude import documents_to_exclude, stage_without, write_without

            docs = documents_to_exclude(exclude)
            if out is not None:
                new = write_without(idx, docs, out)
                err_console.print(
                    f"wrote a new index at {out} without {len(docs)} documents ({len(new)} of {len(idx)} passages); "
                    f"{directory} is unchanged", markup=False, highlight=False)
            else:
                new = stage_without(idx, docs, exclude, switch=switch)
                kept = f"({len(new)} of {len(idx)} passages; nothing re-embedded)"
                if switch:
                    err_console.print(
                        f"generation {new.generation} of {directory} without {len(docs)} documents {kept} is live; "
                        f"generation {idx.generation} is kept: `ragsieve index use {idx.generation} --index "
                        f"{directory}` switches back", markup=False, highlight=False)
                else:
                    err_console.print(
                        f"wrote generation {new.generation} of {directory} without {len(docs)} documents {kept}; "
                        f"generation {idx.generation} stays live. Switch with `ragsieve index use {new.generation} "
                        f"--index {directory}`", markup=False, highlight=False)
                if as_json:
                    print_result({"generation": new.generation, "live": new.generation if switch else idx.generation,
                                  "excluded_documents": docs, "passages": len(new)}, as_json=True)
            new.close()
            return
        from ragsieve.audit.run import audit_with_state
        from ragsieve.audit.saved import latest_state

        previous, note = (None, "") if full else latest_state(directory, idx.generation)
        if note:
            err_console.print(f"note: {note}", markup=False, highlight=False)
        with stage_progress(not as_json or err_console.is_terminal) as progress:
            report, state = audit_with_state(idx, checks=checks, questions=questions, use_reader=not no_reader,
                                             progress=progress, previous=previous)
    if save:
        from ragsieve.audit.saved import save_audit

        saved = save_audit(directory, report, state)
        err_console.print(f"saved the audit of generation {report.generation} to {saved}", markup=False,
                          highlight=False)
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
