"""Helpers for the reliability tier: a tiny two-domain corpus and ingests in separate processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ragsieve.config import PipelineConfig

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("ingest_worker.py")
# Entity extraction is not what these tests exercise; leaving it out keeps each build fast.
FAST = PipelineConfig.model_validate({"ingest": {"extract_entities": False}})


def write_corpus(root: Path, extra: str = "") -> Path:
    """Two domains, a JSONL file with metadata: enough to exercise partitions and filters."""
    (root / "astronomy").mkdir(parents=True, exist_ok=True)
    (root / "biology").mkdir(parents=True, exist_ok=True)
    (root / "astronomy" / "sun.txt").write_text("The Sun is a star. It burns hydrogen into helium.")
    (root / "astronomy" / "mars.md").write_text("# Mars\n\nMars is the red planet with dust storms." + extra)
    (root / "biology" / "cells.txt").write_text("Mitochondria produce ATP, the energy of the cell.")
    (root / "biology" / "notes.jsonl").write_text(
        '{"id": "n1", "text": "Leaves turn light into sugar by photosynthesis.", "kind": "plant"}\n'
        '{"id": "n2", "text": "Bacteria divide by binary fission.", "kind": "microbe"}\n'
    )
    return root


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO), env.get("PYTHONPATH", "")])
    return env


def start_worker(corpus: Path, index: Path, *args: str) -> subprocess.Popen[str]:
    """An ingest in its own process (HashEmbedder), stdout/stderr captured."""
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(corpus), str(index), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=worker_env(),
        cwd=REPO,
    )


def run_cli(capsys: Any, *args: object) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr with whitespace collapsed)."""
    from ragsieve.cli import main

    code = 0
    try:
        main([str(a) for a in args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, " ".join(out.err.split())
