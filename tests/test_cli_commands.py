"""Every ``ragsieve`` command, run for real as a user runs it, with stderr going to a file.

Each command gets its cheapest real invocation: a small index built here with the bundled ONNX
embedder, the fake OpenAI-compatible chat server of ``tests/chat_server.py`` where an answer is
generated, and the bundled llama.cpp model where log-probabilities are needed. stdout and stderr
are files, not a terminal, so the long commands must report progress as plain lines there (a
logged run is never silent for minutes), and human output must fit 80 columns.

The command tree is read from the click command, so a command added later fails
``test_every_command_is_exercised`` until it is given an invocation here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.attack.fakes import QUESTIONS as ATTACK_QUESTIONS
from tests.chat_server import serve_chat
from tests.helpers import copy_corpus

from ragsieve import __version__
from ragsieve.cli import cli_command

pytestmark = pytest.mark.slow


def _leaf_commands(command: Any, path: tuple[str, ...] = ()) -> list[str]:
    subs = getattr(command, "commands", None)
    if not subs:
        return [" ".join(path)]
    return [name for key, sub in subs.items() for name in _leaf_commands(sub, (*path, key))]


@dataclass
class Run:
    code: int
    out: str
    err: str


def _env(tmp: Path) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "RAGSIEVE_INDEX": "", "XDG_CACHE_HOME": str(tmp / "cache")}
    env.pop("RAGSIEVE_DEBUG", None)
    return env


class Workspace:
    """The files every command reads, and a runner that sends stdout and stderr to files."""

    def __init__(self, root: Path, chat_url: str) -> None:
        self.root = root
        self.chat_url = chat_url
        self.logs = root / "logs"
        self.logs.mkdir()
        self.n = 0

    def run(self, *args: str, timeout: float = 300) -> Run:
        self.n += 1
        out_path, err_path = self.logs / f"{self.n}.out", self.logs / f"{self.n}.err"
        with out_path.open("w") as out, err_path.open("w") as err:
            proc = subprocess.run(
                [sys.executable, "-m", "ragsieve.cli", *args], stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                env=_env(self.root), timeout=timeout, cwd=self.root,
            )
        return Run(proc.returncode, out_path.read_text(), err_path.read_text())

    def path(self, name: str) -> str:
        return str(self.root / name)


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    root = tmp_path_factory.mktemp("commands")
    copy_corpus(root)
    _write_jsonl(root / "qa.jsonl", [
        {"question": "What is the Moon?", "answer": "satellite"},
        {"question": "What do ribosomes build?", "answer": "proteins"},
    ])
    _write_jsonl(root / "route-labels.jsonl", [
        {"text": "Apollo landed on the Moon", "domain": "astronomy"},
        {"text": "the Sun is a star", "domain": "astronomy"},
        {"text": "cells make proteins in ribosomes", "domain": "biology"},
        {"text": "plants use photosynthesis", "domain": "biology"},
    ])
    _write_jsonl(root / "sst.jsonl", [
        {"text": "a moving film about the Moon", "label": "positive"},
        {"text": "a dull film about cells", "label": "negative"},
    ])
    _write_jsonl(root / "attack-q.jsonl", ATTACK_QUESTIONS)
    _write_jsonl(root / "validation.jsonl", [
        {"id": f"q{q}", "items": [
            {"id": f"q{q}-{r}", "source": ["good.org", "bad.com", "ok.net"][(q + r) % 3],
             "utility": 0.0 if (q + r) % 3 == 1 else 1.0}
            for r in range(4)
        ]}
        for q in range(6)
    ])
    (root / "noise.txt").write_text("noise sentence one.\nnoise sentence two.\n", encoding="utf-8")
    _write_dkf(root / "dkf.jsonl")
    with serve_chat() as chat:
        (root / "fake-llm.toml").write_text(
            f'[llm]\nbackend = "openai"\nbase_url = "{chat.url}"\nmodel = "fake"\n', encoding="utf-8"
        )
        yield Workspace(root, chat.url)


def _write_dkf(path: Path) -> None:
    from ragsieve.filtering import KfDataset, KfPair

    pairs = [
        KfPair("sst-2", f"review {i}: a moving film", text, harmful, 1.5 if harmful else 0.5, "predicted",
               gold="positive", rank=1, p_without=[0.4, 0.6], p_with=[0.5, 0.5] if harmful else [0.2, 0.8])
        for i in range(6)
        for text, harmful in (("The Moon orbits the Earth.", False), ("Cats purr when content.", True))
    ]
    KfDataset(pairs, {"theta": 1.0}).save(path)


def _progress_lines(err: str, label: str) -> list[str]:
    """Plain progress lines (``label: done/total (pct%) rate/s, secs``) in a stderr file."""
    return [line for line in err.splitlines() if re.match(rf"{re.escape(label)}[^:]*: [\d,]+/[\d,]+", line)]


def _fits(text: str, width: int = 80) -> None:
    long = [line for line in text.splitlines() if len(line) > width]
    assert not long, f"lines wider than {width}: {long}"


# Which command writes which progress label, and the invocations, in the order they depend on
# each other (ingest first: the rest read its index).
PROGRESS = {
    "ingest": "loading files", "demo": "embedding chunks", "eval": "evaluating",
    "calibrate": "answering with", "filters annotate": "annotating",
}


@pytest.fixture(scope="module")
def results(ws: Workspace) -> dict[str, Run]:
    idx, url = ws.path("idx"), ws.chat_url
    fake = ("--llm-url", url, "--model", "fake")
    out: dict[str, Run] = {}
    out["ingest"] = ws.run("ingest", ws.path("corpus"), "--index", idx, "--threads", "1")
    out["search"] = ws.run("search", "Apollo moon landing", "--index", idx, "-k", "3")
    out["search sparse note"] = ws.run("search", "the of and", "--index", idx, "--mode", "sparse", "--json")
    out["ask"] = ws.run("ask", "What is the Moon?", "--index", idx, *fake, "--pipeline", "plain")
    out["ask json"] = ws.run("ask", "What is the Moon?", "--index", idx, *fake, "--pipeline", "plain", "--json")
    (ws.root / "answer.json").write_text(out["ask json"].out, encoding="utf-8")
    out["info"] = ws.run("info", "--index", idx)
    out["audit"] = ws.run("audit", "--index", idx)
    # generations: an index ingested twice (a file added) has a previous generation to switch back to
    generations_corpus, generations_idx = ws.root / "corpus-generations", ws.path("idx-generations")
    shutil.copytree(ws.path("corpus"), generations_corpus)
    ws.run("ingest", str(generations_corpus), "--index", generations_idx, "--threads", "1")
    (generations_corpus / "added.txt").write_text("An added note about the Apollo landing sites.\n", encoding="utf-8")
    ws.run("ingest", str(generations_corpus), "--index", generations_idx, "--threads", "1")
    out["index generations"] = ws.run("index", "generations", "--index", generations_idx, "--json")
    listed = json.loads(out["index generations"].out) if out["index generations"].code == 0 else []
    previous = next((r["generation"] for r in listed if r["role"] == "previous"), "none-listed")
    out["index use"] = ws.run("index", "use", previous, "--index", generations_idx)
    out["classify"] = ws.run("classify", "a moving film", "--labels", "positive,negative", "--no-calibrate",
                             "--threads", "1")
    out["eval"] = ws.run("eval", "--data", ws.path("qa.jsonl"), "--index", idx, *fake, "--only", "plain,no-retrieval",
                         "--judge", "none", "--bootstrap", "20", "--cache", ws.path("eval-cache.jsonl"))
    out["calibrate"] = ws.run("calibrate", "--data", ws.path("qa.jsonl"), "--index", idx, *fake, "--pipeline",
                              "plain", "--splits", "0", "--no-write", "--cache", ws.path("cal-cache.jsonl"))
    out["trace view"] = ws.run("trace", "view", ws.path("answer.json"), "-o", ws.path("trace.html"))
    out["router train"] = ws.run("router", "train", idx)
    out["router eval"] = ws.run("router", "eval", idx, "--labels", ws.path("route-labels.jsonl"))
    out["router route"] = ws.run("router", "route", "Apollo moon landing", "--index", idx)
    out["filters annotate"] = ws.run("filters", "annotate", "--data", ws.path("sst.jsonl"), "--index", idx,
                                     "--out", ws.path("annotated.jsonl"), "--shots", "1", "--top-k", "2")
    out["filters train"] = ws.run("filters", "train", "--dkf", ws.path("dkf.jsonl"), "--out", ws.path("proxy"))
    out["filters eval"] = ws.run("filters", "eval", "--heldout", ws.path("dkf.jsonl"), "--filter", "proxy",
                                 "--proxy", ws.path("proxy"))
    out["tasks train"] = ws.run("tasks", "train", "--out", ws.path("tasks.npz"))
    out["tasks eval"] = ws.run("tasks", "eval", "--model-path", ws.path("tasks.npz"), "--limit", "5")
    out["coe extract"] = ws.run("coe", "extract", "Who wrote Hamlet?")
    out["coe judge"] = ws.run("coe", "judge", "Who wrote Hamlet?", "-k", "Hamlet is a play by Shakespeare.")
    out["coe perturb"] = ws.run("coe", "perturb", "irrelevant", "-k", "Paris is in France.", "--pool",
                                ws.path("noise.txt"))
    out["importance fit"] = ws.run("importance", "fit", ws.path("validation.jsonl"), "--out", ws.path("w.json"),
                                   "-k", "2", "--epochs", "2")
    out["importance report"] = ws.run("importance", "report", ws.path("w.json"))
    out["attack poison"] = ws.run("attack", "poison", "--index", idx, "--questions", ws.path("attack-q.jsonl"),
                                  "--n", "1", "--out", ws.path("poisoned"))
    out["attack eval"] = ws.run("attack", "eval", "--index", idx, "--poisoned", ws.path("poisoned"), "--defence",
                                "plain", "--config", ws.path("fake-llm.toml"))
    out["importance apply"] = ws.run("importance", "apply", ws.path("w.json"), "--index", idx)
    out["serve"] = _serve(ws, idx)
    out["mcp"] = ws.run("mcp", "--index", idx, *fake)  # stdio: stdin at its end, the server stops at once
    out["demo"] = ws.run("demo", "--index", ws.path("demo-idx"), "-q", "What is graphene?", "--pipeline", "plain",
                         "--threads", "1", timeout=900)
    return out


def _serve(ws: Workspace, idx: str) -> Run:
    """Start ``ragsieve serve``, wait for its start-up line on stderr, then stop it."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err_path = ws.logs / "serve.err"
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ragsieve.cli", "serve", "--index", idx, "--port", str(port),
             "--llm-url", ws.chat_url, "--model", "fake"],
            stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, env=_env(ws.root), cwd=ws.root,
        )
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and "ragsieve serving" not in err_path.read_text():
                if proc.poll() is not None:
                    break
                time.sleep(0.2)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    return Run(0 if proc.returncode in (0, -signal.SIGINT, 130) else proc.returncode, "", err_path.read_text())


