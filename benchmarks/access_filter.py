"""What a reader's grants add to a search: :class:`ragsieve.index.access.ScopedIndex` (the grants as
the search's row mask) against the same index searched without them.

Synthetic passages (``--passages``, default 10,000) from a fixed vocabulary, a deterministic
hashed bag-of-words embedder of 384 dimensions (MiniLM's width; the query vector is computed once
per query and passed in, so embedding time is out of both sides), tags ``team-0`` .. ``team-9``
spread evenly. A reader granted 5 tags reads half the passages, one granted 1 tag a tenth. Per
mode, each query runs plain and scoped in alternation for ``--repeats`` rounds; cells are the
median over rounds of the per-round p50 per query. Writes the ``access-filter`` section of
docs/benchmarks.md (``--no-write``: print only).

    python benchmarks/access_filter.py
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

try:
    from benchmarks._report import markdown_table, publish_section
except ImportError:  # run as a script: python benchmarks/access_filter.py
    from _report import markdown_table, publish_section

from ragsieve.index import Index
from ragsieve.index.access import Access, ScopedIndex
from ragsieve.types import Chunk

DIM = 384
_SYLLABLES = ["ba", "ko", "mi", "tu", "re", "sa", "lo", "ne", "fi", "du", "ga", "pe", "zo", "hu", "ri"]
# 3,000 made-up words of letters only (the sparse index's tokenizer keeps them whole)
VOCAB = [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES][:3000]


class HashedWords:
    """Deterministic bag-of-words vectors: fast, no model to load."""

    model_name = "bench/hashed-words"
    dim = DIM

    def warm_up(self) -> None:
        pass

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.split():
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                out[i, h % DIM] += 1.0 if (h >> 32) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "bench", "model": self.model_name}


def passages(n: int, rng: np.random.Generator) -> list[Chunk]:
    chunks = []
    for i in range(n):
        words = " ".join(VOCAB[j] for j in rng.zipf(1.3, size=60) % len(VOCAB))
        chunks.append(Chunk(id=f"p{i}", text=words, doc_id=f"d{i}", source=f"s{i % 50}",
                            metadata={"tags": [f"team-{i % 10}"]}, path=f"team-{i % 10}/p{i}.md"))
    return chunks


def timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--no-write", action="store_true", help="print the section without writing the docs")
    args = parser.parse_args()

    import faiss

    faiss.omp_set_num_threads(1)  # one thread, as the other search benchmarks: no contention noise
    rng = np.random.default_rng(0)
    emb = HashedWords()
    chunks = passages(args.passages, rng)
    queries = [" ".join(VOCAB[j] for j in rng.zipf(1.3, size=6) % len(VOCAB)) for _ in range(args.queries)]
    vectors = emb.embed(queries)
    with tempfile.TemporaryDirectory() as tmp:
        index = Index.from_chunks(chunks, Path(tmp) / "index", embedder=emb)  # type: ignore[arg-type]
        index.warm_up()
        readers = {
            "half (5 of 10 tags)": Access(tags=frozenset(f"team-{t}" for t in range(5))),
            "a tenth (1 tag)": Access(tags=frozenset({"team-3"})),
        }
        views: dict[str, ScopedIndex] = {}
        mask_ms: dict[str, float] = {}
        for name, access in readers.items():
            view = ScopedIndex(index, access)
            mask_ms[name] = timed(lambda v=view: v.mask)  # once per index generation and grant set
            views[name] = view
        rows = []
        for mode in ("dense", "sparse", "hybrid"):
            plain_rounds: list[float] = []
            scoped_rounds: dict[str, list[float]] = {name: [] for name in views}
            for _ in range(args.repeats):
                plain: list[float] = []
                scoped: dict[str, list[float]] = {name: [] for name in views}
                for q, vec in zip(queries, vectors, strict=True):
                    plain.append(timed(lambda q=q, vec=vec, m=mode: index.search(q, args.k, m, query_vector=vec)))
                    for name, view in views.items():
                        scoped[name].append(
                            timed(lambda q=q, vec=vec, v=view, m=mode: v.search(q, args.k, m, query_vector=vec))
                        )
                plain_rounds.append(statistics.median(plain))
                for name in views:
                    scoped_rounds[name].append(statistics.median(scoped[name]))
            base = statistics.median(plain_rounds)
            for name in views:
                with_grants = statistics.median(scoped_rounds[name])
                rows.append([
                    mode, name, f"{base:.2f}", f"{with_grants:.2f}", f"{with_grants - base:+.2f}",
                    f"{(with_grants / base - 1) * 100:+.1f} %",
                ])
    body = (
        f"{args.passages:,} synthetic passages (Zipf words over a 3,000-word vocabulary, 60 words each), flat "
        f"faiss ({DIM} dims, hashed bag-of-words vectors, 1 thread) + bm25s, k={args.k}, {args.queries} queries "
        f"(6 Zipf words), {args.repeats} rounds, plain and scoped searches alternating per query; query "
        "vectors computed beforehand (embedding is the same on both sides and left out). Cells: median over "
        "rounds of the per-round p50 per query. The grant mask is computed once per index generation and "
        "grant set: " + ", ".join(f"{name}: {ms:.1f} ms" for name, ms in mask_ms.items()) + ".\n\n"
        + markdown_table(
            ["mode", "reader reads", "no grants p50 ms", "with grants p50 ms", "added ms", "added"], rows
        )
    )
    publish_section("benchmarks.md", "access-filter", "Access keys: what a reader's grants add to a search", body,
                    write=not args.no_write)


if __name__ == "__main__":
    main()
