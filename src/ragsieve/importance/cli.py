"""``ragsieve importance``: learn source weights, store them with an index, report on them.

Examples::

    ragsieve importance fit validation.jsonl --out weights.json --csv weights.csv
    ragsieve importance apply weights.json --index ./my-index
    ragsieve importance report weights.json --out report/ --top 20

``validation.jsonl`` has one tuple per line:
``{"id": "q1", "items": [{"id": "doc-7", "source": "example.org", "utility": 1.0}, ...]}``
(ranked best first; an optional ``answer`` per item enables ``--utility majority``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see ragsieve.importance.kernels

import csv  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
from enum import Enum  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Literal  # noqa: E402

import typer  # noqa: E402
from rich.table import Table  # noqa: E402

from ragsieve.console import console  # noqa: E402
from ragsieve.errors import InputError  # noqa: E402

app = typer.Typer(
    help="Data importance: learn, store and inspect a weight per data source.", no_args_is_help=True
)


class MethodOpt(str, Enum):
    exact = "exact"
    approx = "approx"
    montecarlo = "montecarlo"


class UtilityOpt(str, Enum):
    additive = "additive"
    majority = "majority"


class DuplicateOpt(str, Enum):
    error = "error"
    first = "first"


class GroupUpdateOpt(str, Enum):
    mean_gradient = "mean-gradient"
    reference = "reference"


class ModeOpt(str, Enum):
    prune = "prune"
    reweight = "reweight"


def _read_weights(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InputError(f"weights file {path} does not exist; create it with `ragsieve importance fit`")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({exc.msg}); re-run `ragsieve importance fit`") from exc
    if not isinstance(data, dict) or not isinstance(data.get("weights"), dict):
        raise InputError(f"{path} has no 'weights' object; re-run `ragsieve importance fit`")
    return data


@app.command()
def fit(
    validation: Path = typer.Argument(..., help="JSONL of validation tuples (ranked items with utility)."),
    out: Path = typer.Option(Path("source_weights.json"), "--out", "-o", help="Where to write the weights."),
    csv_out: Path | None = typer.Option(None, "--csv", help="Also write source,weight,gradient as CSV."),
    k: int = typer.Option(10, "--k", "-k", min=1, help="Top-K of the retrieval."),
    epochs: int = typer.Option(50, min=0),
    learning_rate: float = typer.Option(500.0, "--lr"),
    init_weight: float = typer.Option(0.5, min=0.0, max=1.0),
    method: MethodOpt = typer.Option(MethodOpt.exact),
    utility: UtilityOpt = typer.Option(UtilityOpt.additive, help="majority needs an 'answer' per item."),
    epsilon: float = typer.Option(1e-3, help="Truncation (approx) or accuracy (montecarlo)."),
    delta: float = typer.Option(0.05, help="Failure probability of montecarlo."),
    threads: int | None = typer.Option(None, help="Threads (default: all numba threads)."),
    on_duplicate: DuplicateOpt = typer.Option(DuplicateOpt.error, help="Repeated item in one list."),
    seed: int = typer.Option(0),
    group_update: GroupUpdateOpt = typer.Option(
        GroupUpdateOpt.mean_gradient,
        help="mean-gradient: step each source by its items' mean gradient, then clip; reference: the "
        "authors' rule (step and clip each item, then average over every item of the source).",
    ),
    workers: int | None = typer.Option(
        None, "--workers", min=1, help="Sum each epoch's gradients on a local Dask cluster of N worker processes."
    ),
    cluster: str | None = typer.Option(
        None, "--cluster", metavar="ADDRESS", help="Dask scheduler address (tcp://host:8786) to fit on."
    ),
) -> None:
    """Learn a weight per source and tune a pruning threshold on the same validation set."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ragsieve.cluster import dask_client
    from ragsieve.importance.apply import tune_prune_threshold
    from ragsieve.importance.data import load_jsonl
    from ragsieve.importance.estimator import DataImportance
    from ragsieve.io import atomic_write_json, atomic_write_text

    data = load_jsonl(validation, on_duplicate=on_duplicate.value)
    est = DataImportance(
        k=k, epochs=epochs, learning_rate=learning_rate, init_weight=init_weight, method=method.value,
        epsilon=epsilon, delta=delta, utility=utility.value, seed=seed, n_jobs=threads,
        group_update=group_update.value,
    )
    with Progress(
        TextColumn("[bold]fitting"), BarColumn(), MofNCompleteColumn(), TextColumn("U~={task.fields[value]}"),
        TimeElapsedColumn(), console=console, transient=True,
    ) as progress:
        task = progress.add_task("fit", total=epochs, value="-")

        def step(epoch: int, value: float) -> None:
            progress.update(task, advance=1, value=f"{value:.4f}")

        with dask_client(workers, cluster, "fitting source weights") as client:
            est.fit(data, client=client, callback=step)
    weights = est.source_weights()
    eval_utility: Literal["additive", "majority"] = "majority" if utility == UtilityOpt.majority else "additive"
    tuned = tune_prune_threshold(data, est.weights_, k=k, utility=eval_utility, known=est.seen_)
    grads = dict(zip(est.sources_, est.gradients_.tolist(), strict=True))
    atomic_write_json(out, {
        "weights": weights,
        "threshold": tuned.threshold,
        "metadata": {
            "params": est.get_params(), "validation": str(validation), "n_tuples": data.n_tuples,
            "n_items": data.n_items, "fit_seconds": round(est.fit_seconds_, 3),
            "final_value": est.history_[-1] if est.history_ else None,
            "prune": {"removal_rate": tuned.removal_rate, "validation_score": tuned.validation_score,
                      "pruned_sources": tuned.pruned_sources},
        },
    })
    if csv_out is not None:
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(["source", "weight", "gradient"])
        for s, w in sorted(weights.items(), key=lambda kv: -kv[1]):
            writer.writerow([s, f"{w:.6g}", f"{grads[s]:.6g}"])
        atomic_write_text(csv_out, buf.getvalue())
    console.print(
        f"learned {len(weights)} source weights from {data.n_tuples} tuples in {est.fit_seconds_:.2f}s; "
        f"prune threshold {tuned.threshold:.4g} (removes {tuned.pruned_sources} sources, validation score "
        f"{tuned.validation_score:.4f}) -> {out}", markup=False, highlight=False
    )


