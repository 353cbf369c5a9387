"""Messages that interpolate values (paths, names, questions) print as plain text: Rich markup
would swallow anything in square brackets, such as a path ``runs/[v2]/out`` or an extra's name."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ragsieve"


def _is_text(node: ast.expr) -> bool:
    """A ``rich.text.Text(...)`` or a sum of them: plain text whatever it holds."""
    if isinstance(node, ast.BinOp):
        return _is_text(node.left) and _is_text(node.right)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Text"


def _interpolates(node: ast.expr) -> bool:
    if _is_text(node):
        return False
    return any(isinstance(n, ast.JoinedStr) and any(isinstance(v, ast.FormattedValue) for v in n.values)
               for n in ast.walk(node))  # fmt: skip


def _markup_calls(tree: ast.AST) -> list[int]:
    """Lines of ``<console>.print(...)`` calls whose first argument interpolates values and
    that leave Rich markup on."""
    bad = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "print"):
            continue
        owner = node.func.value
        if not (isinstance(owner, ast.Name) and owner.id.endswith("console")) or not node.args:
            continue
        markup = {k.arg: k.value for k in node.keywords}.get("markup")
        if _interpolates(node.args[0]) and not (isinstance(markup, ast.Constant) and markup.value is False):
            bad.append(node.lineno)
    return bad


def test_the_detector_finds_a_markup_print() -> None:
    assert _markup_calls(ast.parse('console.print(f"wrote {out}")')) == [1]
    assert _markup_calls(ast.parse('console.print(f"wrote {out}", markup=False)')) == []
    assert _markup_calls(ast.parse('console.print("[bold]done[/bold]")')) == []
    assert _markup_calls(ast.parse('console.print(Text("ok ", style="green") + Text(f"{out}"))')) == []
    assert _markup_calls(ast.parse('console.print(Text("ok") + f"{out}")')) == [1]


def test_command_line_messages_with_values_print_without_markup() -> None:
    offenders = []
    for path in sorted([SRC / "cli.py", SRC / "console.py", *SRC.glob("*/cli.py")]):
        for line in _markup_calls(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(SRC)}:{line}")
    assert not offenders, f"pass markup=False (and highlight=False) to these prints: {offenders}"