def test_every_command_is_exercised(results: dict[str, Run]) -> None:
    assert set(_leaf_commands(cli_command())) <= set(results), "give the new command an invocation in results()"


def test_every_command_succeeds(results: dict[str, Run]) -> None:
    failed = {name: (r.code, r.err[-600:]) for name, r in results.items() if r.code != 0}
    assert not failed, failed


@pytest.mark.parametrize("command", sorted(PROGRESS))
def test_long_commands_write_progress_lines_to_a_stderr_file(results: dict[str, Run], command: str) -> None:
    err = results[command].err
    lines = _progress_lines(err, PROGRESS[command])
    assert lines, f"no '{PROGRESS[command]}' progress line on {command}'s stderr:\n{err[-1500:]}"
    assert "\r" not in err and "\x1b[" not in err  # plain lines: no bar redrawn in place, no colour codes


def test_serve_logs_its_start_up_line_at_info(results: dict[str, Run]) -> None:
    start = [line for line in results["serve"].err.splitlines() if "ragsieve serving" in line]
    assert start and start[0].startswith("INFO "), results["serve"].err[-1000:]
    assert not any(line.startswith("WARNING") for line in results["serve"].err.splitlines())


@pytest.mark.parametrize("command", ["ask", "search", "info", "eval", "router route", "demo"])
def test_human_output_fits_80_columns(results: dict[str, Run], command: str) -> None:
    out = results[command].out
    assert out.strip() and not out.lstrip().startswith("{")  # human lines by default, not JSON
    _fits(out)


