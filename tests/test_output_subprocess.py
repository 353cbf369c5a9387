"""What the user asked for always reaches them: real processes, the real bundled models, no fakes.

The question is answered while the bundled llama.cpp model is still loading on a worker thread
(an abstention needs no model call), so whatever loads the model must leave the process's
standard streams alone. Each run here reads what a user would see: ``ragsieve ask`` in text and
``--json``, in a pipe and on a terminal, on a question the demo corpus answers and on one it does
not; the README's Python example on a small folder; and ``ragsieve serve``'s ``/v1/ask``.
"""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import CORPUS

from ragsieve.demo import demo_corpus_dir, demo_questions

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
# The demo corpus says nothing about Teflon (checked below); the sieve must say it cannot answer.
UNANSWERABLE = "Who invented Teflon, and in which year?"
ANSWERABLE = "Who discovered superconductivity, and in which year?"  # demo question q01
ANSWER_FIELDS = {"question", "answer", "abstained", "abstain_reason", "trace"}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\]8;[^\x1b\x07]*(?:\x1b\\|\x07)")
RUN_TIMEOUT_S = 240


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def _env() -> dict[str, str]:
    """The test session's own folders (tests/conftest.py), no colour, 80 columns."""
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    for name in ("RAGSIEVE_DEBUG", "RAGSIEVE_INDEX", "PYTHONUNBUFFERED"):  # stdout buffered, as a user's is
        env.pop(name, None)
    return env


