"""Cold start and ingest throughput, side by side in one run.

    python benchmarks/speed.py [--repeats 5] [--corpus src/ragsieve/demo/corpus] [--threads N]

Measures, each as min and median over ``--repeats`` runs on this machine:

* cold ``ragsieve ask --pipeline sieve`` on the demo index (built first with the default
  ``ragsieve ingest``), in a fresh process per run, split into interpreter start, imports
  (``ragsieve.cli`` and what it pulls in; ``python -X importtime`` names the largest), model
  loading (the trace's ``warm_up``), the checks before generation (route, need, retrieve, judge,
  poison, filter, select), generation and verification. The LLM is a fake OpenAI-compatible
  server on loopback that answers at once, so "before the first LLM call" is ragsieve's own cost;
* ``ragsieve --help``;
* ingest chunks/s (``Index.build`` with a warmed embedder, fresh index folder per run, router
  training included) against the same embedder alone on the same chunk texts.

Writes the ``speed`` section of docs/benchmarks.md.

``--warm`` measures instead, in one warm process with the bundled models (SmolLM2 through
llama.cpp, MiniLM), on the first ``--questions`` demo questions: the per-question cost of each
stage for the sieve and for plain RAG (generation timed at the LLM, so "checks" is everything
else), and for the sieve's :meth:`Pipeline.stream` the time from the end of the checks to the
first streamed token against the time to the full verified answer. It writes the ``speed-warm``
section.

``--eval-cache PATH --set-name NAME`` reads instead a cache of ``ragsieve.eval.harness`` (the JSONL
``ragsieve eval`` and ``benchmarks/calibration.py`` write: one record per question and configuration
with ``stage_ms`` and ``seconds``) and writes, as the ``speed-eval-NAME`` section, the per-stage
median and mean milliseconds of the sieve and of plain RAG over the first ``--eval-questions``
questions both have a record for, the checks (everything but generation) per question and the
sieve/plain ratio. No model runs; the timings are those the cached run measured.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, markdown_table, write_section  # noqa: E402

DEMO_CORPUS = ROOT / "src" / "ragsieve" / "demo" / "corpus"
QUESTION = "What is the band gap of graphene?"
# stages the sieve runs before its first LLM call (generation)
CHECKS = ("route", "need", "retrieve", "judge", "poison", "filter", "select")
GOALS = {"cold_overhead_s": 1.5, "help_s": 0.5, "ingest_ratio": 0.8, "warm_checks_s": 0.5, "sieve_over_plain": 1.5,
         "first_token_after_checks_s": 1.5}

# Runs the CLI in a fresh interpreter and reports when the interpreter started running code and
# when `import ragsieve.cli` finished, so process start and imports can be told apart.
WRAPPER = """
import json, os, sys, time
t_code = time.time()
import ragsieve.cli
t_imported = time.time()
sys.argv = ["ragsieve", *sys.argv[2:]]
try:
    ragsieve.cli.main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
with open(os.environ["SPEED_OUT"], "w") as fh:
    json.dump({"t_code": t_code, "t_imported": t_imported, "t_end": time.time(), "code": code}, fh)
