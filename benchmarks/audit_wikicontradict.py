"""Real contradictions found by ``ragsieve audit``: WikiContradict's pairs of Wikipedia passages
that contradict each other, placed in a corpus of other Wikipedia text.

    nice -n 10 python benchmarks/audit_wikicontradict.py          # build (cached), audit, print
    nice -n 10 python benchmarks/audit_wikicontradict.py --write  # with the labels: docs/results/audit.md

The corpus: the HotpotQA dev (distractor) paragraphs of :mod:`benchmarks.audit_planted` (one
document per article, on Wikipedia's host) as the other Wikipedia text, plus every distinct passage
of WikiContradict (``shared/data/trust/wikicontradict``, Hou et al. 2024), each its own document at
the address the data gives it (the two passages of a row on two hosts). The data repeats a passage
for each question asked of it (455 passages, 314 distinct texts); each text is one document, so a
repeat is not a planted mirror. 202 of the 253 rows put their two contradicting claims in two
passages; their distinct pairs of documents are the pairs counted. The other 51 rows put both
claims in one passage, which a check of documents against each other cannot find: they are in the
corpus but not among the pairs.

The audit runs with its defaults (fixed before this run; nothing here is tuned), once with the
extractive reader (the default) and once without: the reader only grades a conflict's sureness
(``severity`` high when it answers the derived question from both sentences), it finds none, so
both runs have the same findings. Measured:

- pairs found: a conflict finding whose documents are exactly the pair's two (and, read by hand,
  names its two claims; or a finding of any kind whose documents hold both);
- precision: of the conflict findings naming a WikiContradict document, the share whose two
  sentences and values state the two contradicting claims of one row, read by hand in
  ``benchmarks/labels/audit_wikicontradict.json`` (finding key -> ``true``/``false`` and why); a
  finding on the right documents about another fact is not precise;
- conflict findings among the other text alone, per 1,000 documents, with the hand labels of the
  same findings on the clean HotpotQA corpus (``benchmarks/labels/audit_hotpotqa.json``) where
  they exist;
- the audit's wall time (2 cores shared with other jobs).

Intervals: 95 % Wilson.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import read_jsonl
from benchmarks._report import ROOT, SHARED_DATA, markdown_table, publish_section
from benchmarks._stats import rate_with_interval, wilson_interval
from benchmarks.audit_planted import clean_chunks, embedded

DATA = SHARED_DATA / "trust" / "wikicontradict"
RUNS = ROOT / "runs" / "audit_wikicontradict"
LABELS = ROOT / "benchmarks" / "labels" / "audit_wikicontradict.json"
FILLER_LABELS = ROOT / "benchmarks" / "labels" / "audit_hotpotqa.json"
PREFIX = "wikicontradict/"


def contradict_chunks() -> tuple[list[Any], dict[str, str]]:
    """One document per distinct WikiContradict passage text (the data repeats a passage for each
    question asked of it: 455 passages, 314 distinct texts), named after the first passage holding
    that text, at the address the data gives it; and each passage id's document."""
    from ragsieve.types import Chunk

    chunks: dict[str, Any] = {}
    doc_of: dict[str, str] = {}
    for row in read_jsonl(DATA / "corpus.jsonl"):
        text = row["text"]
        if text not in chunks:
            chunks[text] = Chunk(f"wc:{row['id']}", text, PREFIX + row["id"], row["url"], title=row.get("title", ""))
        doc_of[row["id"]] = chunks[text].doc_id
    return list(chunks.values()), doc_of


def pairs(doc_of: dict[str, str]) -> dict[frozenset[str], list[dict[str, Any]]]:
    """The distinct pairs of documents holding the two claims of a row (rows whose two claims sit
    in two passages), each with its rows (several questions may ask about one pair)."""
    out: dict[frozenset[str], list[dict[str, Any]]] = {}
    for q in read_jsonl(DATA / "questions.jsonl"):
        docs = frozenset(doc_of[p] for p in q["gold_passage_ids"])
        if len(docs) == 2:
            out.setdefault(docs, []).append(q)
    return out


def finding_key(f: dict[str, Any]) -> str:
    """One conflict finding: its documents and its derived question (a pair of documents can
    hold several findings, one per question)."""
    question = f["values"]["question"] if f.get("values") else ""
    return f["kind"] + ":" + "|".join(sorted(f["documents"])) + ":" + question