@app.command()
def apply(
    weights: Path = typer.Argument(..., help="Weights JSON written by `ragsieve importance fit`."),
    index: Path = typer.Option(..., "--index", "-i", help="Index directory to store the weights in."),
    threshold: float | None = typer.Option(None, help="Override the tuned pruning threshold."),
) -> None:
    """Store source weights with an index (used when retrieval.use_source_weights is prune/reweight)."""
    from ragsieve.importance.apply import save_source_weights

    data = _read_weights(weights)
    if not index.is_dir():
        raise InputError(f"index directory {index} does not exist; build it with `ragsieve ingest` first")
    thr = threshold if threshold is not None else data.get("threshold")
    path = save_source_weights(index, data["weights"], threshold=thr, metadata=data.get("metadata"))
    console.print(
        f"stored {len(data['weights'])} source weights in {path}; enable them with "
        "retrieval.use_source_weights = \"prune\" or \"reweight\"", markup=False, highlight=False
    )


@app.command()
def report(
    weights: Path = typer.Argument(..., help="Weights JSON (from fit, or an index's source_weights.json)."),
    out: Path = typer.Option(
        Path("importance-report"), "--out", "-o", help="Folder for the PNG and markdown."
    ),
    top: int = typer.Option(15, min=1, help="How many top and bottom sources to list."),
) -> None:
    """Histogram of the weights (PNG) and the top and bottom sources (markdown + console)."""
    from ragsieve.extras import require

    matplotlib = require("matplotlib", "plots", "the importance histogram")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ragsieve.io import atomic_path, atomic_write_text

    data = _read_weights(weights)
    items = sorted(((str(s), float(w)) for s, w in data["weights"].items()), key=lambda kv: (-kv[1], kv[0]))
    if not items:
        raise InputError(f"{weights} holds no source weights")
    import numpy as np

    values = np.array([w for _, w in items])
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(values, bins=20, range=(0.0, 1.0), color="#4477aa")
    ax.set_xlabel("learned source weight")
    ax.set_ylabel("sources")
    ax.set_title(f"{len(values)} sources")
    thr = data.get("threshold")
    if thr is not None and np.isfinite(thr):
        ax.axvline(float(thr), color="#cc3311", linestyle="--", label=f"prune threshold {float(thr):.3g}")
        ax.legend()
    fig.tight_layout()
    png = out / "weights_histogram.png"
    with atomic_path(png, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    lines = [
        f"# Source weights ({len(values)} sources)", "",
        f"mean {values.mean():.4f}, median {np.median(values):.4f}, "
        f"share below 0.5: {(values < 0.5).mean():.1%}"
        + (f", prune threshold {float(thr):.4g}" if thr is not None else ""),
        "", "![histogram](weights_histogram.png)", "",
    ]
    for title, rows in (("Top", items[:top]), ("Bottom", items[::-1][:top])):
        lines += [f"## {title} {len(rows)}", "", "| source | weight |", "|---|---|"]
        lines += [f"| {s} | {w:.4f} |" for s, w in rows]
        lines.append("")
        table = Table(title=f"{title} sources")
        table.add_column("source")
        table.add_column("weight", justify="right")
        for s, w in rows:
            table.add_row(s, f"{w:.4f}")
        console.print(table)
    atomic_write_text(out / "report.md", "\n".join(lines))
    console.print(f"wrote {png} and {out / 'report.md'}", markup=False, highlight=False)