def test_ask_prints_the_citation_and_the_timing_line_whole(results: dict[str, Run]) -> None:
    lines = results["ask"].out.splitlines()
    assert any(re.fullmatch(r" +\[\d\] astronomy/moon\.txt", line) for line in lines), lines
    timing = [line for line in lines if " ms, " in line and "LLM call" in line]
    assert timing and "…" not in timing[-1]


def test_info_and_search_have_json_too(ws: Workspace) -> None:
    info = json.loads(ws.run("info", "--index", ws.path("idx"), "--json").out)
    assert set(info["domains"]) == {"astronomy", "biology"}
    hits = json.loads(ws.run("search", "Moon", "--index", ws.path("idx"), "-k", "1", "--json").out)["hits"]
    assert hits[0]["citation"] and hits[0]["path"]


def test_sparse_search_with_no_searchable_word_says_why(results: dict[str, Run]) -> None:
    data = json.loads(results["search sparse note"].out)
    assert data["hits"] == [] and "no searchable words" in data["note"]


def test_eval_intervals_never_split_a_bracket(results: dict[str, Run]) -> None:
    out = results["eval"].out
    for line in out.splitlines():
        assert line.count("[") == line.count("]"), line


def test_version(ws: Workspace) -> None:
    result = ws.run("--version")
    assert result.code == 0 and result.out.strip() == f"ragsieve {__version__}"


