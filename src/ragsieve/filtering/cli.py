"""``ragsieve filters annotate|train|eval``: build D_kf, train the proxy, report filter quality."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console

from ragsieve.console import INDEX_HELP, console, resolve_index_dir, stage_progress
from ragsieve.errors import InputError

app = typer.Typer(help="Knowledge filtering: perplexity labels (D_kf), proxy training, filter quality.")


def _read_labelled(path: Path) -> list[dict[str, str]]:
    from ragsieve.io import read_jsonl

    if not path.is_file():
        raise InputError(f"{path} does not exist; pass a JSONL file with 'text' and 'label' fields")
    rows = list(read_jsonl(path))
    if not rows or any("text" not in r or "label" not in r for r in rows):
        raise InputError(f"{path} must hold JSON objects with 'text' and 'label' fields, one per line")
    return rows


def _llm(threads: int | None, model: str | None) -> Any:
    from ragsieve.config import LLMConfig
    from ragsieve.llm import load_llm

    llm = load_llm(LLMConfig.model_validate({"n_threads": threads, "model": model}))
    llm.warm_up()
    return llm


@app.command()
def annotate(
    data: Path = typer.Option(..., "--data", help="JSONL with 'text' and 'label' (training queries)."),
    index: Path | None = typer.Option(None, "--index", metavar="DIR", help="Knowledge index. " + INDEX_HELP),
    out: Path = typer.Option(..., "--out", help="Where to write D_kf (JSONL)."),
    task: str = typer.Option("sst-2", "--task", help="Task template: sst-2, sst-5, mr, trec, cola."),
    shots: int = typer.Option(16, "--shots", help="Training queries per class (LM-BFF style); 0 = all."),
    seed: int = typer.Option(42, "--seed", help="Seed for the k-shot draw."),
    theta: float = typer.Option(1.0, "--theta", help="Harmful when PPL ratio > theta."),
    variant: str = typer.Option("predicted", "--variant", help="predicted | gold label perplexity."),
    top_k: int = typer.Option(30, "--top-k", help="Knowledge pieces retrieved per query."),
    mode: str = typer.Option("dense", "--mode", help="dense | sparse | hybrid retrieval."),
    threads: int | None = typer.Option(1, "--threads", help="CPU threads for llama.cpp."),
    model: str | None = typer.Option(None, "--model", help="GGUF path (default: bundled SmolLM2)."),
) -> None:
    """Label (query, knowledge) pairs Harmful/Harmless by perplexity and save D_kf."""
    from ragsieve.filtering import KfDataset, PerplexityAnnotator, get_task
    from ragsieve.filtering.scoring import scorer_for_task
    from ragsieve.index import Index

    if variant not in ("predicted", "gold"):
        raise InputError(f"--variant must be 'predicted' or 'gold', got {variant!r}")
    tmpl = get_task(task)
    rows = _read_labelled(data)
    if shots:
        rng = random.Random(seed)
        picked: list[dict[str, str]] = []
        for label in tmpl.labels:
            pool = [r for r in rows if r["label"] == label]
            picked += rng.sample(pool, min(shots, len(pool)))
        rows = picked
    idx = Index.open(resolve_index_dir(index))
    llm = _llm(threads, model)
    scorer = scorer_for_task(task).fit_calibration(llm)
    ann = PerplexityAnnotator(task, theta=theta, variant=variant)  # type: ignore[arg-type]
    pairs = []
    with stage_progress() as progress:
        for done, r in enumerate(rows):
            progress("annotating", done, len(rows))
            hits = idx.search(r["text"], k=top_k, mode=mode)  # type: ignore[arg-type]
            pairs += ann.annotate(
                llm,
                scorer,
                tmpl,
                r["text"],
                [h.chunk.text for h in hits],
                gold=r["label"],
                scores=[h.score for h in hits],
                retriever=mode,
            )
        progress("annotating", len(rows), len(rows))
    meta = {**ann.to_dict(), "shots": shots, "seed": seed, "top_k": top_k, "model": llm.model_name}
    KfDataset(pairs, meta).save(out)
    n_h = sum(p.harmful for p in pairs)
    console.print(f"wrote {len(pairs)} pairs ({n_h} Harmful) to {out}", markup=False, highlight=False)


@app.command()
def train(
    dkf: Path = typer.Option(..., "--dkf", help="D_kf JSONL from `ragsieve filters annotate`."),
    out: Path = typer.Option(..., "--out", help="Folder for the trained proxy."),
    variant: str | None = typer.Option(None, "--variant", help="Relabel to predicted | gold before training."),
    c: float = typer.Option(0.5, "--C", help="Inverse L2 regularisation strength."),
    prior: str = typer.Option(
        "train",
        "--prior",
        help="train: probabilities under D_kf's Harmful/Harmless balance; uniform: shifted to equal priors "
        "(use it when D_kf is mostly Harmless and the proxy keeps everything).",
    ),
) -> None:
    """Train the proxy filter (calibrated logistic regression on MiniLM features)."""
    from ragsieve.embed import load_embedder
    from ragsieve.filtering import KfDataset, ProxyFilter, get_task, relabel
    from ragsieve.filtering.proxy import PRIORS

    ds = KfDataset.load(dkf)
    pairs = list(ds)
    if variant:
        if variant not in ("predicted", "gold"):
            raise InputError(f"--variant must be 'predicted' or 'gold', got {variant!r}")
        labels = get_task(pairs[0].task).labels if pairs else []
        pairs = relabel(pairs, variant, float(ds.meta.get("theta", 1.0)), labels)  # type: ignore[arg-type]
    if prior not in PRIORS:
        raise InputError(f"--prior must be one of {', '.join(PRIORS)}, got {prior!r}")
    proxy = ProxyFilter(C=c, prior=prior).warm_up(load_embedder(None)).fit(pairs)  # type: ignore[arg-type]
    proxy.save(out)
    console.print(f"trained the proxy on {len(pairs)} pairs; saved to {out}", markup=False, highlight=False)


@app.command("eval")
def evaluate(
    heldout: Path = typer.Option(..., "--heldout", help="Held-out D_kf JSONL (the reference labels)."),
    filter_name: str = typer.Option("proxy", "--filter", help="direct | icl | proxy | ensemble."),
    proxy: Path | None = typer.Option(None, "--proxy", help="Trained proxy folder (proxy, ensemble)."),
    dkf: Path | None = typer.Option(None, "--dkf", help="Training D_kf for ICL demonstrations."),
    threads: int | None = typer.Option(1, "--threads", help="CPU threads for llama.cpp."),
    as_json: bool = typer.Option(False, "--json", help="Print the scores as JSON."),
) -> None:
    """Precision/recall/F1 of a filter's Harmful decisions against held-out perplexity labels."""
    from ragsieve.embed import load_embedder
    from ragsieve.filtering import Candidate, KfDataset
    from ragsieve.filtering.factory import FilteringConfig, make_filter

    ds = KfDataset.load(heldout)
    if not len(ds):
        raise InputError(f"{heldout} holds no pairs")
    task = ds.pairs[0].task
    try:
        cfg = FilteringConfig.model_validate(
            {
                "filter": filter_name,
                "task": task,
                "proxy_path": str(proxy) if proxy else None,
                "dkf_path": str(dkf) if dkf else None,
            }
        )
    except ValidationError as exc:
        raise InputError(f"--filter must be one of direct, icl, proxy, ensemble ({exc.errors()[0]['msg']})") from exc
    needs_llm = filter_name in ("direct", "icl", "ensemble")
    llm = _llm(threads, None) if needs_llm else None
    f = make_filter(cfg, llm, load_embedder(None))
    by_query: dict[str, list[int]] = {}
    for i, p in enumerate(ds.pairs):
        by_query.setdefault(p.query, []).append(i)
    import numpy as np

    p_h = np.zeros(len(ds))
    for q, rows in by_query.items():
        cands = [Candidate(ds.pairs[i].knowledge, rank=ds.pairs[i].rank) for i in rows]
        p_h[rows] = f.score_many(q, cands)
    pred = p_h < cfg.threshold
    true = ds.harmful
    tp = float(np.sum(pred & true))
    prec = tp / max(float(pred.sum()), 1.0)
    rec = tp / max(float(true.sum()), 1.0)
    f1 = 2 * prec * rec / max(prec + rec, 1e-12)
    result: dict[str, Any] = {
        "filter": filter_name,
        "pairs": len(ds),
        "precision": prec,
        "recall": rec,
        "f1": f1,
        "predicted_harmful": float(pred.mean()),
        "true_harmful": float(true.mean()),
    }
    if as_json:
        console.print_json(json.dumps(result))
    else:
        console.print(
            f"{filter_name}: Harmful precision {prec:.3f} recall {rec:.3f} F1 {f1:.3f} on {len(ds)} pairs "
            f"({100 * result['predicted_harmful']:.1f}% predicted vs "
            f"{100 * result['true_harmful']:.1f}% true Harmful)", markup=False, highlight=False
        )


