"""Which claim judge separates supported from unsupported answer sentences on the demo corpus?

For each answerable demo question the claim is its reference answer. Supported pair: the claim
and the best-ranked retrieved chunk from one of the question's gold documents. Unsupported
pair: the claim and the best-ranked retrieved chunk from any other document (a hard negative:
on the question's topic, without its answer). Reported per judge: ROC AUC of the support score
(bootstrap 95% interval over questions), accuracy at the sieve's support threshold, and
milliseconds per judgement.

python benchmarks/verify_judges.py --threads 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import markdown_table, publish_section  # noqa: E402


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(score of a supported pair > score of an unsupported one), ties counting one half."""
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--index", type=Path, default=Path("runs/demo-index"))
    parser.add_argument("--threshold", type=float, default=None, help="default: sieve.support_threshold")
    args = parser.parse_args()

    from ragsieve.config import PipelineConfig, apply_overrides
    from ragsieve.demo import demo_corpus_dir, demo_questions
    from ragsieve.index import Index
    from ragsieve.llm import load_llm
    from ragsieve.verify import LexicalEmbeddingJudge, LLMLogprobJudge

    cfg = apply_overrides(PipelineConfig(index_dir=str(args.index)), {"llm.n_threads": args.threads})
    threshold = args.threshold if args.threshold is not None else cfg.sieve.support_threshold
    index = Index.build(demo_corpus_dir(), args.index, config=cfg)
    llm = load_llm(cfg.llm)
    llm.warm_up()
    judges = [LexicalEmbeddingJudge(embedder=index.embedder), LLMLogprobJudge(llm=llm)]
    pairs: list[tuple[str, str, str]] = []  # (claim, supported evidence, unsupported evidence)
    for q in demo_questions():
        hits = index.search(q["question"], k=20)
        gold = [h for h in hits if h.chunk.doc_id in q["doc_ids"] or h.chunk.source in q["doc_ids"]]
        other = [h for h in hits if h not in gold]
        if gold and other:
            pairs.append((q["answer"], gold[0].chunk.text, other[0].chunk.text))
    rows = []
    rng = np.random.default_rng(0)
    for judge in judges:
        t0 = time.perf_counter()
        pos = np.asarray([judge.support(c, [e]) for c, e, _ in pairs])
        neg = np.asarray([judge.support(c, [e]) for c, _, e in pairs])
        ms = (time.perf_counter() - t0) * 1000.0 / (2 * len(pairs))
        boot = []
        for _ in range(2000):
            idx = rng.integers(0, len(pairs), len(pairs))
            boot.append(auc(pos[idx], neg[idx]))
        acc = float(np.mean(np.concatenate([pos >= threshold, neg < threshold])))
        rows.append(
            [
                judge.name,
                f"{auc(pos, neg):.3f} [{np.percentile(boot, 2.5):.3f}, {np.percentile(boot, 97.5):.3f}]",
                f"{acc:.3f}",
                f"{pos.mean():.2f} / {neg.mean():.2f}",
                f"{ms:.0f}",
            ]
        )
    body = (
        f"n = {len(pairs)} answerable demo questions with a gold and a non-gold chunk in the top 20 (hybrid "
        "retrieval); each gives one supported pair (reference answer, best gold-document chunk) and one "
        "unsupported pair (reference answer, best other chunk). LLM: bundled SmolLM2-135M-Instruct (llama.cpp, "
        f"{args.threads} threads), yes/no next-token log-probabilities with contextual calibration; embedder: "
        f"bundled all-MiniLM-L6-v2. Accuracy at support threshold {threshold}. 1-min load average at the end: "
        f"{os.getloadavg()[0]:.1f}.\n\n"
        + markdown_table(["claim judge", "ROC AUC [95% CI]", "accuracy", "mean score sup / unsup", "ms / pair"], rows)
    )
    publish_section("results/verification.md", "verify-judges", "Verification: claim judges on the demo corpus", body)


if __name__ == "__main__":
    main()
