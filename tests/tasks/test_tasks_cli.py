"""``ragsieve tasks train|eval`` (TF-IDF only; no model loads)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ragsieve.tasks.cli import app


def test_train_then_eval(tmp_path) -> None:
    runner = CliRunner()
    out = tmp_path / "clf.npz"
    res = runner.invoke(app, ["train", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["train_rows"] > 400 and out.is_file()
    res = runner.invoke(app, ["eval", "--model-path", str(out), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["n"] > 100 and 0.5 < report["accuracy"] <= 1.0


def test_eval_rejects_unknown_classifier() -> None:
    res = CliRunner().invoke(app, ["eval", "--classifier", "magic"])
    assert res.exit_code != 0
    assert "magic" in str(res.exception) or "magic" in res.output
