"""Conflicting sources: read what each passage answers on its own, then compare.

Selection that keeps one passage of a contradicting pair throws away the signal a reader needs.
:class:`ConflictDetector` isolates, then aggregates:

1. **isolate** – for each passage, the answer it supports *on its own*, read in the text layer
   (:func:`ragsieve.text.passage.passage_answer`, once per request through the request's
   :class:`ragsieve.text.readings.Readings`; this module groups and decides): a value of the
   kind the question asks for (the learned :func:`ragsieve.text.kind.expected_kind`: a date,
   number, quantity, name or yes/no; a question asking for a description has no single value to
   compare) in the passage's sentence that best covers the question's key terms, nearest to them
   in the clause that holds them, never a value the question itself states; a passage that does
   not name the question's own entities answers nothing (it is about something else). With an
   :class:`ragsieve.llm.base.LLM` the short answer is asked of the model instead, constrained to
   JSON, and kept only where the passage states it. An answer takes part in a disagreement only
   above a bar (:attr:`ragsieve.text.passage.PassageAnswer.states_answer`): its sentence holds
   every key term of the question (:data:`CONFLICT_TERM_COVER`) and its clause states one value
   of the asked kind (a list of laureates, or two thresholds in one clause, is not one answer);
   below the bar it is recorded in the report, not compared. An unclear case is not a conflict.
   Optionally (a :class:`ragsieve.text.passage.MeaningBar` with the index's embedder; off by
   default, :data:`CONFLICT_MEANING_BAR`) the passage's sentence closest in meaning to the
   question also meets the bar when its cosine reaches the bar's: a paraphrased question misses
   the literal one. With the extractive reader (``reader``; ``[reading] reader = "minilm"``) each
   passage's answer is the reader's span instead, its values of the asked kind read by the value
   readers (:func:`ragsieve.text.passage.span_answer`; a yes/no question's stance from the clause
   holding the span), compared when the reader is sure enough (:data:`CONFLICT_READER_BAR`);
2. **aggregate** – passages are grouped by normalised answer (``"June 1931"`` and ``"1931"``
   are one answer), and each group counts *independent* sources
   (:func:`independent_sources`: passages from one site/host/document, or near-duplicate
   texts, count once), weighed by optional per-source trust weights (``source_weights.json``
   as the importance stage writes it);
3. **decide** – one answer: consistent. Two answers contradict (:func:`contradicts`) only when
   they are values of one kind (a year against a year; a passage answering "what voltage" with
   the year the cell was invented speaks of something else) and documents tell them apart
   (:func:`document_of`: one article giving a river's length in one paragraph and a canal's in
   the next describes two things). Several answers none of which contradicts another are
   reported as ``"one-document"`` or ``"different-kinds"``, without a conflict; answers that
   contradict none of the others are set aside. Contradicting answers: a
   :class:`ConflictReport` whose ``policy``
   (:data:`ConflictPolicy`) gives the decision: ``"both"`` names every answer with its sources,
   ``"abstain"`` declines, ``"trusted"`` answers with the group of clearly higher weight (and
   falls back to ``"both"`` when no group is clearly ahead).

Example:
    >>> from ragsieve.conflict import ConflictDetector
    >>> from ragsieve.types import Chunk, SearchHit
    >>> hits = [SearchHit(Chunk(id=f"c{i}", text=t, doc_id=f"d{i}", source=s), 1.0, i, {}) for i, (t, s) in
    ...         enumerate([("The Kessel Bridge opened in 1931.", "site-a.example"),
    ...                    ("The Kessel Bridge opened to traffic in 1947.", "site-b.example")], 1)]
    >>> ConflictDetector().detect("When did the Kessel Bridge open?", hits).message
    'The sources disagree: 1931 (site-a.example, [1]) vs 1947 (site-b.example, [2]).'
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args

from ragsieve.config import ConflictPolicy
from ragsieve.errors import ConfigError
from ragsieve.text.kind import expected_kind
from ragsieve.text.passage import (
    CONFLICT_MEANING_BAR,
    CONFLICT_TERM_COVER,
    MIN_TERM_COVER,
    MeaningBar,
    PassageAnswer,
    ReaderBar,
    document_of,
    llm_passage_answer,
    not_about,
    passage_answer,
    passage_sentences,
    same_answer,
    source_of,
)
from ragsieve.text.question import read_question
from ragsieve.text.readings import Readings
from ragsieve.text.terms import key_terms, words
from ragsieve.types import SearchHit

if TYPE_CHECKING:
    from ragsieve.text.reader import ExtractiveReader

__all__ = [
    "CONFLICT_POLICIES", "CONFLICT_READER_BAR", "AnswerGroup", "ConflictDetector", "ConflictReport", "SourceGroup",
    "contradicts",
    "independent_sources", "jaccard", "sentence_cosines",
    # the text layer's (ragsieve.text.passage, ragsieve.text.terms), still imported from here by
    # benchmarks/conflicts.py and benchmarks/train_reader.py
    "CONFLICT_MEANING_BAR", "CONFLICT_TERM_COVER", "MIN_TERM_COVER", "MeaningBar", "key_terms", "passage_answer",
]

logger = logging.getLogger(__name__)

CONFLICT_POLICIES: tuple[str, ...] = get_args(ConflictPolicy)
# decisions on several answer groups that are not a disagreement between sources
NOT_A_DISAGREEMENT: tuple[str, ...] = ("one-document", "different-kinds")
# Near-duplicate threshold on the Jaccard similarity of word 3-shingles. Chosen on the unit-test
# fixtures and by arithmetic, not on a benchmark: one changed word in a 40-word passage changes
# 3 of 38 shingles (Jaccard ~0.85), light copy-editing stays above ~0.7, while two passages
# that merely share a topic sit below 0.2.
NEAR_DUPLICATE_JACCARD = 0.6
# With the extractive reader on: the bar a passage's reader answer must meet to take part in a
# disagreement (its answer probability, and the key-term cover of the sentence holding its span).
# Chosen on the training split only (`python benchmarks/conflicts.py --reader minilm --choose-reader-bar`;
# the rule fixed before the run and the grid: docs/results/reader.md): below a cover of 100% no bar
# kept WikiContradict's conflict precision at 90% (at 75%: 8/10), and 0.7 ties 0.5 on every count.
CONFLICT_READER_BAR = ReaderBar(probability=0.7, cover=1.0)


def sentence_cosines(embedder: Any, question: str, passages: Sequence[str]) -> list[list[float]]:
    """Per passage, the cosine of each of its sentences
    (:func:`ragsieve.text.passage.passage_sentences`, in order) with the question, from one batch
    of ``embedder`` (vectors normalised here whatever the embedder does): the meaning bar's input
    (:class:`ragsieve.text.passage.MeaningBar`)."""
    import numpy as np

    from ragsieve.embed.base import l2_normalize

    split = [[s for _, s in passage_sentences(text)] for text in passages]
    flat = [s for sentences in split for s in sentences]
    if not flat:
        return [[] for _ in passages]
    vectors = l2_normalize(np.asarray(embedder.embed([question, *flat]), dtype=np.float32))
    sims = (vectors[1:] @ vectors[0]).tolist()
    out: list[list[float]] = []
    start = 0
    for sentences in split:
        out.append([float(x) for x in sims[start : start + len(sentences)]])
        start += len(sentences)
    return out


# A number and a quantity can answer one question ("how long": 1,230 or 1,230 km); a year and a
# number, or a name and a number, answer different ones.
_KIND_FAMILY = {"quantity": "number"}


def _families(group: AnswerGroup) -> set[str]:
    return {_KIND_FAMILY.get(p.value.kind, p.value.kind) for p in group.passages if p.value is not None}


def _documents(group: AnswerGroup) -> set[str]:
    return {document_of(h) for s in group.sources for h in s.hits}


def contradicts(a: AnswerGroup, b: AnswerGroup) -> bool:
    """Whether two answer groups disagree: values of one kind (a year against a year, not a year
    against a voltage: a passage that answers with another kind of value speaks of something
    else), told apart by documents (some document states one and not the other, and some other
    document the other and not the first). Values that differ only inside one document (one
    article's paragraphs about different things) do not disagree."""
    if not _families(a) & _families(b):
        return False
    da, db = _documents(a), _documents(b)
    return bool(da - db and db - da)


def _shingles(text: str, n: int = 3) -> set[tuple[str, ...]]:
    tokens = words(text)
    if len(tokens) < n:
        return {tuple(tokens)}
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def jaccard(a: str, b: str) -> float:
    """Jaccard similarity of the word 3-shingles of two texts (1.0 for identical texts)."""
    sa, sb = _shingles(a), _shingles(b)
    return len(sa & sb) / max(1, len(sa | sb))


@dataclass
class SourceGroup:
    """Passages that count as one source: same site, same document, or near-duplicate text."""

    label: str  # the site shown to people
    hits: list[SearchHit]
    positions: list[int]  # 1-based positions of the hits among the passages given

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.label, "chunk_ids": [h.chunk.id for h in self.hits], "positions": self.positions}


