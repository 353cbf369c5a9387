"""A new user's first hour, run for real and recorded in docs/walkthrough.md.

Runs, in a fresh folder and a fresh home (no demo index, no ONNX cache, no config: what a fresh
clone has once ``bash scripts/install.sh`` is done), the commands a new user runs first:
``ragsieve demo``; ``ragsieve ask`` with a question the demo corpus answers and one it cannot;
``ragsieve ingest`` of a small folder holding a PDF; ``ragsieve ask`` against that index (a
question one page answers, and one on which the folder's two files disagree); ``ragsieve serve``
on 127.0.0.1 with a free port, a request to its API, its health and its page, then stops it. Each
command runs exactly as the page shows it (``bash -c`` in that folder, ``$PORT`` set), and its
real output, stdout and stderr as a terminal shows them, goes into the page with the date, the
machine and the commit.

    python scripts/walkthrough.py                 # run it and print the page
    python scripts/walkthrough.py --write         # run it, write docs/walkthrough.md and the README's excerpt
    python scripts/walkthrough.py --steps ingest,ask-pdf --keep ./wt   # some steps, folder kept

``tests/test_walkthrough.py`` checks that the page lists exactly :data:`STEPS`' commands, in order,
that each recorded output has its step's shape (:func:`shape_problems`), and (marked slow: it runs
the bundled model) that re-running the cheap steps gives those shapes again.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "walkthrough.md"
WIDTH = 80
SKIP_NOTE = "<!-- docs-test: skip: run and recorded by scripts/walkthrough.py (tests/test_walkthrough.py) -->"
ANSWERABLE = "What is graphene made of?"
UNANSWERABLE = "Who invented Teflon, and in which year?"  # the demo corpus says nothing about Teflon
PDF_QUESTION = "What is the melting point of PTFE?"
CONFLICT_QUESTION = "In which year did Roy Plunkett discover PTFE?"
# The folder a user ingests: a two-page PDF, and a note that gives another year for the discovery.
PDF_PAGES = (
    (
        "Polytetrafluoroethylene",
        "Polytetrafluoroethylene (PTFE) is a fluoropolymer of tetrafluoroethylene, sold by DuPont as Teflon.",
        "Roy Plunkett discovered PTFE by accident in 1938 at the Jackson Laboratory of DuPont in New Jersey.",
        "A cylinder of tetrafluoroethylene gas had polymerised into a white, waxy solid.",
    ),
    (
        "Properties of PTFE",
        "PTFE melts at 327 degrees Celsius and keeps its strength from minus 200 degrees up to 260 degrees.",
        "It has one of the lowest coefficients of friction of any solid, about 0.05 to 0.10.",
        "Almost no chemical attacks it, which is why it lines pipes, valves and non-stick pans.",
    ),
)
NOTE = (
    "# PTFE: a history note\n\n"
    "Roy Plunkett discovered PTFE (Teflon) in 1941 at DuPont, and the company patented the polymer that year.\n"
)


@dataclass(frozen=True)
class Step:
    """One command of the walk-through: ``id``, a title, the command as the user types it, what to
    look at in its output, and whether a re-run is cheap (seconds, for the test)."""

    id: str
    title: str
    command: str
    look: str
    cheap: bool = False
    background: bool = False  # runs until a later step stops it (the service)


STEPS: tuple[Step, ...] = (
    Step("demo", "Index the bundled demo corpus and run the sieve on two questions", "ragsieve demo",
         "the first answer cites its source; the second question is one the corpus cannot answer, and the "
         "sieve says so instead of answering"),
    Step("ask-answerable", "Ask the demo index a question it can answer", f'ragsieve ask "{ANSWERABLE}"',
         "`A:` is the answer, `[1]` its source; `caveat:` (when present) says what the checks could not "
         "confirm; the confidence and the threshold below which answers are withheld"),
    Step("ask-unanswerable", "Ask it a question it cannot answer", f'ragsieve ask "{UNANSWERABLE}"',
         "`A (abstained):` the refusal, in words: what the evidence does and does not say"),
    Step("ingest", "Index your own folder: a PDF and a note", "ragsieve ingest ./my-docs --index ./my-index",
         "how many files and chunks were indexed", cheap=True),
    Step("ask-pdf", "Ask a question one page of the PDF answers",
         f'ragsieve ask "{PDF_QUESTION}" --index ./my-index',
         "the citation names the PDF page (`teflon.pdf#page=2`)", cheap=True),
    Step("ask-conflict", "Ask a question on which your two files disagree",
         f'ragsieve ask "{CONFLICT_QUESTION}" --index ./my-index',
         "when the sources disagree the answer says so, with each side's value and source"),
    Step("serve", "Serve the index over HTTP (in the background)",
         "ragsieve serve --index ./my-index --host 127.0.0.1 --port $PORT",
         "the service's log, printed when it is stopped (last step)", cheap=True, background=True),
    Step("health", "Is it up?", "curl -s -w '\\nHTTP %{http_code}\\n' http://127.0.0.1:$PORT/v1/health",
         "HTTP 200 and whether the model is loaded", cheap=True),
    Step("api-ask", "Ask through the API",
         "curl -s -o answer.json -w 'HTTP %{http_code}\\n' http://127.0.0.1:$PORT/v1/ask "
         "-H 'Content-Type: application/json' -d '{\"question\": \"" + PDF_QUESTION + "\"}' && "
         "python3 -c 'import json; a = json.load(open(\"answer.json\")); p = a[\"presentation\"]; "
         "print(json.dumps({k: p[k] for k in (\"outcome\", \"text\", \"caveat\", \"confidence_note\", "
         "\"reasons\")}, indent=1))'",
         "HTTP 200; the answer's presentation (what the page shows), its reasons in words and their codes",
         cheap=True),
    Step("page", "Fetch the page a browser opens",
         "curl -s -o page.html -w 'HTTP %{http_code}, %{content_type}\\n' http://127.0.0.1:$PORT/ && "
         "grep -o '<title>[^<]*</title>' page.html",
         "HTTP 200: open http://127.0.0.1:$PORT/ in a browser to ask questions there", cheap=True),
    Step("stop", "Stop the service (Ctrl-C)", "kill -INT $SERVE_PID && wait $SERVE_PID",
         "the service finishes the requests in flight and exits", cheap=True),
)


# ------------------------------------------------------------------------------ the folder
def pdf_bytes(pages: tuple[tuple[str, ...], ...] = PDF_PAGES) -> bytes:
    """A small PDF, one page per tuple (a title, then lines), written by hand: no PDF writer needed."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    font = 3 + 2 * len(pages)
    for i, lines in enumerate(pages):
        page_no, content_no = 3 + 2 * i, 4 + 2 * i
        kids.append(f"{page_no} 0 R")
        ops = ["BT", "/F1 16 Tf", "72 720 Td", f"({_pdf_text(lines[0])}) Tj", "/F1 11 Tf", "0 -28 Td"]
        for line in lines[1:]:
            for part in _wrap(line, 90):
                ops += [f"({_pdf_text(part)}) Tj", "0 -16 Td"]
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_no} 0 R "
                       f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode())
        objects.append(b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(pages)} >>".encode()
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def _pdf_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width) or [""]


