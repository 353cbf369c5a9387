"""One optimisation epoch of ragsieve's DataImportance against the authors' Rust crate (RAGBooster).

Both sides run on the same data shape, on one and on two threads, interleaved (ours, then theirs,
per size and repeat) so that they share the machine's load: N tuples x 50 retrieved items, every position its
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
``benchmarks/importance_vs_rust_epoch_time.rs`` is that binary's source (with the Cargo.toml it needs
in its header): a crate folder under ``runs/`` holding the upstream ``src/mle/`` (amsterdata/ragbooster,
commit 3402fd2), a ``src/lib.rs`` of one line ``pub mod mle;`` and this file as ``src/bin/epoch_time.rs``
builds with ``cargo build --release --offline``. The crate sizes ``n_jobs`` threads but runs on rayon's
global pool, so the binary sizes that pool to THREADS.

``--rust-python DIR`` (a folder holding the crate's Python binding, ``ragbooster.so``) also checks
that ``group_update="reference"`` reproduces the crate's ``learn_importance`` weights, on data where
30 % of the items are never retrieved and learning rates large enough to clip.

    python benchmarks/importance_vs_rust.py --rust-bin runs/ragbooster/target/release/epoch_time
    python benchmarks/importance_vs_rust.py --rust-bin BIN --rust-python runs/ragbooster/python
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


def ours(data: ValidationData, group_update: str, epochs: int = 5, threads: int = 1) -> tuple[float, float]:
    """Median wall and CPU ms between DataImportance's per-epoch callbacks."""
    stamps: list[tuple[float, float]] = []

    def tick(epoch: int, value: float) -> None:
        stamps.append((time.perf_counter(), time.process_time()))

    est = DataImportance(k=10, epochs=epochs, learning_rate=0.1, n_jobs=threads, group_update=group_update)  # type: ignore[arg-type]
    stamps.append((time.perf_counter(), time.process_time()))  # the first interval also holds fit's setup
    est.fit(data, callback=tick)
    steps = np.diff(np.asarray(stamps[1:]), axis=0) * 1000.0
    return float(np.median(steps[:, 0])), float(np.median(steps[:, 1]))