def independent_sources(
    hits: Sequence[SearchHit],
    positions: Sequence[int] | None = None,
    near_duplicate: float = NEAR_DUPLICATE_JACCARD,
    same_source: Mapping[str, str] | None = None,
) -> list[SourceGroup]:
    """Group ``hits`` into independent sources: one site/host, one document, or near-duplicate
    texts (word 3-shingle Jaccard >= ``near_duplicate``) count once, and so do hits that
    ``same_source`` (chunk id -> cluster key, e.g. the poisoning check's near-duplicate and
    paraphrase clusters) maps to one key. Groups keep input order."""
    n = len(hits)
    pos = list(positions) if positions is not None else list(range(1, n + 1))
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    sources = [source_of(h) for h in hits]
    keys = [(same_source or {}).get(h.chunk.id) for h in hits]
    for i in range(n):
        for j in range(i + 1, n):
            same = (
                sources[i] == sources[j]
                or (keys[i] is not None and keys[i] == keys[j])
                or hits[i].chunk.doc_id == hits[j].chunk.doc_id
                or jaccard(hits[i].chunk.text, hits[j].chunk.text) >= near_duplicate
            )
            if same:
                parent[find(j)] = find(i)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    out = []
    for members in groups.values():
        labels = list(dict.fromkeys(sources[i] for i in members))
        out.append(SourceGroup(" = ".join(labels), [hits[i] for i in members], [pos[i] for i in members]))
    return out