"""

ANSWER = "Graphene is a zero-band-gap semimetal [1]."


class _FakeChat(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        if self.path != "/v1/chat/completions" or body.get("logprobs"):
            self._send(404, {"error": "not supported"})
            return
        content = json.dumps({"answer": "yes", "score": 1}) if body.get("response_format") else ANSWER
        self._send(200, {
            "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 9},
        })

    def _send(self, status: int, body: dict[str, Any]) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def _env() -> dict[str, str]:
    src = str(ROOT / "src")
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{src}:{path}" if path else src, "RAGSIEVE_INDEX": "", "NO_COLOR": "1"}


def stats(values: list[float]) -> tuple[float, float]:
    return min(values), statistics.median(values)


def build_demo_index(corpus: Path, index: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ragsieve.cli", "ingest", str(corpus), "--index", str(index), "--json"],
        capture_output=True, text=True, env=_env(), timeout=1800,
    )
    if result.returncode != 0:
        raise SystemExit(f"ingest failed: {result.stderr[-2000:]}")


def cold_ask(index: Path, url: str, work: Path) -> dict[str, float]:
    out = work / "wrapper.json"
    env = {**_env(), "SPEED_OUT": str(out)}
    t0 = time.time()
    result = subprocess.run(
        [sys.executable, "-c", WRAPPER, "-", "ask", QUESTION, "--index", str(index), "--pipeline", "sieve",
         "--llm-url", url, "--model", "fake", "--json"],
        capture_output=True, text=True, env=env, timeout=1800, stdin=subprocess.DEVNULL,
    )
    wall = time.time() - t0
    marks = json.loads(out.read_text())
    if result.returncode != 0 or marks["code"] not in (0, None):
        raise SystemExit(f"ask failed: {result.stderr[-2000:]}")
    timings = json.loads(result.stdout)["trace"]["timings_ms"]
    row = {
        "process start": marks["t_code"] - t0,
        "imports": marks["t_imported"] - marks["t_code"],
        "model loading": timings.get("warm_up", 0.0) / 1000,
        "checks": sum(timings.get(s, 0.0) for s in CHECKS) / 1000,
        "generation": timings.get("generate", 0.0) / 1000,
        "verification": timings.get("verify", 0.0) / 1000,
        "total wall": wall,
    }
    for stage in CHECKS:
        row[f"  {stage}"] = timings.get(stage, 0.0) / 1000
    # everything before generation: start, imports, CLI and index setup, model loading, checks
    row["before first LLM call"] = wall - row["generation"] - row["verification"] - (time.time() - marks["t_end"])
    return row


def import_profile(top: int = 8) -> list[tuple[str, float]]:
    """The largest top-level packages by cumulative import time of ``import ragsieve.cli``."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import ragsieve.cli"],
        capture_output=True, text=True, env=_env(), timeout=600,
    )
    by_package: dict[str, float] = {}
    for line in result.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s*(\S+)", line)
        if m:
            # a package's first import line holds its cumulative cost; keep the largest per package
            pkg = m.group(2).split(".")[0]
            by_package[pkg] = max(by_package.get(pkg, 0.0), int(m.group(1)) / 1e6)
    return sorted(by_package.items(), key=lambda kv: -kv[1])[:top]


def help_time() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ragsieve.cli", "--help"], capture_output=True, env=_env(), timeout=600,
                   check=True)
    return time.perf_counter() - t0


def ingest_vs_embedder(corpus: Path, work: Path, repeats: int, threads: int | None) -> dict[str, Any]:
    from ragsieve.config import EmbedderConfig, PipelineConfig
    from ragsieve.embed import load_embedder
    from ragsieve.index import Index
    from ragsieve.index.store import BuildReport

    config = PipelineConfig.model_validate({"embedder": {"threads": threads}})
    embedder = load_embedder(EmbedderConfig.model_validate({"threads": threads}))
    embedder.warm_up()
    embedder.embed(["warm-up text"] * 8)
    ingest_rates: list[float] = []
    embed_rates: list[float] = []
    n_chunks = 0
    texts: list[str] = []
    for r in range(repeats):
        target = work / f"ingest-{r}"
        shutil.rmtree(target, ignore_errors=True)
        report = BuildReport()
        t0 = time.perf_counter()
        index = Index.build(corpus, target, config=config, embedder=embedder, report=report)
        seconds = time.perf_counter() - t0
        n_chunks = len(index.chunks)
        texts = [c.text for c in index.chunks]
        index.close()
        ingest_rates.append(n_chunks / seconds)
        t0 = time.perf_counter()
        embedder.embed(texts)
        embed_rates.append(len(texts) / (time.perf_counter() - t0))
    return {"chunks": n_chunks, "ingest": ingest_rates, "embedder": embed_rates}