def make_folder(work: Path) -> None:
    """The user's folder: ``my-docs/teflon.pdf`` (two pages) and ``my-docs/history-note.md``."""
    docs = work / "my-docs"
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "teflon.pdf").write_bytes(pdf_bytes())
    (docs / "history-note.md").write_text(NOTE, encoding="utf-8")


# ------------------------------------------------------------------------------ running
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fresh_env(home: Path, port: int, keep_xdg: bool = False) -> dict[str, str]:
    """The environment of a new user: a fresh home and nothing of ours (no index, no config);
    ``keep_xdg`` keeps the ``XDG_*`` folders (a test session's own, with its caches)."""
    dropped = ("RAGSIEVE_",) if keep_xdg else ("RAGSIEVE_", "XDG_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped) and k not in ("COLUMNS", "LINES")}
    env.update(HOME=str(home), COLUMNS=str(WIDTH), PORT=str(port), PYTHONUNBUFFERED="1", NO_COLOR="1")
    return env


@dataclass
class Recorded:
    step: Step
    output: str
    seconds: float
    rc: int


def _wait_up(port: int, proc: subprocess.Popen[str], timeout: float = 300.0) -> None:
    import httpx

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            return
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2.0).status_code == 200:
                return
        time.sleep(0.5)


def run_steps(work: Path, home: Path, ids: list[str] | None = None,
              log: Callable[[str], None] = lambda s: None, keep_xdg: bool = False) -> Iterator[Recorded]:
    """Run :data:`STEPS` (or those of ``ids``, in their order) in ``work`` with ``home`` as the
    home folder; yield each with its output. The service runs from its step to ``stop``."""
    make_folder(work)
    port = free_port()
    env = fresh_env(home, port, keep_xdg)
    server: subprocess.Popen[str] | None = None
    server_started = 0.0
    server_step: Step | None = None
    try:
        for step in STEPS:
            if ids is not None and step.id not in ids:
                continue
            log(f"$ {step.command}")
            if step.background:
                server_step, server_started = step, time.monotonic()
                server = subprocess.Popen(["bash", "-c", "exec " + step.command], cwd=work, env=env, text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                env["SERVE_PID"] = str(server.pid)
                _wait_up(port, server)
                continue
            if step.id == "stop" and server is not None:
                started = time.monotonic()
                server.send_signal(signal.SIGINT)
                out, _ = server.communicate(timeout=120)
                rc = server.returncode
                server = None
                assert server_step is not None
                yield Recorded(server_step, _clean(out, port, home), round(started - server_started, 1), rc)
                yield Recorded(step, "", round(time.monotonic() - started, 1), rc)
                continue
            started = time.monotonic()
            done = subprocess.run(["bash", "-c", step.command], cwd=work, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1800)
            yield Recorded(step, _clean(done.stdout, port, home), round(time.monotonic() - started, 1), done.returncode)
    finally:
        if server is not None:
            server.kill()
            server.wait()


def _clean(text: str, port: int, home: Path) -> str:
    """The output as a reader sees it: the free port as ``$PORT``, the fresh home as ``~``, no
    trailing spaces, no carriage-return progress redraws."""
    text = text.replace(str(home), "~").replace(str(port), "$PORT")
    lines = [line.rsplit("\r", 1)[-1].rstrip() for line in text.splitlines()]
    return "\n".join(lines).strip("\n")


# ------------------------------------------------------------------------------ shapes
def shape_problems(step_id: str, output: str) -> list[str]:
    """What is missing from ``output`` for step ``step_id`` to have its recorded shape (the
    parts every run shows, whatever the model's words): an empty list when it has it."""
    problems: list[str] = []

    def need(pattern: str, what: str) -> None:
        if not re.search(pattern, output, re.MULTILINE):
            problems.append(f"{step_id}: {what} (no match for {pattern!r})")

    if step_id == "demo":
        need(r"^Q: " + re.escape(ANSWERABLE), "the first demo question")
        need(r"^A(?: \(abstained\))?: \S", "an answer or an abstention with text")
        need(r"^A \(abstained\): I can't", "the unanswerable demo question refused in words")
    elif step_id == "ask-answerable":
        need(r"^A(?: \(abstained\))?: \S", "an answer (or an abstention) with text")
        need(r"^\s+confidence \d\.\d\d on a 0-1 scale", "the confidence in words")
    elif step_id == "ask-unanswerable":
        need(r"^A \(abstained\): I can't", "a refusal in words")
    elif step_id == "ingest":
        need(r"\b[1-9]\d* chunks?\b", "the chunks indexed")
    elif step_id in ("ask-pdf", "ask-conflict"):
        need(r"^A(?: \(abstained\))?: \S", "an answer (or an abstention) with text")
        if step_id == "ask-pdf":
            need(r"teflon\.pdf", "the PDF among the candidates or the citations")
    elif step_id in ("health", "api-ask", "page"):
        need(r"^HTTP 200\b", "the service answered 200")
    for bad in ("Traceback (most recent call last)", ">= 0.", "responsive: ", "answer sentences is supported"):
        if bad in output and step_id != "api-ask":  # the API's JSON keeps the codes beside the words
            problems.append(f"{step_id}: shows {bad!r}")
    return problems


# ------------------------------------------------------------------------------ the page
def machine() -> str:
    cpu = ""
    with contextlib.suppress(OSError):
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE)
        cpu = found.group(1).strip() if found else ""
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores"
            + (f" ({cpu})" if cpu else "") + f", Python {platform.python_version()}")


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, text=True, capture_output=True).stdout.strip()

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return head + (" with uncommitted changes" if dirty else "")