# ----------------------------------------------------------------------------- aggregate and decide
@dataclass
class AnswerGroup:
    """Passages that give one answer, with their independent sources and trust weight."""

    answer: str
    passages: list[PassageAnswer]
    sources: list[SourceGroup]
    weight: float

    @property
    def count(self) -> int:
        return len(self.sources)

    def cite(self) -> str:
        sites = ", ".join(s.label for s in self.sources)
        marks = "".join(f"[{p.position}]" for p in self.passages)
        return f"{self.answer} ({sites}, {marks})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "independent_sources": self.count,
            "weight": round(self.weight, 6),
            "sources": [s.to_dict() for s in self.sources],
            "passages": [p.position for p in self.passages],
        }


@dataclass
class ConflictReport:
    """The per-passage answers, the answer groups and the decision."""

    question: str
    expected: str
    policy: ConflictPolicy
    answers: list[PassageAnswer] = field(default_factory=list)
    groups: list[AnswerGroup] = field(default_factory=list)
    # "consistent" | "both" | "abstain" | "trusted" | "no-answer" | "one-document" | "different-kinds"
    decision: str = "no-answer"
    chosen: str | None = None  # the answer to give ("consistent"/"trusted"), None otherwise
    message: str = ""
    # answer groups that contradict none of the others (another kind of value, or only their own
    # document's other values), left out of a conflict's groups
    set_aside: list[AnswerGroup] = field(default_factory=list)

    @property
    def conflict(self) -> bool:
        """Several answers that contradict each other (:func:`contradicts`)."""
        return len(self.groups) > 1 and self.decision not in NOT_A_DISAGREEMENT

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "expected": self.expected,
            "policy": self.policy,
            "conflict": self.conflict,
            "decision": self.decision,
            "chosen": self.chosen,
            "message": self.message,
            "groups": [g.to_dict() for g in self.groups],
            "set_aside": [g.to_dict() for g in self.set_aside],
            "passages": [a.to_dict() for a in self.answers],
        }


def _same_answer(a: PassageAnswer, b: PassageAnswer) -> bool:
    return a.value is not None and b.value is not None and same_answer(a.value, b.value)