class TimedLLM:
    """The LLM with the time spent in answer generation (``generate``/``generate_stream``) counted,
    so a question's checks are its stages' time minus generation."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.generate_s = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.inner.generate(*args, **kwargs)
        finally:
            self.generate_s += time.perf_counter() - start

    def generate_stream(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return (yield from self.inner.generate_stream(*args, **kwargs))
        finally:
            self.generate_s += time.perf_counter() - start


def warm_profile(index: Path, n_questions: int, repeats: int) -> dict[str, Any]:
    """Per-question stage costs of the sieve and plain RAG, and streaming times, in one warm process."""
    from ragsieve.config import LLMConfig, PipelineConfig
    from ragsieve.demo import demo_questions
    from ragsieve.llm import load_llm
    from ragsieve.sieve.events import Final, StageStarted, Token
    from ragsieve.sieve.pipeline import Pipeline

    every = [q["question"] for q in demo_questions()]
    questions, warm_up_question = every[:n_questions], every[n_questions % len(every)]
    llm = TimedLLM(load_llm(LLMConfig()))
    llm.warm_up()
    out: dict[str, Any] = {"questions": len(questions), "presets": {}}
    opened: Any = None
    for preset in ("plain", "sieve"):
        pipe = Pipeline(PipelineConfig(index_dir=str(index), pipeline=preset), index=opened, llm=llm)  # type: ignore[arg-type]
        pipe.warm_up()
        opened = pipe.index
        # first-question costs (lazy caches) are not the warm cost; a question outside the measured
        # set, so no measured question hits a per-question cache
        pipe.ask(warm_up_question)
        stages: dict[str, list[float]] = {}
        totals, checks, generation = [], [], []
        for _ in range(repeats):
            for q in questions:
                llm.generate_s = 0.0
                start = time.perf_counter()
                answer = pipe.ask(q)
                total = time.perf_counter() - start
                timings = {k: v / 1000 for k, v in answer.trace.timings_ms.items() if k != "warm_up"}
                for name, sec in timings.items():
                    stages.setdefault(name, []).append(sec)
                totals.append(total)
                generation.append(llm.generate_s)
                checks.append(sum(timings.values()) - llm.generate_s)
        out["presets"][preset] = {"stages": stages, "total": totals, "checks": checks, "generation": generation}
        if preset == "sieve":
            first_after_checks, first_token, full = [], [], []
            for q in questions:
                start = time.perf_counter()
                generate_at = first = None
                for event in pipe.stream(q):
                    now = time.perf_counter() - start
                    if isinstance(event, StageStarted) and event.stage == "generate":
                        generate_at = now
                    elif isinstance(event, Token) and first is None:
                        first = now
                    elif isinstance(event, Final):
                        full.append(now)
                if first is not None and generate_at is not None:
                    first_token.append(first)
                    first_after_checks.append(first - generate_at)
            out["stream"] = {"first_after_checks": first_after_checks, "first_token": first_token, "full": full}
    return out


def warm_section(profile: dict[str, Any], load_before: tuple[float, ...], load_after: tuple[float, ...],
                 repeats: int) -> str:
    sieve, plain = profile["presets"]["sieve"], profile["presets"]["plain"]
    order = [s for s in ("route", "need", "retrieve", "judge", "poison", "filter", "select", "generate", "verify")
             if s in sieve["stages"] or s in plain["stages"]]

    def ms(values: list[float] | None) -> str:
        if not values:
            return "–"
        return f"{1000 * statistics.median(values):.0f} ({1000 * min(values):.0f})"

    rows = [[s, ms(sieve["stages"].get(s)), ms(plain["stages"].get(s))] for s in order]
    rows += [["checks (all but generation)", ms(sieve["checks"]), ms(plain["checks"])],
             ["generation (at the LLM)", ms(sieve["generation"]), ms(plain["generation"])],
             ["total per question", ms(sieve["total"]), ms(plain["total"])]]
    checks_med = statistics.median(sieve["checks"])
    ratio = statistics.median(sieve["total"]) / statistics.median(plain["total"])
    stream = profile["stream"]
    first_med = statistics.median(stream["first_after_checks"]) if stream["first_after_checks"] else float("nan")

    def verdict(ok: bool) -> str:
        return "met" if ok else "**not met**"

    return f"""Load average (1/5/15 min) before: {load_before[0]:.2f} / {load_before[1]:.2f} / {load_before[2]:.2f};
after: {load_after[0]:.2f} / {load_after[1]:.2f} / {load_after[2]:.2f} on {os.cpu_count()} cores, shared with other
work: read seconds as upper bounds. One warm process, bundled models (SmolLM2-135M through llama.cpp, MiniLM
ONNX), the demo index the default `ragsieve ingest` builds; the first {profile["questions"]} demo questions,
{repeats} repeat(s), after one warm-up question (not among them) per pipeline.

### Warm per-question cost of each stage (ms, median (min) per question)

