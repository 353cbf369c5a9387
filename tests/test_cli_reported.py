"""Defects a new user met with the command line: option names cut in narrow help, and a
question that ran past the documented two-minute bound of `ragsieve ask`."""

from __future__ import annotations

import time
from typing import Any

import pytest
from click.testing import CliRunner

from ragsieve import cli
from ragsieve.cancel import check_cancelled
from ragsieve.cli import cli_command


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _commands(sub, (*path, name))
    return found


def test_help_at_80_columns_shows_every_option_name_whole() -> None:
    root = cli_command()
    runner = CliRunner()
    checked = 0
    for path, command in _commands(root):
        result = runner.invoke(root, [*path, "--help"], env={"COLUMNS": "80", "NO_COLOR": "1"}, terminal_width=80,
                               prog_name="ragsieve")
        assert result.exit_code == 0, (path, result.output)
        words = set(result.output.replace("│", " ").split())
        for param in command.params:
            for name in (*param.opts, *param.secondary_opts):
                if name.startswith("-"):
                    assert name in words, (path, name, result.output)
                    checked += 1
        assert "-…" not in result.output and not any(w.startswith("-") and w.endswith("…") for w in words), path
    assert checked > 100


class SlowPipeline:
    """A model that generates forever, checking for cancellation between tokens as llama.cpp does."""

    def ask(self, question: str, **kwargs: Any) -> Any:
        while True:
            check_cancelled()
            time.sleep(0.01)


def test_ask_stops_at_its_time_limit_with_an_error_saying_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "ASK_DEADLINE_S", 0.3)
    monkeypatch.setattr("ragsieve.sieve.pipeline.build_pipeline", lambda cfg: SlowPipeline())
    start = time.monotonic()
    with pytest.raises(SystemExit) as exc:
        cli.main(["ask", "What is graphene?", "--no-retrieval"])
    elapsed = time.monotonic() - start
    err = " ".join(capsys.readouterr().err.split())
    assert exc.value.code == 2 and elapsed < 5
    assert "the question ran past its 0.3 s time limit" in err and "ask again" in err
    assert "internal error" not in err
