"""Cold `ask` (the sieve): from the process start to the first model request, as a user waits, and
before the first LLM call by stage, the LLM loaded on a worker thread while retrieval and the checks
run, against the same process loading it first.

From the process start (``--served-runs``, default 5): the ``ragsieve`` command itself
(``ragsieve ask QUESTION --index IDX --llm-url URL --model served``) as a subprocess against a fake
OpenAI-compatible server on loopback (``tests/chat_server.py``: it answers at once, so the clock
holds ragsieve's own work); the clock runs from ``Popen`` to the server receiving the first
request, and the child's CPU time (all threads, ``/proc``) is read at that moment, a figure that a
shared machine's load inflates less than the wall time. One unmeasured run first reads the
files into the OS cache and compiles what is not compiled yet. Each part writes its own section of
docs/benchmarks.md ("cold-ask-start" and "cold-ask"), so ``--served-only`` leaves the other as it was.

Each run is a fresh Python process (nothing warm but the OS file cache) on the demo corpus
ingested by the default `ragsieve ingest`, with the bundled models (MiniLM on ONNX Runtime,
SmolLM2-135M via llama.cpp). "loaded first" warms the LLM up before asking (the order before
the overlap); "overlapped" is what `ragsieve ask` does now. The modes alternate run by run so
the shared machine's load falls on both alike. ``--compare-src`` adds another checkout's code
(its own ingest and ask, e.g. the main branch's ``src``) as a column measured in the same run.

python benchmarks/cold_ask.py --runs 5
python benchmarks/cold_ask.py --runs 5 --compare-src ../main/src --skip-first
python benchmarks/cold_ask.py --served-only --served-runs 5 --bytecode-cache /tmp/bc
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Lets `python benchmarks/<script>.py` import its siblings as the `benchmarks` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.chat_server import ChatServer, serve_chat

from benchmarks._report import markdown_table, write_section
from benchmarks._stats import median_bootstrap_interval

QUESTION = "When did Apollo 11 land on the Moon?"

# One cold question in a fresh process; prints a JSON line of its timings (seconds).
CHILD = r"""
import json, sys, time
start = time.perf_counter()
from ragsieve.config import PipelineConfig
from ragsieve.llm import llama_cpp
from ragsieve.sieve.pipeline import Pipeline
imported = time.perf_counter()
first_call = []
for name in ("generate", "generate_json", "continuation_logprobs", "next_token_logprobs"):
    original = getattr(llama_cpp.LlamaCppLLM, name)
    def wrapped(self, *a, _original=original, **k):
        if not first_call:
            first_call.append(time.perf_counter())
        return _original(self, *a, **k)
    setattr(llama_cpp.LlamaCppLLM, name, wrapped)
index_dir, mode, question = sys.argv[1:4]
pipe = Pipeline(PipelineConfig(index_dir=index_dir))
t0 = time.perf_counter()
load_s = 0.0
if mode == "first":
    from ragsieve.llm import load_llm
    llm = load_llm(pipe.config.llm)
    llm.warm_up()
    pipe.llm = llm
    load_s = time.perf_counter() - t0
answer = pipe.ask(question)
end = time.perf_counter()
print(json.dumps({
    "import_s": imported - start,
    "load_first_s": load_s,
    "until_first_llm_call_s": first_call[0] - t0 if first_call else None,
    "ask_s": end - t0,
    "stages_ms": answer.trace.timings_ms,
    "completion_tokens": answer.trace.completion_tokens,
    "text": answer.text,
}))
"""


# Where the children read (and write) compiled bytecode, when ``--bytecode-cache`` names one.
BYTECODE_CACHE: Path | None = None


def child_env(src: Path | None) -> dict[str, str]:
    """The environment of a child: this checkout's ragsieve, or the one under ``src``."""
    env = {**os.environ, "RAGSIEVE_INDEX": ""}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    if BYTECODE_CACHE is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(BYTECODE_CACHE)
    return env


