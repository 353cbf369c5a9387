"""Read the shared BEIR-layout datasets (corpus.jsonl.gz, queries*.jsonl, qrels*.tsv)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

# Lets `python benchmarks/<script>.py` import its siblings as the `benchmarks` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import read_jsonl
from benchmarks._report import ROOT, SHARED_DATA
from ragsieve.types import Chunk

BEIR_DOMAINS = {"nfcorpus": "beir-nfcorpus", "arguana": "arguana", "cosqa": "cosqa"}


def beir_dir(name: str) -> Path:
    return SHARED_DATA / BEIR_DOMAINS.get(name, name)


def beir_corpus(name: str, domain: str | None = None) -> list[Chunk]:
    """One chunk per document (title + text), as BEIR evaluates whole documents."""
    chunks = []
    for doc in read_jsonl(beir_dir(name) / "corpus.jsonl.gz"):
        text = (doc.get("title", "") + "\n" + doc["text"]).strip()
        chunks.append(
            Chunk(
                id=str(doc["id"]),
                text=text,
                doc_id=str(doc["id"]),
                source=name,
                domain=domain or name,
                title=doc.get("title", ""),
            )
        )
    return chunks


def beir_queries(name: str, split: str = "test") -> dict[str, str]:
    suffix = "" if split == "test" else f"_{split}"
    path = beir_dir(name) / f"queries{suffix}.jsonl"
    return {str(q["id"]): q["text"] for q in map(json.loads, path.open(encoding="utf-8"))}


def beir_qrels(name: str, split: str = "test") -> dict[str, dict[str, int]]:
    suffix = "" if split == "test" else f"_{split}"
    qrels: dict[str, dict[str, int]] = {}
    with open(beir_dir(name) / f"qrels{suffix}.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return qrels


def beir_index_dir(name: str) -> Path:
    return ROOT / "runs" / "indexes" / f"beir-{name}"


def evaluate_run(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    """nDCG@10 and Recall@100 with ir_measures (queries without judgements are ignored)."""
    import ir_measures
    from ir_measures import R, nDCG

    measures = [nDCG @ 10, R @ 100]
    agg = ir_measures.calc_aggregate(measures, qrels, {q: d for q, d in run.items() if q in qrels})
    return {str(m): float(agg[m]) for m in measures}
