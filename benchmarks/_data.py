"""Data readers and answer caches shared by the benchmark scripts.

JSONL files are read by :func:`ragsieve.io.read_jsonl` (gzip-compressed when the name ends in
``.gz``; blank lines skipped; a malformed line raises with its line number). A cache that a run
appends to while another process may read it is read with :func:`read_complete_lines`, which
skips the line being written, and written through :class:`AnswerCache`, one fsynced line per
record, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from ragsieve.io import read_jsonl

__all__ = ["AnswerCache", "load_or_make_jsonl", "prose_corpora", "read_complete_lines", "read_jsonl"]

T = TypeVar("T")


def read_complete_lines(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a file another process may be appending to (a torn or
    malformed line is skipped; a missing file reads as empty)."""
    if not path.exists():
        return []
    rows = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break  # the line being written
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                rows.append(row)
    return rows


def load_or_make_jsonl(
    path: Path,
    make: Callable[[], Iterable[T]],
    to_dict: Callable[[T], dict[str, Any]],
    from_dict: Callable[[dict[str, Any]], T],
) -> list[T]:
    """The records kept in the JSONL ``path``, or, when there is none yet, ``make()``'s, written
    there first (one ``to_dict`` object a line), so a rerun reuses them instead of making them again."""
    if path.is_file():
        return [from_dict(row) for row in read_jsonl(path)]
    records = list(make())
    path.write_text("".join(json.dumps(to_dict(r), ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return records


class AnswerCache:
    """Append-only JSONL of records keyed by their ``"key"`` field; each record is one flushed and
    fsynced line, so a killed run loses at most the record being written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records = {r["key"]: r for r in read_complete_lines(path) if "key" in r}

    def put(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.records[record["key"]] = record


def prose_corpora(shared: Path) -> dict[str, list[str]]:
    """The distinct passages of three ordinary corpora under ``shared`` (``../shared/data``):
    SQuAD 2.0 passages (``trust/squad2``), HotpotQA dev paragraphs (distractor 500) and BEIR
    NFCorpus abstracts: text written for people, with no instruction to a model in it."""
    squad2 = list(dict.fromkeys(r["text"] for r in read_jsonl(shared / "trust/squad2/corpus.jsonl")))
    hotpot: dict[str, None] = {}
    for row in read_jsonl(shared / "hotpotqa/hotpotqa_dev_distractor_500.jsonl"):
        for c in row["contexts"]:
            hotpot.setdefault(c["paragraph_text"], None)
    nf = [r["text"] for r in read_jsonl(shared / "beir-nfcorpus/corpus.jsonl.gz") if r.get("text")]
    return {"SQuAD 2.0": squad2, "HotpotQA": list(hotpot), "NFCorpus": nf}
