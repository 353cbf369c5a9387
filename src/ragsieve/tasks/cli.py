"""``ragsieve tasks train|eval``: train and evaluate the task router and the retrieval evaluator."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Literal

import typer

from ragsieve.errors import InputError

app = typer.Typer(help="Task-adaptive RAG: task classifier and retrieval evaluator.", no_args_is_help=True)

ClassifierChoice = Literal["tfidf", "llm-json", "llm-logprob"]


@app.command()
def train(
    out: Path = typer.Option(
        ..., "--out", help="Where to save the model (.npz arrays for the classifier, .json for --evaluator)."
    ),
    data: Path | None = typer.Option(None, "--data", help="Labelled requests JSONL (default: the bundled set)."),
    evaluator: bool = typer.Option(False, "--evaluator", help="Train the retrieval evaluator instead, on PopQA."),
    popqa: Path | None = typer.Option(None, "--popqa", help="popqa_longtail_crag.jsonl (for --evaluator)."),
    n_train: int = typer.Option(300, "--n-train", help="PopQA questions to train the evaluator on."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON report."),
) -> None:
    """Train the TF-IDF task classifier (or, with --evaluator, the retrieval evaluator)."""
    if evaluator:
        from ragsieve.config import EmbedderConfig
        from ragsieve.embed import load_embedder
        from ragsieve.tasks.evaluator import TrainedRetrievalEvaluator
        from ragsieve.tasks.popqa import evaluator_training_data, load_popqa_items

        if popqa is None:
            raise InputError("--evaluator needs --popqa PATH to popqa_longtail_crag.jsonl")
        items = load_popqa_items(popqa)[:n_train]
        emb = load_embedder(EmbedderConfig.model_validate({}))
        emb.warm_up()
        x, y = evaluator_training_data(items, emb)
        ev = TrainedRetrievalEvaluator().fit(x, y)
        ev.save(out)
        report = {"saved": str(out), "questions": len(items), "passages": len(y), "relevant": int(sum(y))}
    else:
        from ragsieve.tasks.classifier import TfidfTaskClassifier
        from ragsieve.tasks.labels import load_task_requests

        rows = load_task_requests("train", path=data)
        clf = TfidfTaskClassifier().fit([r.text for r in rows], [r.label for r in rows])
        clf.save(out)
        report = {"saved": str(out), "train_rows": len(rows)}
    typer.echo(json.dumps(report) if as_json else " ".join(f"{k}={v}" for k, v in report.items()))


@app.command("eval")
def evaluate(
    classifier: str = typer.Option("tfidf", "--classifier", help="tfidf, llm-json or llm-logprob."),
    model_path: Path | None = typer.Option(None, "--model-path", help="Saved TF-IDF classifier (default: train now)."),
    data: Path | None = typer.Option(None, "--data", help="Labelled requests JSONL (default: the bundled set)."),
    limit: int = typer.Option(0, "--limit", help="Evaluate only the first N test rows."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads for llama.cpp."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON report."),
) -> None:
    """Accuracy and latency of a task classifier on the test split."""
    from ragsieve.tasks.classifier import LLMTaskClassifier, TaskClassifier, TfidfTaskClassifier
    from ragsieve.tasks.labels import load_task_requests

    if classifier not in ("tfidf", "llm-json", "llm-logprob"):
        raise InputError(f"--classifier {classifier!r} is unknown; use tfidf, llm-json or llm-logprob")
    test = load_task_requests("test", path=data)
    if limit:
        test = test[:limit]
    clf: TaskClassifier
    if classifier == "tfidf":
        if model_path is not None:
            clf = TfidfTaskClassifier.load(model_path)
        else:
            train_rows = load_task_requests("train", path=data)
            clf = TfidfTaskClassifier().fit([r.text for r in train_rows], [r.label for r in train_rows])
    else:
        from ragsieve.config import LLMConfig
        from ragsieve.llm import load_llm

        llm = load_llm(LLMConfig.model_validate({"n_threads": threads}))
        lc = LLMTaskClassifier(mode="json" if classifier == "llm-json" else "logprob")
        lc.warm_up(llm)
        clf = lc
    preds = [clf.classify(r.text) for r in test]
    if not test:
        raise InputError('the data has no test rows; add rows with "split": "test"')
    acc = sum(p.label == r.label for p, r in zip(preds, test, strict=True)) / len(test)
    report = {
        "classifier": classifier,
        "n": len(test),
        "accuracy": round(acc, 4),
        "median_latency_ms": round(statistics.median(p.latency_ms for p in preds), 3),
        "fallbacks": sum(p.fallback for p in preds),
    }
    typer.echo(json.dumps(report) if as_json else " ".join(f"{k}={v}" for k, v in report.items()))
