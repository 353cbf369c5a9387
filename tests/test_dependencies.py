"""The dependency lists in pyproject.toml: a lean core, and bounds on every direct dependency."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

PYPROJECT = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
CORE: list[str] = PYPROJECT["project"]["dependencies"]
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _name(requirement: str) -> str:
    match = _NAME.match(requirement)
    assert match, requirement
    return match.group(1).lower().replace("_", "-")


def test_the_core_has_no_compiler_toolchain():
    names = {_name(r) for r in CORE}
    assert not names & {"numba", "llvmlite", "torch", "llama-cpp-python"}, names
    assert "numba" in {_name(r) for r in EXTRAS["fast-kernels"]}
    assert "fast-kernels" in EXTRAS["all"][0]


DIRECT = [r for r in CORE + [r for rs in EXTRAS.values() for r in rs] if not r.startswith("ragsieve[")]


@pytest.mark.parametrize("requirement", [r for r in DIRECT if _name(r) != "types-pyyaml"])
def test_every_direct_dependency_has_lower_and_upper_bounds(requirement):
    spec = requirement.split(";")[0]
    assert ">=" in spec and "<" in spec.replace("<=", ""), f"{requirement}: give it >=oldest,<next-major bounds"
