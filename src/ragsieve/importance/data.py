"""Validation tuples as flat arrays (CSR layout), loaders and a synthetic generator.

A validation set of N tuples is stored like a sparse matrix: ``offsets[t]:offsets[t+1]`` are
the positions of tuple ``t`` (its ranked retrieved items, best first) in the flat arrays
``item`` (item index), ``source`` (source index) and ``utility``. ``answer`` (optional) holds an
answer id per position for utilities such as the majority vote. Memory is linear in the number
of positions: 4 + 4 + 8 (+ 4) bytes each, so 50M positions take well under 1 GB.

JSONL format (one validation tuple per line)::

    {"id": "q1", "items": [{"id": "doc-7", "source": "example.org", "utility": 1.0,
                            "answer": "Paris"}, ...]}

``answer`` is optional. An empty ``items`` list is allowed and contributes nothing.

Repeated items within one list: an item is either in the corpus or not, so a repeated id
breaks the independence the exact gradient relies on. ``on_duplicate="error"`` (default)
rejects them; ``"first"`` keeps the best-ranked occurrence and drops the later ones (the
item's later copies can never enter a top-K ahead of it, and are present exactly when it is).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragsieve.errors import InputError
from ragsieve.io import read_jsonl

OnDuplicate = Literal["error", "first"]


@dataclass
class ValidationData:
    """Flat arrays of N ranked lists (see the module docstring)."""

    offsets: np.ndarray  # int64, N + 1
    item: np.ndarray  # int32, positions -> item index
    source: np.ndarray  # int32, positions -> source index
    utility: np.ndarray  # float64 (or float32), positions
    item_source: np.ndarray  # int32, item index -> source index
    sources: list[str] = field(default_factory=list)
    item_ids: list[str] | None = None  # None for synthetic data (ids are the indices)
    tuple_ids: list[str] | None = None
    answer: np.ndarray | None = None  # int32 answer id per position, or None

    @property
    def n_tuples(self) -> int:
        return int(self.offsets.shape[0] - 1)

    @property
    def n_positions(self) -> int:
        return int(self.item.shape[0])

    @property
    def n_items(self) -> int:
        return int(self.item_source.shape[0])

    @property
    def n_sources(self) -> int:
        return len(self.sources) if self.sources else int(self.item_source.max(initial=-1) + 1)

    @property
    def max_len(self) -> int:
        return int(np.diff(self.offsets).max(initial=0))

    def items_per_source(self) -> np.ndarray:
        """Number of distinct items of each source that occur in these tuples."""
        seen = np.zeros(self.n_items, dtype=bool)
        seen[self.item] = True
        return np.bincount(self.item_source[seen], minlength=self.n_sources).astype(np.int64)

    def subset(self, tuples: Sequence[int] | np.ndarray) -> ValidationData:
        """The tuples at the given indices, with the same item and source numbering."""
        idx = np.asarray(tuples, dtype=np.int64)
        starts = self.offsets[idx]
        lens = self.offsets[idx + 1] - starts
        offsets = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        take = np.repeat(starts - offsets[:-1], lens) + np.arange(offsets[-1], dtype=np.int64)
        return ValidationData(
            offsets=offsets,
            item=self.item[take],
            source=self.source[take],
            utility=self.utility[take],
            item_source=self.item_source,
            sources=self.sources,
            item_ids=self.item_ids,
            tuple_ids=[self.tuple_ids[t] for t in idx] if self.tuple_ids is not None else None,
            answer=self.answer[take] if self.answer is not None else None,
        )

    def validate(self) -> None:
        """Check array shapes and index ranges; raise :class:`InputError` on a mismatch."""
        n = self.n_positions
        off = self.offsets
        if off.ndim != 1 or off.shape[0] < 1 or off[0] != 0 or off[-1] != n:
            raise InputError("offsets must start at 0 and end at the number of positions")
        if np.any(np.diff(self.offsets) < 0):
            raise InputError("offsets must be non-decreasing")
        for name in ("source", "utility"):
            if getattr(self, name).shape[0] != n:
                got = getattr(self, name).shape[0]
                raise InputError(f"{name} has {got} entries, expected {n} (one per position)")
        if self.answer is not None and self.answer.shape[0] != n:
            raise InputError(f"answer has {self.answer.shape[0]} entries, expected {n}")
        if n and (self.item.min() < 0 or self.item.max() >= self.n_items):
            raise InputError("item indices must lie in [0, n_items); build the data with from_lists")
        n_src = self.n_sources
        for name, arr in (("source", self.source), ("item_source", self.item_source)):
            if arr.shape[0] and (arr.min() < 0 or arr.max() >= n_src):
                raise InputError(
                    f"{name} indices must lie in [0, {n_src}) (one entry of `sources` each); "
                    "build the data with from_lists or extend `sources`"
                )
        if n and not np.array_equal(self.item_source[self.item], self.source):
            raise InputError("source[pos] must equal item_source[item[pos]]: an item belongs to one source")
        if self.answer is not None and n and self.answer.min() < 0:
            raise InputError("answer ids must be non-negative integers")
        if not np.all(np.isfinite(self.utility)):
            raise InputError("utilities must be finite numbers; replace NaN/inf values")


def from_lists(
    tuples: Iterable[Sequence[Mapping[str, Any]]],
    *,
    tuple_ids: Sequence[str] | None = None,
    on_duplicate: OnDuplicate = "error",
    utility_dtype: type = np.float64,
) -> ValidationData:
    """Build :class:`ValidationData` from ranked lists of ``{"id", "source", "utility"[, "answer"]}``.

    An item id always belongs to one source; the same id under two sources is an error.
    """
    item_index: dict[str, int] = {}
    item_source: list[int] = []
    source_index: dict[str, int] = {}
    answer_index: dict[str, int] = {}
    offsets = [0]
    items: list[int] = []
    sources: list[int] = []
    utils: list[float] = []
    answers: list[int] = []
    has_answer: bool | None = None
    for t, ranked in enumerate(tuples):
        seen: set[int] = set()
        for r, entry in enumerate(ranked):
            try:
                item_id = str(entry["id"])
                src = str(entry["source"])
                u = float(entry["utility"])
            except KeyError as exc:
                raise InputError(
                    f"tuple {t}, item {r} lacks the field {exc.args[0]!r}; "
                    "every item needs id, source and utility"
                ) from exc
            except (TypeError, ValueError) as exc:
                bad = entry.get("utility")
                raise InputError(f"tuple {t}, item {r}: utility {bad!r} is not a number") from exc
            s = source_index.setdefault(src, len(source_index))
            i = item_index.get(item_id)
            if i is None:
                i = item_index[item_id] = len(item_index)
                item_source.append(s)
            elif item_source[i] != s:
                raise InputError(
                    f"item {item_id!r} appears under two sources; give every item id exactly one source"
                )
            if i in seen:
                if on_duplicate == "error":
                    name = tuple_ids[t] if tuple_ids is not None else t
                    raise InputError(
                        f"item {item_id!r} appears twice in the ranked list of tuple {name!r}; "
                        "give each retrieved result its own id, or pass on_duplicate='first' to keep "
                        "only its best-ranked occurrence"
                    )
                continue
            seen.add(i)
            this_has = "answer" in entry
            if has_answer is None:
                has_answer = this_has
            elif has_answer != this_has:
                raise InputError("either every item has an 'answer' field or none has")
            if this_has:
                answers.append(answer_index.setdefault(str(entry["answer"]), len(answer_index)))
            items.append(i)
            sources.append(s)
            utils.append(u)
        offsets.append(len(items))
    data = ValidationData(
        offsets=np.asarray(offsets, dtype=np.int64),
        item=np.asarray(items, dtype=np.int32),
        source=np.asarray(sources, dtype=np.int32),
        utility=np.asarray(utils, dtype=utility_dtype),
        item_source=np.asarray(item_source, dtype=np.int32),
        sources=list(source_index),
        item_ids=list(item_index),
        tuple_ids=list(tuple_ids) if tuple_ids is not None else None,
        answer=np.asarray(answers, dtype=np.int32) if has_answer else None,
    )
    data.validate()
    return data


def load_jsonl(path: str | Path, on_duplicate: OnDuplicate = "error") -> ValidationData:
    """Read validation tuples from JSONL (see the module docstring for the format)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"validation file {p} does not exist; pass a JSONL file of validation tuples")
    ids: list[str] = []
    lists: list[list[dict[str, Any]]] = []
    for n, row in enumerate(read_jsonl(p)):
        items = row.get("items")
        if not isinstance(items, list):
            raise InputError(f"{p}: tuple {n} has no 'items' list; each line needs {{'id', 'items': [...]}}")
        ids.append(str(row.get("id", n)))
        lists.append(items)
    return from_lists(lists, tuple_ids=ids, on_duplicate=on_duplicate)


def synthetic(
    n_tuples: int,
    list_len: int = 50,
    n_sources: int = 1000,
    positive_rate: float = 0.5,
    seed: int = 0,
    utility_dtype: type = np.float32,
) -> ValidationData:
    """Synthetic data shaped as the paper's Section 3.5: every position is its own item.

    ``n_tuples * list_len`` distinct items, each assigned to one of ``n_sources`` sources
    uniformly at random, binary utilities. Built with vectorised numpy in O(M) memory.
    """
    rng = np.random.default_rng(seed)
    m = n_tuples * list_len
    offsets = np.arange(0, m + 1, list_len, dtype=np.int64)
    item = np.arange(m, dtype=np.int32)
    source = rng.integers(0, n_sources, size=m, dtype=np.int32)
    utility: np.ndarray = (rng.random(m, dtype=np.float32) < positive_rate).astype(utility_dtype)
    return ValidationData(
        offsets=offsets,
        item=item,
        source=source,
        utility=utility,
        item_source=source,
        sources=[f"source-{i}" for i in range(n_sources)],
    )
