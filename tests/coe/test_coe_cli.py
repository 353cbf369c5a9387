from __future__ import annotations

import json

from typer.testing import CliRunner

from ragsieve.coe.cli import app
from ragsieve.coe.perturb import irrelevant_fraction

runner = CliRunner()


def test_perturb_irrelevant(tmp_path):
    pool = tmp_path / "noise.txt"
    pool.write_text("\n".join(f"noise sentence {i} about nothing at all." for i in range(10)))
    res = runner.invoke(app, ["perturb", "irrelevant", "-k", "Paris is the capital of France.",
                              "--pool", str(pool), "--proportion", "0.5"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["kind"] == "irrelevant"
    irr = [s for s in data["knowledge"] if s != "Paris is the capital of France."]
    assert abs(irrelevant_fraction(data["original"], irr) - 0.5) < 0.05


def test_perturb_needs_inputs():
    res = runner.invoke(app, ["perturb", "irrelevant"])
    assert res.exit_code != 0
    res = runner.invoke(app, ["perturb", "wordp", "-k", "x"])
    assert res.exit_code != 0
    assert "--question" in str(res.exception)
