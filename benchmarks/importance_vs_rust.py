"""One optimisation epoch of ragsieve's DataImportance against the authors' Rust crate (RAGBooster).

Both sides run on the same data shape, one thread, interleaved (ours, then theirs, per size and
repeat) so that they share the machine's load: N tuples x 50 retrieved items, every position its
own item, items grouped into 1,000 sources, binary utilities (P(1) = 0.5), K = 10. One epoch here
is the median interval between ``DataImportance.fit``'s per-epoch callbacks (5 epochs); there,
the marginal cost ``(cost of 5 epochs - cost of 1 epoch) / 4`` of ``mle::mle_importance`` with a
grouping, which has no per-epoch hook. Either way setup done once per call (validation,
discretisation) is excluded and the epoch's own weight update and grouping are included. Wall
and process-CPU milliseconds are reported; on a shared machine the CPU column is the fairer one.

Building the Rust side offline from Debian packages (the crate is not on PyPI): install
``cargo librust-rayon-dev librust-itertools-dev librust-rand-dev librust-libc-dev`` (and
``librust-num-cpus-dev librust-pyo3-dev`` for the Python binding), point cargo at
``/usr/share/cargo/registry`` (``[source.crates-io] replace-with = "debian"``), relax the crate's
version requirements to Debian's (itertools 0.10.3, num_cpus 1.14, pyo3 0.17.3 instead of
0.10.5, 1.15, 0.18.1) and add a binary that times ``mle_importance`` (its ``src/mle`` module is used
unchanged). ``--rust-bin`` is that binary: ``BIN N THREADS REPEATS`` prints ``M,threads,wall_ms,cpu_ms``.

    python benchmarks/importance_vs_rust.py --rust-bin runs/ragbooster/target/release/epoch_time
    python benchmarks/importance_vs_rust.py --rust-bin BIN --sizes 50000 --no-write
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before numba starts its OpenMP threads

import argparse  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402

from ragsieve.importance.data import ValidationData, synthetic  # noqa: E402
from ragsieve.importance.estimator import DataImportance  # noqa: E402


def ours(data: ValidationData, group_update: str, epochs: int = 5) -> tuple[float, float]:
    """Median wall and CPU ms between DataImportance's per-epoch callbacks (1 thread)."""
    stamps: list[tuple[float, float]] = []

    def tick(epoch: int, value: float) -> None:
        stamps.append((time.perf_counter(), time.process_time()))

    est = DataImportance(k=10, epochs=epochs, learning_rate=0.1, n_jobs=1, group_update=group_update)  # type: ignore[arg-type]
    stamps.append((time.perf_counter(), time.process_time()))  # the first interval also holds fit's setup
    est.fit(data, callback=tick)
    steps = np.diff(np.asarray(stamps[1:]), axis=0) * 1000.0
    return float(np.median(steps[:, 0])), float(np.median(steps[:, 1]))


def theirs(binary: Path, m: int) -> tuple[float, float]:
    out = subprocess.run([str(binary), str(m // 50), "1", "1"], capture_output=True, text=True, check=True)
    _, _, wall, cpu = out.stdout.strip().splitlines()[-1].split(",")
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rust-bin", type=Path, required=True, help="The timing binary built from the crate.")
    parser.add_argument("--sizes", type=int, nargs="+", default=[50_000, 500_000, 5_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    numba.set_num_threads(1)
    rows = []
    loads: list[float] = []
    for m in args.sizes:
        data = synthetic(m // 50, list_len=50, n_sources=1000, seed=0)
        ours(data, "mean-gradient", epochs=2)  # compile the kernels before timing
        ours(data, "reference", epochs=2)
        got: dict[str, list[tuple[float, float]]] = {"mean-gradient": [], "reference": [], "rust": []}
        for _ in range(args.repeats):
            loads.append(os.getloadavg()[0])
            got["mean-gradient"].append(ours(data, "mean-gradient"))
            got["reference"].append(ours(data, "reference"))
            got["rust"].append(theirs(args.rust_bin, m))
        med = {k: (float(np.median([w for w, _ in v])), float(np.median([c for _, c in v]))) for k, v in got.items()}
        print(m, {k: (round(w, 1), round(c, 1)) for k, (w, c) in med.items()}, flush=True)
        rows.append(
            [f"{m:,}"]
            + [f"{med[k][0]:,.1f} / {med[k][1]:,.1f}" for k in ("mean-gradient", "reference", "rust")]
            + [f"{med['rust'][1] / med['mean-gradient'][1]:.1f}x", f"{med['rust'][1] / med['reference'][1]:.1f}x"]
        )
    if args.no_write:
        return
    from _report import markdown_table, write_section

    headers = [
        "M (positions)",
        "ragsieve, group_update=mean-gradient: wall / CPU ms",
        "ragsieve, group_update=reference: wall / CPU ms",
        "RAGBooster (Rust), grouped: wall / CPU ms",
        "CPU ratio Rust / mean-gradient",
        "CPU ratio Rust / reference",
    ]
    body = (
        "Cost of one optimisation epoch: for ragsieve the median interval between `DataImportance.fit`'s "
        "per-epoch callbacks (5 epochs), for the authors' `mle::mle_importance` (RAGBooster's Rust crate, built "
        "offline from Debian's librust-* crates; see the script's docstring for the steps) the marginal cost "
        "`(5 epochs - 1 epoch) / 4`. One thread each, interleaved per repeat, "
        f"medians of {args.repeats} repeats. Data: N tuples x 50 items, every position its own item, 1,000 "
        "sources, binary utilities P(1) = 0.5, K = 10 (the Rust side draws its own data of the same shape). "
        "The Rust epoch includes its per-item update and the regrouping over all M items; ragsieve's "
        "mean-gradient epoch updates 1,000 source weights, its reference epoch M item weights. "
        f"1-minute load average during the run: {min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} cores "
        "(other jobs shared the cores, so wall times are inflated; the CPU column is the time each epoch ran "
        "on a core).\n\n" + markdown_table(headers, rows)
    )
    write_section("benchmarks.md", "importance-vs-rust", "Data importance: ragsieve vs the authors' Rust crate", body)


if __name__ == "__main__":
    main()
