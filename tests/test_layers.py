"""The package's layers: every import in ``src/ragsieve`` (lazy, function-level and
``TYPE_CHECKING`` ones included) goes to the same layer or a lower one, and no modules or
packages import each other in a circle.

The layers are declared once, in :data:`LAYERS` (docs/architecture.md draws them). A new
top-level module or package must be added there: the test names it and says so.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Bottom-up. A module's layer is its top-level name's (``ragsieve.<name>...``), except that
# every ``cli`` module (``ragsieve.cli`` and each ``ragsieve.<package>.cli``) is on the ``cli``
# layer, and the package itself (``ragsieve/__init__.py``, the public re-exports) is on top.
LAYERS: dict[str, tuple[str, ...]] = {
    # no model, no pipeline: types, errors, config, I/O and small helpers every layer may use
    "ground": (
        "types", "errors", "config", "io", "http", "text", "answers", "extras", "safe_models",
        "console", "sentences", "values", "citations", "cluster", "demo", "array_models", "cancel",
        "telemetry", "options", "present", "lexicon", "signals", "records",
    ),
    # the parts a stage is made of: models, indexes, and each check's own component
    "components": (
        "ingest", "embed", "llm", "index", "store", "route", "importance", "generate", "verify",
        "tasks", "expand", "coe", "select", "filtering", "conflict", "calibrate", "decision", "voices",
        "audit",
        # the public classes that join components (``ragsieve.Index``: the index with its audit)
        "api",
    ),
    # the question's path: one module per stage, and the pipeline that runs them
    "sieve": ("sieve",),
    # what runs the pipeline: evaluation, the red-team harness, the server
    "harnesses": ("eval", "attack", "serve", "adapters", "mcp"),
    # the command line
    "cli": ("cli",),
    # ``import ragsieve``: the public names, re-exported
    "package": (),
}
ORDER = {layer: rank for rank, layer in enumerate(LAYERS)}
LAYER_OF = {name: layer for layer, names in LAYERS.items() for name in names}


def modules() -> dict[str, Path]:
    """Every module under ``src/ragsieve`` by dotted name (a package by its own name)."""
    out: dict[str, Path] = {}
    for path in sorted((SRC / "ragsieve").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = modules()


def _known(name: str) -> str | None:
    """The longest prefix of ``name`` that is a module of ours."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> Iterator[str]:
    """The modules of ours ``module`` imports, wherever in the file the import is."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _known(alias.name) if alias.name.split(".")[0] == "ragsieve" else None
                if target:
                    yield target
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            if base.split(".")[0] != "ragsieve":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                target = full if full in MODULES else _known(base)
                if target:
                    yield target


def graph() -> dict[str, set[str]]:
    return {m: {t for t in imports_of(m) if t != m} for m in MODULES}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "package"
    if parts[-1] == "cli":
        return "cli"
    layer = LAYER_OF.get(parts[1])
    if layer is None:
        raise AssertionError(
            f"ragsieve.{parts[1]} is on no layer: add {parts[1]!r} to one of the layers in "
            f"tests/test_layers.py (LAYERS: {', '.join(LAYERS)}) and to docs/architecture.md"
        )
    return layer


def unit_of(module: str) -> str:
    """The package-level unit: ``ragsieve.<name>`` (a package's own ``cli`` module included: the
    package's command line must not make two packages import each other either)."""
    parts = module.split(".")
    return module if len(parts) <= 2 else ".".join(parts[:2])


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_top_level_module_is_on_a_layer():
    for module in MODULES:
        layer_of(module)


def test_no_import_goes_up_a_layer():
    upward = [
        f"{m} ({layer_of(m)}) imports {t} ({layer_of(t)})"
        for m, targets in graph().items()
        for t in sorted(targets)
        if ORDER[layer_of(t)] > ORDER[layer_of(m)]
    ]
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_no_module_import_cycle():
    found = cycles(graph())
    assert not found, "modules importing each other in a circle: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_package_import_cycle():
    units: dict[str, set[str]] = {}
    for m, targets in graph().items():
        units.setdefault(unit_of(m), set()).update(unit_of(t) for t in targets if unit_of(t) != unit_of(m))
    found = cycles(units)
    assert not found, "packages importing each other in a circle: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_stage_reaches_the_pipeline():
    # the pipeline, its streaming half and the candidate checks (which run the same stages on
    # another retriever's candidates) run stages; a stage itself never reaches the pipeline
    runners = ("ragsieve.sieve.pipeline", "ragsieve.sieve.checks")
    stages = [m for m in MODULES if m.startswith("ragsieve.sieve.") and m not in runners]
    assert stages
    edges = graph()
    assert not [m for m in stages if "ragsieve.sieve.pipeline" in edges[m]]
    for m in stages:
        assert "self.pipe" not in MODULES[m].read_text(encoding="utf-8"), m


@pytest.mark.parametrize(
    "edges, expected",
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
    ],
)
def test_the_cycle_finder_finds_cycles(edges, expected):
    assert cycles(edges) == expected


def test_a_lazy_import_counts(tmp_path, monkeypatch):
    pkg = tmp_path / "ragsieve"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "types.py").write_text("def f():\n    from ragsieve.cli import main\n")
    (pkg / "cli.py").write_text("from . import types\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "SRC", tmp_path)
    found = modules()
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "MODULES", found)
    assert set(imports_of("ragsieve.types")) == {"ragsieve.cli"}
    assert set(imports_of("ragsieve.cli")) == {"ragsieve.types"}


