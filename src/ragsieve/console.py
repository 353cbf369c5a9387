"""The terminal every command writes to: one stdout and one stderr console, and progress bars
(shared by ``ragsieve`` and every sub-command module, ``*/cli.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

__all__ = ["PlainProgress", "ProgressReporter", "console", "err_console", "progress"]

console = Console()
err_console = Console(stderr=True)


class ProgressReporter:
    """Adapts the index builder's ``(stage, done, total)`` callback to rich progress bars."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, Any] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        labels = {"load": "loading files", "embed": "embedding chunks", "index": "building indexes"}
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(labels.get(stage, stage), total=total)
        self.progress.update(self.tasks[stage], completed=done, total=total)


class _RateColumn(ProgressColumn):
    """Items per second (chunks, files) of a task."""

    def render(self, task: Any) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f}/s" if speed else "", style="progress.data.speed")


def progress() -> Progress:
    """Progress bars on stderr: description, bar, done/total, rate, elapsed, remaining."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=False,
    )


STAGE_LABELS = {"load": "loading files", "embed": "embedding chunks", "index": "building indexes",
                "partitions": "partitions"}


class PlainProgress:
    """An ingest progress callback ``(stage, done, total)`` that writes plain lines, for a stderr
    that is not a terminal (a log file, CI, a pipe), where a progress bar shows nothing.

    At most one line per ``interval_s`` per stage, plus the first and the last, each with the
    rate since the stage began::

        embedding chunks: 1,024/6,119 (17%) 96.3/s, 10.6s

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> report = PlainProgress(out, interval_s=0.0)
        >>> report("embed", 128, 256); report("embed", 256, 256)
        >>> len(out.getvalue().splitlines())
        2
    """

    def __init__(
        self, stream: Any = None, interval_s: float = 5.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        import sys

        self.stream = stream if stream is not None else sys.stderr
        self.interval_s = interval_s
        self.clock = clock
        self._started: dict[str, float] = {}
        self._last: dict[str, float] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        start = self._started.setdefault(stage, now)
        last = self._last.get(stage)
        if last is not None and done < total and now - last < self.interval_s:
            return
        self._last[stage] = now
        elapsed = now - start
        rate = f" {done / elapsed:,.1f}/s," if elapsed > 0 else ""
        share = f" ({100 * done // total}%)" if total else ""
        label = STAGE_LABELS.get(stage, stage)
        self.stream.write(f"{label}: {done:,}/{total:,}{share}{rate} {elapsed:.1f}s\n")
        self.stream.flush()
