"""Shared fixtures. The real bundled models load once per test session."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The test session runs in folders of its own, set here (before anything imports ragsieve) so that
# every test and every subprocess a test starts inherits them: what a user ran before — the demo
# index `ragsieve demo` writes to the cache, the exported ONNX graph, eval caches, a config or a
# calibration, $RAGSIEVE_INDEX — cannot change a test's outcome, and the tests leave nothing in the
# user's folders. The user's own folders are remembered for the test that checks this.
# Under pytest-xdist a worker starts with the folders its controller set below: the controller
# hands the user's own on in RAGSIEVE_TESTS_USER_FOLDERS.
if os.environ.get("RAGSIEVE_TESTS_USER_FOLDERS"):
    USER_FOLDERS = {name: Path(path) for name, path in json.loads(os.environ["RAGSIEVE_TESTS_USER_FOLDERS"]).items()}
else:
    USER_HOME = Path.home()
    USER_FOLDERS = {
        "home": USER_HOME,
        "cache": Path(os.environ.get("XDG_CACHE_HOME", USER_HOME / ".cache")),
        "config": Path(os.environ.get("XDG_CONFIG_HOME", USER_HOME / ".config")),
        "data": Path(os.environ.get("XDG_DATA_HOME", USER_HOME / ".local" / "share")),
    }
    os.environ["RAGSIEVE_TESTS_USER_FOLDERS"] = json.dumps({name: str(path) for name, path in USER_FOLDERS.items()})
SESSION_ROOT = Path(tempfile.mkdtemp(prefix="ragsieve-tests-"))
SESSION_FOLDERS = {name: SESSION_ROOT / name for name in USER_FOLDERS}
for _folder in SESSION_FOLDERS.values():
    _folder.mkdir()
os.environ["HOME"] = str(SESSION_FOLDERS["home"])
os.environ["XDG_CACHE_HOME"] = str(SESSION_FOLDERS["cache"])
os.environ["XDG_CONFIG_HOME"] = str(SESSION_FOLDERS["config"])
os.environ["XDG_DATA_HOME"] = str(SESSION_FOLDERS["data"])
for _name in ("RAGSIEVE_INDEX", "RAGSIEVE_DEBUG", "RAGSIEVE_API_KEY"):
    os.environ.pop(_name, None)

# Under pytest-xdist each worker is a process of its own, so the folders above are already its own.
# numba's on-disk cache of the importance kernels is not: two processes that compile different
# specialisations of one kernel at once each number their new cache files from the index they read,
# so one can overwrite the other's machine code under its own index entry (a later load then fails
# inside the kernel). Each worker keeps its own cache, kept between runs so only the first compiles.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if XDIST_WORKER:
    _numba_base = os.environ.get("NUMBA_CACHE_DIR") or str(Path(tempfile.gettempdir()) / "ragsieve-tests-numba")
    os.environ["NUMBA_CACHE_DIR"] = str(Path(_numba_base) / XDIST_WORKER)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(SESSION_ROOT, ignore_errors=True)


@pytest.fixture(scope="session")
def llm():
    """The bundled SmolLM2-135M-Instruct through llama.cpp."""
    from ragsieve.config import LLMConfig
    from ragsieve.llm import load_llm

    model = load_llm(LLMConfig(n_threads=1))
    model.warm_up()
    return model


@pytest.fixture(scope="session")
def embedder():
    """The bundled all-MiniLM-L6-v2 sentence embedder."""
    from ragsieve.config import EmbedderConfig
    from ragsieve.embed import load_embedder

    model = load_embedder(EmbedderConfig())
    model.warm_up()
    return model


@pytest.fixture()
def fault_server():
    """A fault-injecting HTTP server on 127.0.0.1 (see ``tests/fault_server.py``)."""
    from tests.fault_server import serve_faults

    with serve_faults() as server:
        yield server
