"""Ingest chunks/s, sentence vectors included, and the embedder alone: fp32 against int8, the
separate sentence pass against one pass, 1 and 2 threads, side by side in one run.

    python benchmarks/ingest_speed.py [--nfcorpus-docs 300] [--wiki 5000] [--repeats 1]

Corpora: the bundled demo corpus (its folder, as ``ragsieve demo`` ingests it), ``--nfcorpus-docs``
BEIR NFCorpus abstracts (title and text, the first N of the corpus file, written as one JSONL file
and ingested as a folder) and ``--wiki`` sentences of the shared Wikipedia file (ingested as
ready-made chunks, as ``benchmarks/build_wiki_index.py`` does). Every ingest is the package's own
path (``Index.build`` / ``Index.from_chunks``: reading, chunking, embedding, the sentence vectors the
checks read, the dense and BM25 indexes), into a fresh folder each time, with a warmed embedder
and no embedding cache; the configurations run interleaved, so drift in a shared machine hits
them alike. *today* is fp32 with the separate sentence pass (the defaults before int8 and one pass).
The embedder alone is ``embed`` over the ingested chunks' texts. Writes the ``ingest-speed``
section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys as _sys
import tempfile
import time
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, markdown_table, publish_section
from benchmarks.beir import beir_corpus
from benchmarks.wiki import wiki_chunks
from ragsieve.config import EmbedderConfig, PipelineConfig
from ragsieve.demo import demo_corpus_dir
from ragsieve.embed import Embedder, load_embedder
from ragsieve.index import Index

PRECISIONS = ("fp32", "int8")
METHODS = ("separate", "one-pass")
THREADS = (1, 2)


def load_text() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f}"


def nfcorpus_folder(work: _Path, n_docs: int) -> _Path:
    folder = work / "nfcorpus"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "abstracts.jsonl", "w", encoding="utf-8") as fh:
        for chunk in beir_corpus("nfcorpus")[:n_docs]:
            fh.write(json.dumps({"id": chunk.id, "title": chunk.title, "text": chunk.text}) + "\n")
    return folder


def warmed(precision: str, threads: int) -> Embedder:
    emb = load_embedder(EmbedderConfig(precision=precision, threads=threads))  # type: ignore[arg-type]
    emb.warm_up()
    emb.embed(["a warm-up text of a few words."] * 8)
    return emb


def ingest_once(corpus: object, target: _Path, emb: Embedder, method: str) -> tuple[float, float, list[str], int]:
    """Wall seconds and CPU seconds (the process's, all threads) of one ingest, its chunks' texts
    and its stored sentence rows."""
    config = PipelineConfig()
    config.ingest.sentence_vectors = method  # type: ignore[assignment]
    shutil.rmtree(target, ignore_errors=True)
    start, cpu = time.perf_counter(), time.process_time()
    if isinstance(corpus, list):
        index = Index.from_chunks(corpus, target, embedder=emb, config=config)
    else:
        index = Index.build(corpus, target, config=config, embedder=emb)  # type: ignore[arg-type]
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    with index:
        n_chunks = len(index)
        n_sentences = len(index.sentence_vectors(range(n_chunks))[0])
        texts = [c.text for c in index.chunks]
    shutil.rmtree(target, ignore_errors=True)
    return seconds, cpu, texts, n_sentences


def run_corpus(name: str, corpus: object, work: _Path, repeats: int, methods: tuple[str, ...]) -> list[list[object]]:
    rows: list[list[object]] = []
    for threads in THREADS:
        embedders = {p: warmed(p, threads) for p in PRECISIONS}
        ingest_once(corpus, work / f"{name}-idx", embedders["int8"], methods[0])  # untimed: files cached, code loaded
        best: dict[tuple[str, str], float] = {}
        best_cpu: dict[tuple[str, str], float] = {}
        embed_best: dict[str, float] = {}
        embed_cpu: dict[str, float] = {}
        texts: list[str] = []
        for _ in range(repeats):
            for p in PRECISIONS:  # interleaved
                for m in methods:
                    seconds, cpu, texts, n_sentences = ingest_once(corpus, work / f"{name}-idx", embedders[p], m)
                    best[(p, m)] = min(best.get((p, m), float("inf")), seconds)
                    best_cpu[(p, m)] = min(best_cpu.get((p, m), float("inf")), cpu)
                    print(f"{name} threads={threads} {p} {m}: {seconds:.1f}s, cpu {cpu:.1f}s ({len(texts)} chunks, "
                          f"{n_sentences} sentence rows) load {load_text()}", flush=True)  # fmt: skip
                start, cpu = time.perf_counter(), time.process_time()
                embedders[p].embed(texts)
                embed_best[p] = min(embed_best.get(p, float("inf")), time.perf_counter() - start)
                embed_cpu[p] = min(embed_cpu.get(p, float("inf")), time.process_time() - cpu)
        n_chunks = len(texts)
        base = ("fp32", "separate") if "separate" in methods else ("fp32", methods[0])
        for p in PRECISIONS:
            for m in methods:
                rows.append([name, threads, n_chunks, f"{p}, {m}", round(n_chunks / best[(p, m)], 1),
                             f"{best[base] / best[(p, m)]:.2f}x", round(n_chunks / best_cpu[(p, m)], 1),
                             f"{best_cpu[base] / best_cpu[(p, m)]:.2f}x", round(n_chunks / embed_best[p], 1),
                             round(n_chunks / embed_cpu[p], 1)])  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nfcorpus-docs", type=int, default=300)
    ap.add_argument("--wiki", type=int, default=5000, help="Wikipedia sentences (the first N of the shared file)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    started, load_before = time.perf_counter(), load_text()
    runs = ROOT / "runs"
    runs.mkdir(exist_ok=True)
    work = _Path(tempfile.mkdtemp(prefix="ingest-speed-", dir=runs))
    try:
        rows = run_corpus("demo", demo_corpus_dir(), work, args.repeats, METHODS)
        rows += run_corpus("NFCorpus", nfcorpus_folder(work, args.nfcorpus_docs), work, args.repeats, METHODS)
        # one sentence per chunk: no sentence rows to store, so the two methods are the same ingest
        rows += run_corpus("Wikipedia", wiki_chunks(args.wiki), work, args.repeats, ("one-pass",))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    body = "\n\n".join(
        [
            "Chunks per second of the whole ingest (`Index.build` of a folder, `Index.from_chunks` for the "
            "Wikipedia sentences: reading, chunking, embedding, the sentence vectors the checks read, the dense "
            "and BM25 indexes), and of the embedder alone (`embed` over the same chunk texts), for each "
            "precision and sentence-vector method (`ingest.sentence_vectors`), at 1 and 2 ONNX Runtime threads; "
            f"best of {args.repeats} interleaved run(s) after one untimed ingest, a fresh index folder each time, "
            "the embedder warmed first and no embedding cache. *speed-up* is against fp32 with the separate "
            "sentence pass at the same threads (the defaults before int8 and one pass; for Wikipedia, fp32). "
            f"Corpora: the bundled demo corpus (default chunking); the first {args.nfcorpus_docs} NFCorpus "
            "documents (title and abstract, one JSONL file); "
            f"the first {args.wiki} sentences of the shared Wikipedia file, a subsample of the 50k the plan names,"
            " to bound the run on a shared machine (each is one chunk of one sentence, so no "
            "sentence rows are stored and the two methods are one ingest).",
            markdown_table(
                ["corpus", "threads", "chunks", "precision, sentences", "ingest chunks/s", "speed-up",
                 "ingest chunks per CPU-s", "CPU speed-up", "embedder alone chunks/s", "embedder chunks per CPU-s"],
                rows,
            ),  # fmt: skip
            f"Load average (1/5/15 min) before the run: {load_before}; after: {load_text()}. The machine was "
            "shared with other jobs, so wall-clock rates are low and noisy (a run waits for the cores); the "
            "rates per CPU-second (the process's CPU time, all threads) measure the work itself and are the "
            "steadier ratio under such load, but they cannot show what a second thread gains. "
            f"Run {time.perf_counter() - started:.0f} s in all. Retrieval quality by precision: "
            "[Embedder: int8 ONNX graph vs fp32](#embedder-int8-onnx-graph-vs-fp32); sentence vectors by method: "
            "[Sentence vectors: one pass vs a separate pass](#sentence-vectors-one-pass-vs-a-separate-pass).",
        ]
    )
    publish_section("benchmarks.md", "ingest-speed", "Ingest speed: precision, sentence vectors and threads", body,
                    write=not args.no_write)  # fmt: skip


if __name__ == "__main__":
    main()
