"""Write one benchmark's or experiment's section into its page of the docs.

Speed goes to ``docs/benchmarks.md``; accuracy and quality go to one page per sieve stage or
topic under ``docs/results/`` (the pages are listed in :data:`PAGES`, in the order of the sieve's
stages). ``docs/results.md`` is the hand-written one-screen summary that links into those pages;
no script writes it.

Each script owns a section delimited by HTML comments and rewrites only that section, so
scripts can run in any order and never clobber each other's numbers. Every section is
stamped with the exact command, the machine facts and the date. Relative links in a body are
written relative to ``docs/`` (``img/plot.png``); they are rebased for the page's folder.

The rest of the scripts' shared harness sits beside this module: ``_data.py`` (JSONL readers and
resumable answer caches), ``_stats.py`` (the Wilson and bootstrap intervals, and how reports print
them) and ``_models.py`` (the answering models and their llm settings). A script run as
``python benchmarks/<name>.py`` imports them as top-level modules (``from _report import ...``); one
that other scripts or the tests import as ``benchmarks.<name>`` imports them as ``benchmarks._report``.
``tests/test_benchmarks_hygiene.py`` checks that no script keeps its own copy of these helpers.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from ragsieve.errors import RagsieveError

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SHARED_DATA = ROOT.parent / "shared" / "data"


def machine_facts() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = "unknown"
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem_gb:.0f} GiB RAM, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}, commit {commit or 'uncommitted'}"
    )


def command_line() -> str:
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(ROOT):
        script = script.relative_to(ROOT)
    return shlex.join(["python", str(script), *sys.argv[1:]])


class ReportPage(NamedTuple):
    """A page that benchmark scripts write sections into."""

    title: str
    intro: str


_RESULTS_NOTE = (
    "Each generated section below is written by the script named in its `Command:` line (through "
    "`benchmarks/_report.py`) and carries the exact command, date and machine; rerun the command to "
    "refresh it. A section without a `Command:` line is a reading of the generated ones, written by "
    "hand, and says so. Numbers below the papers' are expected with the bundled 135M model; only measured "
    "numbers appear here. The one-screen summary is [Results](../results.md)."
)

# Result pages in the order of the sieve's stages (route, need, retrieve, judge, poison, filter,
# select, generate, verify), then the task-adaptive preset; the end-to-end page comes first
# because the summary's headline figures come from it.
RESULT_PAGES: dict[str, ReportPage] = {
    "results/sieve-vs-plain-rag.md": ReportPage(
        "The sieve vs plain RAG",
        "End to end, the whole sieve against plain RAG and no retrieval on the same questions (the eval "
        "harness, `benchmarks/eval_sieve.py`): accuracy, coverage, abstention, selective accuracy, "
        "faithfulness, citations and seconds per question.",
    ),
    "results/retrieval-and-routing.md": ReportPage(
        "Retrieval and routing",
        "The route and retrieve stages: the query router, routed vs global search, and retrieval quality "
        "of dense, sparse and hybrid search and of the storage backends.",
    ),
    "results/retrieval-need.md": ReportPage(
        "Retrieval need",
        "The need stage: which signal decides best whether a question needs retrieval.",
    ),
    "results/source-weights.md": ReportPage(
        "Source weights (data importance)",
        "Source weights learned by data importance, used by retrieval (`retrieval.use_source_weights`).",
    ),
    "results/relevance-judge.md": ReportPage(
        "Relevance judge",
        "The judge stage: the trained retrieval evaluator that scores each candidate's relevance.",
    ),
    "results/knowledge-poisoning.md": ReportPage(
        "Knowledge poisoning",
        "The poison stage and the red-team harness: attack success by defence, and what the poison "
        "check drops on corpora without an attack.",
    ),
    "results/injection.md": ReportPage(
        "Indirect prompt injection",
        "The injection stage: the sentence classifier on held-out attacks and ordinary corpora, and planted "
        "instructions in retrieved passages, answered by plain RAG and the sieve with and without the check.",
    ),
    "results/knowledge-filtering.md": ReportPage(
        "Knowledge filtering",
        "The filter stage: knowledge filters and fusion on classification tasks, and the label scorers they use.",
    ),
    "results/chain-of-evidence.md": ReportPage(
        "Chain of evidence",
        "The select stage: ScopeCoE's chain-of-evidence selection on HotpotQA.",
    ),
    "results/decoding.md": ReportPage(
        "Decoding",
        "The generate stage: repetition in the bundled model's answers and the cut at the first repeat.",
    ),
    "results/reader.md": ReportPage(
        "Extractive reader",
        "The extractive QA reader (`ragsieve.text.reader`): the span of a passage that answers the question, or "
        "no answer; fine-tuned here from the bundled MiniLM, scored under domain shift against the rule reader.",
    ),
    "results/verification.md": ReportPage(
        "Verification",
        "The verify stage: how well each claim judge separates supported from unsupported claims.",
    ),
    "results/conflicts.md": ReportPage(
        "Conflicting sources",
        "The conflict stage: whether passages that disagree on the asked value are noticed (WikiContradict, "
        "ConflictQA) and how often agreeing passages are wrongly flagged (SQuAD 2.0, HotpotQA).",
    ),
    "results/calibration.md": ReportPage(
        "Calibrated abstention",
        "Risk-coverage of the sieve against the best confidence baseline of plain RAG, abstention thresholds "
        "calibrated to a target error rate (Learn then Test) with the split simulation, and faithfulness "
        "under a judge independent of the sieve's verifier.",
    ),
    "results/task-adaptive.md": ReportPage(
        "Task-adaptive preset",
        "The task-adaptive preset's stages: the task router, HyDE, the CRAG-style corrective retrieval "
        "on PopQA and long-form reflection.",
    ),
    "results/audit.md": ReportPage(
        "Corpus audit",
        "`ragsieve audit`: the findings it reports on a corpus where nothing was planted, each read and "
        "classified by hand, as false findings per 1,000 documents.",
    ),
}

PAGES: dict[str, ReportPage] = {
    "benchmarks.md": ReportPage(
        "Benchmarks",
        "Every section is written by a script under `benchmarks/` and carries the exact command, date and "
        "machine. Machines here are noisy: comparisons are ratios measured side by side in one run, "
        "reported as min/median over repeats.",
    ),
    **RESULT_PAGES,
}

SUMMARY_PAGE = "results.md"


class ReportPageError(RagsieveError):
    """A section was sent to a page that is not a report page, or to the wrong page."""


def _check_page(doc: str) -> None:
    if doc in PAGES:
        return
    known = ", ".join(PAGES)
    if doc == SUMMARY_PAGE:
        raise ReportPageError(
            "docs/results.md is the hand-written one-screen summary and takes no generated sections; "
            f"write the section to the results page of its stage instead, one of: {known}."
        )
    raise ReportPageError(
        f"docs/{doc} is not a report page. Pass one of: {known}; for a new topic, add the page to "
        "PAGES in benchmarks/_report.py and to the nav in mkdocs.yml."
    )


def _marker_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- BEGIN {re.escape(name)} -->.*?<!-- END {re.escape(name)} -->", re.S)


def _page_holding(name: str, docs_dir: Path, other_than: str) -> str | None:
    begin = f"<!-- BEGIN {name} -->"
    for page in (*PAGES, SUMMARY_PAGE):
        path = docs_dir / page
        if page != other_than and path.exists() and begin in path.read_text(encoding="utf-8"):
            return page
    return None


def _rebase_links(body: str, doc: str) -> str:
    """Rewrite links relative to ``docs/`` so that they resolve from ``docs/<doc>``."""
    depth = doc.count("/")
    if depth == 0:
        return body
    prefix = "../" * depth
    return re.sub(r"(\]\()(?![a-z][a-z0-9+.-]*:|#|/|\.\./)", lambda m: m.group(1) + prefix, body)


def write_section(doc: str, name: str, title: str, body: str, *, docs_dir: Path | None = None) -> Path:
    """Replace (or append) the section ``name`` of ``docs/<doc>`` with ``body``.

    ``doc`` must be one of :data:`PAGES` (``"benchmarks.md"`` or ``"results/<topic>.md"``); a
    section already kept on another page is refused rather than written twice.
    """
    _check_page(doc)
    docs_dir = DOCS if docs_dir is None else docs_dir
    other = _page_holding(name, docs_dir, other_than=doc)
    if other is not None:
        raise ReportPageError(
            f"section {name!r} is kept on docs/{other}, not docs/{doc}: write it to {other!r}, or move the "
            f"section with its BEGIN/END markers to docs/{doc} first."
        )
    path = docs_dir / doc
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = f"Command: `{command_line()}`  \nDate: {_dt.date.today().isoformat()}  \nMachine: {machine_facts()}\n\n"
    section = f"<!-- BEGIN {name} -->\n## {title}\n\n{stamp}{_rebase_links(body.strip(), doc)}\n<!-- END {name} -->"
    lock_path = docs_dir / f".{doc.replace('/', '-')}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text = path.read_text(encoding="utf-8") if path.exists() else _header(doc)
        pattern = _marker_pattern(name)
        text = (
            pattern.sub(lambda _m: section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section + "\n"
        )
        tmp = path.with_suffix(".md.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return path


def publish_section(doc: str, name: str, title: str, body: str, *, write: bool = True) -> None:
    """Print ``body``, then, unless ``write`` is false (a script's ``--no-write``), write it as the
    section ``name`` of ``docs/<doc>`` (:func:`write_section`)."""
    print(body)
    if write:
        write_section(doc, name, title, body)


def _header(doc: str) -> str:
    page = PAGES[doc]
    intro = page.intro if doc == "benchmarks.md" else f"{page.intro}\n\n{_RESULTS_NOTE}"
    return f"# {page.title}\n\n{intro}\n"


def markdown_table(headers: list[str], rows: list[list[object]]) -> str:
    def fmt(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
        return str(v)

    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(out)
