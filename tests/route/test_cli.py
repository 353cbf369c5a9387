"""``ragsieve router train|eval|route`` (index opening patched to use the hashing embedder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragsieve.index import cli as route_cli


@pytest.fixture()
def runner(index: Any, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setattr(route_cli, "_open", lambda _path: index)
    return CliRunner()


def test_train_from_chunks_then_route(runner: CliRunner, index: Any) -> None:
    res = runner.invoke(route_cli.app, ["train", str(index.dir), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["trained_on"] == "chunks" and out["domains"] == ["code", "debate", "health"]
    res = runner.invoke(
        route_cli.app, ["route", "python json parse", "--index", str(index.dir), "--unsure", "0.3", "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["domains"][0] == "code"


def test_train_from_labels_and_eval(runner: CliRunner, index: Any, labels_file: Path) -> None:
    res = runner.invoke(
        route_cli.app,
        ["train", str(index.dir), "--labels", str(labels_file), "--classifier", "linear-svc", "--json"],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["train_accuracy"] >= 0.9
    res = runner.invoke(route_cli.app, ["eval", str(index.dir), "--labels", str(labels_file), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["n"] == 12 and out["accuracy"] >= 0.9
    assert out["routing"]["total"] == 12
    assert out["routing"]["single"] + out["routing"]["multi"] + out["routing"]["fallback"] == 12


def test_bad_classifier_is_a_clear_error(runner: CliRunner, index: Any) -> None:
    from ragsieve.errors import ConfigError

    res = runner.invoke(route_cli.app, ["train", str(index.dir), "--classifier", "bert"])
    assert isinstance(res.exception, ConfigError) and "classifier" in str(res.exception)


def test_router_mounted_in_main_cli() -> None:
    from ragsieve.cli import cli_command

    assert "router" in cli_command().commands
