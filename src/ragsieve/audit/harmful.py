"""Sources that hurt: with labelled questions, data importance per source and the sources a
tuned pruning threshold would remove (:mod:`ragsieve.importance`, as ``ragsieve importance fit``).

The questions file is the validation JSONL ``ragsieve importance fit`` reads (one line per
question: its ranked retrieved items, each with an ``id``, a ``source`` and a ``utility``). The
weights are learned and the threshold tuned on that same file, as the importance command does;
a source below the threshold is one whose passages lowered the questions' utility.
"""

from __future__ import annotations

from pathlib import Path

from ragsieve.audit.corpus import Corpus
from ragsieve.audit.report import Finding, Member


def find_harmful(corpus: Corpus, questions: Path, k: int = 10, epochs: int = 50) -> tuple[list[Finding], int]:
    """Findings for the sources a tuned pruning threshold removes, and the number of questions."""
    from ragsieve.importance import DataImportance, load_jsonl, tune_prune_threshold

    data = load_jsonl(questions, on_duplicate="first")
    # the additive utility, ``ragsieve importance fit``'s default (the majority vote needs the
    # Monte Carlo estimator, too slow for an audit's default)
    est = DataImportance(k=k, epochs=epochs, utility="additive").fit(data)
    weights = est.source_weights()
    tuned = tune_prune_threshold(data, est.weights_, k=k, utility="additive", known=est.seen_)
    pruned = sorted((s for s, w in weights.items() if w < tuned.threshold), key=lambda s: weights[s])
    rows_of: dict[str, list[int]] = {}
    for row, c in enumerate(corpus.chunks):
        rows_of.setdefault(c.source, []).append(row)
    findings = []
    for source in pruned:
        rows = rows_of.get(source, [])
        members = []
        for r in rows[:20]:
            c = corpus.chunks[r]
            citation, link = corpus.citation(r)
            members.append(Member(c.doc_id, c.id, citation, corpus.hosts[r], c.text[:300], link))
        docs = tuple(dict.fromkeys(corpus.chunks[r].doc_id for r in rows))
        weight = float(weights[source])
        evidence = (f"source {source} has importance weight {weight:.3f}, below the tuned pruning threshold "
                    f"{tuned.threshold:.3f} (pruning it and {tuned.pruned_sources - 1} others scores "
                    f"{tuned.validation_score:.3f} on the {data.n_tuples} questions)")
        findings.append(Finding(
            kind="harmful-source", score=max(0.0, min(1.0, 1.0 - weight)),
            severity="high" if weight == 0.0 else "medium", members=tuple(members), evidence=evidence,
            exclude=docs, original=None,
            details={"source": source, "weight": round(weight, 6), "threshold": round(tuned.threshold, 6),
                     "passages": len(rows), "validation_score": round(tuned.validation_score, 6)},
        ))  # fmt: skip
    return findings, data.n_tuples
