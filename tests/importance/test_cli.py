"""`ragsieve importance fit|apply|report` end to end on a small JSONL."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ragsieve.importance.apply import load_prune_threshold, load_source_weights
from ragsieve.importance.cli import app


def write_validation(path: Path) -> None:
    rows = []
    for q in range(30):
        items = []
        for r in range(6):
            src = ["good.org", "bad.com", "ok.net"][(q + r) % 3]
            items.append({"id": f"q{q}-{r}", "source": src, "utility": 1.0 if src != "bad.com" else 0.0})
        rows.append({"id": f"q{q}", "items": items})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_fit_apply_report(tmp_path: Path) -> None:
    runner = CliRunner()
    val = tmp_path / "val.jsonl"
    write_validation(val)
    weights = tmp_path / "w.json"
    res = runner.invoke(app, ["fit", str(val), "--out", str(weights), "--csv", str(tmp_path / "w.csv"),
                              "-k", "3", "--epochs", "10", "--lr", "20"])
    assert res.exit_code == 0, res.output
    data = json.loads(weights.read_text())
    assert data["weights"]["good.org"] > data["weights"]["bad.com"]
    assert (tmp_path / "w.csv").read_text().splitlines()[0] == "source,weight,gradient"

    index = tmp_path / "index"
    res = runner.invoke(app, ["apply", str(weights), "--index", str(index)])
    assert res.exit_code != 0  # no such index directory
    index.mkdir()
    res = runner.invoke(app, ["apply", str(weights), "--index", str(index), "--threshold", "0.3"])
    assert res.exit_code == 0, res.output
    assert load_source_weights(index) == data["weights"]
    assert load_prune_threshold(index) == 0.3
    assert isinstance(data["threshold"], float)

    out = tmp_path / "report"
    res = runner.invoke(app, ["report", str(weights), "--out", str(out), "--top", "2"])
    assert res.exit_code == 0, res.output
    png = (out / "weights_histogram.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert "good.org" in (out / "report.md").read_text()


def test_fit_rejects_repeated_items(tmp_path: Path) -> None:
    val = tmp_path / "val.jsonl"
    val.write_text(json.dumps({"id": "q", "items": [{"id": "a", "source": "s", "utility": 1},
                                                    {"id": "a", "source": "s", "utility": 0}]}) + "\n")
    res = CliRunner().invoke(app, ["fit", str(val), "--out", str(tmp_path / "w.json")])
    assert res.exit_code != 0 and "appears twice" in str(res.exception)
    res = CliRunner().invoke(app, ["fit", str(val), "--out", str(tmp_path / "w.json"), "--on-duplicate", "first",
                                   "--epochs", "2"])
    assert res.exit_code == 0, res.output


def test_fit_on_a_dask_scheduler_gives_the_single_process_weights(tmp_path: Path) -> None:
    import pytest

    distributed = pytest.importorskip("dask.distributed")
    val = tmp_path / "val.jsonl"
    write_validation(val)
    args = ["fit", str(val), "-k", "3", "--epochs", "5", "--lr", "20"]
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "one.json")])
    assert res.exit_code == 0, res.output
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
    ) as cluster:
        address = cluster.scheduler_address
        res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "dask.json"), "--cluster", address])
        assert res.exit_code == 0, res.output
        assert all(w.state.executed_count > 0 for w in cluster.workers.values()), "each worker summed gradients"
    one = json.loads((tmp_path / "one.json").read_text())
    spread = json.loads((tmp_path / "dask.json").read_text())
    assert spread["weights"].keys() == one["weights"].keys()
    for source, weight in one["weights"].items():
        assert abs(spread["weights"][source] - weight) < 1e-9, source
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "x.json"), "--workers", "2", "--cluster", "tcp://x:1"])
    assert res.exit_code != 0 and "not both" in str(res.exception)
