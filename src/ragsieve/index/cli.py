"""``ragsieve router train|eval|route``: train the query-to-domain router of an index,
measure it on labelled questions, and show where one query would be searched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from ragsieve.console import INDEX_HELP, console, print_result, resolve_index_dir

app = typer.Typer(help="Query-to-domain router of a domain-partitioned index.", no_args_is_help=True)


def _route_config(
    config: Path | None,
    classifier: str | None,
    mass: float | None,
    unsure: float | None,
    max_domains: int | None,
) -> Any:
    from ragsieve.config import load_config
    from ragsieve.route import RouteConfig

    base = dict(load_config(config).stages.get("route", {})) if config else {}
    for key, value in (
        ("classifier", classifier),
        ("mass_threshold", mass),
        ("unsure_threshold", unsure),
        ("max_domains", max_domains),
    ):
        if value is not None:
            base[key] = value
    return RouteConfig.parse(base)


def _open(index: Path) -> Any:
    from ragsieve.index import Index

    return Index.open(index)


_INDEX = typer.Argument(
    None, metavar="[INDEX]",
    help="Index directory built with `ragsieve ingest --partition-by` (default: $RAGSIEVE_INDEX, else the demo index).",
)
_CONFIG = typer.Option(None, "--config", help="TOML/YAML config; its stages.route section is used.")
_CLASSIFIER = typer.Option(
    None, "--classifier", help="logreg, multinomial-nb, gaussian-nb, linear-svc or embedding-logreg."
)
_MASS = typer.Option(None, "--mass", help="Route to the top domains holding this probability mass.")
_UNSURE = typer.Option(
    None, "--unsure", help="Search the global index when the top probability is below this."
)
_MAX = typer.Option(None, "--max-domains", help="At most this many domains per query.")


@app.command()
def train(
    index: Path | None = _INDEX,
    labels: Path | None = typer.Option(
        None, "--labels", help="JSONL of {text, domain}; without it the router learns from the chunks."
    ),
    classifier: str | None = _CLASSIFIER,
    config: Path | None = _CONFIG,
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Fit the router and save it inside the index (``<index>/router``)."""
    from ragsieve.route import DomainRouter, train_router

    cfg = _route_config(config, classifier, None, None, None)
    index = resolve_index_dir(index)
    idx = _open(index)
    router = train_router(idx, cfg, labels=labels)
    meta = DomainRouter.read_meta(idx.dir / "router")
    domains = [str(c) for c in router.classes_]
    result: dict[str, Any] = {
        "index": str(index),
        "classifier": router.classifier,
        "domains": domains,
        "trained_on": meta.get("trained_on"),
        "n_train": meta.get("n_train"),
        "train_accuracy": None,
    }
    if labels is not None:
        from ragsieve.route import examples_from_jsonl

        data = examples_from_jsonl(labels)
        result["train_accuracy"] = round(router.score(data.texts, data.domains), 4)
    if as_json:
        console.print_json(json.dumps(result))
        return
    console.print(Text("trained", style="green") + Text(
        f" a {router.classifier} router on {result['n_train']} {result['trained_on']} "
        f"over domains {', '.join(domains)}; saved to {idx.dir / 'router'}"
    ), highlight=False)


