"""The corpus audit as a prior for the sieve (``stages.retrieve.audit_prior``): a passage of a
document the index generation's saved audit found in a coordinated voice, or of a source it
found hurting answers, starts with less trust.

Trust enters the sieve as each candidate's ``source_weight`` (learned by ``ragsieve importance``
and set by retrieval when the index has weights): the judge scales each candidate's relevance by
its weight relative to the most trusted candidate (:func:`ragsieve.sieve.judge.trust_weighted`),
so a marked passage must be about twice as relevant (at the default ``audit_trust`` 0.5) to be
judged as relevant. Here a marked candidate's weight (1 when the index has none) is multiplied by
``audit_trust`` and every other candidate gets its plain weight, so the comparison is relative to
unmarked sources. The retrieval score is scaled the same way and the candidates re-ranked.

Only the saved audit of the generation being searched is read (``<index>/audits/<generation>.json``,
parsed as JSON and checked against the audit schema, never executed); a re-ingest's new generation
has none until it is audited. The trace's ``retrieve`` record says which audit was read, and each
marked candidate has an ``audit-prior`` decision with the finding that marked it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ragsieve.config import RetrieveStageConfig
from ragsieve.errors import IndexStoreError
from ragsieve.types import SearchHit, Trace

logger = logging.getLogger(__name__)


class AuditPrior:
    """Lower the trust of candidates the saved audit marks (see the module docstring).

    Example:
        >>> prior = AuditPrior(trust=0.5)
        >>> prior.trust
        0.5
    """

    def __init__(self, trust: float = RetrieveStageConfig().audit_trust) -> None:
        self.trust = float(trust)
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], tuple[Any, str]] = {}  # (index dir, generation) -> (marks, note)

    def marks(self, index: Any) -> tuple[Any, str]:
        """(the :class:`~ragsieve.audit.saved.TrustMarks` of ``index``'s generation or ``None``,
        a note for the trace), read once per generation."""
        from ragsieve.audit.saved import trust_marks

        directory, generation = getattr(index, "dir", None), getattr(index, "generation", "")
        if directory is None or not generation:
            return None, "the index has no generations (a format-1 folder or another store): no saved audit"
        key = (str(directory), str(generation))
        with self._lock:
            if key not in self._cache:
                try:
                    marks = trust_marks(directory, generation)
                    note = (f"audit of generation {generation}: {len(marks.documents)} documents, "
                            f"{len(marks.sources)} sources marked" if marks is not None
                            else f"no saved audit of generation {generation} (`ragsieve audit --save`)")
                except IndexStoreError as exc:
                    logger.warning("not using the saved audit: %s", exc)
                    marks, note = None, f"saved audit refused: {exc}"
                self._cache[key] = (marks, note)
            return self._cache[key]

    def apply(self, index: Any, hits: list[SearchHit], trace: Trace) -> tuple[list[SearchHit], dict[str, Any]]:
        """``hits`` with marked candidates' weights and scores lowered and re-ranked, and what the
        retrieve record notes about it."""
        marks, note = self.marks(index)
        record: dict[str, Any] = {"note": note, "trust": self.trust, "marked": 0}
        if marks is None or not hits:
            return hits, record
        reasons = [marks.reason(h.chunk.doc_id, h.chunk.source) for h in hits]
        if not any(reasons):
            return hits, record
        learned: dict[str, float] | None = getattr(index, "source_weights", None)
        out: list[SearchHit] = []
        for h, reason in zip(hits, reasons, strict=True):
            base = float(h.scores.get("source_weight", learned.get(h.chunk.source, 1.0) if learned else 1.0))
            if reason is None:
                out.append(SearchHit(h.chunk, h.score, h.rank, {**h.scores, "source_weight": base}))
                continue
            weight = base * self.trust
            record["marked"] += 1
            trace.decide("audit-prior", h.chunk.id, "flagged", f"starts with trust {weight:.2f}: {reason}",
                         weight, document=h.chunk.doc_id, source=h.chunk.source)
            out.append(SearchHit(h.chunk, h.score * self.trust, h.rank,
                                 {**h.scores, "source_weight": weight, "audit_prior": self.trust}))
        out.sort(key=lambda h: -h.score)
        return [SearchHit(h.chunk, h.score, r, h.scores) for r, h in enumerate(out, 1)], record
