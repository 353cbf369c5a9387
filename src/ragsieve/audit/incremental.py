"""The incremental audit: after a re-ingest, audit what changed against what was there.

An audit saved with ``--save`` keeps, beside its report, the state the next audit reuses
(``audits/<generation>.state.json``): a key per passage (a hash of its id, document, source,
title, metadata and text), the dense neighbour table, the mirrored document pairs, each grouped
neighbourhood's voices, each conflict candidate pair's result and the reader's sureness of each
conflict. Every check's result for a pair or a neighbourhood depends on those passages alone, so
the next audit (of a later generation of the same index) reuses a result whenever every passage
it depends on is unchanged and does the work only for the rest:

- neighbours: a changed passage is searched against the whole index; an unchanged one keeps its
  neighbours and is compared with the changed passages only (one that lost a neighbour to a
  removed passage is searched again);
- mirrors: every document is hashed (MinHash, linear), but a pair LSH proposes is checked only
  when one of its documents changed;
- voices: a neighbourhood is grouped only when one of its passages changed;
- conflicts: a candidate pair is read only when one of its passages changed (or their order
  did), and the reader runs only on new findings.

The findings are those of a full audit of the new generation (tests compare the two), and the
work done is counted in the report's ``candidates`` (``*_reused`` beside each check's count).
The state is parsed JSON checked by a schema (:class:`AuditState`), never executed; one that
fails the check, or was saved with other settings, is ignored and the audit runs in full.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from ragsieve.audit.conflicts import PairConflict
from ragsieve.audit.corpus import EXACT_NEIGHBOURS_UP_TO, Corpus, ProgressFn

STATE_VERSION: Literal[1] = 1


class AuditState(BaseModel):
    """What one audit leaves for the next (see the module docstring); rows index ``keys``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    version: Literal[1] = STATE_VERSION
    generation: str
    checks: list[str]
    neighbours: int
    reader: bool  # the extractive reader gave the sureness
    keys: list[str]
    ids: list[list[int]] | None = None
    sims: list[list[float]] | None = None
    doc_keys: dict[str, str] = {}
    mirrors: list[tuple[str, str, float]] = []
    voices: list[tuple[list[int], list[tuple[list[int], float, float]]]] = []
    pairs: list[tuple[int, int, list[list[str]]]] = []
    sureness: list[tuple[str, str, str, float | None, float | None, bool]] = []

    @classmethod
    def parse(cls, data: Any) -> AuditState | None:
        """The state in ``data`` (parsed JSON), or ``None`` when it is not one (any row out of
        range, a wrong type, an unknown field)."""
        try:
            state = cls.model_validate_json(data if isinstance(data, str | bytes) else json.dumps(data))
        except (ValidationError, TypeError, ValueError):
            return None
        n = len(state.keys)
        rows = [r for row in (state.ids or []) for r in row]
        rows += [r for nbhd, voices in state.voices for r in nbhd]
        rows += [r for a, b, _ in state.pairs for r in (a, b)]
        if any(r < -1 or r >= n for r in rows) or len(set(state.keys)) != n:
            return None
        if state.ids is not None and (state.sims is None or len(state.ids) != n or len(state.sims) != n):
            return None
        if any(len(c) != 7 for _, _, found in state.pairs for c in found):
            return None
        if any(p < 0 or p >= len(nbhd) for nbhd, voices in state.voices for positions, _, _ in voices
               for p in positions):
            return None
        return state

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def passage_keys(corpus: Corpus) -> list[str]:
    """A key per passage that changes whenever anything a check reads of it changes."""
    out = []
    for c in corpus.chunks:
        blob = json.dumps([c.id, c.doc_id, c.source, c.title, c.position, c.metadata, c.text], sort_keys=True,
                          ensure_ascii=False, default=str)
        out.append(hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:32])
    return out


def document_keys(corpus: Corpus, keys: list[str]) -> dict[str, str]:
    return {d: hashlib.sha256("|".join(keys[r] for r in rows).encode()).hexdigest()[:32]
            for d, rows in corpus.docs.items()}


class Reuse:
    """The earlier state mapped onto the passages of the corpus being audited."""

    def __init__(self, corpus: Corpus, keys: list[str], state: AuditState, *, neighbours: int, reader: bool) -> None:
        self.state = state
        self.n = len(corpus)
        position = {k: i for i, k in enumerate(keys)}
        self.new_of_old = np.array([position.get(k, -1) for k in state.keys], dtype=np.int64)
        old_position = {k: i for i, k in enumerate(state.keys)}
        self.old_of_new = np.array([old_position.get(k, -1) for k in keys], dtype=np.int64)
        self.changed = [int(r) for r in np.flatnonzero(self.old_of_new < 0)]
        self.removed = int((self.new_of_old < 0).sum())
        self.same_neighbours = state.neighbours == neighbours
        doc_keys = document_keys(corpus, keys)
        self.unchanged_docs = {d for d, k in doc_keys.items() if state.doc_keys.get(d) == k}
        self.same_reader = state.reader == reader
        self._voices = {tuple(nbhd): [(list(p), m, lo) for p, m, lo in voices] for nbhd, voices in state.voices}
        self._pairs = {(a, b): found for a, b, found in state.pairs}

    def ran(self, check: str) -> bool:
        return check in self.state.checks

    def _old(self, rows: tuple[int, ...]) -> tuple[int, ...] | None:
        old = tuple(int(self.old_of_new[r]) for r in rows)
        return None if any(o < 0 for o in old) else old

    def voices(self, rows: tuple[int, ...]) -> list[tuple[list[int], float, float]] | None:
        old = self._old(rows)
        return self._voices.get(old) if old is not None else None

    def pair(self, a: int, b: int) -> list[PairConflict] | None:
        old = self._old((a, b))
        if old is None or old[0] >= old[1]:
            return None
        found = self._pairs.get((old[0], old[1]))
        return None if found is None else [PairConflict(*c) for c in found]

    def mirrors(self) -> dict[tuple[str, str], float]:
        return {(a, b): j for a, b, j in self.state.mirrors}

    def sureness(self) -> dict[tuple[str, str, str], tuple[float | None, float | None, bool]]:
        if not self.same_reader:
            return {}
        return {(q, a, b): (sa, sb, ans) for q, a, b, sa, sb, ans in self.state.sureness}


