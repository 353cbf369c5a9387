"""Partitioned ingest throughput, and folder index vs Milvus Lite on the same queries in one run.

    python benchmarks/store_scale.py ingest --texts 3000 --workers 1 2 --repeats 3 [--cluster tcp://HOST:8786]
    python benchmarks/store_scale.py query --wiki 50000 300000 --queries 100
    python benchmarks/store_scale.py beir --beir nfcorpus arguana
    python benchmarks/store_scale.py project --chunks 100000000   # from the ingest and query runs

``ingest``: the first ``--texts`` Wikipedia sentences (``shared/data/wiki_sentences``) written as
JSONL files of 100 records, ingested into a folder index by ``ragsieve.store.ingest`` in this
process and on a Dask LocalCluster of each ``--workers`` count (or the given scheduler), with the
bundled embedder; compared with the embedder's own batch rate on the same texts in this process.
Rates count load + chunk + embed (the partitions), and separately the whole ingest with the write.

``query``: ``--wiki`` Wikipedia sentences at each size with seeded random 384-d vectors (latency
p50/p95, insert time, size on disk, resident memory; no model timed); keeps the per-chunk costs
of the largest size for ``project``.

``beir``: each BEIR set with the bundled embedder (vectors cached under ``runs/``): nDCG@10 and
per-query latency, dense / sparse / hybrid, both stores answering each query in turn.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, markdown_table, write_section
from benchmarks._stats import median_bootstrap_interval
from benchmarks.beir import beir_corpus, beir_qrels, beir_queries, evaluate_run
from benchmarks.store_backends import RandomUnitEmbedder
from benchmarks.wiki import WIKI_DIR, wiki_chunks
from ragsieve.config import IngestConfig, PipelineConfig
from ragsieve.embed import load_embedder
from ragsieve.store import FolderStore, MilvusStore, Store

RUNS = ROOT / "runs" / "store_scale"
# Sentences in shared/data/wiki_sentences.
WIKI_TOTAL = 300_000
MODES = ("dense", "sparse", "hybrid")


def _sentences(n: int) -> list[str]:
    with gzip.open(WIKI_DIR / "wiki300k.txt.gz", "rt", encoding="utf-8") as fh:
        return [line.strip() for _, line in zip(range(n), fh, strict=False)]


def _write_corpus(texts: list[str], folder: Path, per_file: int = 100) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for f, start in enumerate(range(0, len(texts), per_file)):
        rows = [{"id": f"s{start + i}", "text": t} for i, t in enumerate(texts[start : start + per_file])]
        (folder / f"part{f:05d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _rate_cells(rates: list[float], reference: list[float]) -> list[str]:
    """Median and best chunks/s, and each as a multiple of the embedder's median and best batch rate."""
    med, best = float(np.median(rates)), max(rates)
    return [
        f"{med:.0f} / {best:.0f}",
        f"{med / float(np.median(reference)):.2f} / {best / max(reference):.2f}",
    ]