# ---------------------------------------------------------------------------- stage contracts
SIEVE_DIR = SRC / "ragsieve" / "sieve"
# the modules that run stages rather than being one
RUNNERS = {"pipeline.py", "streaming.py", "runner.py", "build.py", "checks.py", "state.py", "events.py", "__init__.py"}


def _stage_classes() -> Iterator[tuple[str, ast.ClassDef]]:
    """Every class under ``ragsieve/sieve`` with a ``run(question, candidates, trace, state)``."""
    for path in sorted(SIEVE_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "run":
                        names = [a.arg for a in item.args.args]
                        if names[-1:] == ["state"]:
                            yield path.name, node


def test_stages_share_no_untyped_channel():
    """No ``extra`` dict: what a stage tells a later one is a typed field of PipelineState."""
    from ragsieve.sieve.state import STATE_FIELDS

    assert "extra" not in STATE_FIELDS
    found = []
    for path in sorted(SIEVE_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute) and node.attr == "extra"
                and isinstance(node.value, ast.Name) and node.value.id == "state"
            ):  # fmt: skip
                found.append(f"{path.name}:{node.lineno}")
    assert not found, "state.extra used at " + ", ".join(found)


def test_no_any_typed_state():
    """The state's fields are typed (no ``Any``), and every stage's ``run`` takes a PipelineState."""
    source = (SIEVE_DIR / "state.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    state_cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PipelineState")
    any_fields = [
        item.target.id
        for item in state_cls.body
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
        and "Any" in ast.unparse(item.annotation)
    ]
    assert not any_fields, f"PipelineState fields typed Any: {any_fields}"
    stages = list(_stage_classes())
    assert len(stages) >= 14  # the sieve's stages and the task-adaptive preset's
    untyped = []
    for module, cls in stages:
        run = next(i for i in cls.body if isinstance(i, ast.FunctionDef) and i.name == "run")
        annotation = run.args.args[-1].annotation
        if annotation is None or ast.unparse(annotation) != "PipelineState":
            untyped.append(f"{module}:{cls.name}")
    assert not untyped, f"stages whose state is not a PipelineState: {untyped}"


def test_every_stage_declares_what_it_reads_and_writes():
    """Each stage class (or its base) declares ``reads``, ``uses``, ``writes`` and ``emits``, and no stage
    module outside the runner records an abstention or builds an Answer itself."""
    declared = {}
    for module, cls in _stage_classes():
        names = {
            t.id
            for item in cls.body
            if isinstance(item, ast.AnnAssign | ast.Assign)
            for t in ([item.target] if isinstance(item, ast.AnnAssign) else item.targets)
            if isinstance(t, ast.Name)
        }
        bases = [ast.unparse(b) for b in cls.bases]
        declared[cls.name] = (module, names, bases)
    missing = []
    for name, (module, names, bases) in declared.items():
        have = set(names)
        for base in bases:
            have |= declared.get(base, ("", set(), []))[1]
        if not {"reads", "uses", "writes", "emits"} <= have:
            missing.append(f"{module}:{name}")
    assert not missing, f"stages without reads/uses/writes/emits: {missing}"
    for path in sorted(SIEVE_DIR.glob("*.py")):
        if path.name in {"runner.py"}:
            continue
        text = path.read_text(encoding="utf-8")
        assert 'trace.record("abstain"' not in text, f"{path.name} records an abstention; return an Abstain"
        if path.name not in RUNNERS:
            assert "Answer(" not in text, f"{path.name} builds an Answer; return an Abstain"


def test_building_a_pipeline_checks_the_wiring():
    """Every preset's stages read only what an earlier stage (or the request) produces; a stage
    put before the one that produces its input fails when the pipeline is built, naming both."""
    from ragsieve.config import PipelineConfig
    from ragsieve.errors import ConfigError
    from ragsieve.sieve.build import StageResources, build_stages
    from ragsieve.sieve.pipeline import Pipeline
    from ragsieve.sieve.state import STATE_FIELDS, Ref, check_wiring, preset_stages

    for preset in ("plain", "sieve"):
        cfg = PipelineConfig(pipeline=preset)
        resources = StageResources(cfg, Ref(), Ref(), sieve=preset == "sieve", judge=None, selector=None,
                                   claim_judge=None)  # fmt: skip
        stages = build_stages(cfg, preset_stages(cfg), resources)
        for stage in stages:
            assert set(stage.reads) | set(stage.uses) | set(stage.writes) <= STATE_FIELDS, stage.name
    cfg = PipelineConfig()
    resources = StageResources(cfg, Ref(), Ref(), sieve=True, judge=None, selector=None, claim_judge=None)
    with pytest.raises(ConfigError, match="stage 'verify' reads text, evidence, cited"):
        build_stages(cfg, ["verify", "generate"], resources)
    generate, verify = build_stages(cfg, ["generate", "verify"], resources)
    with pytest.raises(ConfigError, match="stage 'verify' reads text, evidence, cited, which no stage before it"):
        check_wiring([verify, generate])
    with pytest.raises(ConfigError, match="stage 'verify' reads"):
        Pipeline(cfg, stages=[verify, generate])
    check_wiring([generate, verify])

    class Typo:
        name = "typo"
        reads = ("evidance",)
        uses = ()
        writes = ()

    with pytest.raises(ConfigError, match="'typo' declares evidance, which PipelineState does not have"):
        check_wiring([Typo()])  # type: ignore[list-item]
