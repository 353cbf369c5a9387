"""What every audit check reads: the index's passages grouped by document, with their hosts,
citations and unit vectors, and the near-linear candidate pairs (each passage's nearest
neighbours in the dense vectors; never all pairs)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.citations import Citation, citation_uri, format_citation
from ragsieve.errors import InputError
from ragsieve.types import Chunk, SearchHit

# Neighbours read per passage for the candidate pairs. A fixed budget, not a threshold on any
# report: it bounds the work at k pairs per passage (linear in the corpus), and a coordinated
# voice (voices.MIN_MEMBERS documents) or a conflicting pair sits well inside it.
NEIGHBOURS = 10
# A shared name is a candidate link only when few passages hold it (at most this many), so a
# popular name (a country, the corpus's subject) never turns into all pairs of its passages.
RARE_NAME_POSTINGS = NEIGHBOURS

# Up to this many passages the neighbour table is exact (a flat inner-product search: quadratic
# work, 210 s of a 100,000-passage audit's 326 s); above it an HNSW graph, n log n, whose top 10
# agreed with the exact search on 0.969 of a 300,000-sentence corpus's neighbours
# (docs/benchmarks.md, "Search latency: 300k passages against 10k").
EXACT_NEIGHBOURS_UP_TO = 50_000
# The graph's parameters: the index's own HNSW defaults (``dense_index``), a wider search beam, as
# every passage is a query here and a tight cluster's members must all be found.
HNSW_M = 32
HNSW_EF_SEARCH = 128

ProgressFn = Callable[[str, int, int], None]


@dataclass
class Corpus:
    """The passages of one index, in index order, with what the checks need of each."""

    chunks: list[Chunk]
    vectors: np.ndarray  # unit rows, float32
    root: Path | None = None
    hosts: list[str] = field(default_factory=list)
    docs: dict[str, list[int]] = field(default_factory=dict)  # doc id -> rows in position order

    @classmethod
    def of(cls, chunks: Sequence[Chunk], vectors: Any, root: Path | None = None) -> Corpus:
        from ragsieve.voices import host_of

        vecs = np.asarray(vectors, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[0] != len(chunks):
            raise InputError(f"the audit needs one vector per passage: {len(chunks)} passages, vectors {vecs.shape}")
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        unit = np.ascontiguousarray(vecs / np.where(norms > 0, norms, 1.0), dtype=np.float32)
        chunks = list(chunks)
        docs: dict[str, list[int]] = {}
        for row, c in enumerate(chunks):
            docs.setdefault(c.doc_id, []).append(row)
        for rows in docs.values():
            rows.sort(key=lambda r: (chunks[r].position, r))
        hosts = [host_of(hit(c)) for c in chunks]
        return cls(chunks, unit, root, hosts, docs)

    def __len__(self) -> int:
        return len(self.chunks)

    def hit(self, row: int) -> SearchHit:
        return hit(self.chunks[row])

    def citation(self, row: int) -> tuple[str, str | None]:
        """How a person names the passage's place (file, page, heading or address) and a link to it."""
        c = Citation.from_chunk(self.chunks[row])
        return format_citation(c), citation_uri(c, self.root)

    def doc_text(self, doc_id: str) -> str:
        return "\n".join(self.chunks[r].text for r in self.docs[doc_id])

    def neighbours(self, k: int = NEIGHBOURS, progress: ProgressFn | None = None,
                   exact_up_to: int = EXACT_NEIGHBOURS_UP_TO) -> tuple[np.ndarray, np.ndarray]:
        """Each passage's ``k`` nearest other passages by cosine: (rows, cosines), ``n x k``
        (``-1`` rows where the corpus has fewer). Exact inner-product search in blocks up to
        ``exact_up_to`` passages, an HNSW graph above (built on one thread, so the table, and
        the findings, are the same on every run)."""
        import faiss

        n, dim = self.vectors.shape
        k = max(1, min(k, n - 1)) if n > 1 else 1
        ids = np.full((n, k), -1, dtype=np.int64)
        sims = np.zeros((n, k), dtype=np.float32)
        if n < 2:
            return ids, sims
        search: Any
        if n <= exact_up_to:
            search = faiss.IndexFlatIP(dim)
            search.add(self.vectors)
        else:
            search = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
            threads = faiss.omp_get_max_threads()
            faiss.omp_set_num_threads(1)  # parallel insertion makes the graph differ run to run
            try:
                block = 16_384
                for start in range(0, n, block):
                    search.add(self.vectors[start:start + block])
                    if progress:
                        progress("neighbour graph", min(n, start + block), n)
            finally:
                faiss.omp_set_num_threads(threads)
            search.hnsw.efSearch = max(HNSW_EF_SEARCH, k + 1)
        block = 1024
        for start in range(0, n, block):
            stop = min(n, start + block)
            d, i = search.search(self.vectors[start:stop], k + 1)
            for r in range(stop - start):
                row = start + r
                keep = [(j, s) for j, s in zip(i[r].tolist(), d[r].tolist(), strict=True) if j != row and j >= 0][:k]
                for c, (j, s) in enumerate(keep):
                    ids[row, c], sims[row, c] = j, s
            if progress:
                progress("neighbours", stop, n)
        return ids, sims


def hit(chunk: Chunk, rank: int = 1) -> SearchHit:
    return SearchHit(chunk, 1.0, rank, {})


def neighbour_pairs(ids: np.ndarray, other_document: Sequence[str] | None = None) -> set[tuple[int, int]]:
    """The unordered pairs (low row, high row) of the neighbour table; with ``other_document``
    (each row's document id) only pairs of passages from different documents."""
    pairs: set[tuple[int, int]] = set()
    for row, nbrs in enumerate(ids.tolist()):
        for j in nbrs:
            if j < 0 or j == row:
                continue
            if other_document is not None and other_document[row] == other_document[j]:
                continue
            pairs.add((row, j) if row < j else (j, row))
    return pairs


def rare_name_pairs(names: Sequence[Sequence[str]], doc_ids: Sequence[str], cap: int = RARE_NAME_POSTINGS
                    ) -> set[tuple[int, int]]:
    """Pairs of passages from different documents that share a name held by at most ``cap``
    passages (at most ``cap - 1`` pairs per posting, so linear in the corpus)."""
    postings: dict[str, list[int]] = {}
    for row, row_names in enumerate(names):
        for name in dict.fromkeys(row_names):
            postings.setdefault(name, []).append(row)
    pairs: set[tuple[int, int]] = set()
    for rows in postings.values():
        if len(rows) < 2 or len(rows) > cap:
            continue
        for a_pos, a in enumerate(rows):
            for b in rows[a_pos + 1:]:
                if doc_ids[a] != doc_ids[b]:
                    pairs.add((a, b))
    return pairs
