"""The audit as one self-contained HTML page: each finding's sentences side by side, each member
linked to its document. One inline ``<style>`` block and no script, no inline ``style``
attributes, nothing loaded from elsewhere, so the page works under the service's
Content-Security-Policy (which allows exactly the page's own inline style by hash)."""

from __future__ import annotations

from html import escape

from ragsieve.audit.report import AuditReport, Finding

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #222; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
.finding { border: 1px solid #ccc; border-radius: 6px; padding: .8rem 1rem; margin: 1rem 0; }
.finding.high { border-left: 6px solid #b22; } .finding.medium { border-left: 6px solid #d90; }
.side { display: grid; grid-template-columns: repeat(auto-fit, minmax(16rem, 1fr)); gap: .8rem; }
.member { background: #f6f6f6; padding: .6rem; border-radius: 4px; }
.meta { color: #555; font-size: .85rem; } .values { font-weight: 600; }
table { border-collapse: collapse; } td, th { padding: .2rem .8rem; text-align: left; }
"""

TITLES = {
    "mirror": "Mirrored documents",
    "coordinated-voice": "Coordinated voices",
    "conflict": "Conflicting documents",
    "harmful-source": "Sources that hurt",
}


def render_html(report: AuditReport) -> str:
    """The report as one HTML page (see the module docstring)."""
    counts = "".join(f"<tr><td>{escape(TITLES[k])}</td><td>{n}</td></tr>" for k, n in report.counts().items())
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>ragsieve audit: {escape(report.index)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Audit of {escape(report.index)}</h1>",
        f'<p class="meta">generation {escape(report.generation)}; {report.passages} passages in '
        f"{report.documents} documents; {report.seconds:.1f} s</p>",
        f"<table><tr><th>finding</th><th>count</th></tr>{counts}</table>",
    ]
    for note in report.notes:
        parts.append(f'<p class="meta">{escape(note)}</p>')
    for kind, title in TITLES.items():
        found = report.of_kind(kind)
        if not found:
            continue
        parts.append(f"<h2>{escape(title)} ({len(found)})</h2>")
        parts.extend(_finding(f) for f in found)
    if not report.findings:
        parts.append("<p>No finding.</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _finding(f: Finding) -> str:
    values = ""
    if f.values is not None:
        pair = (f.values.first_sureness, f.values.second_sureness)
        sure = " vs ".join("?" if s is None else f"{s:.2f}" for s in pair)
        values = (f'<p class="values">{escape(f.values.first)} vs {escape(f.values.second)} '
                  f'<span class="meta">({escape(f.values.question)}; reader sureness {sure})</span></p>')
    members = []
    for m in f.members:
        name = escape(m.citation or m.doc_id)
        link = f'<a href="{escape(m.link, quote=True)}">{name}</a>' if m.link else name
        members.append(f'<div class="member"><p class="meta">{link} · {escape(m.host)} · {escape(m.doc_id)}</p>'
                       f"<p>{escape(m.sentence)}</p></div>")
    exclude = f'<p class="meta">suggested to exclude: {escape(", ".join(f.exclude))}</p>' if f.exclude else ""
    return (f'<div class="finding {f.severity}"><p><strong>{escape(f.severity)}</strong> · score {f.score:.2f} · '
            f"{escape(f.evidence)}</p>{values}<div class=\"side\">{''.join(members)}</div>{exclude}</div>")
