"""Cold `ask` (the sieve) before the first LLM call, by stage: the LLM loaded on a worker thread
while retrieval and the checks run, against the same process loading it first.

Each run is a fresh Python process (nothing warm but the OS file cache) on the demo corpus
ingested by the default `ragsieve ingest`, with the bundled models (MiniLM on ONNX Runtime,
SmolLM2-135M via llama.cpp). "loaded first" warms the LLM up before asking (the order before
the overlap); "overlapped" is what `ragsieve ask` does now. The modes alternate run by run so
the shared machine's load falls on both alike. ``--compare-src`` adds another checkout's code
(its own ingest and ask, e.g. the main branch's ``src``) as a column measured in the same run.

python benchmarks/cold_ask.py --runs 5
python benchmarks/cold_ask.py --runs 5 --compare-src ../main/src --skip-first
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

from benchmarks._report import markdown_table, write_section

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


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
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
    modes: dict[str, tuple[Path, Path | None]] = {}
    if not args.skip_first:
        modes["first"] = (index_dir, None)
    if args.compare_src is not None:
        compare_index = work / "compare-index"
        ingest(compare_index, args.compare_src.resolve())
        modes["compare"] = (compare_index, args.compare_src.resolve())
    modes["overlap"] = (index_dir, None)
    if BYTECODE_CACHE is not None:
        for src in dict.fromkeys(src for _, src in modes.values()):
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

    headers = {
        "first": "LLM loaded first (before)",
        "compare": f"`{args.compare_src}` (its own ingest, LLM loaded meanwhile)",
        "overlap": "this checkout (LLM loaded meanwhile)",
    }
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
    flags = " ".join(
        f for f in (
            f"--runs {args.runs}",
            f"--compare-src {args.compare_src}" if args.compare_src else "",
            "--skip-first" if args.skip_first else "",
            f"--settle {args.settle:g}" if args.settle else "",
            f"--bytecode-cache {args.bytecode_cache}" if args.bytecode_cache else "",
        ) if f
    )
    # idle means nothing else ran before the runs; the runs' own processes (about 1.5 cores while the
    # LLM and the embedder load) raise the average after them
    idle = load_before < 0.5
    machine = (
        f"The machine was idle before the runs: 1-min load average {load_before:.2f} before, {load_after:.1f} "
        "after (the runs' own processes count towards it)."
        if idle else
        "**The machine was shared** (other processes running): 1-min load "
        f"average {load_before:.2f} before, {load_after:.1f} after, so these are not idle-machine figures."
    )
    body = (
        f"`python benchmarks/cold_ask.py {flags}`: one question (\"{QUESTION}\") per fresh process "
        "on the demo corpus ingested by the default `ragsieve ingest` (sentence vectors stored with the index where "
        "that version stores them), default sieve, bundled MiniLM (ONNX Runtime) "
        "and SmolLM2-135M (llama.cpp). Clock from building the pipeline to the first call into the LLM "
        "(the wait for its load included); medians of "
        f"{args.runs} runs per column, the columns alternating run by run. The `generate` stage includes the wait "
        "for the model when it is still loading; `coe` is the ScopeCoE cover inside `select`, not a stage of its own. "
        + (
            "Each column's ragsieve was compiled to bytecode first, as an installed package is (and one unmeasured "
            "question per column compiled the other modules a question imports). "
            if BYTECODE_CACHE is not None else
            "Modules without compiled bytecode (a source checkout where PYTHONDONTWRITEBYTECODE is set) are "
            "compiled inside the clock. " if os.environ.get("PYTHONDONTWRITEBYTECODE") else ""
        )
        + f"{machine}\n\n"
        + markdown_table(["ms (median)", *[headers[m] for m in runs]], rows)
    )
    if not args.no_write:
        write_section("benchmarks.md", "cold-ask", "Cold ask before the first LLM call (model loaded meanwhile)", body)
    print(body)


if __name__ == "__main__":
    main()
