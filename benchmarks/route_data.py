"""The multi-domain corpus of the routing experiments, from ../shared/data.

Domains: ``nfcorpus`` (BEIR NFCorpus, nutrition/medical), ``arguana`` (ArguAna
counter-arguments, reconstructed), ``cosqa`` (CoSQA code search) and ``wiki`` (Wikipedia
sentences, the large fourth domain without queries). One chunk per corpus document
(``title. text``) or per Wikipedia sentence; chunk ids are the datasets' document ids, so
qrels apply directly.

Labelled query splits (fixed seed 0):

* nfcorpus: train = ``queries_train`` (capped), test = ``queries`` (BEIR test, 323)
* cosqa: train = ``queries_dev`` (500), test = ``queries`` (test, 500)
* arguana: only test queries exist; a fixed-seed half of them trains, the other half tests.
"""

from __future__ import annotations

import csv
import gzip
from typing import NamedTuple

import numpy as np

from _data import read_jsonl
from _report import ROOT, SHARED_DATA
from ragsieve.types import Chunk

QUERY_DOMAINS = ("nfcorpus", "arguana", "cosqa")
FOLDERS = {"nfcorpus": "beir-nfcorpus", "arguana": "arguana", "cosqa": "cosqa", "wiki": "wiki_sentences"}
CACHE = ROOT / "runs" / "cache" / "route"


class Query(NamedTuple):
    id: str
    text: str
    domain: str


def domain_chunks(domain: str) -> list[Chunk]:
    folder = SHARED_DATA / FOLDERS[domain]
    chunks = []
    for row in read_jsonl(folder / "corpus.jsonl.gz"):
        title = (row.get("title") or "").strip()
        text = f"{title}. {row['text']}" if title else row["text"]
        chunks.append(
            Chunk(id=row["id"], text=text, doc_id=row["id"], source=domain, domain=domain, title=title)
        )
    return chunks


def wiki_texts() -> list[str]:
    with gzip.open(SHARED_DATA / FOLDERS["wiki"] / "wiki300k.txt.gz", "rt", encoding="utf-8") as fh:
        return [line.rstrip("\n") for line in fh]


def wiki_chunks(n: int, seed: int = 0) -> list[Chunk]:
    """A fixed-seed sample of ``n`` Wikipedia sentences (all 300k when n >= 300k)."""
    texts = wiki_texts()
    rows = (
        np.arange(len(texts))
        if n >= len(texts)
        else np.sort(np.random.default_rng(seed).choice(len(texts), n, replace=False))
    )
    return [
        Chunk(id=f"wiki-{i}", text=texts[i], doc_id=f"wiki-{i}", source="wiki", domain="wiki")
        for i in rows.tolist()
    ]


def _queries(domain: str, split: str) -> list[Query]:
    folder = SHARED_DATA / FOLDERS[domain]
    name = "queries.jsonl" if split == "test" else f"queries_{split}.jsonl"
    return [Query(r["id"], r["text"], domain) for r in read_jsonl(folder / name)]


def qrels(domain: str, split: str = "test") -> dict[str, dict[str, int]]:
    folder = SHARED_DATA / FOLDERS[domain]
    name = "qrels.tsv" if split == "test" else f"qrels_{split}.tsv"
    out: dict[str, dict[str, int]] = {}
    with open(folder / name, encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t")
        next(reader)
        for qid, did, score in reader:
            out.setdefault(qid, {})[did] = int(score)
    return out


def query_splits(max_train_per_domain: int = 500, seed: int = 0) -> tuple[list[Query], list[Query]]:
    """(train, test) labelled queries of the three query domains."""
    rng = np.random.default_rng(seed)
    train: list[Query] = []
    test: list[Query] = []
    nf_train = _queries("nfcorpus", "train")
    train += [
        nf_train[i]
        for i in sorted(rng.choice(len(nf_train), min(max_train_per_domain, len(nf_train)), replace=False))
    ]
    test += _queries("nfcorpus", "test")
    train += _queries("cosqa", "dev")[:max_train_per_domain]
    test += _queries("cosqa", "test")
    arg = _queries("arguana", "test")
    perm = rng.permutation(len(arg))
    half = len(arg) // 2
    train += [arg[i] for i in sorted(perm[:half].tolist())][:max_train_per_domain]
    test += [arg[i] for i in sorted(perm[half:].tolist())]
    return train, test


def truncate_words(text: str, n: int = 100) -> str:
    words = text.split()
    return " ".join(words[:n])


class SyntheticEmbedder:
    """Random unit vectors (seeded by the text hash) standing in for MiniLM where embedding
    every text on this 2-core CPU is infeasible: used for timing runs and sparse-only
    quality runs, never for a reported dense-retrieval quality number."""

    def __init__(self, dim: int = 384) -> None:
        self._dim = dim

    @property
    def model_name(self) -> str:
        return f"synthetic-random-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def warm_up(self) -> None:
        return None

    def embed(self, texts: list[str] | tuple[str, ...]) -> np.ndarray:
        import zlib

        out = np.stack(
            [np.random.default_rng(zlib.crc32(t.encode())).standard_normal(self._dim) for t in texts]
        )
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.astype(np.float32)

    def to_dict(self) -> dict[str, object]:
        return {"backend": "synthetic", "dim": self._dim}


def random_unit_vectors(n: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):
        block = rng.standard_normal((min(100_000, n - start), dim), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + len(block)] = block
    return out
