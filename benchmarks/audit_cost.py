"""What one ``ragsieve audit`` costs: wall time, peak memory and where the time goes, at 10,000 to 300,000 passages.

    nice -n 10 python benchmarks/audit_cost.py --sizes 10000 100000 300000

The corpus is the first N sentences of ``shared/data/wiki_sentences`` (corpus order, so
neighbouring sentences often come from one article): one passage per sentence, the article its
document (``doc_id`` the Wikipedia page id, title the article's), its address
``https://en.wikipedia.org/wiki/<title>``. The sentences are embedded once with the bundled
MiniLM (the default int8 embedder; vectors cached in blocks of :data:`BLOCK` sentences under
``runs/audit_cost/``, so an interrupted embedding resumes) and each size is written as an index
with those vectors (``Index.from_chunks``, not timed). Each audit then runs in a fresh process, as
the command does: ``Index.open`` with the default embedder, then :func:`ragsieve.audit.audit_index`
with the default checks (mirrors, coordinated voices, conflicts with the extractive reader). Peak
RSS is that process's ``ru_maxrss`` (the embedder's model included, since the command loads it).
The audit's progress reports time its phases (mirrors; the neighbour search; voices; the conflict
candidate pairs; reading the pairs; the reader's sureness and the rest).

Each size's measurement is saved under ``runs/audit_cost/``; ``--resume`` reuses the saved ones
(measured by the same package source) and measures only the missing sizes, so the sizes can be run in stages.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, SHARED_DATA, markdown_table, publish_section

DATA = SHARED_DATA / "wiki_sentences"
CACHE = ROOT / "runs" / "audit_cost"


def read_sentences(n: int) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    with gzip.open(DATA / "wiki300k.txt.gz", "rt", encoding="utf-8") as text, \
            gzip.open(DATA / "wiki300k_meta.tsv.gz", "rt", encoding="utf-8") as meta:
        next(meta)
        for line, row in zip(text, meta, strict=False):
            _, page, title = row.rstrip("\n").split("\t", 2)
            out.append({"text": line.strip(), "page": page, "title": title})
            if len(out) >= n:
                break
    return out


def chunks_of(rows: list[dict[str, str]]) -> list[Any]:
    from ragsieve.types import Chunk

    seen: dict[str, int] = {}
    chunks = []
    for i, r in enumerate(rows):
        position = seen.get(r["page"], 0)
        seen[r["page"]] = position + 1
        url = "https://en.wikipedia.org/wiki/" + r["title"].replace(" ", "_")
        chunks.append(Chunk(id=f"s{i}", text=r["text"], doc_id=f"wiki-{r['page']}", source="en.wikipedia.org",
                            title=r["title"], position=position, url=url))
    return chunks


BLOCK = 10_000  # sentences embedded and cached per file, so an interrupted run resumes where it stopped


def vectors_for(rows: list[dict[str, str]]) -> np.ndarray:
    """The default embedder's vectors of ``rows`` (a prefix of the corpus), cached in blocks of
    :data:`BLOCK` corpus sentences under ``runs/audit_cost/<model>/``: a larger size reuses the
    smaller sizes' blocks and a crash loses at most the block being embedded."""
    import hashlib

    from ragsieve.config import EmbedderConfig
    from ragsieve.embed import load_embedder

    embedder = load_embedder(EmbedderConfig())
    folder = CACHE / hashlib.sha256(embedder.model_name.encode()).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.txt").write_text(embedder.model_name + "\n")
    parts: list[np.ndarray] = []
    for start in range(0, len(rows), BLOCK):
        block = rows[start:start + BLOCK]
        done = [p for p in folder.glob(f"block_{start:07d}_*.npy") if not p.name.endswith(".part.npy")
                and int(p.stem.rsplit("_", 1)[1]) >= len(block)]
        path = done[0] if done else folder / f"block_{start:07d}_{len(block)}.npy"
        if not done:
            began = time.perf_counter()
            vecs = np.asarray(embedder.embed([r["text"] for r in block]), dtype=np.float32)
            partial = path.with_suffix(".part.npy")
            np.save(partial, vecs)
            partial.replace(path)
            print(f"embedded sentences {start}-{start + len(block)} in {time.perf_counter() - began:.0f} s",
                  file=sys.stderr, flush=True)
        parts.append(np.load(path)[: len(block)])
    return np.concatenate(parts) if parts else np.zeros((0, embedder.dim), dtype=np.float32)


PHASES = ("mirrors", "neighbours", "voices", "conflict candidates", "conflict pairs", "reader and rest")