class ConflictDetector:
    """Detect disagreeing sources among a question's kept passages (see the module docs).

    ``policy``: what to do on disagreement (:data:`ConflictPolicy`). ``source_weights``: trust
    per source (site or ``chunk.source``; 1.0 when absent), e.g. the ``weights`` of the
    importance stage's ``source_weights.json``. ``trusted_margin``: under ``"trusted"`` the
    heaviest group wins only when its weight exceeds every other group's by this factor
    (1.5: half again as much), else both answers are given. ``llm``: optional model for the
    per-passage short answer. ``meaning``: the meaning bar (:class:`MeaningBar`; default
    :data:`CONFLICT_MEANING_BAR`), read only with an ``embedder`` (the index's; without one the
    literal bar alone decides). The extraction reader embeds the question and every passage
    sentence in one batch per question. ``reader``: the extractive reader
    (:class:`ragsieve.text.reader.ExtractiveReader`, ``[reading] reader = "minilm"``): each
    passage's answer is then the reader's (:meth:`ragsieve.text.readings.PassageReading.reader_answer`),
    compared when it meets ``reader_bar`` (default :data:`CONFLICT_READER_BAR`); without it (and
    without an ``llm``) the rules read.

    Example:
        >>> detector = ConflictDetector(policy="abstain")
        >>> report = detector.detect(question, hits)  # doctest: +SKIP
        >>> report.conflict, report.message  # doctest: +SKIP
    """

    def __init__(
        self,
        policy: str = "both",
        source_weights: Mapping[str, float] | None = None,
        trusted_margin: float = 1.5,
        near_duplicate: float = NEAR_DUPLICATE_JACCARD,
        llm: Any = None,
        embedder: Any = None,
        meaning: MeaningBar | None | str = "default",
        reader: ExtractiveReader | None = None,
        reader_bar: ReaderBar = CONFLICT_READER_BAR,
    ) -> None:
        if policy not in CONFLICT_POLICIES:
            raise ConfigError(f"unknown conflict policy {policy!r}; use one of {', '.join(CONFLICT_POLICIES)}")
        if trusted_margin < 1.0:
            raise ConfigError(f"trusted_margin must be at least 1.0 (a factor), got {trusted_margin}")
        self.policy: ConflictPolicy = policy  # type: ignore[assignment]
        self.source_weights = dict(source_weights or {})
        self.trusted_margin = trusted_margin
        self.near_duplicate = near_duplicate
        self.llm = llm
        self.embedder = embedder
        if isinstance(meaning, str):
            if meaning != "default":
                raise ConfigError(f"meaning must be a MeaningBar, None or 'default', got {meaning!r}")
            meaning = CONFLICT_MEANING_BAR
        self.meaning: MeaningBar | None = meaning
        self.reader = reader
        self.reader_bar = reader_bar

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "conflict",
            "policy": self.policy,
            "source_weights": self.source_weights,
            "trusted_margin": self.trusted_margin,
            "near_duplicate": self.near_duplicate,
        } | ({"meaning": {"cosine": self.meaning.cosine, "floor": self.meaning.floor}} if self.meaning else {})

    @classmethod
    def from_dict(cls, data: dict[str, Any], llm: Any = None, embedder: Any = None) -> ConflictDetector:
        options = {k: v for k, v in data.items() if k not in ("type", "meaning")}
        meaning = MeaningBar(**data["meaning"]) if data.get("meaning") else None
        return cls(llm=llm, embedder=embedder, meaning=meaning, **options)

    @classmethod
    def from_weights_file(cls, path: str, **kwargs: Any) -> ConflictDetector:
        """A detector whose trust weights are the ``weights`` of a ``source_weights.json``."""
        import json
        from pathlib import Path

        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(source_weights=data.get("weights", {}), **kwargs)

    def warm_up(self) -> None:
        if self.llm is not None:
            self.llm.warm_up()
        if self.reader is not None:
            self.reader.warm_up()

    def weight(self, group: SourceGroup) -> float:
        """Trust of one independent source: its best member's weight (1.0 when unknown)."""
        ws = [self.source_weights.get(source_of(h), self.source_weights.get(h.chunk.source, 1.0)) for h in group.hits]
        return max(ws) if ws else 1.0

    def answers(
        self, question: str, hits: Sequence[SearchHit], readings: Readings | None = None
    ) -> list[PassageAnswer]:
        """What each passage answers on its own, numbered 1, 2, ... in ``hits``' order. With
        ``readings`` (the request's, :class:`ragsieve.text.readings.Readings`), the rules'
        readings come from there (read once per request); the model's, and the meaning bar's,
        are read here."""
        if self.reader is not None and self.llm is None:
            readings = readings if readings is not None else Readings()
            asked = readings.question(question)
            read = readings.passages(question, hits, self.reader)  # one batch: those not read yet
            return [
                r.reader_answer(asked, self.reader_bar, position=i) or dataclasses.replace(r.answer, position=i)
                for i, r in enumerate(read, 1)
            ]
        out = []
        meaning = self.meaning if self.embedder is not None and self.llm is None else None
        cosines: list[list[float] | None] = [None] * len(hits)
        asked = readings.question(question) if readings is not None else read_question(question)
        if meaning is not None and hits and asked.kind != "description":
            # only the passages about the question's entities are read, so only theirs are embedded
            about = [i for i, h in enumerate(hits) if not not_about(asked, h.chunk.text)]
            rows = sentence_cosines(self.embedder, question, [hits[i].chunk.text for i in about])
            for i, row in zip(about, rows, strict=True):
                cosines[i] = row
        cached = (
            readings.passages(question, hits) if readings is not None and self.llm is None and meaning is None else None
        )
        for i, h in enumerate(hits, 1):
            if cached is not None:
                a = dataclasses.replace(cached[i - 1].answer, position=i)
            elif self.llm is not None:
                a = llm_passage_answer(
                    self.llm, question, h.chunk.text, position=i, chunk_id=h.chunk.id, source=source_of(h)
                )
            else:
                a = passage_answer(
                    question, h.chunk.text, position=i, chunk_id=h.chunk.id, source=source_of(h),
                    cosines=cosines[i - 1], meaning=meaning, asked=asked,
                )  # fmt: skip
            out.append(a)
        return out

    def detect(
        self,
        question: str,
        hits: Sequence[SearchHit],
        same_source: Mapping[str, str] | None = None,
        readings: Readings | None = None,
    ) -> ConflictReport:
        """Read each passage's answer, group, count independent sources, decide.
        ``same_source``: chunk id -> cluster key of passages known to be copies of one source
        (:func:`independent_sources`); ``readings``: the request's readings (:meth:`answers`)."""
        answers = self.answers(question, hits, readings)
        kind = readings.question(question).kind if readings is not None else expected_kind(question)
        report = ConflictReport(question, kind, self.policy, answers)
        clusters: list[list[PassageAnswer]] = []
        for a in answers:
            # an answer below the bar (part of the question's terms, several values in its
            # clause) stays in the report's passages for the trace and is not compared
            if not a.states_answer:
                continue
            for cl in clusters:
                if any(_same_answer(a, b) for b in cl):
                    cl.append(a)
                    break
            else:
                clusters.append([a])
        by_pos = {i: h for i, h in enumerate(hits, 1)}
        for cl in clusters:
            srcs = independent_sources(
                [by_pos[a.position] for a in cl], [a.position for a in cl], self.near_duplicate, same_source
            )
            label = max((a.value.text for a in cl if a.value is not None), key=len)
            report.groups.append(AnswerGroup(label, cl, srcs, sum(self.weight(s) for s in srcs)))
        report.groups.sort(key=lambda g: (-g.weight, g.passages[0].position))
        self._decide(report)
        return report

    def _decide(self, report: ConflictReport) -> None:
        groups = report.groups
        if not groups:
            report.decision, report.message = "no-answer", "No passage states an answer on its own."
            return
        if len(groups) == 1:
            report.decision, report.chosen = "consistent", groups[0].answer
            report.message = f"The sources agree: {groups[0].cite()}."
            return
        opposed = [g for g in groups if any(contradicts(g, h) for h in groups if h is not g)]
        if not opposed:
            listed = "; ".join(g.cite() for g in sorted(groups, key=lambda g: g.passages[0].position))
            if any(_families(g) & _families(h) for i, g in enumerate(groups) for h in groups[i + 1 :]):
                report.decision = "one-document"
                report.message = (
                    f"One document gives several values ({listed}): read as different things it describes, "
                    "not as sources that disagree."
                )
            else:
                report.decision = "different-kinds"
                report.message = (
                    f"The passages answer with different kinds of value ({listed}): read as answers about "
                    "different things, not as sources that disagree."
                )
            return
        report.set_aside = [g for g in groups if all(g is not o for o in opposed)]
        report.groups = groups = opposed
        disagree = "The sources disagree: " + " vs ".join(
            g.cite() for g in sorted(groups, key=lambda g: g.passages[0].position)
        )
        if self.policy == "abstain":
            report.decision, report.message = "abstain", disagree + ", so I can't give one answer."
            return
        if self.policy == "trusted":
            top, runner = groups[0], groups[1]
            if top.weight >= self.trusted_margin * runner.weight and top.weight > runner.weight:
                report.decision, report.chosen = "trusted", top.answer
                report.message = (
                    f"{disagree}. Answering with {top.answer}: its sources weigh {top.weight:.2g} "
                    f"against {runner.weight:.2g}."
                )
                return
        report.decision, report.message = "both", disagree + "."
