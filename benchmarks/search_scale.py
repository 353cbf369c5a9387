"""Search latency at 300k passages against 10k, measured side by side in one run.

    python benchmarks/build_wiki_index.py --limit 10000      # the two indexes (runs/indexes/)
    python benchmarks/build_wiki_index.py
    python benchmarks/search_scale.py                        # writes a section of docs/benchmarks.md

Both indexes are the Wikipedia sentence indexes ``build_wiki_index.py`` writes (one chunk per
sentence, bundled MiniLM, flat faiss + bm25s). The queries are the first 12 words of sentences
drawn from the first 10,000 (so both indexes hold their source sentence), embedded once
beforehand; each query is searched on both indexes in turn, in every mode, so machine load
falls on both sides alike. ``--hnsw`` also writes an HNSW copy of each index from its stored
vectors (``dense_index.kind = "hnsw"``, nothing embedded again; the build time is reported) and
times their dense search beside the flat ones, with recall@k of the HNSW search against the exact.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import markdown_table, publish_section  # noqa: E402
from benchmarks.wiki import wiki_index_dir  # noqa: E402
from ragsieve.config import PipelineConfig  # noqa: E402
from ragsieve.index import Index  # noqa: E402

SEED = 5
MODES = ("dense", "sparse", "hybrid")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--hnsw", action="store_true", help="also build HNSW copies and time their dense search")
    ap.add_argument("--no-write", action="store_true", help="print the section without writing the docs")
    args = ap.parse_args(argv)
    sizes = {"10k": wiki_index_dir(10000), "300k": wiki_index_dir(None)}
    missing = [str(p) for p in sizes.values() if not p.exists()]
    if missing:
        raise SystemExit(f"build the indexes first (python benchmarks/build_wiki_index.py): missing {missing}")
    indexes = {name: Index.open(path) for name, path in sizes.items()}
    built: dict[str, float] = {}
    if args.hnsw:
        config = PipelineConfig().model_copy(
            update={"dense_index": PipelineConfig().dense_index.model_copy(update={"kind": "hnsw"})}
        )
        for name in list(sizes):
            flat = indexes[name]
            target = sizes[name].with_name(sizes[name].name + "-hnsw")
            if target.exists():
                shutil.rmtree(target)
            start = time.perf_counter()
            Index.from_chunks(flat.chunks, target, embedder=flat.embedder, config=config, embeddings=flat.embeddings)
            built[name] = time.perf_counter() - start
            indexes[f"{name} hnsw"] = Index.open(target)
    small = indexes["10k"]
    picked = random.Random(SEED).sample(range(len(small)), args.queries)
    texts = [" ".join(str(small.chunks[i].text).split()[:12]) for i in picked]
    vectors = small.embedder.embed(texts)
    for index in indexes.values():  # warm each index's search structures
        for mode in MODES:
            index.search(texts[0], args.k, mode, query_vector=vectors[0])
    plain = ("10k", "300k")
    times: dict[tuple[str, str], list[float]] = {(n, m): [] for n in indexes for m in MODES}
    overlap: dict[str, list[float]] = {n: [] for n in indexes if n not in plain}
    load_before = os.getloadavg()[0]
    for text, vector in zip(texts, vectors, strict=True):
        for mode in MODES:
            exact: dict[str, set[str]] = {}
            for name, index in indexes.items():
                if name not in plain and mode != "dense":
                    continue
                start = time.perf_counter()
                hits = index.search(text, args.k, mode, query_vector=vector)
                times[(name, mode)].append((time.perf_counter() - start) * 1000)
                ids = {h.chunk.id for h in hits}
                if name in plain and mode == "dense":
                    exact[name] = ids
                elif mode == "dense":
                    base = exact[name.split()[0]]
                    overlap[name].append(len(ids & base) / max(len(base), 1))
    load_after = os.getloadavg()[0]
    rows = []
    for mode in MODES:
        cells = [mode]
        p = {}
        for name in plain:
            xs = times[(name, mode)]
            p[name] = (statistics.median(xs), statistics.quantiles(xs, n=20)[18])
            cells += [f"{p[name][0]:.2f}", f"{p[name][1]:.2f}"]
        cells += [f"{p['300k'][0] / p['10k'][0]:.1f}x", f"{p['300k'][1] / p['10k'][1]:.1f}x"]
        rows.append(cells)
    if args.hnsw:
        for name in plain:
            xs = times[(f"{name} hnsw", "dense")]
            p[f"{name} hnsw"] = (statistics.median(xs), statistics.quantiles(xs, n=20)[18])
        cells = ["dense, HNSW (M 32, efSearch 64)"]
        for name in plain:
            cells += [f"{p[name + ' hnsw'][0]:.2f}", f"{p[name + ' hnsw'][1]:.2f}"]
        cells += [f"{p['300k hnsw'][0] / p['10k hnsw'][0]:.1f}x", f"{p['300k hnsw'][1] / p['10k hnsw'][1]:.1f}x"]
        rows.append(cells)
    body = (
        f"{len(indexes['10k']):,} and {len(indexes['300k']):,} Wikipedia sentences, one chunk each "
        f"(`build_wiki_index.py`), k = {args.k}, {args.queries} queries (the first 12 words of sentences among the "
        "first 10,000; query vectors computed beforehand, so embedding is left out), each searched on both "
        f"indexes in turn in every mode, one search at a time. 1-minute load average {load_before:.2f} before, "
        f"{load_after:.2f} after. Dense search is exact (flat faiss), so its cost grows with the corpus.\n\n"
        + markdown_table(
            ["mode", "10k p50 ms", "10k p95 ms", "300k p50 ms", "300k p95 ms", "p50 ratio", "p95 ratio"], rows
        )
    )
    if args.hnsw:
        body += (
            '\n\nHNSW copies written from the stored vectors (`dense_index.kind = "hnsw"`, nothing embedded '
            "again): "
            + ", ".join(f"{name} in {seconds:.0f} s" for name, seconds in built.items())
            + "; their dense top-k shares with the exact search (recall@k): "
            + ", ".join(f"{name.split()[0]} {statistics.mean(v):.3f}" for name, v in overlap.items())
            + "."
        )
    publish_section(
        "benchmarks.md", "search-scale", "Search latency: 300k passages against 10k", body, write=not args.no_write
    )


if __name__ == "__main__":
    main()
