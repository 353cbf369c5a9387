"""One audit of one index generation: every check, in order, into one :class:`AuditReport`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragsieve.audit.corpus import EXACT_NEIGHBOURS_UP_TO, NEIGHBOURS, Corpus, ProgressFn
from ragsieve.audit.report import FINDING_KINDS, AuditReport, Finding
from ragsieve.errors import InputError

if TYPE_CHECKING:
    from ragsieve.audit.incremental import AuditState
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
    exact_neighbours_up_to: int = EXACT_NEIGHBOURS_UP_TO,
) -> AuditReport:
    """Audit the passages of ``index`` (its live generation, as opened) for corpus-level problems.

    ``checks``: the finding kinds to look for (default: mirrors, coordinated voices and
    conflicts, plus harmful sources when ``questions`` is given); ``questions``: labelled
    questions in the format ``ragsieve importance fit`` reads; ``neighbours``: the dense
    neighbours read per passage for candidates; ``use_reader``: give each conflict the
    extractive reader's sureness; ``exact_neighbours_up_to``: the largest corpus whose neighbours
    are found by an exact search (above it, by an HNSW graph: n log n, a few neighbours missed).
    """
    return audit_with_state(index, checks=checks, questions=questions, neighbours=neighbours,
                            use_reader=use_reader, progress=progress,
                            exact_neighbours_up_to=exact_neighbours_up_to)[0]


def audit_with_state(
    index: Index,
    *,
    checks: Sequence[str] | None = None,
    questions: str | Path | None = None,
    neighbours: int = NEIGHBOURS,
    use_reader: bool = True,
    progress: ProgressFn | None = None,
    previous: AuditState | None = None,
    exact_neighbours_up_to: int = EXACT_NEIGHBOURS_UP_TO,
) -> tuple[AuditReport, AuditState]:
    """:func:`audit_index`, and the state the next audit reuses. With ``previous`` (the state an
    audit of an earlier generation left, :mod:`ragsieve.audit.incremental`) only what changed
    since is checked; the findings are those of a full audit."""
    from ragsieve.audit.incremental import Reuse, new_state, passage_keys, update_neighbours

    start = time.perf_counter()
    wanted = check_kinds(checks, "check") if checks is not None else (
        DEFAULT_CHECKS + (("harmful-source",) if questions is not None else ()))
    if "harmful-source" in wanted and questions is None:
        raise InputError("the harmful-source check needs labelled questions; pass questions= (--questions FILE)")
    corpus = Corpus.of(index.chunks, index.embeddings, index.corpus_root)
    keys = passage_keys(corpus)
    reuse = Reuse(corpus, keys, previous, neighbours=neighbours, reader=use_reader) if previous is not None else None
    findings: list[Finding] = []
    candidates: dict[str, int] = {}
    notes: list[str] = []
    mirror_groups: list[frozenset[str]] = []
    mirror_pairs: dict[tuple[str, str], float] = {}
    ids = sims = None
    voice_results: dict[tuple[int, ...], list[Any]] = {}
    pair_results: dict[tuple[int, int], Any] = {}
    sureness: dict[tuple[str, str, str], Any] = {}
    if reuse is not None:
        candidates["changed_passages"] = len(reuse.changed)
        candidates["removed_passages"] = reuse.removed
    if "mirror" in wanted:
        from ragsieve.audit.mirrors import mirror_edges, mirror_findings

        use = reuse is not None and reuse.ran("mirror")
        mirror_pairs, candidates["mirror"], reused = mirror_edges(
            corpus, progress, unchanged=reuse.unchanged_docs if use and reuse else (),
            known=reuse.mirrors() if use and reuse else None)
        if reuse is not None:
            candidates["mirror_reused"] = reused
        mirrors = mirror_findings(corpus, mirror_pairs)
        findings += mirrors
        mirror_groups = [frozenset(f.documents) for f in mirrors]
    if "coordinated-voice" in wanted or "conflict" in wanted:
        ids, sims, searched = update_neighbours(corpus, neighbours, reuse, progress, exact_up_to=exact_neighbours_up_to)
        candidates["neighbour_rows"] = int((ids >= 0).sum())
        if searched == len(corpus) > exact_neighbours_up_to:
            notes.append(f"neighbours of {searched:,} passages found by an HNSW graph (more than "
                         f"{exact_neighbours_up_to:,}: an exact search grows with the square of the corpus); "
                         "a few true neighbours are missed")
        if reuse is not None:
            candidates["neighbour_rows_searched"] = searched
        if "coordinated-voice" in wanted:
            from ragsieve.audit.coordinated import coordinated_findings, voice_clusters

            use = reuse is not None and reuse.ran("coordinated-voice")
            clusters, voice_work = voice_clusters(corpus, ids, sims, progress,
                                                  known=reuse.voices if use and reuse else None)
            candidates["coordinated-voice"] = voice_work.grouped
            if reuse is not None:
                candidates["coordinated-voice_reused"] = voice_work.reused
            voice_results = voice_work.results
            findings += coordinated_findings(corpus, clusters, mirror_groups)
        if "conflict" in wanted:
            from ragsieve.audit.conflicts import scan_conflicts

            use = reuse is not None and reuse.ran("conflict")
            conflicts, work, note = scan_conflicts(
                corpus, ids, mirror_groups, use_reader, progress, known=reuse.pair if use and reuse else None,
                known_sureness=reuse.sureness() if use and reuse else None)
            candidates["conflict"] = work.read
            if reuse is not None:
                candidates["conflict_reused"] = work.reused
            pair_results, sureness = work.results, work.sureness
            findings += conflicts
            if note:
                notes.append(note)
                sureness = {}  # the reader did not load: nothing of it to reuse
    if "harmful-source" in wanted and questions is not None:
        from ragsieve.audit.harmful import find_harmful

        harmful, candidates["harmful-source"] = find_harmful(corpus, Path(questions))
        findings += harmful
    order = {kind: i for i, kind in enumerate(FINDING_KINDS)}
    findings.sort(key=lambda f: (f.severity != "high", order[f.kind], -f.score))
    if reuse is not None:
        notes.append(f"incremental: {len(reuse.changed)} passages new or changed and {reuse.removed} removed since "
                     f"the audit of generation {reuse.state.generation}; the rest reused")
    generation = str(getattr(index, "generation", None))
    report = AuditReport(
        index=str(index.dir), generation=generation, passages=len(corpus),
        documents=len(corpus.docs),
        findings=tuple(findings), checks=wanted, candidates=candidates, seconds=time.perf_counter() - start,
        notes=tuple(notes),
    )
    state = new_state(generation, tuple(c for c in wanted if c != "harmful-source"), neighbours,
                      use_reader and not any("reader did not load" in n for n in notes), corpus, keys, ids, sims,
                      mirror_pairs, voice_results, pair_results, sureness)
    return report, state