@app.command("eval")
def evaluate(
    index: Path | None = _INDEX,
    labels: Path = typer.Option(..., "--labels", help="JSONL of {text, domain} held-out questions."),
    config: Path | None = _CONFIG,
    mass: float | None = _MASS,
    unsure: float | None = _UNSURE,
    max_domains: int | None = _MAX,
    as_json: bool = typer.Option(False, "--json", help="Print the scores as JSON."),
) -> None:
    """Accuracy, macro recall/precision of the saved router, and how often routing went to
    one domain, several, or fell back to the global index."""
    from ragsieve.route import QueryRouter, examples_from_jsonl, load_router, router_scores

    index = resolve_index_dir(index)
    idx = _open(index)
    cfg = _route_config(config, None, mass, unsure, max_domains)
    router = load_router(idx)
    data = examples_from_jsonl(labels)
    scores = router_scores(data.domains, [str(p) for p in router.predict(data.texts)])
    qr = QueryRouter(idx, cfg, router=router)
    searched_true = 0
    for text, domain in zip(data.texts, data.domains, strict=True):
        decision = qr.route(text)
        searched_true += decision.domains is None or domain in decision.domains
    result = {
        "n": scores.n,
        "accuracy": round(scores.accuracy, 4),
        "macro_recall": round(scores.macro_recall, 4),
        "macro_precision": round(scores.macro_precision, 4),
        "routing": qr.stats.to_dict(),
        "true_domain_searched": round(searched_true / max(1, scores.n), 4),
    }
    if as_json:
        console.print_json(json.dumps(result))
        return
    table = Table(title=f"router of {index} on {scores.n} labelled questions")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in ("accuracy", "macro_recall", "macro_precision", "true_domain_searched"):
        table.add_row(key, f"{result[key]:.4f}")
    for key, value in qr.stats.to_dict().items():
        table.add_row(f"routed: {key}", str(value))
    console.print(table)


@app.command()
def route(
    query: str = typer.Argument(..., help="The query to route."),
    index: Path | None = typer.Option(None, "--index", metavar="DIR", help=INDEX_HELP),
    config: Path | None = _CONFIG,
    mass: float | None = _MASS,
    unsure: float | None = _UNSURE,
    max_domains: int | None = _MAX,
    as_json: bool = typer.Option(False, "--json", help="Print the decision as JSON."),
) -> None:
    """Show the router's probabilities and which partitions a query would search."""
    from ragsieve.route import QueryRouter

    router = QueryRouter(_open(resolve_index_dir(index)), _route_config(config, None, mass, unsure, max_domains))
    decision = router.route(query)
    print_result(decision.to_dict(), as_json, title=f"route for {query!r}")


index_app = typer.Typer(help="Generations of an index: list them, switch the live one.", no_args_is_help=True)
_INDEX_OPTION = typer.Option(None, "--index", "-i", metavar="DIR", help=INDEX_HELP)


@index_app.command("generations")
def generations(
    index: Path | None = _INDEX_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the generations as JSON."),
) -> None:
    """List an index's generations: live, previous (live before it), staged (written by
    `ragsieve audit --exclude`, not switched to) and old ones the next ingest removes."""
    from ragsieve.index.storage import generation_records

    folder = resolve_index_dir(index)
    records = [r.to_dict() for r in generation_records(folder)]
    if as_json:
        console.print_json(json.dumps(records))
        return
    table = Table(title=f"generations of {folder}")
    for column in ("generation", "role", "passages", "created", "made from / why"):
        table.add_column(column)
    for r in records:
        why = f"{r['base']}: {r['reason']}" if r["base"] else r["reason"]
        table.add_row(r["generation"], r["role"], str(r["n_chunks"] or ""), r["created"], why)
    console.print(table)


@index_app.command("use")
def use(
    generation: str = typer.Argument(..., help="The generation to make live (a staged one, or the previous one)."),
    index: Path | None = _INDEX_OPTION,
    force: bool = typer.Option(False, "--force", help="Switch to a staged generation even though it was made "
                               "from a generation that is no longer live."),
) -> None:
    """Make a staged generation (or the previous live one: a rollback) the live one; the one
    live until now is kept, so the same command switches back. A running service picks it up
    on its next request."""
    from ragsieve.config import IngestConfig
    from ragsieve.index.storage import switch_generation

    folder = resolve_index_dir(index)
    before = switch_generation(folder, generation, IngestConfig().lock_timeout_s, force=force)
    console.print(Text(f"generation {generation} of {folder} is live; generation {before} is kept "
                       f"(`ragsieve index use {before} --index {folder}` switches back)"), highlight=False)