FILTER_TASK_FOR_PRESET = {
    "sentiment": "sst-2",
    "sentiment-5": "sst-5",
    "question-category": "trec",
    "acceptability": "cola",
}


def classify_filtered(
    llm: Any,
    classifier: Any,
    text: str,
    *,
    index_dir: Path | None,
    filter_name: str,
    fusion: bool,
    template: str | None,
    proxy: Path | None = None,
    dkf: Path | None = None,
    alpha: float = 0.5,
    top_k: int = 30,
    max_keep: int = 8,
    as_json: bool = False,
    out: Console | None = None,
) -> dict[str, Any]:
    """``ragsieve classify --index ... --filter ... [--fusion]``: retrieve, filter, classify.

    Prints the label distribution and every candidate (similarity, P_harmless, decision,
    fusion weight); returns the JSON-ready result.
    """
    from ragsieve.filtering import FilteredClassifier
    from ragsieve.filtering.factory import FilteringConfig, make_filter
    from ragsieve.index import Index
    from ragsieve.types import Trace

    out = out or console
    if index_dir is None:
        raise InputError("--filter and --fusion retrieve knowledge: pass --index DIR (built with `ragsieve ingest`)")
    from ragsieve.filtering.tasks import get_task

    preset = FILTER_TASK_FOR_PRESET.get(template or "sentiment")
    task: str | dict[str, Any] | None = preset
    if preset is None or get_task(preset).labels != list(classifier.labels):
        # The user's own labels or prompt: the filters and fusion work on any label set.
        task = {"labels": list(classifier.labels), "template": classifier.template_text()}
    try:
        cfg = FilteringConfig.model_validate(
            {
                "filter": filter_name,
                "fusion": fusion,
                "task": task,
                "alpha": alpha,
                "top_k": top_k,
                "max_keep": max_keep,
                "proxy_path": str(proxy) if proxy else None,
                "dkf_path": str(dkf) if dkf else None,
            }
        )
    except ValidationError as exc:
        raise InputError(f"invalid filtering option: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from exc
    index = Index.open(index_dir)
    index.warm_up()
    flt = make_filter(cfg, llm, index.embedder)
    clf = FilteredClassifier(
        llm,
        classifier,
        list(classifier.labels),
        retriever=index,
        embedder=index.embedder,
        knowledge_filter=flt,
        fusion=cfg.fusion,
        alpha=cfg.alpha,
        top_k=cfg.top_k,
        max_keep=cfg.max_keep,
        mode="dense",
    )
    trace = Trace(text)
    pred = clf.predict(text, trace=trace)
    result = {"text": text, "labels": pred.proba, "prediction": pred.label, "trace": trace.to_dict()}
    if as_json:
        out.print_json(json.dumps(result))
        return result
    for label, p in sorted(pred.proba.items(), key=lambda kv: -kv[1]):
        out.print(f"{label:>20} {p:6.3f} {'█' * int(p * 40)}")
    for c in trace.stage("filtering")[0]["candidates"]:
        w = "" if c["fusion_weight"] is None else f" w={c['fusion_weight']:.3f}"
        mark = "keep" if c["keep"] else "drop"
        out.print(
            f"  {mark} #{c['rank']} sim={c['similarity']:.3f} P_harmless={c['p_harmless']:.3f}{w} {c['text'][:70]}",
            markup=False,
        )
    note = " (no knowledge kept: prediction without retrieval)" if pred.used_fallback else ""
    out.print(f"prediction: [bold]{pred.label}[/]{note}")
    return result
