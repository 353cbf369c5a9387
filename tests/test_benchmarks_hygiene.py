"""The benchmark scripts share one harness and use the package through its public names only.

The harness is ``benchmarks/_report.py`` (docs sections), ``_data.py`` (JSONL readers, answer
caches), ``_stats.py`` (the Wilson and bootstrap intervals) and ``_models.py`` (the answering
models). Every script is read with :mod:`ast`: none imports a private name of ``ragsieve`` and
none keeps its own copy of a harness helper (a ``wilson*`` function, a JSONL reader, a function
named like a harness helper). Every script still imports and answers ``--help``, checked in one
fresh interpreter in which writing a docs section fails, so a script that runs instead of
printing its usage cannot touch the docs.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
HARNESS = ("_report.py", "_data.py", "_stats.py", "_models.py")

# Private names a script may still import, each with what has to happen first. An entry that no
# script imports any more fails the test below, so the list only shrinks.
WAITING: dict[tuple[str, str], str] = {}

# Function names that only the harness defines (besides its modules' public names).
HELPER_NAME = re.compile(r"wilson|^_?(read|load|iter)_?jsonl", re.IGNORECASE)


def scripts() -> list[Path]:
    return sorted(p for p in BENCHMARKS.glob("*.py") if p.name != "__init__.py")


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def harness_names() -> set[str]:
    """The public module-level functions and classes of the harness modules."""
    names: set[str] = set()
    for name in HARNESS:
        for node in parsed(BENCHMARKS / name).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
                names.add(node.name)
    return names


def is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, ValueError):
        return False


def private_uses(tree: ast.Module) -> Iterator[str]:
    """Dotted private names of ``ragsieve`` that a script imports or reads off an imported module."""
    modules: dict[str, str] = {}  # local name -> ragsieve module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "ragsieve":
                    continue
                if any(part.startswith("_") for part in alias.name.split(".")):
                    yield alias.name
                if alias.asname:
                    modules[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "ragsieve":
                continue
            if any(part.startswith("_") for part in node.module.split(".")):
                yield node.module
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if alias.name.startswith("_"):
                    yield full
                elif is_module(full):
                    modules[alias.asname or alias.name] = full
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            yield f"{modules[node.value.id]}.{node.attr}"


def line_readers(tree: ast.Module) -> Iterator[int]:
    """Lines where ``json.loads`` parses the variable of the loop around it: a JSONL reader."""
    for node in ast.walk(tree):
        if isinstance(node, ast.For):
            targets = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
            scope: list[ast.AST] = list(node.body)
        elif isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            targets = {n.id for gen in node.generators for n in ast.walk(gen.target) if isinstance(n, ast.Name)}
            scope = [node]
        else:
            continue
        for inner in (n for part in scope for n in ast.walk(part)):
            if (
                isinstance(inner, ast.Call)
                and isinstance(inner.func, ast.Attribute)
                and inner.func.attr == "loads"
                and isinstance(inner.func.value, ast.Name)
                and inner.func.value.id == "json"
                and inner.args
                and isinstance(inner.args[0], ast.Name)
                and inner.args[0].id in targets
            ):
                yield inner.lineno


def own_helpers(path: Path, tree: ast.Module, shared: set[str]) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
            HELPER_NAME.search(node.name) or node.name in shared
        ):
            found.append(f"{path.name}:{node.lineno} defines {node.name}")
    found += [f"{path.name}:{line} reads JSON lines itself" for line in line_readers(tree)]
    if re.search(r"z\s*\*\s*z\s*/\s*\(\s*4\s*\*\s*n", path.read_text(encoding="utf-8")):
        found.append(f"{path.name} computes a Wilson interval itself")
    return found


def test_no_script_imports_a_private_name_of_the_package() -> None:
    used: set[tuple[str, str]] = set()
    bad = []
    for path in scripts():
        for name in private_uses(parsed(path)):
            if (path.name, name) in WAITING:
                used.add((path.name, name))
            else:
                bad.append(f"{path.name}: {name}")
    assert not bad, (
        "benchmarks use private names of ragsieve; give the thing a public name (with a docstring) in the "
        "package, or move the logic into the harness (benchmarks/_data.py, _stats.py, _report.py): "
        + "; ".join(sorted(set(bad)))
    )
    stale = sorted(set(WAITING) - used)
    assert not stale, f"no script imports these any more; remove them from WAITING: {stale}"


def test_no_script_keeps_its_own_copy_of_a_harness_helper() -> None:
    shared = harness_names()
    found = [f for path in scripts() if path.name not in HARNESS for f in own_helpers(path, parsed(path), shared)]
    assert not found, (
        "use the harness instead (benchmarks/_data.py: read_jsonl, read_complete_lines, AnswerCache; "
        "benchmarks/_stats.py: wilson_interval, rate_with_interval, count_with_interval and the bootstrap "
        "intervals): " + "; ".join(found)
    )


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text(
        "import json\n"
        "import ragsieve.values as values\n"
        "from ragsieve.demo import _hidden\n"
        "from ragsieve.importance import multilinear\n"
        "def wilson(k, n):\n    return z * z / (4 * n * n)\n"
        "def read(path):\n    return [json.loads(line) for line in open(path)]\n"
        "values._prepare('x')\nmultilinear._kernel()\n",
        encoding="utf-8",
    )
    tree = parsed(script)
    assert set(private_uses(tree)) == {
        "ragsieve.demo._hidden",
        "ragsieve.values._prepare",
        "ragsieve.importance.multilinear._kernel",
    }
    found = " | ".join(own_helpers(script, tree, {"markdown_table"}))
    assert "defines wilson" in found and "reads JSON lines itself" in found and "Wilson interval itself" in found


def test_the_harness_reads_plain_and_gzipped_jsonl(tmp_path: Path) -> None:
    import gzip

    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks._data import AnswerCache, read_complete_lines, read_jsonl
    finally:
        sys.path.remove(str(ROOT))
    rows = [{"key": "a", "v": 1}, {"key": "b", "v": 2}]
    text = "\n".join(json.dumps(r) for r in rows) + "\n\n"
    (tmp_path / "r.jsonl").write_text(text, encoding="utf-8")
    with gzip.open(tmp_path / "r.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write(text)
    assert list(read_jsonl(tmp_path / "r.jsonl")) == rows == list(read_jsonl(tmp_path / "r.jsonl.gz"))
    (tmp_path / "torn.jsonl").write_text(text + '{"key": "c"', encoding="utf-8")
    assert read_complete_lines(tmp_path / "torn.jsonl") == rows
    cache = AnswerCache(tmp_path / "cache" / "answers.jsonl")
    cache.put({"key": "q1", "answer": "x"})
    assert AnswerCache(cache.path).records == {"q1": {"key": "q1", "answer": "x"}}


HELP_CHECK = """
import contextlib, importlib, io, json, pathlib, sys
sys.path[:0] = [{root!r}, {bench!r}]
import _report, benchmarks._report
def refuse(*args, **kwargs):
    raise RuntimeError("a script wrote a docs section while asked for --help")
