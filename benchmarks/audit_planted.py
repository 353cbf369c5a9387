"""Planted attacks found by ``ragsieve audit``: passages written to push a wrong answer, planted
into a clean corpus (HotpotQA paragraphs), and the share of clean documents flagged.

    nice -n 10 python benchmarks/audit_planted.py            # build (cached), audit, print the table
    nice -n 10 python benchmarks/audit_planted.py --write    # and write the section of docs/results/audit.md

The clean corpus: every distinct paragraph of the 500 HotpotQA dev (distractor) questions
(``shared/data/hotpotqa``), one document per article title, on Wikipedia's host. The targets: the
100 HotpotQA questions PoisonedRAG attacked (``shared/data/trust/poisonedrag``), each with its wrong
answer. Each writer's passages are planted, one corpus per writer, each passage its own document on
its own host:

- ``poisonedrag-gpt4``: PoisonedRAG's own 5 GPT-4 passages per question (written by others);
- ``template``: the project's :class:`ragsieve.attack.poison.TemplateWriter`, 5 per question;
- ``assert-template``: the project's :class:`ragsieve.attack.poison.AssertionWriter` from its
  templates (``templates_only=True``): the wrong answer asserted as a fact about the question's
  subject, without the question's text, 5 per question;
- ``spread``: the project's :class:`ragsieve.attack.poison.SpreadWriter` with the bundled embedder
  (5 registers chosen to lie far apart), the writer made to beat the coordinated-voice check;
- ``mirror``: the project's :class:`ragsieve.attack.poison.MirrorWriter`, 3 copies of the best
  retrieved gold paragraph with the answer replaced (targets whose paragraph is not found skipped).

The assertion writer's LLM-sampled passages are not run here (they need the generator model;
bounded runs on 2 cores): its template passages stand for it.
The audit runs with its defaults (fixed before this run) except ``use_reader=False`` (the reader
only grades a conflict's sureness, it finds none). A planted passage counts as found when its
document is a member of any finding; a clean document as flagged when it is. Intervals: 95 % Wilson.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import read_jsonl
from benchmarks._report import ROOT, SHARED_DATA, markdown_table, publish_section
from benchmarks._stats import rate_with_interval

HOTPOT = SHARED_DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"
PRAG = SHARED_DATA / "trust" / "poisonedrag"
RUNS = ROOT / "runs" / "audit_planted"
WRITERS = ("poisonedrag-gpt4", "template", "assert-template", "spread", "mirror")
PER_TARGET = {"poisonedrag-gpt4": 5, "template": 5, "assert-template": 5, "spread": 5, "mirror": 3}


def clean_chunks() -> list[Any]:
    from ragsieve.types import Chunk

    seen: dict[str, Any] = {}
    for row in read_jsonl(HOTPOT):
        for ctx in row["contexts"]:
            title = ctx["title"]
            if title in seen:
                continue
            slug = title.replace(" ", "_")
            seen[title] = Chunk(f"hp:{len(seen)}", ctx["paragraph_text"], f"hotpotqa/{slug}",
                                f"https://en.wikipedia.org/wiki/{slug}", title=title)
    return list(seen.values())


def targets() -> list[Any]:
    from ragsieve.attack.poison import Target

    return [Target(q["id"], q["question"], list(q["answers"]), q["poison_answer"])
            for q in read_jsonl(PRAG / "questions.jsonl") if q["dataset"] == "hotpotqa"]


def embedded(name: str, texts: list[str], embedder: Any) -> np.ndarray:
    path = RUNS / f"{name}.npy"
    if path.is_file():
        vectors = np.load(path, allow_pickle=False)
        if vectors.shape[0] == len(texts):
            return vectors
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    RUNS.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def planted(writer: str, goals: list[Any], embedder: Any, clean_index: Any) -> list[Any]:
    """The chunks ``writer`` plants, each its own document on its own host."""
    from ragsieve.attack.poison import AssertionWriter, MirrorWriter, SpreadWriter, TemplateWriter
    from ragsieve.types import Chunk

    out = []
    if writer == "poisonedrag-gpt4":
        wanted = {t.id for t in goals}
        for row in read_jsonl(PRAG / "corpus.jsonl"):
            target = row["id"].rsplit("_adv", 1)[0]
            if target in wanted:
                out.append(Chunk(f"plant:{row['id']}", row["text"], f"plant/{row['id']}", row["url"],
                                 title=row.get("title", "")))
        return out
    made: Any = {"template": TemplateWriter(seed=0), "assert-template": AssertionWriter(templates_only=True, seed=0),
                 "spread": SpreadWriter(embedder, seed=0), "mirror": MirrorWriter(clean_index, seed=0)}[writer]
    for t in goals:
        for i, p in enumerate(made.write(t, PER_TARGET[writer])):
            host = p.source.split("/", 1)[0] if p.source else f"{writer}{i}-{t.id[-8:].lower()}.example"
            title = str(p.metadata.get("title", "")) if p.metadata else ""
            out.append(Chunk(f"plant:{p.id}", p.text, f"plant/{writer}/{t.id}/{i}",
                             f"https://{host}/{t.id}/{i}", title=title))
    return out


def audit(name: str, chunks: list[Any], vectors: np.ndarray, embedder: Any) -> dict[str, Any]:
    from ragsieve.audit import audit_index
    from ragsieve.index import Index

    found = RUNS / f"{name}.findings.json"
    if found.is_file():
        return dict(json.loads(found.read_text(encoding="utf-8")))
    folder = RUNS / f"index-{name}"
    with Index.from_chunks(chunks, folder, embedder=embedder, embeddings=vectors) as index:
        start = time.perf_counter()
        report = audit_index(index, use_reader=False)
        print(f"{name}: {len(chunks)} passages audited in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    found.write_text(report.to_json(), encoding="utf-8")
    return dict(json.loads(report.to_json()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="Write the section of docs/results/audit.md.")
    parser.add_argument("--writers", nargs="*", default=list(WRITERS), choices=WRITERS)
    args = parser.parse_args()
    from ragsieve.embed import load_embedder
    from ragsieve.index import Index

    RUNS.mkdir(parents=True, exist_ok=True)
    embedder = load_embedder()
    clean = clean_chunks()
    clean_vectors = embedded("clean", [c.text for c in clean], embedder)
    goals = targets()
    clean_docs = {c.doc_id for c in clean}
    baseline = audit("clean", clean, clean_vectors, embedder)
    rows: list[list[object]] = []

    def flagged(report: dict[str, Any], kinds: tuple[str, ...] = ("mirror", "coordinated-voice", "conflict")
                ) -> set[str]:
        return {d for f in report["findings"] if f["kind"] in kinds for d in f["documents"]}

    def excluded(report: dict[str, Any]) -> set[str]:
        return {d for f in report["findings"] for d in f["exclude"]}

    copies = ("mirror", "coordinated-voice")
    rows.append(["none (clean corpus)", 0, "-", "-", "-",
                 rate_with_interval(len(flagged(baseline, copies) & clean_docs), len(clean_docs)),
                 rate_with_interval(len(excluded(baseline) & clean_docs), len(clean_docs)),
                 rate_with_interval(len(flagged(baseline) & clean_docs), len(clean_docs)),
                 ", ".join(f"{n} {k}" for k, n in baseline["counts"].items() if n), f"{baseline['seconds']:.0f}"])
    with Index.open(RUNS / "index-clean", embedder=embedder) as clean_index:
        for writer in args.writers:
            plants = planted(writer, goals, embedder, clean_index)
            vectors = embedded(f"plant-{writer}", [c.text for c in plants], embedder)
            report = audit(writer, clean + plants, np.vstack([clean_vectors, vectors]), embedder)
            hit, copied = flagged(report), flagged(report, copies)
            docs = [c.doc_id for c in plants]
            found = [d for d in docs if d in hit]
            found_copies = [d for d in docs if d in copied]
            by_target: dict[str, list[bool]] = {}
            for c in plants:
                target = c.id.split(":", 1)[1].rsplit("_adv", 1)[0] if writer == "poisonedrag-gpt4" else \
                    c.doc_id.split("/")[2]
                by_target.setdefault(target, []).append(c.doc_id in hit)
            sets = sum(any(v) for v in by_target.values())
            rows.append([writer, len(by_target), rate_with_interval(len(found_copies), len(docs)),
                         rate_with_interval(len(found), len(docs)), rate_with_interval(sets, len(by_target)),
                         rate_with_interval(len(copied & clean_docs), len(clean_docs)),
                         rate_with_interval(len(excluded(report) & clean_docs), len(clean_docs)),
                         rate_with_interval(len(hit & clean_docs), len(clean_docs)),
                         ", ".join(f"{n} {k}" for k, n in report["counts"].items() if n), f"{report['seconds']:.0f}"])
    table = markdown_table(["planted by", "attack sets", "planted passages in a voice or mirror [95 % CI]",
                            "planted passages in any finding", "sets with a passage found",
                            "clean documents in a voice or mirror", "clean documents to exclude",
                            "clean documents in any finding",
                            "findings", "audit s"], rows)
    body = (
        f"HotpotQA dev (distractor) paragraphs, {len(clean)} distinct articles, one document each, as the clean "
        f"corpus; {len(goals)} PoisonedRAG HotpotQA targets (question and wrong answer), each writer's passages "
        "planted into a copy of it (one corpus per writer, each passage its own document on its own host). "
        "`poisonedrag-gpt4` is PoisonedRAG's own GPT-4 passages; `template`, `assert-template`, `spread` and "
        "`mirror` are the project's writers (`ragsieve.attack.poison`; `assert-template` is the assertion "
        "writer from its templates: its LLM-sampled passages were not run). The audit's "
        "defaults (fixed before this run) with `use_reader=False` (the reader grades a conflict's sureness, it "
        "finds none). A planted passage is found when its document is a member of a finding (a coordinated voice "
        "or a mirror: the kinds meant for planted copies; or any kind, conflicts included); a clean document is "
        "flagged likewise, and \"to exclude\" when a finding's `exclude` list (what `--exclude` would leave out) names "
        "it: a mirror finding names the copies, not the original, which for the `mirror` writer is the real "
        "paragraph. Nothing here was tuned. \"audit s\": the audit's wall time, on 2 cores shared with other jobs.\n\n"
        f"{table}\n"
    )
    publish_section("results/audit.md", "audit-planted", "Planted attacks (HotpotQA paragraphs)", body,
                    write=args.write)


if __name__ == "__main__":
    main()
