"""Voices: retrieved passages grouped by who is speaking, so coordinated passages count once.

Counting sources by host or by copied text misses the cheapest poisoning attack: an attacker
writes five paraphrases of one false claim and puts them on five hosts. No two share their word
shingles, yet they agree with each other far more than real, independent sources do: the passages
GPT-4 wrote for one target (PoisonedRAG) have a median pairwise cosine (bundled MiniLM) of
0.87-0.92, paragraphs of one real encyclopedia article 0.33-0.43 (TrustRAG, Zhou et al. 2025, builds its
first stage on the same observation).

:class:`VoiceGrouper` groups the retrieved passages into :class:`Voice` objects:

* **by meaning**: passages whose embeddings form a tight cluster (average linkage: groups join
  when their mean pairwise cosine reaches ``tightness``) are one voice; such a cluster spanning
  at least ``min_members`` documents (the pages of one series on one site counting once,
  :func:`series_of`) is *coordinated* (a suspicious cluster);
* **by claim**: given the question, each passage's answer is read without a model
  (:func:`read_claims`); passages that read different answers are set apart (:func:`disagreeing`),
  and passages that read one answer cluster at a lower bar, ``claim_tightness`` (:func:`claim_clusters`),
  coordinated on the same terms. Embeddings are mostly topic: an honest page retelling the event
  a planted claim is about sits as close to the paraphrases as they sit to each other; what it
  answers sets it apart;
* **by host**: passages from one site are one voice (:func:`host_of`);
* **by copy**: pairs another check links (``linked``; the poisoning check passes its
  near-duplicate clusters, word Jaccard and paraphrase cosine) are one voice.

A voice records its members, their hosts, and its tightness (mean and minimum pairwise cosine).
:func:`coordination` turns a coordinated voice into a graded signal: a tight cluster asserting
a value no passage outside it states is the shape of a planted claim. It is a signal, not a
veto: the poison check reports it and the conflict stage counts the cluster once.

The defaults (average linkage, ``tightness`` 0.80, ``claim_tightness`` 0.72, ``min_members`` 3)
were chosen on a training split (PoisonedRAG's MS MARCO attack passages against SQuAD 2.0
paragraphs of the article "Normans" and HotpotQA contexts of the even-numbered non-target
questions) and reported on other sets (``benchmarks/voices.py``, docs/results/knowledge-poisoning.md):
on the held-out PoisonedRAG HotpotQA targets the rule groups 99 % of the GPT-4 passage sets (a gold
paragraph joins the attack's cluster in 4 %); on clean questions it finds a coordinated cluster in
0 % of SQuAD 2.0 and demo questions but 3 % of HotpotQA's (above the 2 % goal); an attacker who
spreads one claim over registers far apart (:class:`ragsieve.attack.poison.SpreadWriter`) escapes
it entirely.

Example:
    >>> import numpy as np
    >>> from ragsieve.types import Chunk, SearchHit
    >>> from ragsieve.voices import VoiceGrouper
    >>> hits = [SearchHit(Chunk(f"p{i}", f"text {i}", f"d{i}", f"site{i}.example"), 1.0, i, {}) for i in range(3)]
    >>> vecs = np.array([[1.0, 0.0], [0.99, 0.1], [0.0, 1.0]])
    >>> voices = VoiceGrouper(tightness=0.9, min_members=2).group(hits, vectors=vecs)
    >>> [(v.members, v.coordinated) for v in voices]
    [(('p0', 'p1'), True), (('p2',), False)]
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragsieve.errors import ConfigError, InputError
from ragsieve.text.passage import document_of, same_answer, source_of
from ragsieve.text.readings import Readings
from ragsieve.types import SearchHit
from ragsieve.values import Value

__all__ = [
    "CLAIM_TIGHTNESS",
    "LINKAGE",
    "LINKAGES",
    "MIN_MEMBERS",
    "TIGHTNESS",
    "Coordination",
    "Voice",
    "VoiceGrouper",
    "answer_coordination",
    "claim_clusters",
    "coordination",
    "disagreeing",
    "host_of",
    "one_per_voice",
    "pairwise_cosine",
    "read_claims",
    "series_of",
    "tight_clusters",
]

# Chosen on the training split by benchmarks/voices.py: among the settings (linkage, cosine,
# member count) with a coordinated cluster in at most 1 % of the training clean sets, the one that
# catches the most training attacks (PoisonedRAG's MS MARCO passages: 92 %), passages that read
# different answers kept apart and the pages of one series on one site counting once
# (:func:`series_of`: yearly pages of one series retrieved together, "2014-15 Colorado Buffaloes
# men's basketball team" and its next seasons, are as tight as paraphrases and were the only
# clusters found in the training clean sets). Held-out figures: docs/results/knowledge-poisoning.md.
TIGHTNESS = 0.80
MIN_MEMBERS = 3
LINKAGE = "average"
# The bar for passages that read one answer to the question (:func:`claim_clusters`), chosen on the
# same training split with TIGHTNESS, MIN_MEMBERS and LINKAGE fixed: among the bars that keep the
# training clean sets with a coordinated voice within the same 1 %, the one that catches the most
# training attacks.
CLAIM_TIGHTNESS = 0.72


def pairwise_cosine(vectors: Any) -> np.ndarray:
    """Cosine similarity of every pair of rows of ``vectors`` (zero rows have cosine 0)."""
    vecs = np.asarray(vectors, dtype=np.float64)
    if vecs.ndim != 2:
        raise InputError(f"pairwise_cosine needs a 2-d array of vectors, got shape {vecs.shape}")
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    unit = vecs / np.where(norms > 0, norms, 1.0)
    return np.clip(unit @ unit.T, -1.0, 1.0)


LINKAGES = ("complete", "average")


def tight_clusters(cosines: Any, tightness: float, linkage: str = "complete") -> list[list[int]]:
    """Clusters of the items by their pairwise ``cosines``: with ``complete`` linkage every pair
    in a cluster reaches ``tightness``; with ``average`` linkage (UPGMA) two groups join when
    their mean pairwise cosine reaches it. Neither chains neighbours (single linkage would: a
    chain of honest passages on one topic drifts, a planted claim does not). Clusters list item
    positions in order and come in order of their first member; singletons included."""
    if linkage not in LINKAGES:
        raise ConfigError(f"voice linkage must be one of {', '.join(LINKAGES)}, got {linkage!r}; fix the config")
    cos = np.asarray(cosines, dtype=np.float64)
    n = cos.shape[0]
    if n == 0:
        return []
    if n == 1:
        return [[0]]
    from scipy.cluster import hierarchy
    from scipy.spatial.distance import squareform

    dist = np.clip(1.0 - cos, 0.0, 2.0)
    np.fill_diagonal(dist, 0.0)
    dist = (dist + dist.T) / 2.0
    tree = hierarchy.linkage(squareform(dist, checks=False), method=linkage)
    # fcluster cuts at distance <= t; a hair of slack keeps a pair exactly at the threshold together
    labels = hierarchy.fcluster(tree, t=1.0 - tightness + 1e-9, criterion="distance")
    groups: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(int(label), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def read_claims(question: str, texts: Sequence[str], readings: Readings | None = None) -> list[Value | None]:
    """The answer each passage gives ``question`` on its own, read without a model
    (:func:`ragsieve.text.passage.passage_answer`, however firm), or ``None`` where it reads none.
    A yes/no stance is not a claim here: any two passages on one question share one of two.
    ``readings``: the request's readings (:class:`ragsieve.text.readings.Readings`; a fresh set
    when none is given)."""
    readings = readings if readings is not None else Readings()
    return [None if r.answer.stance else r.answer.value for r in readings.passages(question, texts)]


def disagreeing(cosines: Any, claims: Sequence[Value | None]) -> np.ndarray:
    """``cosines`` with -1 for every pair of passages that read different answers (``claims``,
    :func:`read_claims`): under complete linkage such a pair never ends in one cluster; under
    average linkage the -1 counts against the two groups joining (two large groups that agree
    everywhere else may still join)."""
    cos = np.array(cosines, dtype=np.float64)
    n = cos.shape[0]
    if len(claims) != n:
        raise InputError(f"voices need one claim per passage: {n} passages, {len(claims)} claims")
    for i in range(n):
        for j in range(i + 1, n):
            a, b = claims[i], claims[j]
            if a is not None and b is not None and not same_answer(a, b):
                cos[i, j] = cos[j, i] = -1.0
    return cos


def claim_clusters(
    cosines: Any, claims: Sequence[Value | None], tightness: float, linkage: str = "complete"
) -> list[list[int]]:
    """Clusters of passages that assert one answer: among the passages that read an answer to the
    question (``claims``, :func:`read_claims`), :func:`tight_clusters` at ``tightness`` with the
    pairs reading different answers set apart (:func:`disagreeing`); only clusters of two or more come back
    (positions among all the passages).

    Embeddings are mostly topic: an honest page about the event a planted claim retells sits as
    close to the attacker's paraphrases as they sit to each other. What sets them apart is what
    they answer, so passages that agree on the answer need a lower bar than ``tight_clusters``
    alone. A passage that reads no answer has shown no agreement: it joins a voice only by the
    meaning bar."""
    return _reader_clusters(disagreeing(cosines, claims), claims, tightness, linkage)


def _reader_clusters(
    apart: np.ndarray, claims: Sequence[Value | None], tightness: float, linkage: str
) -> list[list[int]]:
    """:func:`claim_clusters` on cosines already passed through :func:`disagreeing`."""
    readers = [i for i, c in enumerate(claims) if c is not None]
    if len(readers) < 2:
        return []
    sub = apart[np.ix_(readers, readers)]
    return [[readers[i] for i in c] for c in tight_clusters(sub, tightness, linkage) if len(c) >= 2]


@dataclass(frozen=True)
class Voice:
    """Passages that speak as one: a tight cluster by meaning, one host, or linked copies.

    ``id`` is the best-ranked member's chunk id; ``members`` and ``positions`` (0-based, in the
    order the hits were given) list every member best-ranked first; ``hosts`` their sites;
    ``documents`` how many documents they come from; ``mean_cosine``/``min_cosine`` the
    tightness of the members' embeddings (1.0 for a single passage); ``by`` the rules that joined
    them (``meaning``, ``claim``, ``host``, ``copy``); ``coordinated`` whether a cluster by meaning
    (or by meaning and one answer, ``claim``) spans at least the grouper's ``min_members``
    documents, the pages of one series counting once (:func:`series_of`; the suspicious shape);
    ``cluster`` the members of that cluster (empty when not
    coordinated)."""

    id: str
    members: tuple[str, ...]
    positions: tuple[int, ...]
    hosts: tuple[str, ...]
    documents: int
    mean_cosine: float
    min_cosine: float
    by: tuple[str, ...] = ()
    coordinated: bool = False
    cluster: tuple[str, ...] = field(default=())

    @property
    def size(self) -> int:
        return len(self.members)

    def to_dict(self) -> dict[str, Any]:
        return {
            "voice": self.id, "members": list(self.members), "hosts": list(self.hosts),
            "documents": self.documents, "mean_cosine": round(self.mean_cosine, 4),
            "min_cosine": round(self.min_cosine, 4), "by": list(self.by), "coordinated": self.coordinated,
            "cluster": list(self.cluster),
        }  # fmt: skip


def host_of(hit: SearchHit) -> str:
    """The site a passage comes from: :func:`ragsieve.text.passage.source_of` without a path
    (``news.example/moon`` and ``news.example/mars`` are one host)."""
    return source_of(hit).split("://", 1)[-1].split("/", 1)[0].lower()


_SERIES_NUMBERS = re.compile(r"[\d\u2010-\u2015/-]+")


def series_of(hit: SearchHit) -> str:
    """The series a passage's document belongs to: its host with its title, numbers taken out
    ("2010 Ms. Olympia" and "2011 Ms. Olympia" on one site are one series), or its document when
    it has no title (:func:`ragsieve.text.passage.document_of`). The yearly pages of one series agree
    with each other, and are written alike, as no independent sources do: the only clusters either
    rule found in the training clean sets were such pages. They count as one document towards
    ``min_members``; the same title on other hosts is another series."""
    title = " ".join(_SERIES_NUMBERS.sub(" ", hit.chunk.title or "").lower().split())
    return f"{host_of(hit)}|{title}" if title else document_of(hit)


def _tightness(cos: np.ndarray | None, idx: Sequence[int]) -> tuple[float, float]:
    if cos is None or len(idx) < 2:
        return 1.0, 1.0
    sub = cos[np.ix_(idx, idx)]
    upper = sub[np.triu_indices(len(idx), k=1)]
    return float(upper.mean()), float(upper.min())


class VoiceGrouper:
    """Group retrieved passages into voices (see the module docstring).

    ``tightness``: the cosine every pair of a cluster by meaning reaches (``linkage="complete"``)
    or its groups reach on average (``"average"``, see :func:`tight_clusters`); ``claim_tightness``:
    the lower bar for passages that read one answer to the question (:func:`claim_clusters`; used
    when :meth:`group` is given the question or the claims; ``None`` switches it off);
    ``min_members``: the number of documents a cluster must span to be coordinated, the pages of
    one series counting once (:func:`series_of`; only a coordinated cluster by claim joins its
    members); ``same_host``: passages
    from one site are one voice; ``embedder``: embeds the passages when :meth:`group` gets no
    ``vectors`` (the index's embedder, so the vectors match the index's).

    Example:
        >>> VoiceGrouper().to_dict()["type"]
        'voice-grouper'
    """

    name = "voices"

    def __init__(
        self,
        tightness: float = TIGHTNESS,
        min_members: int = MIN_MEMBERS,
        same_host: bool = True,
        embedder: Any = None,
        linkage: str = LINKAGE,
        claim_tightness: float | None = CLAIM_TIGHTNESS,
    ) -> None:
        self.tightness = tightness
        self.claim_tightness = claim_tightness
        self.min_members = min_members
        self.linkage = linkage
        self.same_host = same_host
        self.embedder = embedder

    def check(self) -> None:
        """Raise :class:`ConfigError` on settings out of range."""
        if isinstance(self.tightness, bool) or not isinstance(self.tightness, (int, float)) \
                or not 0.0 < float(self.tightness) <= 1.0:
            raise ConfigError(f"voice tightness must be a cosine in (0, 1], got {self.tightness!r}; fix the config")
        claim = self.claim_tightness
        if claim is not None and (isinstance(claim, bool) or not isinstance(claim, (int, float))
                                  or not 0.0 < float(claim) <= 1.0):
            raise ConfigError(f"voice claim_tightness must be a cosine in (0, 1] or unset, got {claim!r}; "
                              "fix the config")
        if isinstance(self.min_members, bool) or not isinstance(self.min_members, int) or self.min_members < 2:
            raise ConfigError(f"voice min_members must be an integer of at least 2, got {self.min_members!r}; "
                              "fix the config")
        if self.linkage not in LINKAGES:
            raise ConfigError(f"voice linkage must be one of {', '.join(LINKAGES)}, got {self.linkage!r}; "
                              "fix the config")

    def warm_up(self) -> None:
        if self.embedder is not None and hasattr(self.embedder, "warm_up"):
            self.embedder.warm_up()

    def cosines(self, hits: Sequence[SearchHit]) -> np.ndarray:
        """Pairwise cosine of the passages' embeddings (the ``embedder``'s)."""
        if self.embedder is None:
            raise ConfigError("VoiceGrouper needs an embedder (the index's) or the passages' vectors; "
                              "pass embedder= or vectors=")
        if len(hits) == 0:
            return np.zeros((0, 0))
        return pairwise_cosine(self.embedder.embed([h.chunk.text for h in hits]))

    def group(
        self,
        hits: Sequence[SearchHit],
        vectors: Any = None,
        cosines: Any = None,
        linked: Iterable[tuple[int, int]] = (),
        question: str | None = None,
        claims: Sequence[Value | None] | None = None,
    ) -> list[Voice]:
        """The voices among ``hits`` (best-ranked first), in order of their best-ranked member.

        Pass the passages' ``vectors`` or their pairwise ``cosines`` when you have them (else the
        ``embedder`` embeds the texts); ``linked``: pairs of positions another check found to be
        copies of each other; ``question`` (or the passages' ``claims``, :func:`read_claims`)
        turns on clusters by claim (``claim_tightness``)."""
        self.check()
        n = len(hits)
        if n == 0:
            return []
        if cosines is not None:
            cos = np.asarray(cosines, dtype=np.float64)
        elif vectors is not None:
            cos = pairwise_cosine(vectors)
        else:
            cos = self.cosines(hits)
        if cos.shape != (n, n):
            raise InputError(f"voices need one vector (or cosine row) per passage: {n} passages, "
                             f"cosines of shape {cos.shape}")
        docs = [document_of(h) for h in hits]
        series = [series_of(h) for h in hits]
        hosts = [host_of(h) for h in hits]
        parent = list(range(n))
        rules: list[set[str]] = [set() for _ in range(n)]

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        def join(i: int, j: int, rule: str) -> None:
            a, b = find(i), find(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
                rules[min(a, b)] |= rules[max(a, b)]
            rules[find(i)].add(rule)

        if claims is None and question is not None:
            claims = read_claims(question, [h.chunk.text for h in hits])
        if claims is not None and len(claims) != n:
            raise InputError(f"voices need one claim per passage: {n} passages, {len(claims)} claims")
        # passages that read different answers say different things, however alike their words
        apart = disagreeing(cos, claims) if claims is not None else cos
        coordinated_of: dict[int, list[int]] = {}
        for cluster in tight_clusters(apart, float(self.tightness), self.linkage):
            if len(cluster) < 2:
                continue
            for j in cluster[1:]:
                join(cluster[0], j, "meaning")
            if len({series[i] for i in cluster}) >= self.min_members:
                coordinated_of[cluster[0]] = cluster
        if self.claim_tightness is not None and claims is not None:
            for cluster in _reader_clusters(apart, claims, float(self.claim_tightness), self.linkage):
                if len({series[i] for i in cluster}) < self.min_members:
                    continue  # agreeing on an answer is what honest sources do; only a spread is suspicious
                for j in cluster[1:]:
                    join(cluster[0], j, "claim")
                coordinated_of[cluster[0]] = sorted(set(coordinated_of.get(cluster[0], [])) | set(cluster))
        if self.same_host:
            first_of_host: dict[str, int] = {}
            for i, host in enumerate(hosts):
                if host in first_of_host:
                    join(first_of_host[host], i, "host")
                else:
                    first_of_host[host] = i
        for i, j in linked:
            if not (0 <= i < n and 0 <= j < n):
                raise InputError(f"linked pair ({i}, {j}) is outside the {n} passages given")
            if i != j:
                join(i, j, "copy")
        groups: dict[int, list[int]] = {}
        for i in range(n):
            groups.setdefault(find(i), []).append(i)
        out = []
        for root, idx in sorted(groups.items(), key=lambda kv: kv[1][0]):
            clusters = [c for first, c in coordinated_of.items() if find(first) == root]
            cluster = sorted({i for c in clusters for i in c})
            mean, low = _tightness(cos, cluster or idx)
            out.append(Voice(
                id=hits[idx[0]].chunk.id, members=tuple(hits[i].chunk.id for i in idx), positions=tuple(idx),
                hosts=tuple(dict.fromkeys(hosts[i] for i in idx)), documents=len({docs[i] for i in idx}),
                mean_cosine=mean, min_cosine=low, by=tuple(sorted(rules[root])), coordinated=bool(cluster),
                cluster=tuple(hits[i].chunk.id for i in cluster)))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"type": "voice-grouper", "tightness": self.tightness, "min_members": self.min_members,
                "same_host": self.same_host, "linkage": self.linkage, "claim_tightness": self.claim_tightness}

    @classmethod
    def from_dict(cls, data: dict[str, Any], embedder: Any = None) -> VoiceGrouper:
        params = {k: v for k, v in data.items() if k != "type"}
        return cls(**params, embedder=embedder)


def one_per_voice(
    hits: Sequence[SearchHit], same_source: Mapping[str, str]
) -> tuple[list[SearchHit], dict[str, str]]:
    """``hits`` with at most one passage per voice: the best-ranked (first) member of each
    group ``same_source`` names (chunk id -> voice id) stands for it. Returns the kept hits, in
    order, and for each dropped chunk id the id of the passage that stands for it."""
    kept: list[SearchHit] = []
    stands_for: dict[str, str] = {}
    first_of: dict[str, str] = {}
    for h in hits:
        voice = same_source.get(h.chunk.id)
        if voice is None:
            kept.append(h)
        elif voice in first_of:
            stands_for[h.chunk.id] = first_of[voice]
        else:
            first_of[voice] = h.chunk.id
            kept.append(h)
    return kept, stands_for


@dataclass(frozen=True)
class Coordination:
    """The coordination signal of one coordinated voice.

    ``score`` in [0, 1]: 0.5 for a coordinated cluster, plus up to 0.5 for what it asserts:
    ``claims`` are the values (:mod:`ragsieve.values`) at least half of the cluster's members
    state and the question does not; ``exclusive`` those no passage outside the cluster states;
    ``rivals`` values of a claim's kind that passages outside state and no member does (a gold
    page naming another person than the cluster's). An exclusive claim adds 0.5 (the cluster
    asserts what nothing independent says); rivals, no claim found, or no passage outside the
    cluster to compare with add 0.25; claims that independent passages state too, with no rival,
    add nothing (the cluster agrees with them)."""

    voice: str
    members: tuple[str, ...]
    score: float
    claims: tuple[str, ...]
    exclusive: tuple[str, ...]
    rivals: tuple[str, ...]
    outside: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"voice": self.voice, "members": list(self.members), "score": round(self.score, 4),
                "claims": list(self.claims), "exclusive": list(self.exclusive), "rivals": list(self.rivals),
                "outside": self.outside, "reason": self.reason}


def coordination(question: str, hits: Sequence[SearchHit], voices: Sequence[Voice]) -> list[Coordination]:
    """The coordination signal of each coordinated voice among ``hits`` (see :class:`Coordination`).

    Passages outside the cluster are those of other voices: a same-host companion of a cluster
    member does not count as independent confirmation."""
    from ragsieve.values import extract_values, find_in, read_evidence

    q_ev = read_evidence(question)
    out = []
    for voice in voices:
        if not voice.coordinated:
            continue
        members = [i for i, h in enumerate(hits) if h.chunk.id in set(voice.cluster)]
        inside = set(voice.positions)
        outside_texts = [h.chunk.text for i, h in enumerate(hits) if i not in inside]
        outside = [read_evidence(t) for t in outside_texts]
        evidence = [read_evidence(hits[i].chunk.text) for i in members]
        need = math.ceil(len(members) / 2)
        claims: dict[str, Any] = {}
        for i in members:
            for value in extract_values(hits[i].chunk.text):
                if value.text in claims or find_in(value, q_ev) is not None:
                    continue
                if sum(find_in(value, ev) is not None for ev in evidence) >= need:
                    claims[value.text] = value
        exclusive = [text for text, v in claims.items() if outside and all(find_in(v, ev) is None for ev in outside)]
        kinds = {v.kind for v in claims.values()}
        rivals: dict[str, None] = {}
        for text in outside_texts:
            for value in extract_values(text, kinds) if kinds else []:
                if find_in(value, q_ev) is None and all(find_in(value, ev) is None for ev in evidence):
                    rivals[value.text] = None
        if exclusive:
            grade, why = 1.0, f"asserts {', '.join(exclusive[:3])}, which no passage outside it states"
        elif rivals:
            grade, why = 0.5, (f"passages outside it state {', '.join(list(rivals)[:3])}, which none of its "
                               f"members does (it states {', '.join(list(claims)[:3])})")
        elif not outside:
            grade, why = 0.5, "no passage outside the cluster to compare with"
        elif not claims:
            grade, why = 0.5, "no value shared by most of its members"
        else:
            grade, why = 0.0, "what it asserts, passages outside it state too"
        score = 0.5 + 0.5 * grade
        reason = (f"{len(members)} passages from {voice.documents} documents form one tight cluster "
                  f"(cosine mean {voice.mean_cosine:.2f}, min {voice.min_cosine:.2f}); {why}")
        out.append(Coordination(voice.id, voice.cluster, score, tuple(claims), tuple(exclusive), tuple(rivals),
                                len(outside), reason))
    return out


def answer_coordination(
    question: str, text: str, evidence: Sequence[SearchHit], coordinated: Iterable[str]
) -> dict[str, float]:
    """How much of the evidence behind an answer is a coordinated voice (graded, for the decision).

    The passages of ``evidence`` that state a value of the answer ``text`` (:mod:`ragsieve.values`;
    values the question states do not count) are the answer's support; ``coordinated`` are the
    chunk ids of coordinated voices' members. Returns ``coordinated_share`` (the share of the
    supporting passages that are members; with one passage per voice, the share of the voices)
    and ``cluster_only`` (1 when every supporting passage is a member: the answer is asserted
    only inside a cluster), or nothing when no evidence passage states a value of the answer.

    A yes/no question's answer is its yes or no, not the values of the words around it (as
    :func:`read_claims` reads no claim from a stance): nothing comes back for one."""
    from ragsieve.generate.polar import is_polar_question
    from ragsieve.values import extract_values, find_in, read_evidence

    if is_polar_question(question):
        return {}
    q_ev = read_evidence(question)
    values = [v for v in extract_values(text) if find_in(v, q_ev) is None]
    if not values or not evidence:
        return {}
    members = set(coordinated)
    support = []
    for hit in evidence:
        ev = read_evidence(hit.chunk.text)
        if any(find_in(v, ev) is not None for v in values):
            support.append(hit.chunk.id in members)
    if not support:
        return {}
    share = sum(support) / len(support)
    return {"coordinated_share": share, "cluster_only": float(share == 1.0)}
