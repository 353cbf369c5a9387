"""Build the knowledge index used by the filtering experiments (a subset of wiki_sentences).

Every ``--stride``-th sentence of ../shared/data/wiki_sentences/wiki300k.txt.gz (default
10: 30,000 sentences spread over all 30k source articles) is embedded with the bundled
MiniLM and indexed (faiss flat + BM25) into ``runs/indexes/wiki30k``. The lead's full index
(``runs/indexes/wiki300k``) can be used instead by the experiment script when it exists.

    python benchmarks/filtering_build_index.py --stride 10 --out runs/indexes/wiki30k
"""

from __future__ import annotations

import argparse
import logging
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stride", type=int, default=30)
    ap.add_argument("--out", default="runs/indexes/wiki10k")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO)
    import torch

    torch.set_num_threads(1)
    from benchmarks._report import ROOT
    from benchmarks.wiki import wiki_sentences
    from ragsieve.index import Index
    from ragsieve.types import Chunk

    chunks = [
        Chunk(
            id=f"wiki-{i + 1}",
            text=sentence.strip(),
            doc_id=f"wiki-page-{page_id}",
            source="wikipedia",
            title=title,
            position=i,
        )
        for i, sentence, page_id, title in wiki_sentences()
        if i % args.stride == 0
    ]
    t0 = time.perf_counter()
    Index.from_chunks(chunks, ROOT / args.out)
    print(f"indexed {len(chunks)} sentences into {args.out} in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