def compile_sources(src: Path | None) -> None:
    """Compile a column's ragsieve into the bytecode cache, as installing a package does."""
    if src is None:
        import ragsieve

        src = Path(ragsieve.__file__).resolve().parent.parent
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(src / "ragsieve")],
        check=True, capture_output=True, timeout=600, env=child_env(src),
    )


def ingest(index_dir: Path, src: Path | None) -> None:
    from ragsieve.demo import demo_corpus_dir

    subprocess.run(
        [sys.executable, "-m", "ragsieve.cli", "ingest", str(demo_corpus_dir()), "--index", str(index_dir)],
        check=True, capture_output=True, timeout=600, env=child_env(src),
    )


def run_child(index_dir: Path, mode: str, src: Path | None = None) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(index_dir), "first" if mode == "first" else "overlap", QUESTION],
        capture_output=True, text=True, timeout=600, check=True, env=child_env(src),
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def ragsieve_command() -> list[str]:
    """The ``ragsieve`` console script beside this Python (what a user types), else its entry point."""
    script = Path(sys.executable).parent / "ragsieve"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from ragsieve.cli import main; main()"]


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of process ``pid`` so far (all its threads), from ``/proc``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_served(index_dir: Path, server: ChatServer, src: Path | None = None) -> dict[str, Any]:
    """One ``ragsieve ask`` against the fake server: seconds from ``Popen`` to its first request."""
    server.arrivals.clear()
    command = [*ragsieve_command(), "ask", QUESTION, "--index", str(index_dir), "--llm-url", server.url,
               "--model", "served"]
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=child_env(src))
    while not server.arrivals and proc.poll() is None:
        time.sleep(0.0005)
    cpu = cpu_seconds(proc.pid) if server.arrivals else None
    first = server.arrivals[0] - start if server.arrivals else None
    _, err = proc.communicate(timeout=600)
    end = time.perf_counter()
    if proc.returncode != 0 or first is None:
        raise RuntimeError(f"`ragsieve ask` failed ({proc.returncode}) or sent no request: {err.decode()[-2000:]}")
    return {"first_request_s": first, "cpu_at_first_request_s": cpu, "ask_s": end - start}


