"""What the injection check costs per question: the sentence classifier over ten retrieved passages.

    nice -n 10 python benchmarks/injection_cost.py            # writes a section of docs/benchmarks.md

The injection stage scores every scoreable sentence (and its clauses) of each candidate with the
shipped classifier (:class:`ragsieve.filtering.injection.InjectionScorer`: one MiniLM embedding
pass, fp32, plus a logistic regression). Passages: the demo corpus cut by the ingest chunker, and
SQuAD 2.0 passages, HotpotQA paragraphs and NFCorpus abstracts as stored; ``--draws`` seeded draws
of ten passages per corpus (a question's candidates), scored with 1 and 2 ONNX Runtime threads
alternating draw by draw. The embedding cache is off, so every draw is embedded anew.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import prose_corpora  # noqa: E402
from benchmarks._report import ROOT, SHARED_DATA, markdown_table, publish_section  # noqa: E402
from ragsieve.config import EmbedderConfig  # noqa: E402
from ragsieve.embed import load_embedder  # noqa: E402
from ragsieve.filtering.injection import InjectionScorer, pieces, scoreable, split_units  # noqa: E402
from ragsieve.ingest.chunking import chunk_text  # noqa: E402

SEED = 11
PASSAGES_PER_QUESTION = 10


def corpora() -> dict[str, list[str]]:
    """Each corpus's passages as the injection stage would see them."""
    demo: list[str] = []
    for path in sorted((ROOT / "src/ragsieve/demo/corpus").rglob("*")):
        if path.suffix in (".md", ".txt"):
            demo.extend(c.text if hasattr(c, "text") else str(c) for c in chunk_text(path.read_text(encoding="utf-8")))
    return {"demo corpus (chunked)": demo, **prose_corpora(SHARED_DATA)}


def texts_scored(passages: list[str]) -> tuple[int, int]:
    """(scoreable units, embedded texts: units and their clauses) of ``passages``."""
    units = [u.text for p in passages for u in split_units(p) if scoreable(u.text)]
    return len(units), sum(len(pieces(u)) for u in units)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20, help="draws of ten passages per corpus")
    ap.add_argument("--no-write", action="store_true", help="print the section without writing the docs")
    args = ap.parse_args(argv)
    rng = random.Random(SEED)
    scorers: dict[int, InjectionScorer] = {}
    for threads in (1, 2):
        encoder = load_embedder(EmbedderConfig(precision="fp32", threads=threads))
        encoder.warm_up()
        scorer = InjectionScorer(lambda encoder=encoder: encoder)
        scorer.warm_up()
        scorer.score_passages(["Warm the session up. Then time it."])
        scorers[threads] = scorer
    rows = []
    load_before = os.getloadavg()[0]
    for name, passages in corpora().items():
        draws = [rng.sample(passages, PASSAGES_PER_QUESTION) for _ in range(args.draws)]
        seconds: dict[int, list[float]] = {1: [], 2: []}
        for draw in draws:
            for threads, scorer in scorers.items():
                start = time.perf_counter()
                scorer.score_passages(draw)
                seconds[threads].append(time.perf_counter() - start)
        counts = [texts_scored(d) for d in draws]
        units = statistics.median(c[0] for c in counts)
        embedded = statistics.median(c[1] for c in counts)
        one, two = statistics.median(seconds[1]), statistics.median(seconds[2])
        rows.append([name, str(args.draws), f"{units:.0f}", f"{embedded:.0f}", f"{one:.2f}", f"{two:.2f}",
                     f"{max(seconds[2]):.2f}"])
    load_after = os.getloadavg()[0]
    body = (
        f"The injection stage's classifier over the ten candidates of a question "
        f"(`stages.injection.action` \"record\" or \"remove\"; :mod:`ragsieve.filtering.injection`): "
        f"{args.draws} seeded draws of {PASSAGES_PER_QUESTION} passages per corpus, each scored with 1 and "
        f"with 2 ONNX Runtime threads (alternating), embedding cache off. Units: the passage's scoreable "
        f"sentences and lines; embedded texts: the units and their clauses. 1-minute load average "
        f"{load_before:.2f} before, {load_after:.2f} after (other jobs shared the machine).\n\n"
        + markdown_table(
            ["passages", "draws", "units per question (median)", "texts embedded (median)",
             "s per question, 1 thread (median)", "2 threads (median)", "2 threads (max)"],
            rows,
        )
    )
    publish_section("benchmarks.md", "injection-cost", "Injection check: seconds per question", body,
                    write=not args.no_write)


if __name__ == "__main__":
    main()