def _search(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    import faiss

    flat = faiss.IndexFlatIP(vectors.shape[1])
    flat.add(np.ascontiguousarray(vectors, dtype=np.float32))
    d, i = flat.search(np.ascontiguousarray(queries, dtype=np.float32), min(k, vectors.shape[0]))
    return i, d


def update_neighbours(corpus: Corpus, k: int, reuse: Reuse | None, progress: ProgressFn | None = None,
                      exact_up_to: int = EXACT_NEIGHBOURS_UP_TO) -> tuple[np.ndarray, np.ndarray, int]:
    """The neighbour table of ``corpus`` (as :meth:`Corpus.neighbours` gives it) and the number
    of passages searched against the whole corpus; with ``reuse`` only the changed passages and
    those that lost a neighbour are (the others are compared with the changed passages only)."""
    n = len(corpus)
    state = reuse.state if reuse is not None else None
    if reuse is None or state is None or state.ids is None or state.sims is None or not reuse.same_neighbours:
        ids, sims = corpus.neighbours(k, progress, exact_up_to)
        return ids, sims, n
    width = max(1, min(k, n - 1)) if n > 1 else 1
    if n < 2 or any(len(row) != width for row in state.ids):
        ids, sims = corpus.neighbours(k, progress, exact_up_to)
        return ids, sims, n
    ids = np.full((n, width), -1, dtype=np.int64)
    sims = np.zeros((n, width), dtype=np.float32)
    full: list[int] = list(reuse.changed)
    merge: list[tuple[int, list[tuple[int, float]]]] = []
    for r in range(n):
        o = int(reuse.old_of_new[r])
        if o < 0:
            continue
        kept = [(int(reuse.new_of_old[j]), float(s)) for j, s in zip(state.ids[o], state.sims[o], strict=True)]
        if any(j < 0 for j, _ in kept):
            full.append(r)  # a neighbour was removed: the next one may be anywhere
        else:
            merge.append((r, kept))
    vectors = corpus.vectors
    if full:
        found_ids, found_sims = _search(vectors, vectors[full], width + 1)
        for q, r in enumerate(full):
            keep = [(int(j), float(s)) for j, s in zip(found_ids[q], found_sims[q], strict=True)
                    if j != r and j >= 0][:width]
            for c, (j, s) in enumerate(keep):
                ids[r, c], sims[r, c] = j, s
    changed = np.array(reuse.changed, dtype=np.int64)
    if merge and len(changed):
        rows = [r for r, _ in merge]
        near_ids, near_sims = _search(vectors[changed], vectors[rows], width)
    for q, (r, kept) in enumerate(merge):
        candidates = list(kept)
        if len(changed):
            candidates += [(int(changed[j]), float(s)) for j, s in zip(near_ids[q], near_sims[q], strict=True)
                           if j >= 0]
        candidates.sort(key=lambda js: -js[1])
        for c, (j, s) in enumerate(candidates[:width]):
            ids[r, c], sims[r, c] = j, s
    if progress:
        progress("neighbours", n, n)
    return ids, sims, len(full)


def new_state(generation: str, checks: tuple[str, ...], neighbours: int, reader: bool, corpus: Corpus,
              keys: list[str], ids: np.ndarray | None, sims: np.ndarray | None,
              mirrors: dict[tuple[str, str], float], voices: dict[tuple[int, ...], list[Any]],
              pairs: dict[tuple[int, int], list[PairConflict]],
              sureness: dict[tuple[str, str, str], tuple[float | None, float | None, bool]]) -> AuditState:
    """The state this audit leaves for the next one."""
    return AuditState(
        generation=generation, checks=list(checks), neighbours=neighbours, reader=reader, keys=keys,
        ids=ids.tolist() if ids is not None else None,
        sims=[[float(s) for s in row] for row in sims.tolist()] if sims is not None else None,
        doc_keys=document_keys(corpus, keys),
        mirrors=[(a, b, float(j)) for (a, b), j in mirrors.items()],
        voices=[(list(rows), [(list(p), float(m), float(lo)) for p, m, lo in found]) for rows, found in voices.items()],
        pairs=[(a, b, [c.to_list() for c in found]) for (a, b), found in pairs.items()],
        sureness=[(q, a, b, sa, sb, ans) for (q, a, b), (sa, sb, ans) in sureness.items()],
    )