# ---------------------------------------------------------------- what a new user reads
@pytest.fixture(scope="module")
def own(ws: Workspace) -> dict[str, Run]:
    """A second index of the corpus and the runs that read it, apart from ``results`` (which runs
    every command, the bundled models' included): ingest, search on both scales, an answer the
    sieve withdraws at 80 columns, and eval on two questions."""
    idx, fake = ws.path("own-idx"), ("--llm-url", ws.chat_url, "--model", "fake")
    # the default threshold bounds the right drafts withdrawn and keeps this non-answer (with a
    # caveat) at its confidence of about 0.1; a stricter one shows how a withdrawn draft reads
    strict = Path(ws.path("strict.yaml"))
    strict.write_text("decide:\n  threshold: 0.5\n", encoding="utf-8")
    return {
        "ingest": ws.run("ingest", ws.path("corpus"), "--index", idx, "--threads", "1"),
        "search": ws.run("search", "Apollo moon landing", "--index", idx, "-k", "3"),
        "search raw": ws.run("search", "Apollo moon landing", "--index", idx, "-k", "3", "--raw-scores"),
        "search json": ws.run("search", "Apollo moon landing", "--index", idx, "-k", "3", "--json"),
        # the fake server answers "The passages state it [1].": no date, so the sieve refuses it
        "ask sieve": ws.run("ask", "When did Apollo 11 land on the Moon?", "--index", idx, *fake,
                            "--config", str(strict)),
        "ask default": ws.run("ask", "When did Apollo 11 land on the Moon?", "--index", idx, *fake),
        "eval": ws.run("eval", "--data", ws.path("qa.jsonl"), "--index", idx, *fake, "--only", "plain,no-retrieval",
                       "--judge", "none", "--bootstrap", "20", "--cache", ws.path("own-eval-cache.jsonl")),
    }