Generation is timed at the LLM (`generate`, including the verify stage's one regeneration), so
"checks" is everything else the pipeline does for a question (the verify stage's claim scoring
included).

{markdown_table(["stage", "sieve", "plain RAG"], rows)}

### Time to the first streamed token (sieve, `Pipeline.stream`, seconds)

{markdown_table(["", "median", "min"], [
        ["first token after the checks finish (generate stage start)",
         round(first_med, 3), round(min(stream["first_after_checks"] or [float("nan")]), 3)],
        ["first token after the question", round(statistics.median(stream["first_token"] or [float("nan")]), 3),
         round(min(stream["first_token"] or [float("nan")]), 3)],
        ["full verified answer", round(statistics.median(stream["full"]), 3), round(min(stream["full"]), 3)],
    ])}

### Goals (warm)

{markdown_table(["goal", "measured", "status"], [
        [f"warm checks <= {GOALS['warm_checks_s']} s per question (sieve, demo)", f"{checks_med:.2f} s (median)",
         verdict(checks_med <= GOALS["warm_checks_s"])],
        [f"sieve <= {GOALS['sieve_over_plain']}x plain RAG's seconds per question", f"{ratio:.2f}x (medians)",
         verdict(ratio <= GOALS["sieve_over_plain"])],
        [f"first streamed token <= {GOALS['first_token_after_checks_s']} s after the checks finish",
         f"{first_med:.2f} s (median)", verdict(first_med <= GOALS["first_token_after_checks_s"])],
    ])}

What was tried for the goals not met, with side-by-side before/after figures: the hand-written
section "Speed: what was tried" below.
"""


def eval_cache_records(path: Path, configs: tuple[str, ...] = ("sieve", "plain")) -> tuple[list[str], dict[str, Any]]:
    """Question ids (in the cache's order) that every one of ``configs`` answered without error, and
    each config's record per id. A torn last line (a run still writing) is skipped; when a name was
    run with several configurations (config hashes), the one with the most records is used."""
    from ragsieve.eval.harness import EvalCache

    cache = EvalCache(path).load()
    by_hash: dict[str, dict[str, dict[str, Any]]] = {}
    order: list[str] = []
    for rec in cache.records.values():
        if rec.get("config") not in configs or rec.get("error") or "stage_ms" not in rec:
            continue
        by_hash.setdefault(f"{rec['config']}\n{rec.get('config_hash')}", {})[rec["item_id"]] = rec
        if rec["item_id"] not in order:
            order.append(rec["item_id"])
    chosen: dict[str, dict[str, dict[str, Any]]] = {}
    for key, recs in sorted(by_hash.items(), key=lambda kv: -len(kv[1])):
        chosen.setdefault(key.split("\n", 1)[0], recs)
    ids = [i for i in order if all(i in chosen.get(c, {}) for c in configs)]
    return ids, chosen


def eval_cache_section(path: Path, set_name: str, n_questions: int, skip: int = 0) -> str:
    """Per-stage warm cost of the sieve and plain RAG from an eval-harness cache (see the module doc)."""
    from ragsieve.config import SIEVE_STAGES

    ids, records = eval_cache_records(path)
    if not ids:
        raise SystemExit(f"{path} has no question answered by both the sieve and plain RAG without error")
    ids = ids[skip : skip + n_questions]
    if not ids:
        raise SystemExit(f"{path} has no question left after skipping the first {skip}")
    sieve = [records["sieve"][i] for i in ids]
    plain = [records["plain"][i] for i in ids]
    # top-level stages only: sub-timings (the select stage's "coe") are inside their stage's time
    stages = [s for s in SIEVE_STAGES if any(s in r["stage_ms"] for r in sieve + plain)]

    def per_question(recs: list[dict[str, Any]], stage: str) -> list[float]:
        return [float(r["stage_ms"].get(stage, 0.0)) for r in recs]

    def checks(rec: dict[str, Any]) -> float:
        return sum(float(v) for k, v in rec["stage_ms"].items() if k in SIEVE_STAGES and k != "generate")

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.0f} / {statistics.mean(values):.0f}"

    rows: list[list[object]] = []
    for stage in stages:
        in_plain = any(stage in r["stage_ms"] for r in plain)
        rows.append([stage, cell(per_question(sieve, stage)), cell(per_question(plain, stage)) if in_plain else "–"])
    sieve_checks = [checks(r) for r in sieve]
    plain_checks = [checks(r) for r in plain]
    sieve_total = [1000 * float(r["seconds"]) for r in sieve]
    plain_total = [1000 * float(r["seconds"]) for r in plain]
    rows += [["checks (all but generate)", cell(sieve_checks), cell(plain_checks)],
             ["total per question (`seconds`)", cell(sieve_total), cell(plain_total)]]
    per_q_ratio = [s / p for s, p in zip(sieve_total, plain_total, strict=True) if p > 0]
    ratio_rows: list[list[object]] = [
        ["total, ratio of medians", round(statistics.median(sieve_total) / statistics.median(plain_total), 2)],
        ["total, ratio of means", round(statistics.mean(sieve_total) / statistics.mean(plain_total), 2)],
        ["total, median of per-question ratios", round(statistics.median(per_q_ratio), 2)],
        ["sieve checks / sieve total (medians)",
         round(statistics.median(sieve_checks) / statistics.median(sieve_total), 2)],
        ["sieve generate / plain generate (medians)",
         round(statistics.median(per_question(sieve, "generate"))
               / max(statistics.median(per_question(plain, "generate")), 1e-9), 2)],
    ]
    partial = f" ({n_questions} asked for: the run had answered only these so far)" if len(ids) < n_questions else ""
    which = "the first" if not skip else (
        f"after the first {skip} (skipped: the run resumed on changed code, so those were answered by the code "
        "before the change),"
    )
    regenerated = sum(1 for r in sieve if int(r.get("llm_calls", 1)) > 1)
    models = sorted({str(r.get("model", "")) for r in sieve} - {""})
    try:
        shown = path.resolve().relative_to(ROOT)
    except ValueError:
        shown = path
    return f"""Source: the eval-harness cache `{shown}` ({set_name}), read by this script; no model ran here.
The timings are those the cached run measured (`stage_ms` and `seconds` of each record, warm pipelines
built once per process){", model " + ", ".join(models) if models else ""}. **That run shared the 2-core
machine with other processes** (other engineers' tests and a second measurement run), so every second is
inflated by the load and varies with it: the ratios between the sieve and plain RAG, measured on the same
questions in the same run (each question answered by both in turn), are the finding, not the seconds.
The cache does not record the code's version: these are the costs of the code that wrote the records
read here (see the skip below).

Questions: {which} {len(ids)} of the cache (in the order answered) that both the sieve and plain RAG
answered without error{partial}.

### Per-question cost of each stage (ms, median / mean over questions)

A stage a question skipped counts 0 ms. "checks" is every stage but `generate`; the `verify` stage
holds its one regeneration when it asked for one ({regenerated} of {len(ids)} sieve questions made
more than one LLM call), so the sieve's checks are an upper bound on the checks proper.
"total" is the record's `seconds` (the whole `ask`, model loading excluded).

{markdown_table(["stage", "sieve", "plain RAG"], rows)}

### Sieve against plain RAG, same questions

{markdown_table(["", "sieve / plain"], ratio_rows)}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warm", action="store_true", help="Measure the warm per-stage costs and streaming instead.")
    ap.add_argument("--questions", type=int, default=8, help="Demo questions for --warm.")
    ap.add_argument("--corpus", type=Path, default=DEMO_CORPUS, help="Folder ingested for the throughput rows.")
    ap.add_argument("--threads", type=int, default=None, help="Embedder threads (default: every core).")
    ap.add_argument("--no-write", action="store_true", help="Print the section instead of writing it.")
    ap.add_argument("--eval-cache", type=Path, default=None,
                    help="Read per-stage timings from this eval-harness cache (JSONL) instead of running anything.")
    ap.add_argument("--set-name", default="hotpotqa", help="Name of the question set in --eval-cache (section name).")
    ap.add_argument("--eval-questions", type=int, default=100, help="Questions read from --eval-cache.")
    ap.add_argument("--eval-skip", type=int, default=0,
                    help="Skip the first K questions of --eval-cache (answered before a code change).")
    args = ap.parse_args()

    if args.eval_cache is not None:
        body = eval_cache_section(args.eval_cache, args.set_name, args.eval_questions, args.eval_skip)
        if args.no_write:
            print(body)
        else:
            title = f"Warm stage costs on {args.set_name} questions (from an eval run)"
            print(write_section("benchmarks.md", f"speed-eval-{args.set_name}", title, body))
        return

    load_before = os.getloadavg()
    if args.warm:
        work = Path(tempfile.mkdtemp(prefix="ragsieve-speed-"))
        try:
            build_demo_index(DEMO_CORPUS, work / "demo-index")
            profile = warm_profile(work / "demo-index", args.questions, args.repeats)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        body = warm_section(profile, load_before, os.getloadavg(), args.repeats)
        if args.no_write:
            print(body)
        else:
            print(write_section("benchmarks.md", "speed-warm", "Warm stage costs and streamed answers", body))
        return
    work = Path(tempfile.mkdtemp(prefix="ragsieve-speed-"))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _FakeChat)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        index = work / "demo-index"
        build_demo_index(DEMO_CORPUS, index)
        cold_ask(index, url, work)  # the first run writes caches a fresh install writes once (optimised graph)
        asks = [cold_ask(index, url, work) for _ in range(args.repeats)]
        helps = [help_time() for _ in range(args.repeats)]
        imports = import_profile()
        ingest = ingest_vs_embedder(args.corpus, work, args.repeats, args.threads)
    finally:
        httpd.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()

    parts = ["process start", "imports", "model loading", "checks", *(f"  {s}" for s in CHECKS),
             "before first LLM call", "generation", "verification", "total wall"]
    ask_rows = [[p, *(round(v, 3) for v in stats([a[p] for a in asks]))] for p in parts]
    help_min, help_med = stats(helps)
    ing_min, ing_med = stats(ingest["ingest"])
    emb_min, emb_med = stats(ingest["embedder"])
    ratios = [i / e for i, e in zip(ingest["ingest"], ingest["embedder"], strict=True)]
    overhead_min = min(a["before first LLM call"] for a in asks)
    ratio_med = statistics.median(ratios)

    def verdict(ok: bool) -> str:
        return "met" if ok else "**not met**"

    body = f"""Load average (1/5/15 min) before: {load_before[0]:.2f} / {load_before[1]:.2f} / {load_before[2]:.2f};
after: {load_after[0]:.2f} / {load_after[1]:.2f} / {load_after[2]:.2f} on {os.cpu_count()} cores. The machine is shared
with other work, so read seconds as upper bounds; the min over repeats is the closest to an idle machine.
Repeats: {args.repeats}.

### Cold `ragsieve ask --pipeline sieve` on the demo index (seconds, min / median)

A fresh process per run on the index the default `ragsieve ingest` builds from the demo corpus; the
LLM is a fake OpenAI-compatible server on loopback that answers at once, so generation and
verification here are ragsieve's own cost around the LLM, not a model's.

{markdown_table(["part", "min", "median"], ask_rows)}

"Model loading" is the trace's `warm_up` (index, embedder, LLM client, every stage's model);
"checks" the route, need, retrieve, judge, poison, filter and select stages; "before first LLM call"
is the wall time up to generation (start, imports, CLI setup, loading, checks).

Largest packages imported by `import ragsieve.cli` (`python -X importtime`, cumulative seconds of each
package's first import, one run; `ragsieve` is the whole):

{markdown_table(["package", "seconds"], [[p, round(s, 3)] for p, s in imports])}

### `ragsieve --help` (seconds)

{markdown_table(["min", "median"], [[round(help_min, 3), round(help_med, 3)]])}

### Ingest throughput vs the embedder alone (chunks/s, {ingest["chunks"]} chunks of `{args.corpus.name}`)

`Index.build` with a warmed embedder into a fresh folder (loading, chunking, embedding, indexes,
router training) against `embedder.embed` on the same chunk texts, alternated per repeat; embedder
threads: {args.threads or "all cores"}.

{markdown_table(["", "min", "median"], [
        ["ingest", round(ing_min, 1), round(ing_med, 1)],
        ["embedder alone", round(emb_min, 1), round(emb_med, 1)],
        ["ratio ingest / embedder (per repeat)", round(min(ratios), 3), round(ratio_med, 3)],
    ])}

### Goals

{markdown_table(["goal", "measured", "status"], [
        [f"cold ask overhead before the first LLM call <= {GOALS['cold_overhead_s']} s (idle machine)",
         f"{overhead_min:.2f} s (min, load {load_before[0]:.1f})", verdict(overhead_min <= GOALS["cold_overhead_s"])],
        [f"`ragsieve --help` <= {GOALS['help_s']} s", f"{help_min:.2f} s (min)",
         verdict(help_min <= GOALS["help_s"])],
        [f"ingest >= {GOALS['ingest_ratio']}x the embedder's own rate", f"{ratio_med:.2f}x (median)",
         verdict(ratio_med >= GOALS["ingest_ratio"])],
    ])}

Warm per-stage costs and the time to the first streamed token are the `speed-warm` section
(`python benchmarks/speed.py --warm`). What was tried for the goals not met, with side-by-side
before/after figures: the hand-written section "Speed: what was tried" below.
"""
    if args.no_write:
        print(body)
    else:
        print(write_section("benchmarks.md", "speed", "Cold start and ingest throughput", body))


if __name__ == "__main__":
    main()
