"""Loading the llama.cpp model leaves the process's standard streams alone.

llama-cpp-python's quiet mode points file descriptors 1 and 2 at /dev/null while a model loads,
and the model loads on a worker thread while the question is answered: an answer printed then
was lost. These tests load the real bundled model and watch the descriptors from another thread.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from ragsieve.llm.llama_cpp import LlamaCppLLM, native_logger, quiet_llama_load

pytest.importorskip("llama_cpp")


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def test_a_thread_building_a_model_prints_to_the_log_and_every_other_thread_to_stderr(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import llama_cpp.llama as llama_module

    other = io.StringIO()
    monkeypatch.setattr(sys, "stderr", other)
    seen_elsewhere: list[Any] = []
    with caplog.at_level(logging.DEBUG, logger=native_logger.name), quiet_llama_load():
        print("Model metadata: {}", file=llama_module.sys.stderr)  # what Llama.__init__ prints
        worker = threading.Thread(target=lambda: seen_elsewhere.append(llama_module.sys.stderr))
        worker.start()
        worker.join()
    assert "Model metadata: {}" in [r.getMessage() for r in caplog.records if r.name == native_logger.name]
    assert seen_elsewhere == [other]  # another thread's stderr is the real one
    assert llama_module.sys.stderr is other  # and so is this thread's after the load
    assert llama_module.sys.path is sys.path  # everything else is sys itself


@pytest.mark.slow
def test_loading_the_model_never_redirects_stdout_or_stderr(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from llama_cpp import _utils

    redirected: list[bool] = []
    enter: Callable[[Any], Any] = _utils.suppress_stdout_stderr.__enter__

    def spy(self: Any) -> Any:
        if not self.disable:
            redirected.append(True)
        return enter(self)

    monkeypatch.setattr(_utils.suppress_stdout_stderr, "__enter__", spy)
    before = {fd: _identity(fd) for fd in (1, 2)}
    seen: set[tuple[int, tuple[int, int]]] = set()
    writes = 0
    stop = threading.Event()

    def watch() -> None:  # what another thread finds, and writes, while the model loads
        nonlocal writes
        while not stop.is_set():
            for fd in (1, 2):
                seen.add((fd, _identity(fd)))
            os.write(1, b"x")
            writes += 1
            time.sleep(0.001)

    # The native log lines are kept by a handler of the test's own, not passed up to the root
    # logger: a handler another test left there (a CLI run's, on a stream since closed) would
    # print a logging error on stderr, which is not the load printing.
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep(logging.DEBUG)
    monkeypatch.setattr(native_logger, "propagate", False)
    monkeypatch.setattr(native_logger, "level", logging.DEBUG)
    native_logger.addHandler(keep)
    watcher = threading.Thread(target=watch)
    llm = LlamaCppLLM(n_threads=1)
    try:
        watcher.start()
        try:
            llm.warm_up()
        finally:
            stop.set()
            watcher.join()
    finally:
        native_logger.removeHandler(keep)
    assert not redirected, "the model load used llama-cpp-python's fd redirection"
    assert seen == {(fd, before[fd]) for fd in (1, 2)}, "fd 1 or 2 pointed elsewhere during the load"
    out, err = capfd.readouterr()
    assert out == "x" * writes  # every write of the other thread arrived, nothing else did
    assert err == "", f"the load printed on stderr: {err[:500]!r}"
    native = [r.getMessage() for r in records]
    assert any("llama_model_loader" in m or "llama_context" in m for m in native), native[:5]
    assert llm._llama is not None and llm._llama.verbose is False  # no timings printed per call
    llm.generate("Say hi.", max_tokens=4)
    assert capfd.readouterr() == ("", "")