def _ragsieve(*args: str, cwd: Path) -> Run:
    """``ragsieve ARGS`` with stdout and stderr in pipes."""
    proc = subprocess.run(
        [sys.executable, "-m", "ragsieve.cli", *args], capture_output=True, text=True,
        stdin=subprocess.DEVNULL, env=_env(), cwd=cwd, timeout=RUN_TIMEOUT_S,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def _ragsieve_on_a_terminal(*args: str, cwd: Path) -> Run:
    """``ragsieve ARGS`` with stdout on a pseudo-terminal (stderr in a pipe); the terminal's
    text without its escape sequences."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ragsieve.cli", *args], stdout=slave, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, env=_env(), cwd=cwd,
        )
    finally:
        os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:  # drain the terminal as the process writes, so it never blocks on a full one
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the process closed its end
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        _, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
        os.close(master)
    out = ANSI.sub("", b"".join(chunks).decode("utf-8", errors="replace")).replace("\r\n", "\n")
    return Run(proc.returncode, out, err.decode("utf-8", errors="replace"))


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    """The demo corpus indexed once for the module (as ``ragsieve demo`` indexes it)."""
    from ragsieve.index import Index

    root = tmp_path_factory.mktemp("output")
    Index.build(demo_corpus_dir(), root / "demo-idx", embedder=embedder)
    return root / "demo-idx"


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_demo_corpus_does_not_answer_the_unanswerable_question() -> None:
    corpus = " ".join(p.read_text(encoding="utf-8", errors="ignore") for p in demo_corpus_dir().rglob("*")
                      if p.is_file()).lower()
    assert "teflon" not in corpus and "polytetrafluoroethylene" not in corpus
    assert ANSWERABLE in {q["question"] for q in demo_questions()}


@pytest.fixture(scope="module")
def asked(demo_index: Path) -> dict[tuple[str, str], Run]:
    """Each question asked in text and --json in a pipe, and the unanswerable one on a terminal."""
    cwd = demo_index.parent
    runs: dict[tuple[str, str], Run] = {}
    for question in (ANSWERABLE, UNANSWERABLE):
        runs[question, "text"] = _ragsieve("ask", question, "--index", str(demo_index), "--threads", "1", cwd=cwd)
        runs[question, "json"] = _ragsieve("ask", question, "--index", str(demo_index), "--threads", "1", "--json",
                                           cwd=cwd)
    runs[UNANSWERABLE, "terminal"] = _ragsieve_on_a_terminal(
        "ask", UNANSWERABLE, "--index", str(demo_index), "--threads", "1", cwd=cwd
    )
    return runs


@pytest.mark.parametrize(
    ("question", "how"), [(ANSWERABLE, "text"), (UNANSWERABLE, "text"), (UNANSWERABLE, "terminal")]
)
def test_ask_prints_the_answer_or_the_abstention_and_why(
    asked: dict[tuple[str, str], Run], question: str, how: str
) -> None:
    run = asked[question, how]
    assert run.code == 0, run.err[-2000:]
    assert run.out.strip(), f"nothing on stdout; stderr:\n{run.err[-2000:]}"
    assert f"Q: {question}" in run.out
    assert re.search(r"^A(?: \(abstained\))?: \S", run.out, re.M), run.out
    assert re.search(r"^\d+ ms, \d+ LLM calls?", run.out, re.M), "the output ends with the timings line"
    if question == UNANSWERABLE:  # the refusal, saying why
        assert re.search(r"^A \(abstained\): I can't answer this\b.*\S", run.out, re.M), run.out


@pytest.mark.parametrize("question", [ANSWERABLE, UNANSWERABLE])
def test_ask_json_is_complete_and_agrees_with_the_text(asked: dict[tuple[str, str], Run], question: str) -> None:
    run = asked[question, "json"]
    assert run.code == 0, run.err[-2000:]
    assert run.out.strip(), f"nothing on stdout; stderr:\n{run.err[-2000:]}"
    answer = json.loads(run.out)
    assert set(answer) >= ANSWER_FIELDS, sorted(answer)
    assert answer["question"] == question and answer["answer"].strip()
    if question == UNANSWERABLE:
        assert answer["abstained"] is True and answer["abstain_reason"]
    # the answer the text shows (the model is greedy: one answer per question), wrapped there and
    # with its citation markers
    shown = re.sub(r"\s*\[\d+(?:,\s*\d+)*\]", "", asked[question, "text"].out)
    assert _words(answer["answer"]) in _words(shown)


def test_the_readmes_python_example_prints_its_answer(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "the README's Python API section has no python block"
    shutil.copytree(CORPUS, tmp_path / "docs")  # a user's small folder
    proc = subprocess.run(
        [sys.executable, "-c", code.group(1)], capture_output=True, text=True, stdin=subprocess.DEVNULL,
        env=_env(), cwd=tmp_path, timeout=RUN_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    prints = code.group(1).count("print(")
    assert len(lines) >= prints, f"expected {prints} printed lines, got:\n{proc.stdout}\nstderr:\n{proc.stderr[-2000:]}"
    assert lines[0].split(" ", 1)[0] in ("True", "False"), lines[0]  # answer.abstained first
    assert lines[1].startswith("[") and lines[2].startswith("[")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(demo_index: Path) -> Iterator[str]:
    """``ragsieve serve`` on the demo index on a free loopback port; stopped with SIGINT."""
    port = _free_port()
    err_path = demo_index.parent / "serve.err"
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ragsieve.cli", "serve", "--index", str(demo_index), "--port", str(port),
             "--threads", "1"],
            stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, env=_env(), cwd=demo_index.parent,
        )
        try:
            # Ready when /health answers: the start-up line is logged before the socket listens.
            base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
            while not _answers(f"{base}/health"):
                assert proc.poll() is None, f"serve exited:\n{err_path.read_text()[-2000:]}"
                assert time.monotonic() < deadline, f"serve did not start:\n{err_path.read_text()[-2000:]}"
                time.sleep(0.2)
            yield base
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.mark.parametrize("question", [ANSWERABLE, UNANSWERABLE])
def test_serve_answers_v1_ask(server: str, question: str) -> None:
    request = urllib.request.Request(
        f"{server}/v1/ask", data=json.dumps({"question": question}).encode(),
        headers={"Content-Type": "application/json"}, method="POST",
    )
    with urllib.request.urlopen(request, timeout=RUN_TIMEOUT_S) as reply:
        assert reply.status == 200
        answer = json.loads(reply.read())
    assert set(answer) >= ANSWER_FIELDS, sorted(answer)
    assert answer["question"] == question and answer["answer"].strip()
    if question == UNANSWERABLE:
        assert answer["abstained"] is True and answer["abstain_reason"]
