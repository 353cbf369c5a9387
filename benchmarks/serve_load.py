"""Load on `ragsieve serve` over loopback, and the same mix through the library in-process.

    python benchmarks/serve_load.py                       # 50 clients, 60 s, 90% search / 10% ask
    python benchmarks/serve_load.py --duration 10 --clients 10 --no-write   # a quick look

The run starts `ragsieve serve` on the demo index with the bundled models in a subprocess and
loads the same library in this process. It then alternates `--slices` slices of each path, for
`--duration` seconds of load per path in all:
- HTTP: `--clients` asyncio+httpx clients, each looping over the demo questions (`/v1/search`
  with probability 0.9, `/v1/ask` otherwise);
- in-process: as many threads doing the same through `Engine.search` / `Engine.ask`, with the
  server's concurrency (asks on one LLM thread behind the same bounded queue; full: a 429).
Requests still running a few seconds after a slice ends are abandoned and counted apart, as are
429s. The server's RSS is sampled every 0.5 s. Percentile intervals are 95% bootstrap intervals
over requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

# Lets `python benchmarks/<script>.py` import its siblings as the `benchmarks` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, markdown_table, write_section
from ragsieve.config import PipelineConfig, apply_overrides
from ragsieve.demo import demo_corpus_dir, demo_questions

# Requests still running when a phase ends are abandoned (the client disconnects) and counted
# apart: they are the run's cut-off, not failures.
CUT = -1
GRACE_S = 5.0
# Clients wait Retry-After seconds after a 429, at most this long (the in-process phase waits this long).
RETRY_AFTER_CAP_S = 5.0


def percentile_ci(
    xs: list[float], q: float, rng: np.random.Generator, n_boot: int = 300
) -> tuple[float, float, float]:
    arr = np.asarray(xs)
    if arr.size == 0:
        return float("nan"), float("nan"), float("nan")
    boots = np.percentile(rng.choice(arr, size=(n_boot, arr.size), replace=True), q, axis=1)
    return float(np.percentile(arr, q)), float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))


def ratio_ci(
    a: list[float], b: list[float], q: float, rng: np.random.Generator, n_boot: int = 300
) -> tuple[float, float, float]:
    """p``q`` of ``a`` over p``q`` of ``b``, with a bootstrap interval resampling both."""
    xa, xb = np.asarray(a), np.asarray(b)
    if xa.size == 0 or xb.size == 0:
        return float("nan"), float("nan"), float("nan")
    pa = np.percentile(rng.choice(xa, size=(n_boot, xa.size)), q, axis=1)
    pb = np.percentile(rng.choice(xb, size=(n_boot, xb.size)), q, axis=1)
    ratios = pa / pb
    point = float(np.percentile(xa, q) / np.percentile(xb, q))
    return point, float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ensure_index(index: Path) -> None:
    from ragsieve.index import Index

    if Index.exists(index):
        return

    print(f"building the demo index at {index}", file=sys.stderr)
    Index.build(demo_corpus_dir(), index, config=PipelineConfig(index_dir=str(index)))


class Recorder:
    def __init__(self) -> None:
        self.rows: list[tuple[str, int, float, float]] = []  # endpoint, status (0 = exception), ms, t
        self.exceptions: dict[str, int] = {}
        self.lock = threading.Lock()

    def add(self, endpoint: str, status: int, ms: float, exc: BaseException | None = None) -> None:
        with self.lock:
            self.rows.append((endpoint, status, ms, time.monotonic()))
            if exc is not None:
                name = type(exc).__name__
                self.exceptions[name] = self.exceptions.get(name, 0) + 1


async def http_slice(
    url: str, args: argparse.Namespace, questions: list[str], rec: Recorder, seconds: float, seed: int
) -> None:
    import httpx

    stop_at = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)

    async def client(i: int, http: Any) -> None:
        rng = random.Random(seed * 1000 + i)
        while time.monotonic() < stop_at:
            question = rng.choice(questions)
            ask = rng.random() < args.ask_fraction
            endpoint = "ask" if ask else "search"
            body = {"question": question} if ask else {"query": question, "k": args.k}
            start = time.perf_counter()
            error: BaseException | None = None
            try:
                remaining = stop_at + GRACE_S - time.monotonic()
                resp = await asyncio.wait_for(http.post(f"/v1/{endpoint}", json=body), timeout=remaining)
                status = resp.status_code
            except asyncio.TimeoutError:
                status = CUT
            except Exception as exc:  # noqa: BLE001 - a failed request is a measured error, not a crash
                status, error = 0, exc
            rec.add(endpoint, status, (time.perf_counter() - start) * 1000, error)
            if status == 429:
                await asyncio.sleep(min(float(resp.headers.get("Retry-After", "1")), RETRY_AFTER_CAP_S))

    async with httpx.AsyncClient(base_url=url, timeout=args.request_timeout, limits=limits) as http:
        await asyncio.gather(*(client(i, http) for i in range(args.clients)))


class InProcess:
    """The library called directly, with the server's concurrency: searches on worker threads,
    asks on one LLM thread behind a bounded queue (full: a 429), abandoned at the slice end."""

    def __init__(self, args: argparse.Namespace) -> None:
        from ragsieve.serve.engine import Engine

        cfg = apply_overrides(
            PipelineConfig(index_dir=str(args.index)),
            {"llm.n_threads": args.threads, "generation.max_tokens": args.max_tokens},
        )
        self.engine = Engine(cfg)
        self.engine.warm_up()
        self.args = args
        self.llm = ThreadPoolExecutor(1, thread_name_prefix="bench-llm")
        self.pending = 0
        self.lock = threading.Lock()

    def _done(self, _: Any) -> None:
        with self.lock:
            self.pending -= 1

    def run_slice(self, questions: list[str], rec: Recorder, seconds: float, seed: int) -> None:
        args = self.args
        stop_at = time.monotonic() + seconds

        def worker(i: int) -> None:
            rng = random.Random(seed * 1000 + i)
            while time.monotonic() < stop_at:
                question = rng.choice(questions)
                ask = rng.random() < args.ask_fraction
                start = time.perf_counter()
                error: BaseException | None = None
                status = 200
                try:
                    if ask:
                        with self.lock:
                            # pending counts the running ask too; the server's queue_size excludes it
                            full = self.pending > args.queue_size
                            if not full:
                                self.pending += 1
                        if full:
                            status = 429
                        else:
                            future = self.llm.submit(self.engine.ask, question)
                            future.add_done_callback(self._done)
                            try:
                                future.result(timeout=max(stop_at + GRACE_S - time.monotonic(), 0.0))
                            except TimeoutError:
                                future.cancel()  # as a client disconnect cancels queued work
                                status = CUT
                    else:
                        self.engine.search(question, k=args.k)
                except Exception as exc:  # noqa: BLE001
                    status, error = 0, exc
                rec.add("ask" if ask else "search", status, (time.perf_counter() - start) * 1000, error)
                if status == 429:
                    time.sleep(min(RETRY_AFTER_CAP_S, max(stop_at - time.monotonic(), 0.0)))

        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(worker, range(args.clients)))

    def close(self) -> None:
        self.llm.shutdown(wait=True, cancel_futures=True)


def summarise(rec: Recorder, seconds: float, rng: np.random.Generator) -> dict[str, Any]:
    out: dict[str, Any] = {"seconds": seconds, "endpoints": {}}
    for endpoint in ("search", "ask"):
        rows = [r for r in rec.rows if r[0] == endpoint]
        ok = [r[2] for r in rows if r[1] == 200]
        out["endpoints"][endpoint] = {
            "n": len(rows),
            "ok": len(ok),
            "rejected_429": sum(r[1] == 429 for r in rows),
            "errors": sum(r[1] not in (200, 429, CUT) for r in rows),
            "cut": sum(r[1] == CUT for r in rows),
            "statuses": {str(s): sum(r[1] == s for r in rows) for s in sorted({r[1] for r in rows})},
            "rps": len(ok) / seconds if seconds else 0.0,
            "p50": percentile_ci(ok, 50, rng),
            "p95": percentile_ci(ok, 95, rng),
            "p99": percentile_ci(ok, 99, rng),
            "latencies": ok,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, default=ROOT / "runs" / "serve-load" / "demo-index")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load per path")
    parser.add_argument("--slices", type=int, default=6, help="alternate HTTP and in-process this many times")
    parser.add_argument("--baseline", type=float, default=10.0, help="seconds per path of 1-client searches (0: skip)")
    parser.add_argument("--ask-fraction", type=float, default=0.1)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
    parser.add_argument("--max-tokens", type=int, default=64, help="answer length cap (generation.max_tokens)")
    parser.add_argument("--queue-size", type=int, default=16)
    parser.add_argument("--request-timeout", type=float, default=180.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print, do not write docs/benchmarks.md")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    ensure_index(args.index)
    questions = [q["question"] for q in demo_questions()]

    config = args.index.parent / "serve-load.toml"
    config.write_text(f"[generation]\nmax_tokens = {args.max_tokens}\n", encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    server = subprocess.Popen(
        [sys.executable, "-m", "ragsieve.cli", "serve", "--index", str(args.index), "--port", str(port),
         "--threads", str(args.threads), "--queue-size", str(args.queue_size), "--config", str(config)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    samples: list[tuple[float, float]] = []
    sampling = threading.Event()
    library = InProcess(args)
    try:
        import httpx

        deadline = time.monotonic() + 300
        while True:
            if server.poll() is not None:
                raise SystemExit(f"the server exited: {server.stderr.read().decode()[-2000:] if server.stderr else ''}")
            try:
                if httpx.get(url + "/v1/health", timeout=2).json().get("status") == "ok":
                    break
            except (httpx.HTTPError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the server did not warm up within 300 s")
            time.sleep(0.5)
        rss_warm = rss_mb(server.pid)

        def sample() -> None:
            while not sampling.is_set():
                samples.append((time.monotonic(), rss_mb(server.pid)))
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        load_before = os.getloadavg()
        http_rec, inproc_rec = Recorder(), Recorder()
        http_s = inproc_s = 0.0
        slice_s = args.duration / args.slices
        # Alternating short slices of each path keep the shared machine's drifting load from
        # favouring one of them.
        for i in range(args.slices):
            t = time.monotonic()
            asyncio.run(http_slice(url, args, questions, http_rec, slice_s, seed=args.seed * 100 + i))
            http_s += time.monotonic() - t
            t = time.monotonic()
            library.run_slice(questions, inproc_rec, slice_s, seed=args.seed * 100 + i)
            inproc_s += time.monotonic() - t
        load_after = os.getloadavg()
        # One client, searches only: the per-request cost of HTTP without contention.
        solo = argparse.Namespace(**{**vars(args), "clients": 1, "ask_fraction": 0.0})
        solo_http, solo_lib = Recorder(), Recorder()
        if args.baseline > 0:
            library.args = solo
            for i in range(2):
                asyncio.run(http_slice(url, solo, questions, solo_http, args.baseline / 2, seed=10_000 + i))
                library.run_slice(questions, solo_lib, args.baseline / 2, seed=10_000 + i)
            library.args = args
        sampling.set()
        sampler.join()
        metrics = httpx.get(url + "/metrics", timeout=10).text
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        library.close()

    http = summarise(http_rec, http_s, rng)
    lib = summarise(inproc_rec, inproc_s, rng)
    rss = [r for _, r in samples if r == r]
    t0 = samples[0][0] if samples else 0.0
    windows: dict[int, list[float]] = {}
    for t, r in samples:
        if r == r:
            windows.setdefault(int((t - t0) // 10), []).append(r)
    rss_windows = ", ".join(f"{np.mean(v):.0f}" for _, v in sorted(windows.items()))
    tenth = max(1, len(rss) // 10)
    rss_first, rss_last = float(np.mean(rss[:tenth])), float(np.mean(rss[-tenth:]))
    ratios = {q: ratio_ci(http["endpoints"]["search"]["latencies"], lib["endpoints"]["search"]["latencies"], q, rng)
              for q in (50, 95)}

    def ci(t: tuple[float, float, float]) -> str:
        return f"{t[0]:.1f} [{t[1]:.1f}, {t[2]:.1f}]"

    rows = []
    for name, res in (("HTTP (ragsieve serve)", http), ("library in-process", lib)):
        for endpoint in ("search", "ask"):
            e = res["endpoints"][endpoint]
            rows.append([name, endpoint, e["n"], f"{e['rps']:.1f}", ci(e["p50"]), ci(e["p95"]), ci(e["p99"]),
                         e["errors"], e["rejected_429"], e["cut"]])
    table = markdown_table(
        ["path", "endpoint", "requests", "ok req/s", "p50 ms [95% CI]", "p95 ms [95% CI]", "p99 ms [95% CI]",
         "errors", "429s", "cut at end"], rows)
    errors = sum(http["endpoints"][e]["errors"] for e in ("search", "ask"))
    goal_p95 = ratios[95][0] <= 2.0
    baseline = _baseline(solo_http, solo_lib, rng)
    body = f"""Data: the bundled demo corpus ({len(questions)} demo questions, drawn at random per request), index built
