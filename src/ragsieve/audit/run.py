"""One audit of one index generation: every check, in order, into one :class:`AuditReport`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ragsieve.audit.corpus import NEIGHBOURS, Corpus, ProgressFn
from ragsieve.audit.report import FINDING_KINDS, AuditReport, Finding
from ragsieve.errors import InputError

if TYPE_CHECKING:
    from ragsieve.index import Index

# the checks that run without labelled questions
DEFAULT_CHECKS: tuple[str, ...] = ("mirror", "coordinated-voice", "conflict")


def check_kinds(kinds: Sequence[str], what: str) -> tuple[str, ...]:
    """``kinds`` validated against :data:`FINDING_KINDS` (an :class:`InputError` names the bad one)."""
    for kind in kinds:
        if kind not in FINDING_KINDS:
            raise InputError(f"{what} {kind!r} is not a finding kind; use one of {', '.join(FINDING_KINDS)}")
    return tuple(dict.fromkeys(kinds))


def audit_index(
    index: Index,
    *,
    checks: Sequence[str] | None = None,
    questions: str | Path | None = None,
    neighbours: int = NEIGHBOURS,
    use_reader: bool = True,
    progress: ProgressFn | None = None,
) -> AuditReport:
    """Audit the passages of ``index`` (its live generation, as opened) for corpus-level problems.

    ``checks``: the finding kinds to look for (default: mirrors, coordinated voices and
    conflicts, plus harmful sources when ``questions`` is given); ``questions``: labelled
    questions in the format ``ragsieve importance fit`` reads; ``neighbours``: the dense
    neighbours read per passage for candidates; ``use_reader``: give each conflict the
    extractive reader's sureness.
    """
    start = time.perf_counter()
    wanted = check_kinds(checks, "check") if checks is not None else (
        DEFAULT_CHECKS + (("harmful-source",) if questions is not None else ()))
    if "harmful-source" in wanted and questions is None:
        raise InputError("the harmful-source check needs labelled questions; pass questions= (--questions FILE)")
    corpus = Corpus.of(index.chunks, index.embeddings, index.corpus_root)
    findings: list[Finding] = []
    candidates: dict[str, int] = {}
    notes: list[str] = []
    mirror_groups: list[frozenset[str]] = []
    if "mirror" in wanted:
        from ragsieve.audit.mirrors import find_mirrors

        mirrors, candidates["mirror"] = find_mirrors(corpus, progress)
        findings += mirrors
        mirror_groups = [frozenset(f.documents) for f in mirrors]
    if "coordinated-voice" in wanted or "conflict" in wanted:
        ids, sims = corpus.neighbours(neighbours, progress)
        candidates["neighbour_rows"] = int((ids >= 0).sum())
        if "coordinated-voice" in wanted:
            from ragsieve.audit.coordinated import find_coordinated

            voices, candidates["coordinated-voice"] = find_coordinated(corpus, ids, sims, mirror_groups, progress)
            findings += voices
        if "conflict" in wanted:
            from ragsieve.audit.conflicts import find_conflicts

            conflicts, candidates["conflict"], note = find_conflicts(corpus, ids, mirror_groups, use_reader, progress)
            findings += conflicts
            if note:
                notes.append(note)
    if "harmful-source" in wanted and questions is not None:
        from ragsieve.audit.harmful import find_harmful

        harmful, candidates["harmful-source"] = find_harmful(corpus, Path(questions))
        findings += harmful
    order = {kind: i for i, kind in enumerate(FINDING_KINDS)}
    findings.sort(key=lambda f: (f.severity != "high", order[f.kind], -f.score))
    return AuditReport(
        index=str(index.dir), generation=str(getattr(index, "generation", None)), passages=len(corpus),
        documents=len(corpus.docs),
        findings=tuple(findings), checks=wanted, candidates=candidates, seconds=time.perf_counter() - start,
        notes=tuple(notes),
    )
