"""``ragsieve calibrate``: labels from cached answers, the cache shared with eval, writing the config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from ragsieve.calibrate import calibrate_threshold
from ragsieve.config import CalibrationConfig, PipelineConfig, load_config
from ragsieve.errors import ConfigError
from ragsieve.eval import calibrate_cli
from ragsieve.eval.calibrate_cli import calibration_labels, lookup_or_answer, write_calibration
from ragsieve.eval.data import QAItem
from ragsieve.eval.harness import EvalCache, EvalSpec
from ragsieve.types import Answer, Trace


class ConfidentPipeline:
    """Answers "right" with high confidence on even ids and "wrong" with low confidence on odd ones."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def warm_up(self) -> None:
        pass

    def ask(self, question: str, **_: Any) -> Answer:
        self.asked.append(question)
        idx = int(question.split()[-1])
        if idx % 10 == 9:
            return Answer(question, "I can't tell.", [], [], Trace(question), abstained=True, confidence=0.0)
        right = idx % 4 != 3
        conf = 0.5 + 0.5 * (idx % 100) / 100 if right else 0.4 * (idx % 100) / 100
        return Answer(question, "Paris" if right else "Rome", [], [], Trace(question), confidence=conf)


def items(n: int) -> list[QAItem]:
    return [QAItem(id=str(i), question=f"question {i}", answers=["Paris"], references=["Paris"]) for i in range(n)]


