"""False findings of ``ragsieve audit`` on a corpus with nothing planted: BEIR NFCorpus.

    nice -n 10 python benchmarks/audit_false_findings.py          # ingest (cached), audit, list findings
    nice -n 10 python benchmarks/audit_false_findings.py --write  # with the labels: docs/results/audit.md

NFCorpus's 3,633 PubMed abstracts (``shared/data/beir-nfcorpus``) are written as one JSONL file
(id, title, text) and ingested with the default configuration (the bundled MiniLM); the index is
cached under ``runs/audit_nfcorpus/``. The audit runs with its defaults (mirrors, coordinated
voices, conflicts with the extractive reader). Nothing was planted, so a coordinated voice or a
conflict is false unless the two abstracts really state different values for one fact, and a
mirror is false unless the documents are copies. Every finding is labelled by hand, by reading
its sentences, in ``benchmarks/labels/audit_nfcorpus.json`` (finding key -> ``true``/``false``
and why); the rate is false findings per 1,000 documents, with a 95 % Wilson interval on the
share of documents. Nothing is tuned on this set: the audit's rules and thresholds were fixed
before it ran.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import read_jsonl
from benchmarks._report import ROOT, SHARED_DATA, markdown_table, publish_section
from benchmarks._stats import wilson_interval

DATA = SHARED_DATA / "beir-nfcorpus" / "corpus.jsonl.gz"
RUNS = ROOT / "runs" / "audit_nfcorpus"
LABELS = ROOT / "benchmarks" / "labels" / "audit_nfcorpus.json"


def build_index() -> Path:
    from ragsieve.index import Index

    index = RUNS / "index"
    if Index.exists(index):
        return index
    corpus = RUNS / "corpus" / "nfcorpus"
    corpus.mkdir(parents=True, exist_ok=True)
    with open(corpus / "corpus.jsonl", "w", encoding="utf-8") as out:
        for row in read_jsonl(DATA):
            out.write(json.dumps({"id": row["id"], "title": row["title"], "text": row["text"]}) + "\n")
    Index.build(RUNS / "corpus", index).close()
    return index


def per_thousand(count: int, docs: int) -> str:
    """``count`` per 1,000 documents with the 95 % Wilson interval of ``count / docs``."""
    low, high = wilson_interval(count, docs)
    return f"{1000 * count / docs:.2f} [{1000 * low:.2f}, {1000 * high:.2f}]"


def hand_labels(path: Path, findings: list[dict[str, Any]], *, write: bool) -> dict[str, Any]:
    """The labels read by hand in ``path`` (finding key -> label); each finding without one is
    printed (key, evidence, sentences) for a person to read, and writing a section is refused
    until every finding has its label."""
    labels: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    unlabelled = [f for f in findings if key(f) not in labels]
    for f in unlabelled:
        print(json.dumps({"key": key(f), "evidence": f["evidence"], "sentences": [m["sentence"] for m in f["members"]]},
                         ensure_ascii=False))
    if unlabelled:
        print(f"{len(unlabelled)} findings without a label in {path}", file=sys.stderr)
        if write:
            raise SystemExit("label every finding before writing the section")
    return labels


def key(finding: dict[str, Any]) -> str:
    return finding["kind"] + ":" + "|".join(sorted(finding["documents"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="Write the section of docs/results/audit.md.")
    args = parser.parse_args()
    from ragsieve.audit import audit_index
    from ragsieve.index import Index

    found = RUNS / "findings.json"
    if not found.is_file():
        with Index.open(build_index()) as index:
            report = audit_index(index)
        found.write_text(report.to_json(), encoding="utf-8")
    data = json.loads(found.read_text(encoding="utf-8"))
    labels = hand_labels(LABELS, data["findings"], write=args.write)
    docs = int(data["documents"])
    rows: list[list[object]] = []
    for kind in ("mirror", "coordinated-voice", "conflict"):
        mine = [f for f in data["findings"] if f["kind"] == kind]
        false = [f for f in mine if labels.get(key(f), {}).get("true") is False]
        rows.append([kind, len(mine), per_thousand(len(mine), docs), len(mine) - len(false), len(false),
                     per_thousand(len(false), docs)])
    table = markdown_table(["finding", "found", "found per 1,000 docs [95 % CI]", "true (by reading)", "false",
                            "false per 1,000 docs [95 % CI]"], rows)
    examples = "\n".join(
        f"- {f['kind']} ({', '.join(d.split('#')[-1] for d in f['documents'])}): {labels[key(f)]['why']}"
        for f in data["findings"] if key(f) in labels
    )
    body = (
        f"BEIR NFCorpus, all {docs} documents ({data['passages']} passages after the default ingest), nothing "
        "planted; the audit's defaults, fixed before this run, and not changed after it. Each finding labelled "
        "by hand (`benchmarks/labels/audit_nfcorpus.json`): every conflict by reading its two sentences; the "
        "mirrors by comparing the two abstracts (39 are the same text, one differs in punctuation); the "
        "coordinated voices by reading each cluster's shared claims and its first members' sentences (not every "
        "member's). The interval treats findings as a share of documents (a finding names two or more). The "
        "simplest baseline, reporting nothing, has no false findings and finds nothing; this measures what the "
        "audit costs a clean corpus in false alarms.\n\n"
        f"{table}\n\nThe findings:\n\n{examples or '- none'}\n"
    )
    publish_section("results/audit.md", "audit-nfcorpus", "False findings on a clean corpus (NFCorpus)", body,
                    write=args.write)


if __name__ == "__main__":
    main()