def phase_seconds(marks: dict[str, tuple[float, float, int]], total: float) -> dict[str, float]:
    """Seconds per phase from the progress reports' (first, last) times after the audit's start:
    a phase runs from the previous one's last report to its own last; the conflict candidates are
    what comes before the conflict scan's first report (256 pairs read by then); the rest is after
    the conflict scan's last report (the reader's sureness of the findings, the report)."""
    out: dict[str, float] = {}
    last = 0.0
    for name, key in (("mirrors", "mirrors"), ("neighbours", "neighbours"), ("voices", "voices")):
        if key in marks:
            out[name] = marks[key][1] - last
            last = marks[key][1]
    if "conflicts" in marks:
        first, end, _ = marks["conflicts"]
        out["conflict candidates"] = first - last
        out["conflict pairs"] = end - first
        last = end
    out["reader and rest"] = total - last
    return out


def measure(index_dir: str) -> dict[str, Any]:
    """Run in a fresh process: open the index as the command does and audit it."""
    from ragsieve.audit import audit_index
    from ragsieve.index import Index

    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    with Index.open(index_dir) as index:
        opened = time.perf_counter() - start
        began = time.perf_counter()
        marks: dict[str, tuple[float, float, int]] = {}

        def progress(phase: str, done: int, total: int) -> None:
            now = time.perf_counter() - began
            if phase not in marks or done == total or done * 10 // total != marks[phase][2] * 10 // total:
                # the log an audit stopped before its end can be read from
                print(f"{now:8.1f} s  {phase} {done}/{total}", file=sys.stderr, flush=True)
            marks[phase] = (marks[phase][0] if phase in marks else now, now, done)

        report = audit_index(index, progress=progress)
    wall = time.perf_counter() - start
    return {
        "wall_s": wall, "open_s": opened, "audit_s": report.seconds, "rss_mib": resource.getrusage(
            resource.RUSAGE_SELF).ru_maxrss / 1024, "passages": report.passages, "documents": report.documents,
        "counts": report.counts(), "candidates": report.candidates,
        "phases": phase_seconds(marks, report.seconds), "load": [load_before, os.getloadavg()[0]],
        "findings": sorted([f.kind, f.evidence] for f in report.findings),
    }  # fmt: skip


def growth(results: list[dict[str, Any]], key: str = "audit_s") -> list[str]:
    """Per row after the first: the exponent ``log(time ratio) / log(size ratio)`` from the row
    before, and the one ``n log n`` growth would give over the same sizes."""
    out = [""]
    for prev, cur in zip(results, results[1:], strict=False):
        ratio = math.log(cur["passages"] / prev["passages"])
        got = math.log(cur[key] / prev[key]) / ratio
        nlogn = 1 + math.log(math.log(cur["passages"]) / math.log(prev["passages"])) / ratio
        out.append(f"{got:.2f} (n log n: {nlogn:.2f})")
    return out


def commit() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False).stdout.strip() or "uncommitted"