def test_search_scores_are_on_0_1_with_raw_scores_behind_a_flag(own: dict[str, Run]) -> None:
    assert all(r.code == 0 for r in own.values()), {k: r.err[-800:] for k, r in own.items() if r.code}
    scaled = [line for line in own["search"].out.splitlines() if line.strip().startswith("fused ")]
    assert scaled and all(re.match(r"\s+fused [01]\.\d\d\b", line) for line in scaled), scaled
    assert scaled[0].strip().startswith("fused 1.00") and "0-1" in own["search"].out.splitlines()[0]
    numbers = [float(x) for line in scaled for x in re.findall(r"(?:fused|dense|sparse) (\d+\.\d+)", line)]
    assert numbers and all(0.0 <= x <= 1.0 for x in numbers)
    raw = [line for line in own["search raw"].out.splitlines() if line.strip().startswith("fused ")]
    assert raw and re.match(r"\s+fused 0\.0\d{3}\b", raw[0]), raw  # reciprocal-rank fusion, as it is
    assert any(float(x) > 1 for line in raw for x in re.findall(r"sparse (\d+\.\d+)", line)), raw  # BM25
    hit = json.loads(own["search json"].out)["hits"][0]
    assert hit["scaled_scores"]["fused"] == 1.0 and hit["scores"]["fused"] < 0.1


def test_an_80_column_answer_shows_the_withdrawn_draft(own: dict[str, Run]) -> None:
    out = own["ask sieve"].out
    _fits(out)
    lines = out.splitlines()
    assert lines[1].startswith("A (abstained): "), out
    flat = " ".join(out.split())
    # the reply the checks refused, whole, with why and what replaced it
    # why, in words: what the reply lacks (the code stays in --json)
    assert ("withdrawn draft, replaced by the abstention: The answer does not give the kind of answer the question "
            "asks for (the question asks for a date or year; the answer gives none)") in flat, out
    assert "responsive:" not in flat and "wrong_kind" not in flat, out
    assert "The passages state it [1]." in flat
    assert "…" not in "\n".join(lines[: lines.index(next(x for x in lines if x.startswith("candidates")))])


def test_a_kept_non_answer_carries_its_caveat(own: dict[str, Run]) -> None:
    # at the default threshold the decision keeps the draft the responsiveness check asked to
    # withdraw; the reader is told, beside the answer, that the checks did not confirm it and why
    out = own["ask default"].out
    _fits(out)
    lines = out.splitlines()
    assert lines[1].startswith("A: The passages state it [1]."), out
    flat = " ".join(out.split())
    # why, in words: the check that asked to withdraw it, and what it found
    assert "caveat: The checks could not confirm this answer: the answer does not give the kind of answer" in flat, out
    assert "responsive:" not in flat and "verify:" not in flat and ">=" not in flat.split("candidates (")[0], out


def test_ingest_summary_and_progress_line_give_one_rate(own: dict[str, Run]) -> None:
    progress = _progress_lines(own["ingest"].err, "embedding chunks")
    summary = own["ingest"].out
    shown = re.search(r"at ([\d,.]+) chunks/s", summary)
    last = re.search(r" ([\d,.]+)/s,", progress[-1]) if progress else None
    assert shown, summary
    if last is not None:  # (one batch gives the progress line no rate: the summary gives the embedder's)
        assert shown.group(1) == last.group(1), (summary, progress)


def test_eval_header_and_why_there_is_no_fair_comparison(own: dict[str, Run]) -> None:
    out = " ".join(own["eval"].out.split())
    assert "2 questions; rates in %" in out and "questions, %" not in out
    assert "no fair comparison: it needs at least 4 questions" in out and "the fair comparison is below" not in out