_report.write_section = benchmarks._report.write_section = refuse
out = {{}}
for name in {names!r}:
    try:
        module = importlib.import_module("benchmarks." + name)
    except BaseException as exc:
        out[name] = "import failed: " + repr(exc)
        continue
    if not hasattr(module, "main"):
        out[name] = "library"
        continue
    sys.argv = [name + ".py", "--help"]
    text = io.StringIO()
    try:
        with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
            module.main()
        out[name] = "main() ran instead of printing its usage"
    except SystemExit as exc:
        ok = exc.code in (0, None) and "usage:" in text.getvalue()
        out[name] = "ok" if ok else f"exit {{exc.code}}: {{text.getvalue()[-300:]}}"
    except BaseException as exc:
        out[name] = "--help failed: " + repr(exc)
print(json.dumps(out))
"""


def test_every_script_imports_and_answers_help() -> None:
    names = [p.stem for p in scripts() if p.name not in HARNESS]
    code = HELP_CHECK.format(root=str(ROOT), bench=str(BENCHMARKS), names=names)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    libraries = {name for name, what in outcome.items() if what == "library"}
    for name in libraries:  # a module without main() must not pretend to be a script
        assert "__main__" not in (BENCHMARKS / f"{name}.py").read_text(encoding="utf-8"), name
    bad = {name: what for name, what in outcome.items() if what not in ("ok", "library")}
    assert not bad, bad
    assert len(outcome) == len(names) and len(libraries) < len(names) // 4


@pytest.mark.parametrize("name", HARNESS)
def test_the_harness_imports_nothing_private(name: str) -> None:
    assert not list(private_uses(parsed(BENCHMARKS / name)))
