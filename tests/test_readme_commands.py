"""CI runs the README's two commands as written, in order, after its other checks."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    """The commands of the README's first code block, without their trailing comments."""
    block = re.search(r"```(?:bash|sh|console)?\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "the README has no code block"
    commands = [re.sub(r"\s+#.*$", "", line).strip() for line in block.group(1).splitlines()]
    return [c for c in commands if c and not c.startswith("#")]


def ci_commands() -> list[str]:
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_the_readme_starts_with_an_install_and_a_test_command() -> None:
    commands = readme_commands()
    assert len(commands) == 2, commands
    assert "install" in commands[0] and "ragsieve demo" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_commands_verbatim_in_order_and_last() -> None:
    readme, ci = readme_commands(), ci_commands()
    assert ci[-len(readme):] == readme, (
        f".ci/run must end with the README's commands as written: {readme}, not {ci[-len(readme):]}"
    )
    # the demo goes to its default location: no --index of its own in the verbatim command
    assert "--index" not in readme[0]
