"""The terminal every command writes to: one stdout and one stderr console, progress (bars on a
terminal, plain lines elsewhere) and the index a command reads when ``--index`` is not given
(shared by ``ragsieve`` and every sub-command module, ``*/cli.py``)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
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

__all__ = [
    "INDEX_ENV",
    "PlainProgress",
    "ProgressReporter",
    "StageRates",
    "console",
    "default_demo_index",
    "err_console",
    "print_result",
    "progress",
    "result_lines",
    "resolve_index_dir",
    "stage_progress",
]

console = Console()
err_console = Console(stderr=True)


class StageRates:
    """Items per second of each stage, measured the one way every progress display and summary
    uses: items done since the stage's first report over the time since it. (Items done before
    the first report are not counted against a clock that was not running, which would inflate the
    rate.) ``None`` until a stage has two reports.

    Example:
        >>> times = iter([0.0, 2.0])
        >>> rates = StageRates(clock=lambda: next(times))
        >>> rates.update("embed", 128); rates.update("embed", 256)
        64.0
        >>> rates.rate("embed")
        64.0
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._first: dict[str, tuple[float, int]] = {}
        self._rate: dict[str, float | None] = {}

    def update(self, stage: str, done: int, now: float | None = None) -> float | None:
        now = self.clock() if now is None else now
        start, first_done = self._first.setdefault(stage, (now, done))
        elapsed = now - start
        rate = (done - first_done) / elapsed if elapsed > 0 and done > first_done else None
        self._rate[stage] = rate
        return rate

    def rate(self, stage: str) -> float | None:
        return self._rate.get(stage)

    def started(self, stage: str) -> float | None:
        first = self._first.get(stage)
        return first[0] if first else None


def rate_text(rate: float | None) -> str:
    """A rate as every ingest line prints it (one decimal, so the summary and the progress agree)."""
    return "" if rate is None else f"{rate:,.1f}/s"


class ProgressReporter:
    """Adapts the index builder's ``(stage, done, total)`` callback to rich progress bars; the
    rate column and the command's summary read the same :class:`StageRates`."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, Any] = {}
        self.rates = StageRates()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(STAGE_LABELS.get(stage, stage), total=total, rate=None)
        rate = self.rates.update(stage, done)
        self.progress.update(self.tasks[stage], completed=done, total=total, rate=rate)


class _RateColumn(ProgressColumn):
    """Items per second (chunks, files) of a task, as :class:`StageRates` measures them."""

    def render(self, task: Any) -> Text:
        return Text(rate_text(task.fields.get("rate")), style="progress.data.speed")


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
                "sentences": "embedding sentences", "partitions": "partitions"}


class PlainProgress:
    """An ingest progress callback ``(stage, done, total)`` that writes plain lines, for a stderr
    that is not a terminal (a log file, CI, a pipe), where a progress bar shows nothing.

    At most one line per ``interval_s`` per stage, plus the first and the last, each with the
    rate since the stage began and the time left at that rate::

        embedding chunks: 1,024/6,119 (17%) 96.3/s, 10.6s, ~53s left

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
        self.rates = StageRates(clock)
        self._last: dict[str, float] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        measured = self.rates.update(stage, done, now)
        last = self._last.get(stage)
        if last is not None and done < total and now - last < self.interval_s:
            return
        self._last[stage] = now
        started = self.rates.started(stage)
        elapsed = now - (now if started is None else started)
        rate = f" {rate_text(measured)}," if measured is not None else ""
        share = f" ({100 * done // total}%)" if total else ""
        left = f", ~{(total - done) / measured:.0f}s left" if measured and total > done else ""
        label = STAGE_LABELS.get(stage, stage)
        self.stream.write(f"{label}: {done:,}/{total:,}{share}{rate} {elapsed:.1f}s{left}\n")
        self.stream.flush()


ProgressCallback = Callable[[str, int, int], None]