with the default config, answers capped at {args.max_tokens} tokens; models: bundled all-MiniLM-L6-v2
(ONNX) and SmolLM2-135M-Instruct Q4_1, pipeline `{PipelineConfig().pipeline}` (the default), with
{args.threads} llama.cpp thread(s). {args.clients} concurrent clients, {args.ask_fraction:.0%} `/v1/ask` and the rest
`/v1/search` (k={args.k}); {args.duration:g} s of load per path in {args.slices} alternating slices (HTTP
slices took {http_s:.1f} s, in-process {inproc_s:.1f} s, each including up to {GRACE_S:g} s to finish);
LLM queue size {args.queue_size}. Clients back off for `Retry-After` (at most {RETRY_AFTER_CAP_S:g} s) after a 429.
Load average (1/5/15 min) before: {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f}, after:
{load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f} on {os.cpu_count()} cores (the machine is shared
with other jobs). Client exceptions over HTTP: {http_rec.exceptions or "none"}.

{table}

- Errors other than 429 over HTTP: **{errors}** (goal 0: {"met" if errors == 0 else "not met"}); HTTP status
  counts: search {http["endpoints"]["search"]["statuses"]}, ask {http["endpoints"]["ask"]["statuses"]}
  (-1: still running {GRACE_S:g} s after the phase ended, abandoned by the client).