def render_page(records: list[Recorded], started: dt.datetime) -> str:
    out = [
        "# Walk-through: a new user's first hour",
        "",
        "Every command below was run, in this order, by `python scripts/walkthrough.py --write` in a fresh folder",
        "with a fresh home (no demo index, no caches, no config: a fresh clone after `bash scripts/install.sh`),",
        "and its output, stdout and stderr together, is pasted as it came (the service's free port reads `$PORT`).",
        "`tests/test_walkthrough.py` checks that this page lists exactly the script's commands and that each output",
        "has the shape a re-run gives. The answers are the bundled SmolLM2-135M's own words: another machine's",
        "may differ.",
        "",
        f"- date: {started.strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {machine()}",
        f"- commit: {commit()}",
        "",
        "The folder `my-docs/` holds `teflon.pdf` (two pages: the discovery of PTFE in 1938; its properties) and",
        "`history-note.md` (which dates the discovery to 1941). The script writes both.",
        "How to read an answer (the answer, a caveat, a withdrawn draft, a conflict statement, the confidence):",
        "[the README's walk-through](index.md#reading-an-answer).",
        "",
    ]
    order = {s.id: i for i, s in enumerate(STEPS)}
    for n, rec in enumerate(sorted(records, key=lambda r: order[r.step.id]), 1):
        step = rec.step
        out += [f"## {n}. {step.title}", "", SKIP_NOTE, "```bash", step.command, "```", ""]
        if step.id == "serve":
            out += ["Its log, once it was stopped:", ""]
        if rec.output:
            out += ["```text", rec.output, "```", ""]
        status = "" if rec.rc == 0 else f", exit status {rec.rc}"
        out += [f"{rec.seconds:.1f} s{status}. What to look at: {step.look}.", ""]
    return "\n".join(out).rstrip() + "\n"


