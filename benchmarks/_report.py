"""Write one benchmark's or experiment's section into docs/benchmarks.md or docs/results.md.

Each script owns a section delimited by HTML comments and rewrites only that section, so
scripts can run in any order and never clobber each other's numbers. Every section is
stamped with the exact command, the machine facts and the date.
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


def write_section(doc: str, name: str, title: str, body: str) -> Path:
    """Replace (or append) the section ``name`` of ``docs/<doc>`` with ``body``."""
    path = DOCS / doc
    DOCS.mkdir(exist_ok=True)
    stamp = f"Command: `{command_line()}`  \nDate: {_dt.date.today().isoformat()}  \nMachine: {machine_facts()}\n\n"
    section = f"<!-- BEGIN {name} -->\n## {title}\n\n{stamp}{body.strip()}\n<!-- END {name} -->"
    lock_path = DOCS / f".{doc}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text = path.read_text(encoding="utf-8") if path.exists() else _header(doc)
        pattern = re.compile(rf"<!-- BEGIN {re.escape(name)} -->.*?<!-- END {re.escape(name)} -->", re.S)
        text = (
            pattern.sub(lambda _m: section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section + "\n"
        )
        tmp = path.with_suffix(".md.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return path


def _header(doc: str) -> str:
    if doc == "benchmarks.md":
        return (
            "# Benchmarks\n\nEvery section is written by a script under `benchmarks/` and carries the exact "
            "command, date and machine. Machines here are noisy: comparisons are ratios measured side by side "
            "in one run, reported as min/median over repeats.\n"
        )
    return (
        "# Results\n\nEvery table is written by a script under `benchmarks/` and carries the exact command, "
        "date, machine, data split, model and sample size. Numbers below the papers' are expected with the "
        "bundled 135M model; only measured numbers appear here.\n"
    )


def markdown_table(headers: list[str], rows: list[list[object]]) -> str:
    def fmt(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
        return str(v)

    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(out)
