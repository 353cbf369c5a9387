"""The calibrated threshold is applied where the answer is assembled: by ``Pipeline.ask`` (so by
``ask``, ``serve`` and ``eval`` alike), after every other check, and the threshold
``ragsieve calibrate`` writes is the one ``ragsieve ask --config`` uses."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import HashEmbedder, copy_corpus
from tests.test_cli_lean import _ChatServer
from typer.testing import CliRunner

from ragsieve.config import CalibrationConfig, load_config, validate_config
from ragsieve.eval import calibrate_cli
from ragsieve.eval.calibrate_cli import lookup_or_answer
from ragsieve.index import Index
from ragsieve.llm.base import Generation
from ragsieve.sieve.closing import calibrated_abstention
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.sieve.state import Abstain, PipelineState
from ragsieve.types import Answer, Trace
from ragsieve.verify import LexicalEmbeddingJudge

MOON_Q = "When did Apollo 11 land on the Moon?"
REPLY = "Apollo 11 landed on the Moon in July 1969 [1]."


class FixedLLM:
    """Always the same reply; no log-probabilities (the sieve's confidence comes from its checks)."""

    model_name = "fixed"

    def __init__(self, reply: str = REPLY) -> None:
        self.reply = reply

    def warm_up(self) -> None:
        pass

    def generate(self, prompt: Any, *, max_tokens: int = 256, temperature: float = 0.0, stop: Any = None,
                 seed: Any = None) -> Generation:  # fmt: skip
        return Generation(self.reply, 100, 10, "stop")


class KeywordJudge:
    name = "keyword"
    upper = 0.6
    lower = 0.3

    def warm_up(self) -> None:
        pass

    def score(self, question: str, passages: list[str]) -> list[float]:
        return [0.9 if "apollo" in p.lower() else 0.1 for p in passages]


@pytest.fixture(scope="module")
def hash_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("calibrated")
    return Index.build(copy_corpus(root), root / "idx", embedder=HashEmbedder())


def pipeline(index: Index, threshold: float | None, preset: str = "sieve", min_confidence: float = 0.0) -> Pipeline:
    # without the decide stage: what is pinned here is the threshold applied where the answer is
    # assembled (the decide stage applies the same threshold itself: tests/sieve/test_decide.py)
    cfg = validate_config({
        "pipeline": preset,
        "ablate": ["decide"] if preset == "sieve" else [],
        "sieve": {"need": "always", "route": "all", "select": "top-k", "min_confidence": min_confidence},
        "calibration": {"abstain_below": threshold},
    })  # fmt: skip
    return Pipeline(cfg, index=index, llm=FixedLLM(), judge=KeywordJudge(),
                    claim_judge=LexicalEmbeddingJudge(embedding_weight=0.0))  # fmt: skip


def calibration_events(answer: Answer) -> list[dict[str, Any]]:
    return [e for e in answer.trace.events if e.get("stage") == "abstain" and e.get("check") == "calibration"]


def test_the_sieve_answers_at_or_above_the_threshold_and_abstains_below(hash_index: Index) -> None:
    free = pipeline(hash_index, None).ask(MOON_Q)
    assert not free.abstained and free.confidence is not None and 0.0 < free.confidence < 1.0
    c = free.confidence
    at = pipeline(hash_index, round(c - 1e-6, 6)).ask(MOON_Q)
    assert not at.abstained and at.text == free.text and at.confidence == c and not calibration_events(at)
    below = pipeline(hash_index, min(1.0, c + 0.01)).ask(MOON_Q)
    assert below.abstained and below.confidence == c
    assert below.abstain_reason is not None and below.abstain_reason.startswith("calibration: confidence")
    assert REPLY not in below.text and "calibrated threshold" in below.text
    assert [e["reason"] for e in calibration_events(below)] == [below.abstain_reason]


def test_plain_rag_has_no_confidence_so_a_threshold_abstains_always(hash_index: Index) -> None:
    assert not pipeline(hash_index, None, preset="plain").ask(MOON_Q).abstained
    ans = pipeline(hash_index, 0.01, preset="plain").ask(MOON_Q)
    assert ans.abstained and ans.confidence is None
    assert ans.abstain_reason is not None and "no confidence" in ans.abstain_reason


def test_min_confidence_decides_first_and_the_higher_floor_wins(hash_index: Index) -> None:
    c = pipeline(hash_index, None).ask(MOON_Q).confidence
    assert c is not None
    # the verify stage's fixed floor abstains first; calibration leaves that abstention alone
    by_verify = pipeline(hash_index, 0.01, min_confidence=min(1.0, c + 0.01)).ask(MOON_Q)
    assert by_verify.abstained and by_verify.abstain_reason.startswith("verify: confidence")
    assert not calibration_events(by_verify)
    # a floor below the confidence and a threshold above it: the threshold decides
    by_threshold = pipeline(hash_index, min(1.0, c + 0.01), min_confidence=max(0.0, c - 0.01)).ask(MOON_Q)
    assert by_threshold.abstained and calibration_events(by_threshold)


def test_the_helper_leaves_abstentions_and_unthresholded_answers_alone() -> None:
    for threshold, confidence, abstained in ((None, 0.1, False), (0.5, 0.1, True), (0.5, 0.9, False)):
        state = PipelineState(question="q", text="draft", confidence=confidence,
                              abstain=Abstain("judge", "judge: x", "none relevant") if abstained else None)  # fmt: skip
        assert calibrated_abstention(state, threshold) is None
    state = PipelineState(question="q", text="draft", confidence=None)
    out = calibrated_abstention(state, 0.5)
    assert out is not None and out.check == "calibration" and "unknown" in out.text and state.text == "draft"


# ---------------------------------------------------------------------------- calibrate, then ask


class ConfidentPipeline:
    """Right ("Paris") with confidence >= 0.5 on three in four questions, wrong below 0.4 otherwise."""

    def warm_up(self) -> None:
        pass

    def ask(self, question: str, **_: Any) -> Answer:
        idx = int(question.split()[-1])
        right = idx % 4 != 3
        conf = 0.5 + 0.5 * (idx % 100) / 100 if right else 0.4 * (idx % 100) / 100
        return Answer(question, "Paris" if right else "Rome", [], [], Trace(question), confidence=conf)


@pytest.fixture(scope="module")
def chat_server() -> Iterator[str]:
    handler = type("Handler", (_ChatServer,), {"requests": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def real_index(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    root = tmp_path_factory.mktemp("calibrated-real")
    Index.build(copy_corpus(root), root / "idx", embedder=embedder)
    return root / "idx"


def ask_json(config: Path, index: Path, url: str) -> dict[str, Any]:
    from ragsieve.cli import app

    res = CliRunner().invoke(app, ["ask", "What is the Moon?", "--index", str(index), "--config", str(config),
                                   "--llm-url", url, "--model", "fake", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    return json.loads(res.output[res.output.index("{") :])


def test_ask_uses_the_threshold_calibrate_wrote(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, real_index: Path, chat_server: str
) -> None:
    config = tmp_path / "ragsieve.toml"
    config.write_text('pipeline = "sieve"\nablate = ["decide"]\n\n[sieve]\nneed = "always"\n')
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "question": f"question {i}", "answer": "Paris"}) + "\n"
                            for i in range(400)))  # fmt: skip
    real = lookup_or_answer
    monkeypatch.setattr(
        calibrate_cli, "lookup_or_answer", lambda *a, **k: real(*a, **{**k, "build": lambda s: ConfidentPipeline()})
    )
    res = CliRunner().invoke(calibrate_cli.app, ["--data", str(data), "--index", str(real_index), "--risk", "0.1",
                                                 "--config", str(config), "--cache", str(tmp_path / "c.jsonl"),
                                                 "--splits", "0", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    threshold = json.loads(res.stdout)["result"]["threshold"]
    assert load_config(config).calibration.abstain_below == pytest.approx(threshold)

    # the same question without the threshold: its confidence decides what the threshold does
    bare = tmp_path / "bare.toml"
    bare.write_text('pipeline = "sieve"\nablate = ["decide"]\n\n[sieve]\nneed = "always"\n')
    free = ask_json(bare, real_index, chat_server)
    assert not free["abstained"] and free["confidence"] is not None, free["abstain_reason"]
    calibrated = ask_json(config, real_index, chat_server)
    conf = free["confidence"]
    expect_abstain = conf < threshold
    assert calibrated["abstained"] == expect_abstain
    assert (calibrated["abstain_reason"] or "").startswith("calibration:") == expect_abstain
    # just above this answer's confidence it abstains; at it, it answers
    for value, abstains in ((min(1.0, conf + 0.01), True), (conf, False)):
        calibrate_cli.write_calibration(config, CalibrationConfig(abstain_below=value).model_dump())
        assert ask_json(config, real_index, chat_server)["abstained"] == abstains


def test_calibrate_answers_every_draft_of_the_decide_stage(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, real_index: Path
) -> None:
    """The decide stage answers every draft with its confidence while calibrating (threshold 0),
    so the threshold is chosen over all of them; the config file keeps no decide threshold."""
    config = tmp_path / "ragsieve.toml"
    config.write_text('pipeline = "sieve"\n\n[sieve]\nneed = "always"\n')
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "question": f"question {i}", "answer": "Paris"}) + "\n"
                            for i in range(200)))  # fmt: skip
    seen: list[Any] = []
    real = lookup_or_answer

    def spy(items: Any, spec: Any, *a: Any, **k: Any) -> Any:
        seen.append(spec.config)
        return real(items, spec, *a, **{**k, "build": lambda s: ConfidentPipeline()})

    monkeypatch.setattr(calibrate_cli, "lookup_or_answer", spy)
    res = CliRunner().invoke(calibrate_cli.app, ["--data", str(data), "--index", str(real_index), "--risk", "0.1",
                                                 "--config", str(config), "--cache", str(tmp_path / "c.jsonl"),
                                                 "--splits", "0", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert seen and seen[0].decide.threshold == 0.0
    written = load_config(config)
    assert written.decide.threshold is None and written.calibration.abstain_below is not None
