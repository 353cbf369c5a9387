"""Insert and query latency of the folder index vs Milvus Lite behind the store protocol.

    python benchmarks/store_backends.py --chunks 2000 --queries 200

Chunks are the first ``--chunks`` Wikipedia sentences of ``shared/data/wiki_sentences``;
vectors are seeded random unit vectors (dimension 384, as the bundled embedder), so the
numbers are the stores' own cost: no model runs, queries pass ``query_vector``. Queries are
other sentences of the same file; both stores answer each query in turn, interleaved, so
machine noise hits them alike. Medians carry a 95% bootstrap interval.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, markdown_table, write_section
from benchmarks._stats import median_bootstrap_interval
from ragsieve.store import FolderStore, MilvusStore, Store
from ragsieve.types import Chunk

DIM = 384


class RandomUnitEmbedder:
    """Seeded unit vectors per text: a store benchmark must not time a model."""

    model_name = "bench/random-unit-384"
    dim = DIM

    def warm_up(self) -> None:
        pass

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.stack(
            [
                np.random.default_rng(int(hashlib.sha1(t.encode()).hexdigest()[:8], 16)).standard_normal(DIM)
                for t in texts
            ]
        ).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "bench", "model": self.model_name}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--data", type=Path, default=ROOT.parent / "shared" / "data" / "wiki_sentences" / "wiki300k.txt.gz"
    )
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args()

    with gzip.open(args.data, "rt", encoding="utf-8") as f:
        lines = [line.strip() for _, line in zip(range(args.chunks + args.queries), f, strict=False)]
    chunks = [
        Chunk(id=f"s{i}", text=t, doc_id=f"s{i}", source=f"wiki/{i // 100}", domain=f"d{i % 4}")
        for i, t in enumerate(lines[: args.chunks])
    ]
    queries = lines[args.chunks :]
    embedder = RandomUnitEmbedder()
    vectors = embedder.embed([c.text for c in chunks])
    qvecs = embedder.embed(queries)

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        folder = FolderStore.create(chunks, Path(tmp) / "index", embedder)
        t_folder = time.perf_counter() - t0
        milvus = MilvusStore(str(Path(tmp) / "milvus.db"), embedder)
        milvus.warm_up()
        t0 = time.perf_counter()
        milvus.add(chunks, embeddings=vectors)
        t_milvus = time.perf_counter() - t0
        stores: dict[str, Store] = {"folder index": folder, "Milvus Lite": milvus}
        for s in stores.values():
            s.warm_up()
            s.search(queries[0], k=args.k, query_vector=qvecs[0])
        times: dict[tuple[str, str], list[float]] = {}
        for q, v in zip(queries, qvecs, strict=True):
            for mode in ("dense", "sparse", "hybrid"):
                for name, s in stores.items():
                    t0 = time.perf_counter()
                    s.search(q, k=args.k, mode=mode, query_vector=v)
                    times.setdefault((name, mode), []).append((time.perf_counter() - t0) * 1000)
        folder.close()
        milvus.close()

    rows: list[list[object]] = []
    for (name, mode), xs in times.items():
        med, lo, hi = median_bootstrap_interval(xs)
        rows.append([name, mode, f"{med:.2f} [{lo:.2f}, {hi:.2f}]", round(float(np.percentile(xs, 95)), 2)])
    body = (
        f"{args.chunks} Wikipedia sentences (`shared/data/wiki_sentences`), 384-d seeded random unit vectors "
        f"(no model timed), {args.queries} queries, k={args.k}, candidates=50 for hybrid.\n\n"
        f"Build/insert of all {args.chunks} chunks: folder index {t_folder:.2f} s (one generation: faiss + bm25s "
        f"+ checksums + fsync), Milvus Lite {t_milvus:.2f} s (insert + BM25 function).\n\n"
        + markdown_table(["store", "mode", "median ms [95% CI]", "p95 ms"], rows)
    )
    write_section("benchmarks.md", "store-backends", "Store backends: folder index vs Milvus Lite", body)
    print(body)


if __name__ == "__main__":
    main()
