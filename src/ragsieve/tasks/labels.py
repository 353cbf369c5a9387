"""The three request tasks of the task-adaptive pipeline and the labelled request set."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal, NamedTuple, get_args

from ragsieve.errors import InputError
from ragsieve.io import read_jsonl
from ragsieve.options import TaskLabel as TaskLabel

TASK_LABELS: tuple[TaskLabel, ...] = get_args(TaskLabel)


class TaskRequest(NamedTuple):
    id: str
    text: str
    label: TaskLabel
    ambiguous: bool
    split: str


def bundled_requests_path() -> Path:
    """Path of the bundled labelled request set (see ``tasks/data/README.md``)."""
    return Path(str(resources.files("ragsieve.tasks").joinpath("data/task_requests.jsonl")))


def load_task_requests(
    split: Literal["train", "test"] | None = None, path: str | Path | None = None
) -> list[TaskRequest]:
    """Read labelled requests (``id``, ``text``, ``label``, optional ``ambiguous``, ``split``)."""
    p = Path(path) if path is not None else bundled_requests_path()
    if not p.is_file():
        raise InputError(f"task request file {p} does not exist; pass a JSONL file with text and label fields")
    out: list[TaskRequest] = []
    for i, row in enumerate(read_jsonl(p)):
        label = row.get("label")
        if label not in TASK_LABELS:
            raise InputError(f"{p}: row {i} has label {label!r}; use one of {', '.join(TASK_LABELS)}")
        if not isinstance(row.get("text"), str) or not row["text"].strip():
            raise InputError(f"{p}: row {i} has no text; every row needs a non-empty 'text' field")
        r = TaskRequest(
            str(row.get("id", i)),
            row["text"],
            label,
            bool(row.get("ambiguous", False)),
            str(row.get("split", "train")),
        )
        if split is None or r.split == split:
            out.append(r)
    return out
