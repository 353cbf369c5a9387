"""Render evaluation scores: a terminal table, markdown rows, and a risk–coverage plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["COLUMNS", "format_rows", "markdown_table", "plot_risk_coverage"]

# (header, metric key, kind): "pct" as a percentage with its interval, "num" plain.
COLUMNS: list[tuple[str, str, str]] = [
    ("acc", "accuracy", "pct"),
    ("cov", "coverage", "pct"),
    ("ans-acc", "answered_accuracy", "pct"),
    ("AURC", "aurc", "num"),
    ("faith", "faithfulness", "pct"),
    ("abst U/A", "", "abst"),
    ("cite P/R", "", "cite"),
    ("calls", "llm_calls_per_question", "cost"),
    ("tok", "tokens_per_question", "cost"),
    ("s/q", "seconds_per_question", "cost"),
]


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}"


def _interval(metrics: dict[str, Any], key: str, scale: float = 100.0, digits: int = 0) -> str:
    lo, hi = metrics.get("intervals", {}).get(key, [None, None])
    if lo is None or hi is None:
        return ""
    return f" [{scale * lo:.{digits}f},{scale * hi:.{digits}f}]"


def _cell(metrics: dict[str, Any], key: str, kind: str, with_intervals: bool) -> str:
    if kind == "abst":
        return f"{_pct(metrics.get('abstain_unanswerable'))}/{_pct(metrics.get('abstain_answerable'))}"
    if kind == "cite":
        return f"{_pct(metrics.get('citation_precision'))}/{_pct(metrics.get('citation_recall'))}"
    value = metrics.get(key)
    if value is None:
        return "–"
    if kind == "pct":
        return _pct(value) + (_interval(metrics, key) if with_intervals else "")
    if kind == "num":
        return f"{value:.3f}" + (_interval(metrics, key, 1.0, 2) if with_intervals else "")
    if key == "tokens_per_question":
        return f"{value:.0f}"
    return f"{value:.1f}" if key == "llm_calls_per_question" else f"{value:.2f}"


def _matched(metrics: dict[str, Any]) -> str:
    m = metrics.get("vs_baseline", {}).get("selective_accuracy_matched")
    if not m:
        return "(baseline)"
    lo, hi = m["interval"]
    if m["difference"] is None or lo is None or hi is None:
        return "–"
    return f"@{100 * m['coverage']:.0f}%: {100 * m['difference']:+.0f} [{100 * lo:+.0f},{100 * hi:+.0f}]"


def format_rows(
    scores: dict[str, dict[str, Any]], with_intervals: bool = True, columns: list[tuple[str, str, str]] | None = None
) -> tuple[list[str], list[list[str]]]:
    """Header and one row of strings per configuration (percentages, 95% intervals in brackets).

    ``columns`` picks a subset of :data:`COLUMNS`; the matched-coverage comparison always ends the row.
    """
    cols = COLUMNS if columns is None else columns
    header = ["config", "n", *(c[0] for c in cols), "sel-acc Δ vs plain"]
    rows = []
    for name, m in scores.items():
        rows.append([name, str(m["n"]), *(_cell(m, k, kind, with_intervals) for _, k, kind in cols), _matched(m)])
    return header, rows


def markdown_table(scores: dict[str, dict[str, Any]]) -> str:
    header, rows = format_rows(scores)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def plot_risk_coverage(scores: dict[str, dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Write a PNG of every configuration's risk–coverage curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ragsieve.io import atomic_path

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for name, m in scores.items():
        rc = m["risk_coverage"]
        aurc = m.get("aurc")
        label = f"{name} (AURC {aurc:.3f})" if aurc is not None else name
        ax.plot(rc["coverage"], rc["risk"], label=label, drawstyle="steps-post")
    ax.set_xlabel("coverage (share of questions answered)")
    ax.set_ylabel("risk (error rate among answered)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    out = Path(path)
    with atomic_path(out, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return out