@contextmanager
def stage_progress(enabled: bool = True) -> Iterator[ProgressCallback]:
    """A ``(stage, done, total)`` progress callback for a long command: rich progress bars when
    stderr is a terminal, :class:`PlainProgress` lines when it is not (a log file, CI, a pipe),
    so that a logged run is never silent for minutes. ``enabled=False`` reports nothing.

    Example:
        >>> with stage_progress() as report:  # doctest: +SKIP
        ...     report("evaluating", 3, 10)
    """
    if not enabled:
        yield lambda stage, done, total: None
    elif err_console.is_terminal:
        with progress() as bars:
            yield ProgressReporter(bars)
    else:
        yield PlainProgress(sys.stderr)


# Environment variable naming the index that commands use when --index is not given.
INDEX_ENV = "RAGSIEVE_INDEX"

# The help of every ``--index`` option that reads an index (the same fallback everywhere).
INDEX_HELP = f"Index directory (default: ${INDEX_ENV}, else index_dir in --config, else the demo index)."


def default_demo_index() -> Path:
    """Where ``ragsieve demo`` builds the demo index (the last fallback of every command)."""
    from ragsieve.io import user_cache_dir

    return user_cache_dir() / "demo-index"


def resolve_index_dir(index: Path | None, configured: str | None = None) -> Path:
    """The index a command reads: ``--index``, else the configured one, else the demo index.

    Every command that reads an index (``ask``, ``search``, ``info``, ``eval``, ``serve``) falls
    back through this one function. The configured default is ``$RAGSIEVE_INDEX`` or ``index_dir``
    in the ``--config`` file (the environment wins). When the choice was not explicit it is named
    on stderr, so that a user never reads answers from an index they did not mean to ask.
    """
    if index is not None:
        return index
    env = os.environ.get(INDEX_ENV, "").strip()
    demo = default_demo_index()
    if env:
        chosen, why = Path(env), f"${INDEX_ENV}"
    elif configured:
        chosen, why = Path(configured), "index_dir in the config"
    elif demo.is_dir():
        chosen, why = demo, "the demo index; pass --index DIR or set $RAGSIEVE_INDEX for another"
    else:
        from ragsieve.errors import InputError

        raise InputError(
            f"no index given; pass --index DIR (build one with `ragsieve ingest FOLDER --index DIR`), "
            f"set ${INDEX_ENV}, or run `ragsieve demo` to build the demo index"
        )
    err_console.print(f"using index {chosen} ({why})", markup=False, highlight=False)
    return chosen


# Human output is written no wider than this, so it reads in an 80-column terminal.
MAX_WIDTH = 80


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_shown(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_shown(v) for v in value)
    if isinstance(value, bool) or value is None:
        return str(value).lower() if isinstance(value, bool) else "-"
    if isinstance(value, float):
        return f"{value:,.4f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def result_lines(data: dict[str, Any], width: int = MAX_WIDTH, title: str | None = None) -> list[str]:
    """A command's result as human lines: an optional title, then one ``name: value`` line per
    field (nested values inline), wrapped at spaces under their name, never cut.

    Example:
        >>> result_lines({"chunks": 1200, "domains": ["a", "b"]}, title="index x")
        ['index x', '  chunks: 1,200', '  domains: a, b']
    """
    import textwrap

    lines = [title] if title else []
    for key, value in data.items():
        text = f"{str(key).replace('_', ' ')}: {_shown(value) or '-'}"
        lines += textwrap.wrap(
            text, width, initial_indent="  ", subsequent_indent="      ", break_long_words=False,
            break_on_hyphens=False,
        ) or ["  " + text]
    return lines


def print_result(data: dict[str, Any], as_json: bool, title: str | None = None) -> None:
    """Print a command's result: JSON with ``--json``, else :func:`result_lines` on stdout."""
    import json

    if as_json:
        console.print_json(json.dumps(data, default=str, ensure_ascii=False))
        return
    width = max(40, min(console.width or MAX_WIDTH, MAX_WIDTH))
    for line in result_lines(data, width, title):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
