"""Coordinated voices: passages from several documents that say one thing far more alike than
independent sources do (the shape of a planted claim written in paraphrases).

The grouping is :class:`ragsieve.voices.VoiceGrouper`'s, with its thresholds
(:data:`~ragsieve.voices.TIGHTNESS`, :data:`~ragsieve.voices.MIN_MEMBERS`, its linkage, the pages of
one series counting once). At question time it groups one question's retrieved passages; here each
passage's dense neighbours stand in for them: a passage whose neighbours at the grouping's own
cosine bar come from at least ``MIN_MEMBERS`` documents is grouped with them, so the work is
``NEIGHBOURS`` passages per passage, never all pairs. Without a question the grouper's by-claim
rule is off; what the cluster asserts is read instead as in :func:`ragsieve.voices.coordination`:
values (:mod:`ragsieve.values`) at least half of its members state. A cluster that shares no
value asserts no common claim and is not reported; nor is one whose documents all mirror one
another (the mirror finding covers it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable

import numpy as np

from ragsieve.audit.corpus import Corpus, ProgressFn
from ragsieve.audit.report import Finding, Member


def shared_claims(texts: list[str]) -> list[str]:
    """The values at least half of ``texts`` state (the claims of a cluster, as
    :func:`ragsieve.voices.coordination` reads them)."""
    from ragsieve.values import extract_values, find_in, read_evidence

    evidence = [read_evidence(t) for t in texts]
    need = max(2, math.ceil(len(texts) / 2))
    claims: dict[str, None] = {}
    for text in texts:
        for value in extract_values(text):
            if value.text in claims:
                continue
            if sum(find_in(value, ev) is not None for ev in evidence) >= need:
                claims[value.text] = None
    return list(claims)


def find_coordinated(
    corpus: Corpus,
    ids: np.ndarray,
    sims: np.ndarray,
    mirrored: Iterable[frozenset[str]] = (),
    progress: ProgressFn | None = None,
) -> tuple[list[Finding], int]:
    """Coordinated-voice findings from the neighbour table (``ids``, ``sims``), and the number
    of neighbourhoods grouped. ``mirrored``: groups of documents already reported as mirrors."""
    clusters, work = voice_clusters(corpus, ids, sims, progress)
    return coordinated_findings(corpus, clusters, mirrored), work.grouped


Cluster = tuple[list[int], float, float]  # member rows, mean cosine, min cosine


@dataclasses.dataclass
class VoiceWork:
    """What one grouping scan did: neighbourhoods grouped now, neighbourhoods whose grouping was
    reused, and each grouped neighbourhood's voices (positions in the neighbourhood, mean and
    min cosine) by the rows of the neighbourhood, for the next, incremental, scan."""

    grouped: int = 0
    reused: int = 0
    results: dict[tuple[int, ...], list[tuple[list[int], float, float]]] = dataclasses.field(default_factory=dict)


def voice_clusters(
    corpus: Corpus,
    ids: np.ndarray,
    sims: np.ndarray,
    progress: ProgressFn | None = None,
    *,
    known: Callable[[tuple[int, ...]], list[tuple[list[int], float, float]] | None] | None = None,
) -> tuple[list[Cluster], VoiceWork]:
    """The coordinated clusters of every passage's tight neighbourhood and the work done.
    ``known(rows)`` gives a neighbourhood's voices from an earlier scan (``None``: group it
    now): the same unchanged passages group the same way."""
    from ragsieve.voices import MIN_MEMBERS, TIGHTNESS, VoiceGrouper, series_of

    grouper = VoiceGrouper(claim_tightness=None)
    grouper.check()
    seen: set[frozenset[int]] = set()
    clusters: list[Cluster] = []
    work = VoiceWork()
    n = len(corpus)
    for row in range(n):
        near = [int(j) for j, s in zip(ids[row], sims[row], strict=True) if j >= 0 and s >= TIGHTNESS]
        rows = (row, *near)
        if len({series_of(corpus.hit(r)) for r in rows}) < MIN_MEMBERS:
            continue
        voices = known(rows) if known is not None else None
        if voices is None:
            work.grouped += 1
            hits = [corpus.hit(r) for r in rows]
            voices = []
            for voice in grouper.group(hits, vectors=corpus.vectors[list(rows)]):
                if not voice.coordinated:
                    continue
                members = set(voice.cluster)
                voices.append(([p for p in voice.positions if hits[p].chunk.id in members],
                               float(voice.mean_cosine), float(voice.min_cosine)))
        else:
            work.reused += 1
        work.results[rows] = voices
        for positions, mean, low in voices:
            member_rows = [rows[p] for p in positions]
            key = frozenset(member_rows)
            if key in seen:
                continue
            seen.add(key)
            clusters.append((sorted(member_rows), mean, low))
        if progress and row % 256 == 0:
            progress("voices", row + 1, n)
    if progress:
        progress("voices", n, n)
    return clusters, work


def coordinated_findings(corpus: Corpus, clusters: list[Cluster], mirrored: Iterable[frozenset[str]] = ()
                         ) -> list[Finding]:
    """The findings of ``clusters`` (:func:`voice_clusters`): the larger first, a cluster mostly
    inside one already kept dropped, one whose documents all mirror one another left to the
    mirror finding, one that shares no value not reported."""
    mirror_groups = list(mirrored)
    clusters = sorted(clusters, key=lambda c: (-len(c[0]), -c[1]))
    kept: list[Cluster] = []
    for members, mean, low in clusters:
        if any(len(set(members) & set(k[0])) * 2 > len(members) for k in kept):
            continue
        kept.append((members, mean, low))
    findings = []
    for members, mean, low in kept:
        docs = frozenset(corpus.chunks[r].doc_id for r in members)
        if any(docs <= group for group in mirror_groups):
            continue
        claims = shared_claims([corpus.chunks[r].text for r in members])
        if not claims:
            continue
        findings.append(_finding(corpus, members, mean, low, claims))
    return findings


def _finding(corpus: Corpus, members: list[int], mean: float, low: float, claims: list[str]) -> Finding:
    out = []
    for r in members:
        citation, link = corpus.citation(r)
        c = corpus.chunks[r]
        out.append(Member(c.doc_id, c.id, citation, corpus.hosts[r], _claim_sentence(c.text, claims), link))
    hosts = {m.host for m in out}
    docs = list(dict.fromkeys(m.doc_id for m in out))
    evidence = (f"{len(members)} passages from {len(docs)} documents on {len(hosts)} hosts form one tight cluster "
                f"(cosine mean {mean:.2f}, min {low:.2f}) and all state {', '.join(claims[:3])}")
    return Finding(
        kind="coordinated-voice", score=float(min(1.0, max(0.0, mean))),
        severity="high" if len(hosts) > 1 else "medium", members=tuple(out), evidence=evidence,
        exclude=tuple(docs),
        details={"mean_cosine": round(mean, 4), "min_cosine": round(low, 4), "hosts": len(hosts),
                 "documents": len(docs), "claims": "; ".join(claims[:5])},
    )  # fmt: skip


def _claim_sentence(text: str, claims: list[str]) -> str:
    from ragsieve.text.sentences import split_sentences

    sentences = split_sentences(text) or [text]
    for s in sentences:
        if any(claim in s for claim in claims):
            return s
    return sentences[0]
