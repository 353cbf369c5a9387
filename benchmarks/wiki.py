"""Load the shared 300k-sentence Wikipedia corpus as chunks (one sentence each)."""

from __future__ import annotations

import gzip
import sys
from collections.abc import Iterator
from pathlib import Path

# Lets `python benchmarks/<script>.py` import its siblings as the `benchmarks` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, SHARED_DATA
from ragsieve.types import Chunk

WIKI_DIR = SHARED_DATA / "wiki_sentences"
RUNS = ROOT / "runs"


def wiki_sentences(limit: int | None = None) -> Iterator[tuple[int, str, str, str]]:
    """``(line number, sentence, page id, article title)`` of the shared sentences in file order,
    the first ``limit`` of them (all when None)."""
    text_path = WIKI_DIR / "wiki300k.txt.gz"
    meta_path = WIKI_DIR / "wiki300k_meta.tsv.gz"
    if not text_path.is_file():
        raise SystemExit(f"{text_path} not found: the shared data folder must sit beside the checkout")
    with gzip.open(text_path, "rt", encoding="utf-8") as texts, gzip.open(meta_path, "rt", encoding="utf-8") as meta:
        next(meta)  # header
        for i, (sentence, row) in enumerate(zip(texts, meta, strict=False)):
            if limit is not None and i >= limit:
                break
            _line, page_id, title = row.rstrip("\n").split("\t", 2)
            yield i, sentence, page_id, title


def wiki_chunks(limit: int | None = None, domain: str = "wikipedia") -> list[Chunk]:
    """Sentences as chunks; the article title is both title and data source."""
    return [
        Chunk(
            id=f"wiki:{i}",
            text=sentence.strip(),
            doc_id=f"wiki-page:{page_id}",
            source=title,
            domain=domain,
            title=title,
            position=i,
        )
        for i, sentence, page_id, title in wiki_sentences(limit)
    ]


def wiki_index_dir(limit: int | None) -> Path:
    return RUNS / "indexes" / (f"wiki{limit // 1000}k" if limit else "wiki300k")