def run_ingest(args: argparse.Namespace) -> None:
    from dask.distributed import Client, LocalCluster

    from ragsieve.store.ingest import ingest_partitioned, warm_workers

    texts = _sentences(args.texts)
    RUNS.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=RUNS))
    corpus = work / "corpus"
    _write_corpus(texts, corpus)
    cores = os.cpu_count() or 1
    base = PipelineConfig(ingest=IngestConfig(extract_entities=args.entities))
    rows: list[list[object]] = []
    loads = [os.getloadavg()[0]]
    try:
        embedder = load_embedder(base.embedder)
        embedder.warm_up()
        embedder.embed(texts[:64])
        batch_rates = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            for start in range(0, len(texts), 128):
                embedder.embed(texts[start : start + 128])
            batch_rates.append(len(texts) / (time.perf_counter() - t0))
        label = "embedder.embed, batches of 128, this process"
        rows.append([label, f"{cores} threads", *_rate_cells(batch_rates, batch_rates), "", ""])

        def one(label: str, workers: str, client: Any, config: PipelineConfig) -> None:
            rates: list[float] = []
            whole: list[float] = []
            parts = 0
            for r in range(args.repeats):
                out = work / f"idx-{len(rows)}-{r}"
                # In this process the warm embedder is passed in; workers already hold theirs.
                report = ingest_partitioned(
                    corpus,
                    out,
                    config,
                    embedder=embedder if client is None else None,
                    client=client,
                    files_per_partition=args.partition_files,
                )
                rates.append(report.chunks / report.compute_seconds)
                whole.append(report.chunks / report.seconds)
                parts = report.partitions
                shutil.rmtree(out)
            rows.append([label, workers, *_rate_cells(rates, batch_rates), f"{np.median(whole):.0f}", parts])

        def warmed(client: Any, config: PipelineConfig) -> Any:
            # Before the timer: each worker process loads the model once, as a long ingest pays it once.
            warm_workers(client, config.embedder)
            return client

        one("ingest_partitioned, in this process", f"{cores} threads", None, base)
        if args.cluster:
            with Client(args.cluster) as client:
                n = len(client.scheduler_info()["workers"])
                one(f"ingest_partitioned on {args.cluster}", f"{n} workers", warmed(client, base), base)
        for n in args.workers:
            threads = max(1, cores // n)
            config = base.model_copy(update={"embedder": base.embedder.model_copy(update={"threads": threads})})
            with (
                LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
                Client(cluster) as client,
            ):
                one(
                    "ingest_partitioned, Dask LocalCluster",
                    f"{n} x {threads} thread(s)",
                    warmed(client, config),
                    config,
                )
        loads.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    body = (
        f"{len(texts)} Wikipedia sentences (`shared/data/wiki_sentences`, the first {len(texts)}) as JSONL files of "
        f"100 records, {args.partition_files} files per partition, bundled MiniLM embedder (ONNX), entity extraction "
        f"{'on' if args.entities else 'off'}, folder index. {args.repeats} runs of each path, reported as median / "
        f"best; the ratio divides by the embedder's median / best batch rate measured in the same run. The workers "
        "load the embedder once per worker process before the timer (`ragsieve.store.ingest.warm_workers`; a long "
        "ingest pays that load once per worker, not once per partition) and the in-process path gets the warm "
        "embedder. 'chunks/s' counts planning (file hashes) and load + chunk + embed of all partitions (the part "
        "that runs on workers); 'with write' also publishes the index. The machine's "
        f"{cores} cores: load average {loads[0]:.2f} before, {loads[-1]:.2f} after (1-minute)."
        + (f" {args.note}" if args.note else "")
        + "\n\n"
        + markdown_table(
            ["path", "workers", "chunks/s median / best", "vs embedder", "chunks/s with write (median)", "partitions"],
            rows,
        )
    )
    write_section("benchmarks.md", "store-ingest", "Partitioned ingest: throughput vs workers", body)
    print(body)
    facts = {"embedder_rate": float(np.median(batch_rates)), "cores": cores, "rows": rows, "loads": loads}
    (RUNS / "ingest_facts.json").write_text(json.dumps(facts, indent=2, default=str))


def run_projection(args: argparse.Namespace) -> None:
    """100M chunks from the per-chunk costs measured by ``ingest`` and ``query`` (read from runs/)."""
    query = json.loads((RUNS / "projection_facts.json").read_text())
    n, target = int(query["n"]), args.chunks
    if args.per_core_rate:
        per_core, rate_source = args.per_core_rate, f"--per-core-rate ({args.rate_source})"
    else:
        ingest = json.loads((RUNS / "ingest_facts.json").read_text())
        per_core, rate_source = ingest["embedder_rate"] / ingest["cores"], "`store_scale.py ingest`"
    # Linear in chunks: flat vectors and BM25 postings grow with the corpus.
    folder_gb = query["folder_bytes"] / n * target / 1e9
    milvus_gb = query["milvus_bytes"] / n * target / 1e9
    folder_ram = query["folder_rss_mb"] / n * target / 1e3
    milvus_ram = query["milvus_rss_mb"] / n * target / 1e3
    insert_h = query["milvus_insert_s"] / n * target / 3600
    build_h = query["folder_build_s"] / n * target / 3600
    core_hours = target / per_core / 3600
    rows: list[list[object]] = [
        [
            "embedding (bundled MiniLM, CPU)",
            f"{per_core:.0f} chunks/s per core measured",
            f"{core_hours:,.0f} core-hours; {core_hours / (64 * 24):.1f} days on 64 cores (e.g. 8 workers x 8 cores)",
        ],
        ["folder index: size on disk", f"{query['folder_bytes'] / n:.0f} B/chunk", f"{folder_gb:,.0f} GB"],
        [
            "folder index: resident memory",
            f"{query['folder_rss_mb'] * 2**20 / n:.0f} B/chunk",
            f"{folder_ram:,.0f} GB in one process",
        ],
        [
            "folder index: one build",
            f"{query['folder_build_s'] / n * 1e6:.0f} us/chunk",
            f"{build_h:,.1f} h, single process",
        ],
        [
            "Milvus (Lite here): size on disk",
            f"{query['milvus_bytes'] / n:.0f} B/chunk",
            f"{milvus_gb:,.0f} GB across the cluster",
        ],
        [
            "Milvus (Lite here): server memory",
            f"{query['milvus_rss_mb'] * 2**20 / n:.0f} B/chunk",
            f"{milvus_ram:,.0f} GB across query nodes",
        ],
        [
            "Milvus (Lite here): insert",
            f"{query['milvus_insert_s'] / n * 1e6:.0f} us/chunk",
            f"{insert_h:,.1f} h on one Lite writer",
        ],
    ]
    body = (
        f'A projection, not a measurement: per-chunk costs measured at {n:,} chunks (section "Folder index vs '
        f'Milvus Lite") and the embedder rate from {rate_source}, '
        f"multiplied out linearly to {target:,} chunks. Assumptions: sentence-sized chunks (about 25 words) with "
        "384-d float32 vectors and flat (exact) dense search as measured; cost grows linearly with chunks (true for "
        "flat vectors and BM25 postings, optimistic for Milvus Lite, which is single-node and not meant for this "
        "size: the Milvus figures stand for a cluster's total, before replication and before an HNSW/IVF index's "
        "own overhead); embedding parallelises across workers with no loss (the partitioned ingest's measured "
        "ratio to the embedder's batch rate says how close that is); query latency at 100M is not projected, since "
        "flat search is linear in chunks and a store that size needs an approximate index (HNSW/IVF), which was "
        "not measured here.\n\n"
        + markdown_table(["cost", "measured per chunk", f"projected at {target:,} chunks"], rows)
        + f"\n\nWhat this says: on one machine the folder index would need {folder_ram:,.0f} GB resident and "
        f"{folder_gb:,.0f} GB on disk in one process and a {build_h:,.0f} h single-process rebuild after every "
        f"ingest; the database holds about {milvus_gb:,.0f} GB spread over nodes. Embedding ({core_hours:,.0f} "
        "core-hours) parallelises over Dask workers; the per-chunk build and insert times were taken on 2 cores "
        "shared with other jobs (see the load average in the section above), so the time rows are upper bounds, and "
        "a cluster's inserts run in parallel where Milvus Lite has one writer."
    )
    write_section("benchmarks.md", "store-projection", "Projection: a 100M-chunk corpus on each backend", body)
    print(body)


def _du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _milvus_rss_mb() -> float:
    """Resident memory of the Milvus Lite server processes this process started."""
    import psutil

    me = psutil.Process()
    return sum(c.memory_info().rss for c in me.children(recursive=True) if "milvus" in c.name().lower()) / 2**20


def _latency(
    stores: dict[str, Store], queries: list[str], qvecs: np.ndarray, k: int, retrieval: Any = None
) -> dict[str, Any]:
    times: dict[tuple[str, str], list[float]] = {}
    runs: dict[tuple[str, str], list[list[tuple[str, float]]]] = {}
    for q, v in zip(queries, qvecs, strict=True):
        for mode in MODES:
            for name, s in stores.items():
                t0 = time.perf_counter()
                hits = s.search(q, k=k, mode=mode, query_vector=v, retrieval=retrieval)  # type: ignore[arg-type]
                times.setdefault((name, mode), []).append((time.perf_counter() - t0) * 1000)
                runs.setdefault((name, mode), []).append([(h.chunk.id, h.score) for h in hits])
    return {"times": times, "runs": runs}


def _stores(
    chunks: list[Any], vectors: np.ndarray, embedder: Any, where: Path, english: bool = False
) -> tuple[dict[str, Store], dict]:
    """Both stores over the same chunks and the same vectors; build time, size and memory of each.

    ``english``: also a Milvus Lite collection whose BM25 analyzer stems and drops stopwords."""
    import psutil

    from ragsieve.index import Index

    facts: dict[str, Any] = {}
    rss0 = psutil.Process().memory_info().rss
    t0 = time.perf_counter()
    folder = FolderStore(Index.from_chunks(chunks, where / "index", embedder=embedder, embeddings=vectors))
    folder.warm_up()
    facts["folder_build_s"] = time.perf_counter() - t0
    facts["folder_rss_mb"] = (psutil.Process().memory_info().rss - rss0) / 2**20
    milvus = MilvusStore(str(where / "milvus.db"), embedder)
    milvus.warm_up()
    rss_idle = _milvus_rss_mb()
    t0 = time.perf_counter()
    for start in range(0, len(chunks), 2000):
        milvus.add(chunks[start : start + 2000], embeddings=vectors[start : start + 2000])
    facts["milvus_insert_s"] = time.perf_counter() - t0
    facts["milvus_rss_mb"] = _milvus_rss_mb() - rss_idle
    facts["folder_bytes"] = _du(where / "index")
    facts["milvus_bytes"] = _du(where / "milvus.db")
    stores: dict[str, Store] = {"folder index": folder, "Milvus Lite": milvus}
    if english:
        stemmed = MilvusStore(str(where / "milvus-english.db"), embedder, analyzer="english")
        for start in range(0, len(chunks), 2000):
            stemmed.add(chunks[start : start + 2000], embeddings=vectors[start : start + 2000])
        stores["Milvus Lite, english analyzer"] = stemmed
    return stores, facts


def _latency_rows(label: str, times: dict[tuple[str, str], list[float]], extra: dict | None = None) -> list[list]:
    rows = []
    for (name, mode), xs in times.items():
        med, lo, hi = median_bootstrap_interval(xs)
        row = [label, name, mode, f"{med:.2f} [{lo:.2f}, {hi:.2f}]", f"{np.percentile(xs, 95):.2f}"]
        rows.append(row + ([extra[(name, mode)]] if extra else []))
    return rows


def _embed_cached(embedder: Any, texts: list[str]) -> np.ndarray:
    return np.concatenate([embedder.embed(texts[i : i + 128]) for i in range(0, len(texts), 128)])


def _bm25_variants(
    name: str, chunks: list[Any], qids: list[str], qtexts: list[str], qrels: dict[str, dict[str, int]]
) -> list[list[object]]:
    """nDCG@10 of bm25s with the folder index's tokenisation and with Milvus's, to locate the sparse gap."""
    from ragsieve.index.backends import english_stemmer, import_bm25s

    bm25s = import_bm25s()
    texts = [c.text for c in chunks]
    rows: list[list[object]] = []
    for label, stopwords, stemmer, k1 in (
        ("English stopwords, Snowball stemmer, k1=1.5 (the folder index)", "en", english_stemmer(), 1.5),
        ("English stopwords, no stemmer, k1=1.5", "en", None, 1.5),
        ("no stopwords, no stemmer, k1=1.2 (Milvus's standard analyzer and default k1)", None, None, 1.2),
    ):
        retriever = bm25s.BM25(k1=k1, b=0.75)
        retriever.index(
            bm25s.tokenize(texts, stopwords=stopwords, stemmer=stemmer, show_progress=False), show_progress=False
        )
        tokens = bm25s.tokenize(qtexts, stopwords=stopwords, stemmer=stemmer, return_ids=False, show_progress=False)
        docs, _scores = retriever.retrieve(tokens, k=10, show_progress=False)
        run = {
            q: {chunks[int(d)].id: float(10 - r) for r, d in enumerate(row)} for q, row in zip(qids, docs, strict=True)
        }
        rows.append([name, label, f"{evaluate_run(qrels, run)['nDCG@10']:.4f}"])
    return rows


def run_beir(args: argparse.Namespace) -> None:
    """nDCG@10 and latency of dense / sparse / hybrid on each BEIR set, both stores, same vectors."""
    from ragsieve.config import RetrievalConfig

    RUNS.mkdir(parents=True, exist_ok=True)
    # A content-hash cache under runs/: a re-run embeds nothing again.
    config = PipelineConfig().embedder.model_copy(update={"cache_dir": str(RUNS / "embed-cache")})
    embedder = load_embedder(config)
    embedder.warm_up()
    retrieval = RetrievalConfig(max_query_chars=100_000)
    parts = []
    with tempfile.TemporaryDirectory(dir=RUNS) as tmp:
        for name in args.beir:
            chunks = beir_corpus(name)
            t0 = time.perf_counter()
            vectors = _embed_cached(embedder, [c.text for c in chunks])
            embed_s = time.perf_counter() - t0
            queries = beir_queries(name)
            qrels = beir_qrels(name)
            qids = [q for q in queries if q in qrels]
            qtexts = [queries[q] for q in qids]
            qvecs = _embed_cached(embedder, qtexts)
            print(f"{name}: {len(chunks)} docs embedded or read from the cache in {embed_s:.0f} s", flush=True)
            stores, facts = _stores(chunks, vectors, embedder, Path(tmp) / name, english=True)
            measured = _latency(stores, qtexts, qvecs, 10, retrieval)
            for s in stores.values():
                s.close()
            ndcg = {}
            for key, per_query in measured["runs"].items():
                run = {
                    q: {cid: float(len(hits) - r) for r, (cid, _s) in enumerate(hits)}
                    for q, hits in zip(qids, per_query, strict=True)
                }
                ndcg[key] = f"{evaluate_run(qrels, run)['nDCG@10']:.4f}"
            runs = measured["runs"]
            same = {
                (store, mode): np.mean(
                    [
                        [c for c, _ in a] == [c for c, _ in b]
                        for a, b in zip(runs[("folder index", mode)], runs[(store, mode)], strict=True)
                    ]
                )
                for store in stores
                if store != "folder index"
                for mode in MODES
            }
            variants = _bm25_variants(name, chunks, qids, qtexts, qrels)
            parts.append(
                f"**{name}**: {len(chunks)} documents, {len(qids)} test queries with judgements. Build: folder index "
                f"{facts['folder_build_s']:.1f} s, Milvus Lite insert {facts['milvus_insert_s']:.1f} s. Queries "
                "whose top 10 is the folder index's list: "
                + "; ".join(
                    f"{store}: " + ", ".join(f"{mode} {100 * same[(store, mode)]:.0f}%" for mode in MODES)
                    for store in stores
                    if store != "folder index"
                )
                + ".\n\n"
                + markdown_table(
                    ["data", "store", "mode", "median ms [95% CI]", "p95 ms", "nDCG@10"],
                    _latency_rows(name, measured["times"], ndcg),
                )
                + "\n\nWhere the sparse gap comes from: bm25s (outside both stores) with each tokenisation.\n\n"
                + markdown_table(["data", "BM25 tokenisation", "nDCG@10"], variants)
            )
    body = (
        "The BEIR sets in `../shared/data` (test queries with judgements; one chunk per document, title + text; "
        "arguana rebuilt from the original corpus, see its PROVENANCE.md). Both stores hold the same chunks and the "
        "same vectors (bundled all-MiniLM-L6-v2 on ONNX, computed once and cached under `runs/`), and answer each "
        "query in turn, dense, sparse and hybrid; k=10, hybrid fuses 50 candidates per retriever with ragsieve's "
        "RRF (k=60) on both. Latency excludes query embedding (queries embedded in one batch beforehand). "
        f"Load average {os.getloadavg()[0]:.1f} at the end (2 cores shared with other jobs).\n\n"
        + "\n\n".join(parts)
        + "\n\nWhy the stores differ: dense search is exact inner product on the same vectors in both (faiss flat, "
        "Milvus FLAT/IP), so dense rankings differ only on ties and float rounding. Sparse search is BM25 in both "
        "but not the same BM25: the folder index uses bm25s with English stopwords removed, a Snowball stemmer "
        "and k1=1.5, b=0.75; Milvus's BM25 function uses its standard analyzer (lower-cased word tokens, no "
        "stemming, no stopword list) and k1=1.2, b=0.75. The second table re-scores BM25 alone with bm25s under "
        "each set of choices, so it says how much of the sparse difference the tokenisation explains (the rest is "
        "the two engines' own tokenizers and score arithmetic); hybrid inherits part of the sparse difference "
        "through the fusion. 'Milvus Lite, english analyzer' is a third collection whose BM25 analyzer removes "
        'English stopwords and stems (`MilvusStore(..., analyzer="english")`); its dense results are the other '
        "two stores' and are listed for latency only."
    )
    write_section(
        "results/retrieval-and-routing.md", "store-beir", "Folder index vs Milvus Lite on BEIR: nDCG@10, same run", body
    )
    print(body)


def run_query(args: argparse.Namespace) -> None:
    """Latency p50/p95 at each --wiki size, both stores in one run, seeded random vectors (store cost only)."""
    RUNS.mkdir(parents=True, exist_ok=True)
    parts = []
    projection_facts: dict[str, Any] = {}
    rnd = RandomUnitEmbedder()
    # The last sentences of the file are the queries at every size, and never in a corpus.
    available = WIKI_TOTAL - args.queries
    qtexts = [c.text for c in wiki_chunks(WIKI_TOTAL)[available:]]
    qvecs = rnd.embed(qtexts)
    for size in args.wiki:
        with tempfile.TemporaryDirectory(dir=RUNS) as tmp:
            chunks = wiki_chunks(min(size, available))
            vectors = rnd.embed([c.text for c in chunks])
            print(f"wiki {len(chunks)}: building both stores", flush=True)
            stores, facts = _stores(chunks, vectors, rnd, Path(tmp) / "wiki")
            print(f"wiki {len(chunks)}: built ({facts})", flush=True)
            measured = _latency(stores, qtexts, qvecs, 10)
            for s in stores.values():
                s.close()
        projection_facts = {**facts, "n": len(chunks)}
        parts.append(
            f"**{len(chunks):,} chunks**: build: folder index {facts['folder_build_s']:.1f} s (faiss flat + bm25s + "
            f"checksums), Milvus Lite insert {facts['milvus_insert_s']:.1f} s. On disk: folder index "
            f"{facts['folder_bytes'] / 2**20:.0f} MB, Milvus Lite {facts['milvus_bytes'] / 2**20:.0f} MB. Resident "
            f"memory added: folder index {facts['folder_rss_mb']:.0f} MB (this process), Milvus Lite server "
            f"{facts['milvus_rss_mb']:.0f} MB. Load average {os.getloadavg()[0]:.1f} after its queries.\n\n"
            + markdown_table(
                ["data", "store", "mode", "median ms [95% CI]", "p95 ms"],
                _latency_rows(f"wiki {round(len(chunks) / 1000)}k", measured["times"]),
            )
        )
    body = (
        "Wikipedia sentences (`shared/data/wiki_sentences`, the first N as chunks) with seeded random 384-d unit "
        f"vectors, so only the stores' own cost is timed; the last {args.queries} sentences of the file are the "
        "queries at every size. Both stores answer each query in turn (dense, sparse, hybrid), so machine noise "
        "hits them alike; k=10, 50 candidates per retriever for hybrid (RRF). Flat (exact) dense search on both. "
        "The machine's 2 cores were shared with other jobs (niced LLM benchmarks), so absolute times are upper "
        "bounds; compare the stores within a size.\n\n" + "\n\n".join(parts)
    )
    write_section("benchmarks.md", "store-query", "Folder index vs Milvus Lite: query latency, same run", body)
    print(body)
    if projection_facts:
        (RUNS / "projection_facts.json").write_text(json.dumps(projection_facts, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="part", required=True)
    ing = sub.add_parser("ingest")
    ing.add_argument("--texts", type=int, default=3000)
    ing.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    ing.add_argument("--cluster", help="a Dask scheduler address to measure as well")
    ing.add_argument("--partition-files", type=int, default=4)
    ing.add_argument("--repeats", type=int, default=3, help="runs of each path (median and best reported)")
    ing.add_argument("--note", default="", help="a sentence about the machine's state, added to the section")
    ing.add_argument(
        "--no-entities",
        dest="entities",
        action="store_false",
        help="skip entity extraction (on by default, as in ingest)",
    )
    q = sub.add_parser("query")
    q.add_argument("--wiki", type=int, nargs="+", default=[50000, 300000], help="corpus sizes (Wikipedia sentences)")
    q.add_argument("--queries", type=int, default=100, help="Wikipedia queries")
    b = sub.add_parser("beir")
    b.add_argument("--beir", nargs="+", default=["nfcorpus", "arguana"], help="BEIR set names")
    proj = sub.add_parser("project")
    proj.add_argument("--chunks", type=int, default=100_000_000)
    proj.add_argument("--per-core-rate", type=float, help="embedded chunks/s per core, instead of the ingest run's")
    proj.add_argument("--rate-source", default="", help="where --per-core-rate was measured")
    args = parser.parse_args()
    if args.part == "ingest":
        run_ingest(args)
    elif args.part == "query":
        run_query(args)
    elif args.part == "beir":
        run_beir(args)
    else:
        run_projection(args)


if __name__ == "__main__":
    main()
