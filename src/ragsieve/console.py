"""The terminal every command writes to: one stdout and one stderr console, and progress bars
(shared by ``ragsieve`` and every sub-command module, ``*/cli.py``)."""

from __future__ import annotations

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

__all__ = ["ProgressReporter", "console", "err_console", "progress"]

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
