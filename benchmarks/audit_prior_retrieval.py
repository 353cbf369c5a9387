"""The audit as a prior (``stages.retrieve.audit_prior``), measured where it acts first: the sieve's
retrieved candidates, with and without it, on the planted corpora of ``benchmarks/audit_planted.py``.

    nice -n 10 python benchmarks/audit_planted.py                    # first: the indexes and audits
    nice -n 10 python benchmarks/audit_prior_retrieval.py            # print
    nice -n 10 python benchmarks/audit_prior_retrieval.py --write    # and write the section

For the 100 PoisonedRAG HotpotQA questions on the corpus with PoisonedRAG's GPT-4 passages
planted: poisoned passages among the top 5 of the 10 candidates the sieve retrieves, and questions
with a supporting (gold) paragraph in the top 5 (of the 99 whose HotpotQA record is known). For
the 400 other HotpotQA questions on the clean corpus (its own audit's false findings marked):
questions with a supporting paragraph in the top 5, the cost of the prior where nothing was
planted. The audit of each corpus is saved with its index generation
(``audits/<generation>.json``), as ``ragsieve audit --save`` does. This measures the ranking
only: the judge's trust weighting and the answers are not run here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import read_jsonl
from benchmarks._report import ROOT, SHARED_DATA, markdown_table, publish_section
from benchmarks._stats import paired_bootstrap_interval, rate_with_interval

RUNS = ROOT / "runs" / "audit_planted"
HOTPOT = SHARED_DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"
PRAG = SHARED_DATA / "trust" / "poisonedrag"
TOP = 5


def save_audit(index: Any, name: str) -> None:
    """Save the audit ``audit_planted.py`` kept for this corpus with the index's generation."""
    import json

    from ragsieve.audit.saved import saved_path

    data = json.loads((RUNS / f"{name}.findings.json").read_text(encoding="utf-8"))
    if data["generation"] != index.generation:
        raise SystemExit(f"{name}: the kept audit is of generation {data['generation']}, the index is at "
                         f"{index.generation}; rerun benchmarks/audit_planted.py")
    path = saved_path(index.dir, index.generation)
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def ranked(index: Any, question: str, prior: Any) -> list[Any]:
    from ragsieve.config import PipelineConfig
    from ragsieve.sieve.retrieve import CandidateSearch
    from ragsieve.sieve.state import Ref
    from ragsieve.types import Trace

    config = PipelineConfig()
    search = CandidateSearch(Ref(index), config.retrieval, sieve=True, wide=False, prior=prior)
    return search(question, Trace(question), k=config.stages.retrieve.candidates)[:TOP]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="Write the section of docs/results/audit.md.")
    args = parser.parse_args()
    from ragsieve.config import RetrieveStageConfig
    from ragsieve.embed import load_embedder
    from ragsieve.index import Index
    from ragsieve.sieve.prior import AuditPrior

    trust = RetrieveStageConfig().audit_trust
    prior = AuditPrior(trust)  # reads each index generation's saved audit once
    embedder = load_embedder()
    hotpot = {row["id"]: row for row in read_jsonl(HOTPOT)}
    attacked = [q for q in read_jsonl(PRAG / "questions.jsonl") if q["dataset"] == "hotpotqa"]
    rows: list[list[object]] = []

    def gold_titles(hid: str) -> set[str]:
        return set(hotpot[hid]["supporting_titles"]) if hid in hotpot else set()

    with Index.open(RUNS / "index-poisonedrag-gpt4", embedder=embedder) as index:
        save_audit(index, "poisonedrag-gpt4")
        poisoned: dict[str, list[float]] = {"off": [], "on": []}
        gold: dict[str, list[float]] = {"off": [], "on": []}
        for q in attacked:
            titles = gold_titles(q.get("hotpotqa_500_id", ""))
            for arm, use in (("off", None), ("on", prior)):
                hits = ranked(index, q["question"], use)
                poisoned[arm].append(sum(h.chunk.doc_id.startswith("plant/") for h in hits))
                gold[arm].append(float(any(h.chunk.title in titles for h in hits)))
        n = len(attacked)
        known = sum(bool(gold_titles(q.get("hotpotqa_500_id", ""))) for q in attacked)
        for arm in ("off", "on"):
            rows.append([f"PoisonedRAG GPT-4 planted ({n} attacked questions)", arm,
                         rate_with_interval(int(sum(poisoned[arm])), n * TOP),
                         rate_with_interval(int(sum(gold[arm])), known)])
        diff = paired_bootstrap_interval(np.array(poisoned["off"]), np.array(poisoned["on"]))
    attacked_ids = {q.get("hotpotqa_500_id") for q in attacked}
    clean_questions = [row for hid, row in hotpot.items() if hid not in attacked_ids]
    with Index.open(RUNS / "index-clean", embedder=embedder) as index:
        save_audit(index, "clean")
        clean_gold: dict[str, list[float]] = {"off": [], "on": []}
        for row in clean_questions:
            titles = set(row["supporting_titles"])
            for arm, use in (("off", None), ("on", prior)):
                hits = ranked(index, row["question"], use)
                clean_gold[arm].append(float(any(h.chunk.title in titles for h in hits)))
        m = len(clean_questions)
        for arm in ("off", "on"):
            rows.append([f"clean HotpotQA ({m} other questions)", arm, "-",
                         rate_with_interval(int(sum(clean_gold[arm])), m)])
    table = markdown_table(["corpus", "audit prior", f"poisoned passages in the top {TOP} [95 % CI]",
                            f"questions with a supporting paragraph in the top {TOP}"], rows)
    body = (
        "The audit as a prior (`stages.retrieve.audit_prior`, trust 0.5), measured on the ranking of the sieve's "
        f"10 retrieved candidates (top {TOP}), on the corpora of the section above, each with its own saved audit "
        "(defaults, nothing tuned). Only the ranking: the judge's trust weighting, which is where the prior "
        "acts most, and the answers were not run, so this does not say whether it helps answers; the option "
        "stays off by default.\n\n"
        f"{table}\n\nPoisoned passages per attacked question in the top {TOP}, prior on minus off: mean "
        f"{diff[0]:+.2f}, 95 % paired bootstrap interval [{diff[1]:+.2f}, {diff[2]:+.2f}].\n"
    )
    publish_section("results/audit.md", "audit-prior-ranking", "The audit as a prior: the retrieved ranking", body,
                    write=args.write)


if __name__ == "__main__":
    main()
