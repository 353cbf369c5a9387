"""The core works without any extra: importing ragsieve loads no extra's library, and using a
feature whose extra is missing names the extra to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ragsieve.errors import MissingExtraError
from ragsieve.extras import EXTRA_MODULES, EXTRA_ONLY_MODULES, require

# Run in a fresh interpreter that cannot import any extra's library, as in a core-only install.
BLOCKER = textwrap.dedent(
    """
    import importlib.abc, sys
    BLOCKED = {blocked!r}

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Block())
    """
).format(blocked=sorted({m for mods in EXTRA_MODULES.values() for m in mods}))


def _run_core_only(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code)], capture_output=True, text=True, timeout=300
    )


def test_every_module_imports_without_the_extras():
    result = _run_core_only(
        """
        import importlib, pkgutil, ragsieve
        from ragsieve.errors import MissingExtraError
        from ragsieve.extras import EXTRA_ONLY_MODULES, install_hint
        for info in pkgutil.walk_packages(ragsieve.__path__, "ragsieve."):
            if info.name in EXTRA_ONLY_MODULES:
                try:
                    importlib.import_module(info.name)
                except MissingExtraError as exc:
                    assert install_hint(EXTRA_ONLY_MODULES[info.name]) in str(exc), exc
                    print("NAMED", info.name)
                    continue
                raise SystemExit(f"{info.name} imported without its extra")
            importlib.import_module(info.name)
        loaded = sorted(n for n in sys.modules if n.split(".")[0] in BLOCKED)
        print("LOADED", loaded)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stdout
    assert all(f"NAMED {name}" in result.stdout for name in EXTRA_ONLY_MODULES)


def test_cli_help_works_without_the_extras():
    result = _run_core_only("from ragsieve.cli import main\nmain(['--help'])")
    assert result.returncode == 0 and "Usage:" in result.stdout, result.stderr


@pytest.mark.parametrize(
    "code, extra",
    [
        ("from ragsieve.embed.local import SentenceTransformerEmbedder as E; E().warm_up()", "torch"),
        ("from ragsieve.llm.llama_cpp import LlamaCppLLM as L; L(model_path={gguf!r}).warm_up()", "local-llm"),
    ],
)
def test_a_missing_extra_is_named(tmp_path, code, extra):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    call = code.format(gguf=str(gguf))
    result = _run_core_only(
        "from ragsieve.errors import MissingExtraError\n"
        f"try:\n    {call}\nexcept MissingExtraError as exc:\n    print('MISSING', exc)\n"
    )
    assert result.returncode == 0, result.stderr
    assert f"pip install 'ragsieve[{extra}]'" in result.stdout


def test_require_names_the_extra_and_the_purpose():
    with pytest.raises(MissingExtraError) as exc:
        require("ragsieve_no_such_module", "plots", "the importance histogram")
    message = str(exc.value)
    assert "the importance histogram" in message and "pip install 'ragsieve[plots]'" in message
    assert require("json", "plots", "x").__name__ == "json"
