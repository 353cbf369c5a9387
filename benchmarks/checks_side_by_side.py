"""The sieve's checks, two versions of the code side by side: warm per-question cost and the answers.

    python benchmarks/checks_side_by_side.py --before /tmp/base/src --index DIR [--questions-file Q.jsonl]
        [--questions 5] [--rounds 3]

``--before`` is the ``src`` folder of the other version (e.g. ``git archive <commit> src tests | tar -x -C
/tmp/base``; its ``tests/`` must be beside it for the fake LLM), this checkout is "after". Each round
runs one fresh process per version, alternately, so machine load hits both alike: the sieve preset on
``--index`` with the bundled embedder and a deterministic fake LLM that answers at once (the pinned
traces' ``EchoLLM``), one warm-up question (the last of the set), then the first ``--questions``
questions (the demo questions, or the ``question`` field of each line of ``--questions-file``). Per
question: the checks' milliseconds (every stage of the trace but ``generate``) and the answer with its
trace (floats to 4 digits, no timings), which must be the same in both versions.

Prints a markdown table (min over rounds per question, then the median over questions; the ratio per
round) and whether every answer and trace was identical. Writes no docs section: the before/after
comparison is quoted by hand in docs/benchmarks.md's "Speed: what was tried".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Runs in a fresh interpreter with one version's src first on the path.
CHILD = """
import json, os, sys, time
src, n, index, qfile = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path[:0] = [src, os.path.dirname(src)]
import ragsieve
assert ragsieve.__file__.startswith(src), ragsieve.__file__
from tests.test_pipeline_traces import EchoLLM, canonical
from ragsieve import Pipeline
from ragsieve.config import SIEVE_STAGES, PipelineConfig
from ragsieve.demo import demo_questions
if qfile:
    questions = [json.loads(line)["question"] for line in open(qfile, encoding="utf-8") if line.strip()]
else:
    questions = [q["question"] for q in demo_questions(include_unanswerable=True)]
pipe = Pipeline(PipelineConfig(pipeline="sieve", index_dir=index), llm=EchoLLM())
pipe.warm_up()
pipe.ask(questions[-1])
out = []
for q in questions[:n]:
    answer = pipe.ask(q)
    t = answer.trace.timings_ms
    checks = sum(v for k, v in t.items() if k in SIEVE_STAGES and k != "generate")
    out.append({"question": q, "checks_ms": checks, "canonical": canonical(answer)})
print(json.dumps(out))
"""


def run(src: Path, n: int, index: Path, questions_file: Path | None) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(src), "RAGSIEVE_INDEX": ""}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(src), str(n), str(index), str(questions_file or "")],
        capture_output=True, text=True, env=env, timeout=3600, cwd=str(src.parent),
    )
    if result.returncode != 0:
        raise SystemExit(f"{src}: {result.stderr[-3000:]}")
    return list(json.loads(result.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True, help="src folder of the version to compare against")
    ap.add_argument("--index", type=Path, required=True, help="index folder (built with the default embedder)")
    ap.add_argument("--questions-file", type=Path, default=None, help="JSONL with a 'question' field per line")
    ap.add_argument("--questions", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    arms = {"before": args.before.resolve(), "after": ROOT / "src"}
    runs: dict[str, list[list[dict[str, Any]]]] = {name: [] for name in arms}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for name, src in arms.items():
            runs[name].append(run(src, args.questions, args.index, args.questions_file))
            loads.append(os.getloadavg()[0])
    rows = []
    for name in arms:
        per_question = list(zip(*runs[name], strict=True))
        mins = [min(r["checks_ms"] for r in q) for q in per_question]
        rounds = [statistics.median(r["checks_ms"] for r in one) for one in runs[name]]
        rows.append(f"| {name} | {statistics.median(mins):.0f} | {' / '.join(f'{v:.0f}' for v in rounds)} |")
    ratios = [
        statistics.median(r["checks_ms"] for r in b) / statistics.median(r["checks_ms"] for r in a)
        for b, a in zip(runs["before"], runs["after"], strict=True)
    ]
    same = all(
        x["canonical"] == y["canonical"]
        for b, a in zip(runs["before"], runs["after"], strict=True)
        for x, y in zip(b, a, strict=True)
    )
    print("| code | checks ms per question (median over questions of the min over rounds) | median per round |")
    print("|---|---|---|")
    print("\n".join(rows))
    print(f"\nbefore / after per round: {', '.join(f'{r:.2f}' for r in ratios)}; "
          f"answers and traces identical: {same}; 1-min load average {min(loads):.1f} to {max(loads):.1f}")


if __name__ == "__main__":
    main()
