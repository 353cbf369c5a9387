"""Run one ingest in a separate process for the reliability tests (not a test module).

Usage: python ingest_worker.py CORPUS INDEX [--slow-embed S] [--stall-write S] [--signal FILE]
[--lock-timeout S]. ``--signal`` is created when embedding (or writing, with ``--stall-write``)
starts, so a test knows when to kill the process. Prints the build report as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.helpers import HashEmbedder  # noqa: E402

from ragsieve.config import PipelineConfig  # noqa: E402
from ragsieve.errors import RagsieveError  # noqa: E402
from ragsieve.index import BuildReport, Index  # noqa: E402


class SlowEmbedder(HashEmbedder):
    def __init__(self, delay: float, signal: Path | None) -> None:
        super().__init__()
        self.delay = delay
        self.signal = signal

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.signal is not None:
            self.signal.touch()
        time.sleep(self.delay)
        return super().embed(texts)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", type=Path)
    parser.add_argument("index", type=Path)
    parser.add_argument("--slow-embed", type=float, default=0.0)
    parser.add_argument("--stall-write", type=float, default=0.0)
    parser.add_argument("--signal", type=Path)
    parser.add_argument("--lock-timeout", type=float, default=60.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    embed_signal = args.signal if not args.stall_write else None
    embedder = SlowEmbedder(args.slow_embed, embed_signal)
    if args.stall_write:
        import ragsieve.index.store as store

        real_build = store.SparseBackend.build

        def stalled(texts: list[str]) -> store.SparseBackend:
            if args.signal is not None:
                args.signal.touch()
            time.sleep(args.stall_write)
            return real_build(texts)

        store.SparseBackend.build = stalled  # type: ignore[method-assign]
    cfg = PipelineConfig.model_validate({"ingest": {"lock_timeout_s": args.lock_timeout, "extract_entities": False}})
    report = BuildReport()
    try:
        index = Index.build(args.corpus, args.index, config=cfg, embedder=embedder, report=report)
    except RagsieveError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"generation": index.generation, "chunks": len(index), "ids": sorted(c.id for c in index.chunks)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
