"""Milliseconds per gradient epoch of the data-importance estimator (the paper's Section 3.5 shape).

Synthetic validation data: N tuples x 50 retrieved items (every position its own item), K = 10,
binary utilities, items grouped into 1,000 sources; M = N * 50 positions. One epoch = the
source gradients over all tuples (what each of the 50 optimisation steps computes).

    python benchmarks/importance.py                 # 50k, 500k, 5M, 50M; writes docs/benchmarks.md
    python benchmarks/importance.py --sizes 50000 --no-write
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before numba starts its OpenMP threads

import argparse  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402

from ragsieve.importance.data import synthetic  # noqa: E402
from ragsieve.importance.multilinear import unchecked_gradient_sums  # noqa: E402

# Reference figures quoted for the authors' Rust implementation (rayon, exact Algorithm 1),
# median ms per epoch with 1 / 2 threads on an idle machine of this kind. NOT measured here.
REFERENCE_MS = {
    50_000: (6.3, 3.5),
    500_000: (64.0, 34.0),
    5_000_000: (679.0, 339.0),
    50_000_000: (7615.0, 4193.0),
}


def time_epochs(data, weights, threads: int, repeats: int, method: str) -> tuple[list[float], list[float]]:
    """Wall-clock and process-CPU milliseconds of ``repeats`` epochs (after one warm-up call)."""
    # the unchecked epoch DataImportance.fit runs after validating its data once; the public
    # gradient_sums would add an O(M) validation to every timed call
    unchecked_gradient_sums(data, weights, k=10, n_jobs=threads, method=method, epsilon=1e-3)  # warm-up / compile
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        unchecked_gradient_sums(data, weights, k=10, n_jobs=threads, method=method, epsilon=1e-3)
        wall.append((time.perf_counter() - start) * 1000.0)
        cpu.append((time.process_time() - start_cpu) * 1000.0)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50_000, 500_000, 5_000_000, 50_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--huge", type=int, default=100_000_000,
                        help="Also time one 1-thread epoch at this size to show memory stays linear (0: skip).")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    threads = [t for t in args.threads if t <= numba.config.NUMBA_NUM_THREADS]
    rows = []
    loads = []
    for m in args.sizes:
        n = m // 50
        data = synthetic(n, list_len=50, n_sources=1000, seed=0)
        weights = np.random.default_rng(0).uniform(0.2, 0.8, size=1000)
        stats = {}
        for method in ("exact", "approx"):
            for t in threads:
                loads.append(os.getloadavg()[0])
                ts, cpu = time_epochs(data, weights, t, args.repeats, method)
                stats[(method, t)] = (min(ts), float(np.median(ts)))
                stats[("cpu", method, t)] = (min(cpu), float(np.median(cpu)))
                print(f"M={m:>11,} {method:6s} threads={t}: min {min(ts):9.1f} ms  "
                      f"median {np.median(ts):9.1f} ms  (cpu median {np.median(cpu):9.1f} ms)", flush=True)
        rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        ref = REFERENCE_MS.get(m, (float("nan"), float("nan")))
        row = [f"{m:,}"]
        for t in threads:
            mn, md = stats[("exact", t)]
            row.append(f"{mn:,.1f} / {md:,.1f}")
        for t in threads:
            row.append(f"{ref[t - 1]:,}" if t <= 2 else "")
        for t in threads:
            mn, md = stats[("approx", t)]
            row.append(f"{mn:,.1f} / {md:,.1f}")
        cpu_mn, cpu_md = stats[("cpu", "exact", 1)]
        row.append(f"{cpu_mn:,.1f} / {cpu_md:,.1f}")
        row.append(f"{ref[0] / stats[('exact', 1)][1]:.1f}x / {ref[0] / cpu_md:.1f}x")
        row.append(f"{rss_gb:.2f}")
        rows.append(row)
        del data
    huge_line = ""
    if args.huge:
        data = synthetic(args.huge // 50, list_len=50, n_sources=1000, seed=0)
        weights = np.random.default_rng(0).uniform(0.2, 0.8, size=1000)
        wall, cpu = time_epochs(data, weights, 1, 1, "exact")
        rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        data_gb = sum(a.nbytes for a in (data.offsets, data.item, data.source, data.utility)) / 2**30
        huge_line = (
            f"\n\nM = {args.huge:,}: one exact epoch on 1 thread took {wall[0]:,.0f} ms wall / {cpu[0]:,.0f} ms CPU; "
            f"the arrays take {data_gb:.2f} GiB and the process peaked at {rss_gb:.2f} GiB RSS (including the "
            "generator's temporaries), so memory is linear in M and 100M positions fit easily in 24 GB."
        )
        print(huge_line, flush=True)
        del data
    if args.no_write:
        return
    from _report import markdown_table, write_section

    headers = ["M (positions)"]
    headers += [f"exact, {t} thr: min / median ms" for t in threads]
    headers += [f"quoted reference (Rust), {t} thr: median ms" for t in threads]
    headers += [f"approx eps=1e-3, {t} thr: min / median ms" for t in threads]
    headers += ["exact, 1 thr: process CPU ms min / median",
                "1-thread speed-up vs reference median (wall / CPU)", "peak RSS of the process so far (GiB)"]
    body = (
        "Synthetic data shaped as the paper's Section 3.5: N tuples x 50 retrieved items, every position its "
        "own item, items assigned uniformly to 1,000 sources, binary utilities (P(1) = 0.5, float32), source "
        "weights uniform in [0.2, 0.8], K = 10. One epoch = the source-level gradient over all tuples "
        "(`ragsieve.importance.multilinear.unchecked_gradient_sums`, the epoch `DataImportance.fit` runs after "
        f"checking its data once; numba `prange` over chunks of tuples). {args.repeats} timed "
        "repeats after one warm-up call; threads set with `numba.set_num_threads`, OpenMP layer with "
        "`OMP_WAIT_POLICY=PASSIVE`.\n\n"
        "The reference columns are figures quoted for the authors' Rust implementation on an idle machine "
        "of this kind; they were **not measured by this script**, so the speed-up column compares our median "
        "with a number taken under different load. The crate is not on PyPI but it does build offline with "
        "Debian's librust-* crates; `benchmarks/importance_vs_rust.py` measures both side by side on the same "
        "machine. 1-minute load average during the run: "
        f"{min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} cores"
        + (
            " (other jobs shared the cores, so 2-thread figures in particular are pessimistic)"
            if max(loads) > 1.5
            else ""
        )
        + ". The process-CPU column (`time.process_time`, single thread) is the time "
        "the epoch actually ran on a core, i.e. what an idle machine would show for one thread.\n\n"
        + markdown_table(headers, rows) + huge_line
    )
    write_section("benchmarks.md", "importance-epoch", "Data importance: ms per gradient epoch", body)


if __name__ == "__main__":
    main()