def test_labels_follow_eval_scoring() -> None:
    qa = [
        QAItem("a", "q", ["Paris"]),
        QAItem("b", "q", ["Paris"]),
        QAItem("c", "q", [], answerable=False),
        QAItem("d", "q", ["Paris"]),
        QAItem("e", "q", [], answerable=False),
    ]
    base = {"cited_ids": [], "llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
    recs = [
        {**base, "answer": "It is Paris.", "abstained": False, "confidence": 0.9},
        {**base, "answer": "Rome", "abstained": False, "confidence": 0.8},
        {**base, "answer": "Paris", "abstained": False, "confidence": 0.7},  # answered an unanswerable one
        {**base, "answer": "no idea", "abstained": True, "confidence": 0.95},
        {**base, "answer": "", "abstained": False, "confidence": 0.5, "error": "boom"},
    ]
    conf, correct = calibration_labels(qa, recs)
    assert conf == [0.9, 0.8, 0.7, None, None]
    assert correct.tolist() == [True, False, False, False, False]


def test_lookup_reuses_an_eval_record_and_answers_the_rest(tmp_path: Path) -> None:
    qa = items(6)
    spec = EvalSpec("sieve", PipelineConfig(index_dir="idx"))
    cache = EvalCache(tmp_path / "c.jsonl").load()
    # an eval run with the lexical-embedding judge already answered question 0
    cache.put({"key": spec.key("0", "question 0", "lexical-embedding"), "answer": "cached", "confidence": 0.1})
    pipe = ConfidentPipeline()
    recs = lookup_or_answer(qa, spec, cache, build=lambda s: pipe)
    assert recs[0]["answer"] == "cached"
    assert pipe.asked == [f"question {i}" for i in range(1, 6)]
    again = ConfidentPipeline()
    lookup_or_answer(qa, spec, EvalCache(tmp_path / "c.jsonl").load(), build=lambda s: again)
    assert again.asked == []  # resumed from the cache file


def test_write_calibration_toml_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "ragsieve.toml"
    path.write_text('# my settings\npipeline = "sieve"\n\n[calibration]\nabstain_below = 0.2\n\n[retrieval]\nk = 7\n')
    write_calibration(path, CalibrationConfig(abstain_below=0.61, risk=0.1, delta=0.1, data="q.jsonl").model_dump())
    text = path.read_text()
    assert "# my settings" in text and text.count("[calibration]") == 1
    cfg = load_config(path)
    assert cfg.calibration.abstain_below == 0.61 and cfg.calibration.data == "q.jsonl"
    assert cfg.retrieval.k == 7 and cfg.pipeline == "sieve"


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_write_calibration_yaml_json(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"c{suffix}"
    path.write_text('{"retrieval": {"k": 3}}')
    write_calibration(path, {"abstain_below": 0.5, "risk": 0.2})
    cfg = load_config(path)
    assert cfg.calibration.abstain_below == 0.5 and cfg.retrieval.k == 3


def test_write_calibration_refuses_what_would_not_load(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    with pytest.raises(ConfigError):
        write_calibration(path, {"abstain_below": 1.5})
    assert not path.exists()


def test_threshold_changes_answer_identity_only_when_set() -> None:
    plain = PipelineConfig()
    recorded = plain.model_copy(update={"calibration": CalibrationConfig(risk=0.1, n=40)})
    assert plain.answer_identity() == recorded.answer_identity()
    thresholded = plain.model_copy(update={"calibration": CalibrationConfig(abstain_below=0.5)})
    assert thresholded.answer_identity() != plain.answer_identity()


def _run_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, n: int, *args: str) -> Any:
    data = tmp_path / "q.jsonl"
    data.write_text(
        "".join(json.dumps({"id": str(i), "question": f"question {i}", "answer": "Paris"}) + "\n" for i in range(n))
    )
    real = lookup_or_answer
    monkeypatch.setattr(
        calibrate_cli, "lookup_or_answer", lambda *a, **k: real(*a, **{**k, "build": lambda s: ConfidentPipeline()})
    )
    runner = CliRunner()
    return runner.invoke(
        calibrate_cli.app,
        ["--data", str(data), "--index", str(tmp_path / "idx"), "--cache", str(tmp_path / "cache.jsonl"),
         "--config", str(tmp_path / "ragsieve.toml"), "--splits", "50", *args],
    )  # fmt: skip


def test_cli_writes_the_threshold_it_certifies(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    res = _run_cli(monkeypatch, tmp_path, 400, "--risk", "0.1", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)  # progress lines go to stderr
    assert out["result"]["feasible"] and out["written_to"]
    thr = out["result"]["threshold"]
    cfg = load_config(tmp_path / "ragsieve.toml")
    assert cfg.calibration.abstain_below == pytest.approx(thr) and cfg.calibration.risk == 0.1
    # the same threshold as calibrating the pipeline's answers directly
    pipe = ConfidentPipeline()
    answers = [pipe.ask(f"question {i}") for i in range(400)]
    conf = [None if a.abstained else a.confidence for a in answers]
    correct = np.array([not a.abstained and a.text == "Paris" for a in answers])
    direct = calibrate_threshold(conf, correct, 0.1, 0.1)
    assert thr == pytest.approx(direct.threshold)
    # every right answer (confidence >= 0.5) is kept, and some low-confidence wrong ones are not
    assert thr <= 0.5 and out["result"]["coverage"] >= 270 / 400
    assert out["result"]["n_answered"] < 360
    assert out["result"]["bound"] <= 0.1
    assert out["simulation"]["n_splits"] == 50


def test_cli_says_when_no_threshold_reaches_the_target(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    res = _run_cli(monkeypatch, tmp_path, 15, "--risk", "0.05")
    assert res.exit_code == 0, res.output
    assert "no threshold reaches risk 0.05" in " ".join(res.output.split())
    assert "Nothing written" in res.output
    assert not (tmp_path / "ragsieve.toml").exists()


def test_cli_max_withdrawn_certifies_both_errors_and_writes_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    res = _run_cli(monkeypatch, tmp_path, 400, "--risk", "0.1", "--max-withdrawn", "0.05", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    details = out["result"]["details"]
    # the same threshold as calibrating with both targets directly
    pipe = ConfidentPipeline()
    answers = [pipe.ask(f"question {i}") for i in range(400)]
    conf = [None if a.abstained else a.confidence for a in answers]
    correct = np.array([not a.abstained and a.text == "Paris" for a in answers])
    direct = calibrate_threshold(conf, correct, 0.1, 0.1, withdrawn=0.05)
    # every right answer has confidence >= 0.5 and every wrong one < 0.4: a threshold keeps them all
    assert direct.feasible and out["result"]["feasible"]
    assert out["result"]["threshold"] == pytest.approx(direct.threshold) and out["result"]["threshold"] <= 0.5
    assert details["withdrawn_target"] == 0.05 and details["withdrawn"] == 0
    assert 0.0 < details["withdrawn_bound"] <= 0.05
    cfg = load_config(tmp_path / "ragsieve.toml")
    assert cfg.calibration.withdrawn == 0.05
    assert cfg.calibration.withdrawn_bound == pytest.approx(details["withdrawn_bound"], abs=1e-6)