# The README's "Reading an answer" shows these steps' outputs, cut before the candidates.
README = ROOT / "README.md"
README_START = "<!-- walkthrough-excerpt:start (scripts/walkthrough.py --write) -->"
README_END = "<!-- walkthrough-excerpt:end -->"
README_STEPS = ("ask-conflict", "ask-unanswerable")


def excerpt(output: str) -> str:
    """A step's output up to its list of candidates, without the index notice on stderr."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Q: ")), 0)
    end = next((i for i, line in enumerate(lines) if line.startswith("candidates (")), len(lines))
    return "\n".join(lines[start:end]).rstrip()


def readme_block(outputs: dict[str, str]) -> str:
    body = []
    for step in STEPS:
        if step.id in README_STEPS:
            body += [f"$ {step.command}", excerpt(outputs[step.id]), "(then the candidates, sentences, timings)", ""]
    return README_START + "\n```text\n" + "\n".join(body).rstrip() + "\n```\n" + README_END


def write_readme(outputs: dict[str, str]) -> None:
    text = README.read_text(encoding="utf-8")
    start, end = text.index(README_START), text.index(README_END) + len(README_END)
    README.write_text(text[:start] + readme_block(outputs) + text[end:], encoding="utf-8")


COMMAND_BLOCK = re.compile(re.escape(SKIP_NOTE) + r"\n```bash\n(.*?)\n```", re.DOTALL)
OUTPUT_AFTER = re.compile(r"^## \d+\. .*?$\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)


def page_commands(page: str) -> list[str]:
    """The commands a walk-through page lists, in order."""
    return [m.group(1) for m in COMMAND_BLOCK.finditer(page)]


def page_outputs(page: str) -> dict[str, str]:
    """Each step's recorded output on the page, by step id (the page lists the steps in order)."""
    sections = [m.group(1) for m in OUTPUT_AFTER.finditer(page)]
    out: dict[str, str] = {}
    for step, section in zip(STEPS, sections, strict=False):
        blocks = re.findall(r"```text\n(.*?)\n```", section, re.DOTALL)
        out[step.id] = "\n".join(blocks)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true",
                        help=f"write {PAGE.relative_to(ROOT)} and the README's excerpt of it")
    parser.add_argument("--steps", default="", help="comma-separated step ids (default: all): "
                        + ", ".join(s.id for s in STEPS))
    parser.add_argument("--keep", type=Path, default=None, help="run in this folder and keep it")
    parser.add_argument("--readme-only", action="store_true",
                        help="run nothing: write the README's excerpt from the recorded page")
    args = parser.parse_args(argv)
    if args.readme_only:
        write_readme(page_outputs(PAGE.read_text(encoding="utf-8")))
        return 0
    if shutil.which("ragsieve") is None:
        parser.error("the ragsieve command is not on PATH: run bash scripts/install.sh first")
    ids = [s.strip() for s in args.steps.split(",") if s.strip()] or None
    started = dt.datetime.now(dt.timezone.utc)
    with tempfile.TemporaryDirectory(prefix="ragsieve-walkthrough-") as tmp:
        work = args.keep.resolve() if args.keep else Path(tmp) / "work"
        home = work.parent / (work.name + "-home")
        work.mkdir(parents=True, exist_ok=True)
        home.mkdir(parents=True, exist_ok=True)
        records = list(run_steps(work, home, ids, log=lambda s: sys.stderr.write(s + "\n")))
    problems = [p for r in records for p in shape_problems(r.step.id, r.output)]
    page = render_page(records, started)
    if args.write:
        if ids is not None:
            parser.error("--write records every step: leave out --steps")
        PAGE.write_text(page, encoding="utf-8")
        write_readme({r.step.id: r.output for r in records})
        sys.stderr.write(f"wrote {PAGE.relative_to(ROOT)}\n")
    else:
        sys.stdout.write(page)
    for p in problems:
        sys.stderr.write(f"shape: {p}\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
