"""`ragsieve ask` with the defaults trains nothing and imports no heavy library.

The CLI runs in a subprocess (its own ``sys.modules``) on an index built by the default
``ragsieve ingest``, against a fake OpenAI-compatible server on loopback; a wrapper runs the
CLI's ``main`` and writes the names of every module imported by the end to a file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers import copy_corpus
from tests.test_cli_lean import chat_server  # noqa: F401 - the fake LLM server fixture

# Neither may load on the default query path: the profile found them costing 20+ s of imports.
FORBIDDEN = ("sklearn", "skops", "torch", "sentence_transformers", "transformers")

WRAPPER = """
import sys
from pathlib import Path

out = Path(sys.argv[1])
sys.argv = ["ragsieve", *sys.argv[2:]]
from ragsieve.tasks import classifier as _classifier
_fit = _classifier.TfidfTaskClassifier.fit_sklearn

def _refuse_training(*args, **kwargs):
    raise RuntimeError("the task router was trained during ask")

_classifier.TfidfTaskClassifier.fit_sklearn = _refuse_training
from ragsieve.cli import main
try:
    main()
finally:
    out.write_text("\\n".join(sorted(sys.modules)), encoding="utf-8")
"""


def run_cli(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    modules = tmp / "modules.txt"
    modules.unlink(missing_ok=True)
    env = {**os.environ, "RAGSIEVE_INDEX": "", "COLUMNS": "100", "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(modules), *args],
        capture_output=True, text=True, timeout=600, env=env, stdin=subprocess.DEVNULL,
    )
    return result, set(modules.read_text(encoding="utf-8").split()) if modules.is_file() else set()


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in FORBIDDEN)


@pytest.fixture(scope="module")
def default_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cold")
    result, _ = run_cli(root, "ingest", str(copy_corpus(root)), "--index", str(root / "idx"), "--json")
    assert result.returncode == 0, result.stderr
    # the default ingest of a two-folder corpus trains the domain router once, as arrays
    assert (root / "idx" / "router" / "router.npz").is_file()
    return root / "idx"


@pytest.mark.parametrize("pipeline", ["sieve", "plain"])
def test_ask_loads_no_heavy_library_and_trains_nothing(default_index, chat_server, tmp_path, pipeline):  # noqa: F811
    url, _ = chat_server
    result, modules = run_cli(
        tmp_path, "ask", "What is the Moon?", "--index", str(default_index), "--pipeline", pipeline,
        "--llm-url", url, "--model", "fake", "--json",
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["question"] == "What is the Moon?"
    assert modules, "the wrapper wrote no module list"
    assert "ragsieve.cli" in modules
    assert heavy(modules) == [], f"ask imported {heavy(modules)[:10]}"


def test_help_imports_no_heavy_library(tmp_path):
    result, modules = run_cli(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    assert heavy(modules) == []


def test_help_builds_no_config_model():
    # the choices come from ragsieve.options; pydantic and the config models load when a command runs
    code = (
        "import sys\nfrom ragsieve.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('pydantic', 'ragsieve.config', 'ragsieve.options') if m in sys.modules))"
    )
    env = {**os.environ, "RAGSIEVE_INDEX": "", "COLUMNS": "100", "NO_COLOR": "1"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "['ragsieve.options']"


def test_ask_without_a_calibrated_threshold_loads_no_scipy_stats(default_index, chat_server, tmp_path):  # noqa: F811
    url, _ = chat_server
    result, modules = run_cli(
        tmp_path, "ask", "What is the Moon?", "--index", str(default_index), "--pipeline", "sieve",
        "--llm-url", url, "--model", "fake", "--json",
    )
    assert result.returncode == 0, result.stderr
    assert "ragsieve.calibrate" not in modules and "scipy.stats" not in modules
