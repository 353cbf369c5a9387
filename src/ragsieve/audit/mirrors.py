"""Mirrors: documents that copy another document, found with MinHash LSH over word 3-shingles.

A document is every chunk of one ``doc_id`` joined in order, so the chunks of one document are
never compared with each other. A pair is a mirror when the Jaccard similarity of the two whole
documents' word 3-shingles reaches :data:`ragsieve.conflict.NEAR_DUPLICATE_JACCARD` (the bar the
conflict reader already counts near-duplicate passages by): most of both documents' shingles
must match, so a header or footer that many documents share is no mirror. MinHash LSH
(``datasketch``, the ``audit`` extra) proposes the pairs in near-linear time; each proposed pair
is checked on the exact shingle sets, and must state the same values (:func:`same_facts`: a copy
keeps the facts, documents filled in from one template do not).

The original is named only when the index can tell: the member whose chunks carry the earliest
date in a ``published``/``date``/``created`` metadata field (the index records no ingest time per
document). Otherwise ``original`` is ``None`` and the suggested exclusion keeps the first member
in index order.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from ragsieve.audit.corpus import Corpus, ProgressFn
from ragsieve.audit.report import Finding, Member
from ragsieve.extras import require
from ragsieve.text.terms import words

# MinHash signature length: datasketch's default; the estimate's standard error at J=0.6 is ~0.04,
# and every pair it proposes is checked on the exact sets.
NUM_PERM = 128
DATE_FIELDS = ("published", "date", "created")


def shingles(text: str, n: int = 3) -> set[str]:
    """The word ``n``-shingles of ``text`` (as :func:`ragsieve.conflict.jaccard` reads them)."""
    tokens = words(text)
    if len(tokens) < n:
        return {" ".join(tokens)} if tokens else set()
    return {" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def exact_jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def same_facts(first: str, second: str) -> bool:
    """Whether each text states every value the other states (:func:`ragsieve.values.find_in`):
    a copy keeps the facts; documents written from one template ("April 15 is the 105th day of
    the year", "August 9 is the 221st day ...") share most of their words and none of their values."""
    from ragsieve.values import extract_values, find_in, read_evidence

    a, b = read_evidence(first), read_evidence(second)
    return all(find_in(v, b) is not None for v in extract_values(first)) and all(
        find_in(v, a) is not None for v in extract_values(second)
    )


def find_mirrors(corpus: Corpus, progress: ProgressFn | None = None) -> tuple[list[Finding], int]:
    """The mirror findings of ``corpus`` and the number of candidate pairs LSH proposed."""
    edges, proposed, _ = mirror_edges(corpus, progress)
    return mirror_findings(corpus, edges), proposed


def mirror_edges(
    corpus: Corpus,
    progress: ProgressFn | None = None,
    *,
    unchanged: Collection[str] = (),
    known: Mapping[tuple[str, str], float] | None = None,
) -> tuple[dict[tuple[str, str], float], int, int]:
    """The mirrored document pairs (``(first, second)`` in index order, with their exact
    Jaccard), the candidate pairs checked, and the pairs whose result was reused.

    ``unchanged``: documents whose text is as it was when ``known`` (the mirror pairs an earlier
    scan found, keyed by the two document ids in either order) was computed; a proposed pair of
    two of them is not checked again (its result depends on the two texts alone, and LSH
    proposes it again). The result is that of checking every proposed pair."""
    from ragsieve.conflict import NEAR_DUPLICATE_JACCARD

    datasketch = require("datasketch", "audit", "finding mirrored documents")
    doc_ids = list(corpus.docs)
    texts = {d: corpus.doc_text(d) for d in doc_ids}
    sets = {d: shingles(texts[d]) for d in doc_ids}
    lsh = datasketch.MinHashLSH(threshold=NEAR_DUPLICATE_JACCARD, num_perm=NUM_PERM)
    hashes = {}
    for n, d in enumerate(doc_ids, 1):
        if not sets[d]:
            continue
        mh = datasketch.MinHash(num_perm=NUM_PERM)
        mh.update_batch([s.encode("utf-8") for s in sets[d]])
        hashes[d] = mh
        lsh.insert(d, mh)
        if progress and n % 256 == 0:
            progress("mirrors", n, len(doc_ids))
    stable = set(unchanged) if known is not None else set()
    proposed = reused = 0
    similarity: dict[tuple[str, str], float] = {}
    order = {d: i for i, d in enumerate(doc_ids)}
    for d, mh in hashes.items():
        for other in lsh.query(mh):
            if order[other] <= order[d]:
                continue
            if d in stable and other in stable and known is not None:
                reused += 1
                jac = known.get((d, other), known.get((other, d)))
                if jac is not None:
                    similarity[(d, other)] = jac
                continue
            proposed += 1
            jac = exact_jaccard(sets[d], sets[other])
            if jac >= NEAR_DUPLICATE_JACCARD and same_facts(texts[d], texts[other]):
                similarity[(d, other)] = jac
    if progress:
        progress("mirrors", len(doc_ids), len(doc_ids))
    return similarity, proposed, reused


def mirror_findings(corpus: Corpus, similarity: Mapping[tuple[str, str], float]) -> list[Finding]:
    """One finding per group of documents the mirrored pairs ``similarity`` join."""
    doc_ids = list(corpus.docs)
    order = {d: i for i, d in enumerate(doc_ids)}
    parent = {d: d for d in doc_ids}

    def find(d: str) -> str:
        while parent[d] != d:
            parent[d] = parent[parent[d]]
            d = parent[d]
        return d

    for d, other in similarity:
        a, b = find(d), find(other)
        if a != b:
            parent[max(a, b, key=order.__getitem__)] = min(a, b, key=order.__getitem__)
    groups: dict[str, list[str]] = {}
    for d in doc_ids:
        groups.setdefault(find(d), []).append(d)
    findings = []
    for members in groups.values():
        if len(members) < 2:
            continue
        members.sort(key=order.__getitem__)
        findings.append(_finding(corpus, members, dict(similarity)))
    return findings


def _earliest(corpus: Corpus, members: Sequence[str]) -> str | None:
    dates: dict[str, str] = {}
    for d in members:
        meta = corpus.chunks[corpus.docs[d][0]].metadata or {}
        for name in DATE_FIELDS:
            value = meta.get(name)
            if isinstance(value, str) and value[:4].isdigit():
                dates[d] = value
                break
    if len(dates) != len(members):
        return None
    ranked = sorted(members, key=lambda d: dates[d])
    return ranked[0] if dates[ranked[0]] != dates[ranked[1]] else None


def _finding(corpus: Corpus, members: list[str], similarity: dict[tuple[str, str], float]) -> Finding:
    original = _earliest(corpus, members)
    keep = original or members[0]
    sims = [v for (a, b), v in similarity.items() if a in members and b in members]
    score = sum(sims) / len(sims)
    out = []
    for d in members:
        row = corpus.docs[d][0]
        citation, link = corpus.citation(row)
        text = corpus.chunks[row].text
        out.append(Member(d, corpus.chunks[row].id, citation, corpus.hosts[row], text[:300], link))
    hosts = {m.host for m in out}
    copies = [d for d in members if d != keep]
    named = f"{original} is the original (earliest date); " if original else ""
    evidence = (f"{len(members)} documents share {score:.0%} of their word 3-shingles on average: "
                f"{named}{', '.join(copies[:5])} {'copy' if len(copies) > 1 else 'copies'} {keep}")
    return Finding(
        kind="mirror", score=min(1.0, score), severity="high" if len(hosts) > 1 else "medium",
        members=tuple(out), evidence=evidence, exclude=tuple(copies), original=original,
        details={"jaccard_mean": round(score, 4), "hosts": len(hosts), "documents": len(members)},
    )