def served_table(runs: dict[str, list[dict[str, Any]]], headers: dict[str, str]) -> str:
    """Medians with bootstrap 95% intervals of the from-start runs, one column per checkout."""

    def cell(mode: str, key: str) -> str:
        values = [float(r[key]) * 1000 for r in runs[mode] if r[key] is not None]
        if not values:
            return "n/a"
        mid, low, high = median_bootstrap_interval(values)
        return f"{mid:.0f} [{low:.0f}, {high:.0f}]"

    rows: list[list[Any]] = [
        ["**process start to the first model request**", *[f"**{cell(m, 'first_request_s')}**" for m in runs]],
        ["CPU time of the process by then (all threads)", *[cell(m, "cpu_at_first_request_s") for m in runs]],
        ["whole command (to its exit)", *[cell(m, "ask_s") for m in runs]],
    ]
    return markdown_table(["ms, median [95% interval]", *[headers[m] for m in runs]], rows)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine_note(load_before: float, load_after: float, runs_load: str) -> str:
    """Whether the machine was idle before the runs, in words, with the load averages."""
    if load_before < 0.5:
        return (
            f"The machine was idle before the runs: 1-min load average {load_before:.2f} before, {load_after:.1f} "
            f"after ({runs_load})."
        )
    return (
        "**The machine was shared** (other processes running): 1-min load "
        f"average {load_before:.2f} before, {load_after:.1f} after, so these are not idle-machine figures."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5, help="in-process runs per column (bundled llama.cpp model)")
    parser.add_argument(
        "--served-runs", type=int, default=5,
        help="runs of the `ragsieve ask` command against the fake served model, timed from the process start "
        "(0: none)",
    )
    parser.add_argument(
        "--served-only", action="store_true", help="only the from-start runs (no bundled llama.cpp model needed)"
    )
    parser.add_argument("--index", type=Path, default=None, help="an index `ragsieve ingest` built (else the demo's)")
    parser.add_argument(
        "--compare-src", type=Path, default=None,
        help="another checkout's src/ folder (e.g. the main branch's): its own ingest and cold ask run as a "
        "column beside this one's, alternating run by run",
    )
    parser.add_argument("--skip-first", action="store_true", help="leave out the LLM-loaded-first column")
    parser.add_argument(
        "--settle", type=float, default=0.0,
        help="seconds to wait at most, after the ingests, for the 1-minute load average to fall below 0.5",
    )
    parser.add_argument("--no-write", action="store_true", help="print the table; leave docs/benchmarks.md alone")
    parser.add_argument(
        "--bytecode-cache", type=Path, default=None,
        help="compile each column's ragsieve into this folder first (PYTHONPYCACHEPREFIX), ask one unmeasured "
        "question per column, and let the children read it, as an installed package's .pyc files are read; "
        "without it, where PYTHONDONTWRITEBYTECODE is set, a source checkout compiles every module it imports "
        "inside the clock",
    )
    args = parser.parse_args()
    global BYTECODE_CACHE
    BYTECODE_CACHE = args.bytecode_cache.resolve() if args.bytecode_cache else None

    work = Path(tempfile.mkdtemp())
    index_dir = args.index
    if index_dir is None:
        index_dir = work / "demo-index"
        ingest(index_dir, None)
    columns: dict[str, tuple[Path, Path | None]] = {}
    if args.compare_src is not None:
        compare_index = work / "compare-index"
        ingest(compare_index, args.compare_src.resolve())
        columns["compare"] = (compare_index, args.compare_src.resolve())
    columns["overlap"] = (index_dir, None)
    modes: dict[str, tuple[Path, Path | None]] = {}
    if not args.served_only:
        if not args.skip_first:
            modes["first"] = (index_dir, None)
        modes.update(columns)
    served_modes = columns if args.served_runs > 0 else {}
    if BYTECODE_CACHE is not None:
        for src in dict.fromkeys(src for _, src in columns.values()):
            compile_sources(src)
        # The cache folder replaces every __pycache__ (site-packages' too): one unmeasured
        # question per column compiles what a question imports beyond ragsieve.
        for mode, (where, src) in modes.items():
            run_child(where, mode, src)
    # the ingests just before load the machine too: wait (up to --settle seconds) for the 1-minute
    # load average to fall below 0.5 so that an idle machine reads as idle
    settle_until = time.monotonic() + args.settle
    while os.getloadavg()[0] >= 0.5 and time.monotonic() < settle_until:
        time.sleep(5)
    headers = {
        "first": "LLM loaded first (before)",
        "compare": f"`{args.compare_src}` (its own ingest, LLM loaded meanwhile)",
        "overlap": "this checkout (LLM loaded meanwhile)",
    }
    flags = " ".join(
        f for f in (
            f"--runs {args.runs}" if not args.served_only else "--served-only",
            f"--served-runs {args.served_runs}",
            f"--compare-src {args.compare_src}" if args.compare_src else "",
            "--skip-first" if args.skip_first else "",
            f"--settle {args.settle:g}" if args.settle else "",
            f"--bytecode-cache {args.bytecode_cache}" if args.bytecode_cache else "",
        ) if f
    )
    compiled = (
        "Each column's ragsieve was compiled to bytecode first, as an installed package is (and one unmeasured "
        "question per column compiled the other modules a question imports). "
        if BYTECODE_CACHE is not None else
        "Modules without compiled bytecode (a source checkout where PYTHONDONTWRITEBYTECODE is set) are "
        "compiled inside the clock. " if os.environ.get("PYTHONDONTWRITEBYTECODE") else ""
    )
    command = f"`python benchmarks/cold_ask.py {flags}`. {compiled}"

    if served_modes:
        served: dict[str, list[dict[str, Any]]] = {mode: [] for mode in served_modes}
        with serve_chat() as server:
            for where, src in served_modes.values():
                run_served(where, server, src)  # unmeasured: the OS file cache and the bytecode
            load_before = os.getloadavg()[0]
            for _ in range(args.served_runs):
                for mode, (where, src) in served_modes.items():
                    served[mode].append(run_served(where, server, src))
            load_after = os.getloadavg()[0]
        served_headers = {m: headers[m].replace(", LLM loaded meanwhile", "").replace(" (LLM loaded meanwhile)", "")
                          for m in served}
        body = (
            f"{command}The `ragsieve ask` command (\"{QUESTION}\" on the demo index, default sieve, `--llm-url` a "
            "fake OpenAI-compatible server on loopback that answers at once, bundled MiniLM on ONNX Runtime for the "
            "question) as a fresh process, as a user waits for it: timed from `Popen` to the server receiving the "
            "first model request; the CPU row is the process's user and system time (all threads) at that moment, "
            "which a shared machine's load inflates less than the wall time. "
            f"Medians of {args.served_runs} runs per column (one unmeasured run first), bootstrap 95% intervals. "
            + machine_note(load_before, load_after, "the runs' own processes count towards it")
            + "\n\n" + served_table(served, served_headers)
        )
        if not args.no_write:
            write_section("benchmarks.md", "cold-ask-start", "Cold ask from the process start (served model)", body)
        print(body)

    if modes:
        load_before = os.getloadavg()[0]
        runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
        for _ in range(args.runs):
            for mode, (where, src) in modes.items():
                runs[mode].append(run_child(where, mode, src))
        load_after = os.getloadavg()[0]

        def col(mode: str, key: str) -> float:
            return median([float(r[key]) for r in runs[mode] if r[key] is not None])

        def stage(mode: str, name: str) -> float:
            return median([float(r["stages_ms"].get(name, 0.0)) for r in runs[mode]])

        names = list(dict.fromkeys(n for mode in runs for r in runs[mode] for n in r["stages_ms"]))
        load_row = ["LLM load before asking"] + [
            f"{col(m, 'load_first_s') * 1000:.0f}" if m == "first" else "0 (on a worker thread)" for m in runs
        ]
        rows: list[list[Any]] = [
            load_row,
            *[[f"stage `{n}`", *[f"{stage(m, n):.0f}" for m in runs]] for n in names],
            ["**until the first LLM call**", *[f"**{col(m, 'until_first_llm_call_s') * 1000:.0f}**" for m in runs]],
            ["whole ask (generation included)", *[f"{col(m, 'ask_s') * 1000:.0f}" for m in runs]],
            ["imports (before the clock starts)", *[f"{col(m, 'import_s') * 1000:.0f}" for m in runs]],
        ]
        # idle means nothing else ran before the runs; the runs' own processes (about 1.5 cores while the
        # LLM and the embedder load) raise the average after them
        body = (
            f"{command}One question (\"{QUESTION}\") per fresh Python process on the demo corpus ingested by the "
            "default `ragsieve ingest` (sentence vectors stored with the index where that version stores them), "
            "default sieve, bundled MiniLM (ONNX Runtime) and SmolLM2-135M (llama.cpp). Clock from building the "
            "pipeline, after the imports (the section above times the whole command from its process start), to "
            "the first call into the LLM (the wait for its load included); medians of "
            f"{args.runs} runs per column, the columns alternating run by run. The `generate` stage includes the "
            "wait for the model when it is still loading; `coe` is the ScopeCoE cover inside `select`, not a stage "
            "of its own. " + machine_note(load_before, load_after, "the runs' own processes count towards it")
            + "\n\n" + markdown_table(["ms (median)", *[headers[m] for m in runs]], rows)
        )
        if not args.no_write:
            write_section(
                "benchmarks.md", "cold-ask", "Cold ask before the first LLM call (model loaded meanwhile)", body
            )
        print(body)


if __name__ == "__main__":
    main()