def theirs(binary: Path, m: int, threads: int = 1) -> tuple[float, float]:
    out = subprocess.run([str(binary), str(m // 50), str(threads), "1"], capture_output=True, text=True, check=True)
    _, _, wall, cpu = out.stdout.strip().splitlines()[-1].split(",")
    return float(wall), float(cpu)


def agreement(folder: Path, seeds: int = 3) -> list[list[object]]:
    """Rows: seed, learning rate, max |weight difference| of each group rule vs the crate's binding."""
    import importlib
    import sys

    sys.path.insert(0, str(folder))
    ragbooster = importlib.import_module("ragbooster")
    rows: list[list[object]] = []
    rng = np.random.default_rng(0)
    for seed in range(seeds):
        full = synthetic(60, list_len=8, n_sources=7, seed=seed, utility_dtype=np.float64)
        keep = rng.random(full.n_positions) < 0.7  # the dropped positions' items are never retrieved
        keep[-1] = True  # the crate sizes its corpus by the largest retrieved id
        lens = np.add.reduceat(keep.astype(np.int64), full.offsets[:-1])
        data = ValidationData(
            offsets=np.concatenate([[0], np.cumsum(lens)]), item=full.item[keep], source=full.source[keep],
            utility=full.utility[keep], item_source=full.item_source, sources=full.sources,
        )
        lists = [
            {
                "retrieved": data.item[data.offsets[t] : data.offsets[t + 1]].astype(int).tolist(),
                "utility_contributions": data.utility[data.offsets[t] : data.offsets[t + 1]].tolist(),
            }
            for t in range(data.n_tuples)
        ]
        sizes = np.bincount(data.item_source)
        for lr in (20.0, 500.0):
            items = np.asarray(ragbooster.learn_importance(lists, 3, lr, 4, 1, data.item_source.astype(int).tolist()))
            theirs = np.bincount(data.item_source, weights=items) / sizes
            diffs = []
            for rule in ("reference", "mean-gradient"):
                est = DataImportance(k=3, epochs=4, learning_rate=lr, group_update=rule)
                diffs.append(float(np.abs(est.fit(data).weights_ - theirs).max()))
            rows.append([seed, f"{lr:g}", f"{diffs[0]:.1e}", f"{diffs[1]:.3f}"])
    return rows


def _cell(v: list[tuple[float, float]]) -> str:
    """``wall / CPU ms [CPU min, max]`` (medians over the repeats)."""
    wall, cpu = [w for w, _ in v], [c for _, c in v]
    return f"{np.median(wall):,.1f} / {np.median(cpu):,.1f} [{min(cpu):,.1f}, {max(cpu):,.1f}]"


def _ratio(num: list[tuple[float, float]], den: list[tuple[float, float]], column: int) -> str:
    return f"{np.median([x[column] for x in num]) / np.median([x[column] for x in den]):.1f}x"


def _cores(v: list[tuple[float, float]]) -> str:
    """Median CPU / wall: how many cores the run had; below the thread count, the machine's other
    jobs held the rest, and the wall-time speed-up from a second thread cannot show."""
    return f"{np.median([c / w for w, c in v]):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rust-bin", type=Path, required=True, help="The timing binary built from the crate.")
    parser.add_argument("--sizes", type=int, nargs="+", default=[50_000, 500_000, 5_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rust-python", type=Path, default=None, help="Folder with the crate's ragbooster.so.")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    agree = agreement(args.rust_python) if args.rust_python else []
    for row in agree:
        print("agreement", row, flush=True)
    two = min(2, numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    numba.set_num_threads(1)
    rows, rows2 = [], []
    loads: list[float] = []
    for m in args.sizes:
        data = synthetic(m // 50, list_len=50, n_sources=1000, seed=0)
        ours(data, "mean-gradient", epochs=2)  # compile the kernels before timing
        ours(data, "reference", epochs=2)
        got: dict[str, list[tuple[float, float]]] = {
            "mean-gradient": [], "reference": [], "rust": [], "mean-gradient 2": [], "rust 2": [],
        }
        for _ in range(args.repeats):
            loads.append(os.getloadavg()[0])
            got["mean-gradient"].append(ours(data, "mean-gradient"))
            got["reference"].append(ours(data, "reference"))
            got["rust"].append(theirs(args.rust_bin, m))
            got["mean-gradient 2"].append(ours(data, "mean-gradient", threads=two))
            got["rust 2"].append(theirs(args.rust_bin, m, threads=two))
        print(m, {k: (round(float(np.median([w for w, _ in v])), 1), round(float(np.median([c for _, c in v])), 1))
                  for k, v in got.items()}, flush=True)
        rows.append(
            [f"{m:,}"]
            + [_cell(got[k]) for k in ("mean-gradient", "reference", "rust")]
            + [_ratio(got["rust"], got["mean-gradient"], 1), _ratio(got["rust"], got["reference"], 1)]
        )
        rows2.append(
            [f"{m:,}", _cell(got["mean-gradient 2"]), _cell(got["rust 2"]),
             _ratio(got["mean-gradient"], got["mean-gradient 2"], 0), _ratio(got["rust"], got["rust 2"], 0),
             _ratio(got["rust 2"], got["mean-gradient 2"], 0),
             f"{_cores(got['mean-gradient 2'])} / {_cores(got['rust 2'])}"]
        )
        del data
    if args.no_write:
        return
    from _report import markdown_table, write_section

    headers = [
        "M (positions)",
        "ragsieve, group_update=mean-gradient: wall / CPU ms [CPU min, max]",
        "ragsieve, group_update=reference: wall / CPU ms [CPU min, max]",
        "RAGBooster (Rust), grouped: wall / CPU ms [CPU min, max]",
        "CPU ratio Rust / mean-gradient",
        "CPU ratio Rust / reference",
    ]
    headers2 = [
        "M (positions)",
        f"ragsieve, mean-gradient, {two} threads: wall / CPU ms [CPU min, max]",
        f"RAGBooster (Rust), {two} threads: wall / CPU ms [CPU min, max]",
        f"ragsieve: wall 1 thread / {two} threads",
        f"Rust: wall 1 thread / {two} threads",
        f"wall ratio Rust / ragsieve, {two} threads",
        f"cores busy at {two} threads (CPU / wall), ragsieve / Rust",
    ]
    # the benchmark's own threads count towards the load (up to 2 while it runs two)
    busy = max(loads) > 2.5
    body = (
        "Cost of one optimisation epoch: for ragsieve the median interval between `DataImportance.fit`'s "
        "per-epoch callbacks (5 epochs), for the authors' `mle::mle_importance` (RAGBooster's Rust crate, built "
        "offline from Debian's librust-* crates; see the script's docstring for the steps) the marginal cost "
        "`(5 epochs - 1 epoch) / 4`. One thread, then two, interleaved per repeat, "
        f"medians of {args.repeats} repeats; the bracket is the CPU range over the repeats (with 5 repeats, "
        "[min, max] is a 94 % order-statistic interval for the median). Data: N tuples x 50 items, every "
        "position its own item, 1,000 sources, binary utilities P(1) = 0.5, K = 10 (the Rust side draws its "
        "own data of the same shape). "
        "The Rust epoch includes its per-item update and the regrouping over all M items; ragsieve's "
        "mean-gradient epoch updates 1,000 source weights, its reference epoch M item weights. "
        f"1-minute load average during the run: {min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} cores"
        + (
            " (other jobs shared the cores, so wall times are inflated and the two-thread figures understate "
            "what a second core gives; on one thread the CPU column is the time each epoch ran on a core)"
            if busy
            else " (the benchmark's own threads count towards it; no sustained load beyond them)"
        )
        + ".\n\nOne thread:\n\n" + markdown_table(headers, rows)
        + f"\n\n{two} threads (`DataImportance(n_jobs={two})`; the Rust binary sizes rayon's pool to {two}): the "
        "speed-up from the second thread is a ratio of wall times, as CPU time adds both threads up; the last "
        "column, CPU over wall time, is how many cores the run actually had.\n\n"
        + markdown_table(headers2, rows2)
    )
    if agree:
        body += (
            "\n\nSame weights as the authors' code: `DataImportance(k=3, epochs=4, group_update=...)` against the "
            "crate's Python binding `learn_importance(..., grouping=item_source)` (source weight = mean of its "
            "items), on 60 synthetic tuples x 8 items over 7 sources with 30 % of the positions removed (so "
            "some items are never retrieved), 3 seeds x 2 learning rates (500 clips most items):\n\n"
            + markdown_table(
                ["seed", "learning rate", "max abs diff, reference", "max abs diff, mean-gradient (default)"], agree
            )
        )
    write_section("benchmarks.md", "importance-vs-rust", "Data importance: ragsieve vs the authors' Rust crate", body)


if __name__ == "__main__":
    main()