def package_fingerprint() -> str:
    """A hash of the installed package's source: a saved measurement is reused only by the same code
    (the commit alone misses uncommitted changes)."""
    import hashlib

    import ragsieve

    digest = hashlib.sha256()
    package = Path(ragsieve.__file__).parent
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000, 300000])
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true", help="Print the section without writing the docs.")
    parser.add_argument("--embed-only", action="store_true",
                        help="Only embed (and cache) the largest size's sentences, then stop.")
    parser.add_argument("--resume", action="store_true",
                        help="Reuse the sizes already measured (saved under runs/audit_cost/); measure the rest.")
    parser.add_argument("--note", default="", help="A paragraph added to the section (a size stopped before its end).")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    from ragsieve.index import Index

    rows = read_sentences(max(args.sizes))
    vecs = vectors_for(rows)
    if args.embed_only:
        return
    chunks = chunks_of(rows)
    saved = CACHE / "results"
    code = package_fingerprint()
    saved.mkdir(parents=True, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="audit-cost-") as tmp:
        for n in sorted(args.sizes):
            path = saved / f"audit_{n}.json"
            if args.resume and path.is_file():
                result = json.loads(path.read_text())
                if result.get("code") == code:
                    results.append(result)
                    continue
                print(f"{n}: the saved audit ran other code; measuring again", file=sys.stderr)
            folder = Path(tmp) / f"idx{n}"
            Index.from_chunks(chunks[:n], folder, embeddings=vecs[:n]).close()
            proc = subprocess.run([sys.executable, __file__, "--measure", str(folder)], stdout=subprocess.PIPE,
                                  text=True, check=True)  # its progress goes on to stderr
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            result["commit"] = commit()
            result["code"] = code
            result["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            path.write_text(json.dumps(result))
            results.append(result)
            print(json.dumps(result), file=sys.stderr, flush=True)
            shutil.rmtree(folder)  # the next, larger, index needs the disk
    publish_section("benchmarks.md", "audit-cost", "Corpus audit: time and memory", section(results, args.note),
                    write=not args.no_write)


def section(results: list[dict[str, Any]], extra: str = "") -> str:
    """The docs section of the measured ``results`` (one per size, smallest first)."""
    exponents = growth(results)
    table = markdown_table(
        ["passages", "documents", "audit (s)", "open + audit (s)", "growth exponent of the audit time",
         "peak RSS (MiB)", "candidate conflict pairs", "mirror / voice / conflict findings", "load average (1 min)"],
        [[f"{r['passages']:,}", f"{r['documents']:,}", f"{r['audit_s']:.1f}", f"{r['wall_s']:.1f}", e or "-",
          f"{r['rss_mib']:,.0f}", f"{r['candidates'].get('conflict', 0):,}",
          f"{r['counts']['mirror']} / {r['counts']['coordinated-voice']} / {r['counts']['conflict']}",
          f"{r['load'][0]:.1f} to {r['load'][1]:.1f}"]
         for r, e in zip(results, exponents, strict=True)],
    )  # fmt: skip
    phases = markdown_table(
        ["passages", *(f"{p} (s)" for p in PHASES)],
        [[f"{r['passages']:,}", *(f"{r['phases'].get(p, 0.0):.1f}" for p in PHASES)] for r in results],
    )
    phase_growth = []
    for prev, cur in zip(results, results[1:], strict=False):
        ratio = math.log(cur["passages"] / prev["passages"])
        parts = [f"{p} {math.log(cur['phases'][p] / prev['phases'][p]) / ratio:.2f}" for p in PHASES
                 if cur["phases"].get(p, 0) > 0.05 and prev["phases"].get(p, 0) > 0.05]
        phase_growth.append(f"{prev['passages']:,} to {cur['passages']:,}: {', '.join(parts)}")
    goal = next((r for r in results if r["passages"] == 100_000), None)
    verdict = ""
    if goal is not None:
        minutes = goal["wall_s"] / 60
        verdict = (f"**The 100,000-passage audit took {minutes:.1f} minutes (open + audit), "
                   f"{'under' if goal['wall_s'] <= 600 else 'over'} the goal of 10 minutes on 2 cores.**\n\n")
    commits = sorted({r.get("commit", "?") for r in results})
    top = results[-1]
    name, seconds = max(top["phases"].items(), key=lambda kv: kv[1])
    name = {"neighbours": "neighbour search"}.get(name, name)
    largest = (f"At {top['passages']:,} passages the largest phase is the {name}: {seconds:.0f} s of "
               f"{top['audit_s']:.0f} s ({seconds / top['audit_s']:.0%}). ")
    note = f"\n\n{extra}" if extra else ""
    return (
        "The first N sentences of the 300k Wikipedia sentence corpus, one passage each, the article as its "
        "document; vectors from the bundled MiniLM (int8), computed once and not timed. Each audit runs in a "
        "fresh process as `ragsieve audit` does (open the index with the default embedder, then mirrors, "
        "coordinated voices and conflicts with the extractive reader); peak RSS includes the embedder and the "
        "reader. One run per size, niced, on a 2-core machine shared with other jobs (the load average at the "
        "start and end of each audit is in the table; above 2 the audit did not have both cores to itself), "
        "so the times are an upper bound. The growth exponent is log(time ratio) / log(size ratio) from the "
        "size above; n log n growth would give the figure in brackets, linear 1.00, quadratic 2.00. "
        f"Measured at commit {', '.join(commits)}.\n\n"
        f"{verdict}{table}\n\n"
        "Where the time goes (from the audit's progress reports): the mirrors (MinHash LSH over the documents), "
        "the neighbour search (each passage's 10 nearest: an exact inner-product search over all vectors up to "
        "`exact_neighbours_up_to` = 50,000 passages, an HNSW graph built on one thread above it, the graph's "
        "building included), "
        "the voices (grouping each tight neighbourhood), the conflict candidate pairs (the neighbour pairs and "
        "the rare-name pairs: every passage's names read), reading the candidate pairs, and the reader's "
        "sureness of the findings with the report.\n\n"
        f"{phases}\n\n"
        f"Growth exponent per phase: {'; '.join(phase_growth) or '-'}.\n\n"
        f"{largest}The candidate pairs grow with the corpus, not its square (10 neighbours per passage and rare "
        "shared names). An exact neighbour search compares every passage's vector with every other's (in "
        "blocks, with BLAS), so it grows as the square of the corpus and sets the audit's growth once it "
        "dominates; above 50,000 passages the audit finds the neighbours with an HNSW graph instead, n log n, "
        "at the cost of a few missed neighbours (the report's notes say so).\n\n"
        "The findings are not a clean false-finding count. This corpus is plain Wikipedia, with no planted "
        "conflict or coordinated voice; the findings at the larger sizes have not been labelled one by one, "
        "but their evidence lines read mostly as template text (census paragraphs of US places; the year and "
        "day-of-the-year pages, whose calendar sentences differ only in the year) or as different facts that "
        "share words (two countries' GDP figures), so they grow faster than the corpus. An "
        "earlier version found two false ones at 10,000 (a mirror of one-sentence day-of-the-year pages, a "
        "conflict between \"Apollo 8\" and \"Apollo 16\"), and the rules that remove them (a mirror states "
        "the same values; a number right after a name is part of it) were added after seeing them."
        f"{note}"
    )


if __name__ == "__main__":
    main()