def doc_key(f: dict[str, Any]) -> str:
    """The key :mod:`benchmarks.audit_false_findings` and the HotpotQA labels use."""
    return f["kind"] + ":" + "|".join(sorted(f["documents"]))


def audit(name: str, chunks: list[Any], vectors: np.ndarray, embedder: Any, use_reader: bool) -> dict[str, Any]:
    from ragsieve.audit import audit_index
    from ragsieve.index import Index

    found = RUNS / f"{name}.findings.json"
    if found.is_file():
        return dict(json.loads(found.read_text(encoding="utf-8")))
    folder = RUNS / "index"
    index = Index.open(folder, embedder=embedder) if Index.exists(folder) else \
        Index.from_chunks(chunks, folder, embedder=embedder, embeddings=vectors)
    with index:
        report = audit_index(index, use_reader=use_reader)
    print(f"{name}: {report.passages} passages audited in {report.seconds:.0f} s", file=sys.stderr)
    found.write_text(report.to_json(), encoding="utf-8")
    return dict(json.loads(report.to_json()))


def per_thousand(count: int, docs: int) -> str:
    low, high = wilson_interval(count, docs)
    return f"{1000 * count / docs:.2f} [{1000 * low:.2f}, {1000 * high:.2f}] ({count}/{docs})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="Write the section of docs/results/audit.md.")
    args = parser.parse_args()
    from ragsieve.embed import load_embedder

    RUNS.mkdir(parents=True, exist_ok=True)
    embedder = load_embedder()
    filler = clean_chunks()
    planted, doc_of = contradict_chunks()
    vectors = np.vstack([embedded("clean", [c.text for c in filler], embedder),
                         embedded("wikicontradict-distinct", [c.text for c in planted], embedder)])
    chunks = filler + planted
    the_pairs = pairs(doc_of)
    rows_in_pairs = sum(len(v) for v in the_pairs.values())
    filler_docs = {c.doc_id for c in filler}
    labels: dict[str, Any] = json.loads(LABELS.read_text(encoding="utf-8")) if LABELS.is_file() else {}
    filler_labels: dict[str, Any] = (json.loads(FILLER_LABELS.read_text(encoding="utf-8"))
                                     if FILLER_LABELS.is_file() else {})
    reports = {reader: audit(f"reader-{'on' if reader else 'off'}", chunks, vectors, embedder, reader)
               for reader in (True, False)}
    conflicts = {reader: [f for f in r["findings"] if f["kind"] == "conflict"] for reader, r in reports.items()}
    same = sorted(map(finding_key, conflicts[True])) == sorted(map(finding_key, conflicts[False]))
    rows: list[list[object]] = []
    unlabelled: dict[str, dict[str, Any]] = {}
    listing: list[str] = []
    total_docs = 0
    n = len(the_pairs)
    for reader in (True, False):
        report = reports[reader]
        mine = conflicts[reader]
        touching = [f for f in mine if any(d.startswith(PREFIX) for d in f["documents"])]
        on_pair = [f for f in touching if frozenset(f["documents"]) in the_pairs]
        for f in touching:
            if finding_key(f) not in labels:
                unlabelled[finding_key(f)] = f
        precise = [f for f in touching if labels.get(finding_key(f), {}).get("true") is True]
        found_docs = {frozenset(f["documents"]) for f in on_pair}
        found_claims = {frozenset(f["documents"]) for f in on_pair if f in precise}
        high = {frozenset(f["documents"]) for f in on_pair if f in precise and f["severity"] == "high"}
        anywhere = {p for p in the_pairs if any(p <= set(f["documents"]) for f in report["findings"])}
        among_filler = [f for f in mine if set(f["documents"]) <= filler_docs]
        filler_false = [f for f in among_filler if filler_labels.get(doc_key(f), {}).get("true") is False]
        filler_read = [f for f in among_filler if doc_key(f) in filler_labels]
        mixed = [f for f in touching if set(f["documents"]) & filler_docs]
        rows.append([
            "on (default)" if reader else "off", n,
            rate_with_interval(len(found_docs), n),
            rate_with_interval(len(found_claims), n),
            rate_with_interval(len(high), n) if reader else "-",
            rate_with_interval(len(anywhere), n),
            f"{len(touching)} ({len(on_pair)} on one pair's documents, {len(mixed)} with the other text)",
            rate_with_interval(len(precise), len(touching)),
            per_thousand(len(among_filler), len(filler_docs)),
            f"{len(filler_false)} of {len(filler_read)} read",
            f"{report['seconds']:.0f}",
        ])
        if reader:
            listing = [f"- {', '.join(d.split('/')[-1] for d in f['documents'])} "
                       f"(\"{f['values']['question']}\": {' vs '.join(f['values']['values'])}; severity "
                       f"{f['severity']}): {labels[finding_key(f)]['why'] if finding_key(f) in labels else 'not read'}"
                       for f in touching]
            total_docs = int(report["documents"])
    mirrored = {p for p in the_pairs for f in reports[True]["findings"]
                if f["kind"] == "mirror" and p <= set(f["documents"])}
    for k, f in unlabelled.items():
        rows_of = [q["id"] for q in the_pairs.get(frozenset(f["documents"]), [])]
        print(json.dumps({"key": k, "evidence": f["evidence"], "sentences": [m["sentence"] for m in f["members"]],
                          "rows": rows_of}, ensure_ascii=False))
    if unlabelled:
        print(f"{len(unlabelled)} findings without a label in {LABELS}", file=sys.stderr)
        if args.write:
            raise SystemExit("label every conflict finding naming a WikiContradict passage before writing")
    table = markdown_table([
        "extractive reader", "pairs", "pairs found: a conflict on the pair's two documents [95 % CI]",
        "pairs found naming the two claims (read)", "of those, severity high", "pairs in a finding of any kind",
        "conflicts naming a WikiContradict passage", "precision: conflicts naming the two claims of one row (read)",
        "conflicts among the other text, per 1,000 of its docs [95 % CI]",
        "of which false by the HotpotQA reading", "audit s"], rows)
    body = (
        f"The HotpotQA dev (distractor) paragraphs of the planted section ({len(filler_docs)} articles, one "
        f"document each, on Wikipedia's host) plus every distinct WikiContradict passage (Hou et al. 2024; "
        f"{len(planted)} texts: the data repeats a passage for each question asked of it), each its own document at "
        f"the address the data gives it, the two passages of a row on two hosts ({total_docs} documents in all). "
        f"{rows_in_pairs} of WikiContradict's 253 rows put their two contradicting claims in two passages; they make "
        f"{n} distinct pairs of documents, the pairs counted here. The 51 rows whose two claims sit in one passage "
        "are in the corpus but cannot be found by comparing documents. The audit's defaults, fixed before this run "
        "and not changed after it; nothing here was tuned. The extractive reader only grades a conflict's sureness "
        "(severity high when it answers the derived question from both sentences)"
        + (", and both runs have the same findings. " if same else "; the two runs' findings differ. ")
        + "A pair is found when a conflict finding's documents are exactly its two; the finding names the two claims "
        "when its two sentences and values state a row's two contradicting claims, read by hand "
        "(`benchmarks/labels/audit_wikicontradict.json`; a finding between near-copies of a row's two passages, "
        "which the data also holds, counts for precision but not as finding a pair). Precision: of the conflict "
        "findings naming a WikiContradict document, the share naming the two claims of one row. The other text's "
        "own conflicts are rated per 1,000 of its documents; whether they are false is the hand reading of the same "
        "findings on the clean HotpotQA corpus (its section, read by hand). \"audit s\": the audit's wall time, on "
        "2 cores shared with other jobs. Only dates, numbers and quantities can conflict in the audit (names and "
        "yes/no claims are not compared), which bounds what it can find here.\n\n"
        f"{table}\n\n{len(mirrored)} of the pairs are found as mirrors instead (two near-copies that differ by a "
        "negation or the order of words, not by a value; a mirror's documents are not compared for conflicts).\n\n"
        f"The conflict findings naming a WikiContradict document (reader on):\n\n"
        f"{chr(10).join(listing) or '- none'}\n"
    )
    publish_section("results/audit.md", "audit-wikicontradict",
                    "Real contradictions (WikiContradict in other Wikipedia text)", body, write=args.write)


if __name__ == "__main__":
    main()