- Search latency, HTTP over in-process: p50 ratio {ratios[50][0]:.2f} [{ratios[50][1]:.2f}, {ratios[50][2]:.2f}],
  p95 ratio {ratios[95][0]:.2f} [{ratios[95][1]:.2f}, {ratios[95][2]:.2f}]
  (goal ≤ 2: {"met" if goal_p95 else "not met"}).
{baseline}- Server RSS (sampled all through): {rss_warm:.0f} MB warm, peak {max(rss):.0f} MB; mean of the first
  tenth of the run {rss_first:.0f} MB, of the last tenth {rss_last:.0f} MB ({len(rss)} samples, every 0.5 s);
  mean per 10 s: {rss_windows} MB.
- The server's own `/metrics` after the run: LLM queue depth
  {_metric(metrics, "ragsieve_llm_queue_depth")}, 429s counted by the server
  {_metric(metrics, 'ragsieve_http_rejected_total{endpoint="/v1/ask"}')}.
"""
    print(body)
    if not args.no_write:
        write_section("benchmarks.md", "serve-load", "Service under load (`ragsieve serve`)", body)
        raw = ROOT / "runs" / "serve-load" / "raw.json"
        raw.parent.mkdir(parents=True, exist_ok=True)
        raw.write_text(
            json.dumps({"http": http_rec.rows, "inprocess": inproc_rec.rows, "rss": samples}), encoding="utf-8"
        )


def _baseline(http_rec: Recorder, lib_rec: Recorder, rng: np.random.Generator) -> str:
    http = [r[2] for r in http_rec.rows if r[1] == 200]
    lib = [r[2] for r in lib_rec.rows if r[1] == 200]
    if not http or not lib:
        return ""
    p50, p95 = ratio_ci(http, lib, 50, rng), ratio_ci(http, lib, 95, rng)
    return (
        f"- Without contention (1 client, searches only, {len(http)} HTTP / {len(lib)} in-process requests): p50 "
        f"{np.percentile(http, 50):.1f} ms over HTTP vs {np.percentile(lib, 50):.1f} ms in-process (ratio "
        f"{p50[0]:.2f} [{p50[1]:.2f}, {p50[2]:.2f}]), p95 ratio {p95[0]:.2f} [{p95[1]:.2f}, {p95[2]:.2f}].\n"
    )


def _metric(text: str, name: str) -> str:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return line.split()[-1]
    return "0"


if __name__ == "__main__":
    main()
