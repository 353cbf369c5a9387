"""Wall and CPU time of ``ragsieve eval`` on the bundled demo questions, as a user runs it.

Runs the command line a user would type (defaults: the sieve, plain RAG and no retrieval,
the default faithfulness judge, the bundled models, a fresh cache) in a subprocess and records
its wall time, its CPU time (user + system of the child) and the machine's load.

    python benchmarks/eval_cli_time.py
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import markdown_table, write_section  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, default=Path.home() / ".cache" / "ragsieve" / "demo-index")
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()

    from ragsieve.demo import demo_data_path

    data = Path(str(demo_data_path("questions.jsonl")))
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["ragsieve", "eval", "--data", str(data), "--index", str(args.index),
               "--cache", str(Path(tmp) / "cache.jsonl"), "--json"]
        if args.limit:
            cmd += ["--limit", str(args.limit)]
        load_before = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"ragsieve eval failed ({proc.returncode}): {proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    shown = " ".join("QUESTIONS.jsonl" if c == str(data) else "CACHE" if c.endswith("cache.jsonl") else c for c in cmd)
    body = (
        f"`{shown}` on {'the first ' + str(args.limit) if args.limit else 'all 52'} bundled demo questions "
        "(3 configurations: sieve, plain RAG, no retrieval; default faithfulness judge; bundled SmolLM2-135M with "
        "the default threads; a fresh cache, an index already built). Acceptance goal: under 10 minutes on this "
        f"2-core machine. 1-min load average before / after: {load_before:.1f} / {os.getloadavg()[0]:.1f} "
        "(above about 1 other jobs shared the 2 cores).\n\n"
        + markdown_table(["wall time", "CPU time (user + system)", "CPU use"],
                         [[f"{wall / 60:.1f} min", f"{cpu / 60:.1f} min", f"{100 * cpu / wall:.0f}%"]])
    )
    write_section("benchmarks.md", "eval-cli-time", "`ragsieve eval` on the demo questions: wall time", body)
    print(body)


if __name__ == "__main__":
    main()
