"""Conflicting documents: two independent documents that state different values of one kind for the
same subject and attribute.

The comparison is the conflict reader's (:class:`ragsieve.conflict.ConflictDetector`), which needs a
question. The audit derives one from what the two sentences share, the way the reader reads
questions: the subject is the proper names, and the two sentences must name the same ones (each name
of either is named in the other, :func:`ragsieve.values.find_entity`: "Einstein received the Nobel
Prize in 1921" and "Bohr received the Nobel Prize in 1922" are about two people); the attribute is
the content words both hold besides names and values (:func:`ragsieve.text.terms.key_terms`); the
question word is the kind of value the first sentence states (a date: "When", a number: "How many",
a quantity: "How much"), kept only when the learned kind of the derived question
(:func:`ragsieve.text.kind.expected_kind`) accepts that value's kind. The detector then reads each
sentence's answer on its own and decides; only its ``conflict`` (values of one kind, told apart by
documents) is reported. Names are not compared (two sentences naming different people around one
subject rarely state one fact). The extractive reader
(:class:`ragsieve.text.reader.ExtractiveReader`), when it loads, gives its sureness that each
sentence answers the derived question.

Two documents are compared only when their titles share a content word (or one has none,
:func:`same_topic`). Candidate pairs: each passage's dense neighbours from other documents, and
passages that share a rare name (:func:`ragsieve.audit.corpus.rare_name_pairs`); never all pairs.
Within a pair, only sentences that can conflict are compared: each passage's sentences are read
once, those naming no proper name are dropped (the question needs one in both), and a sentence is
paired only with the other passage's sentences holding a key of its names (:func:`_name_keys`: a
word, initials or character 3-gram that every form :func:`ragsieve.values.find_entity` accepts
shares), so abstracts of many sentences cost the sentence pairs that name one subject, not all
of them. The findings are those of comparing every sentence pair (tests compare the two).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from ragsieve.audit.corpus import Corpus, ProgressFn, neighbour_pairs, rare_name_pairs
from ragsieve.audit.report import ConflictValues, Finding, Member

logger = logging.getLogger(__name__)

QUESTION_WORD = {"date": "When", "number": "How many", "quantity": "How much"}


@dataclasses.dataclass(frozen=True)
class _Sentence:
    text: str
    names: tuple[Any, ...]  # name Values
    kinds: frozenset[str]  # kinds of the values it states (of QUESTION_WORD's)
    terms: frozenset[str]
    first_value_kind: str | None


@lru_cache(maxsize=65536)
def _read_sentence(text: str) -> _Sentence:
    from ragsieve.text.terms import key_terms, stems
    from ragsieve.values import extract_values

    values = extract_values(text)
    names = tuple(v for v in values if v.kind == "name")
    # a number right after a name is part of what it names ("Apollo 8", "Boeing 747"), not a measure
    name_ends = {v.span[1] for v in names}
    measured = [v for v in values if v.kind in QUESTION_WORD
                and not (v.kind == "number" and text[: v.span[0]].rstrip() != text[: v.span[0]]
                         and len(text[: v.span[0]].rstrip()) in name_ends)]
    value_stems = {s for v in values if v.kind != "name" for s in stems(v.text)}
    terms = frozenset(key_terms(text) - value_stems)
    return _Sentence(text, names, frozenset(v.kind for v in measured), terms,
                     measured[0].kind if measured else None)


def _sentences(text: str) -> list[_Sentence]:
    from ragsieve.text.sentences import split_sentences

    return [_read_sentence(s) for s in split_sentences(text) or [text]]


def _names_in(names: tuple[Any, ...], text: str) -> bool:
    from ragsieve.values import find_entity

    return all(find_entity(v, text) is not None for v in names)


def same_topic(first_title: str, second_title: str) -> bool:
    """Whether two documents may speak of one fact: their titles share a content word, or one
    has no title. Sentences name their subject by pronouns and general nouns ("Linus Pauling
    introduced the idea in 1931" in an article on hybridisation, "... the concept ... in 1932" in
    one on electronegativity); the titles say what "the idea" and "the concept" are."""
    from ragsieve.text.terms import key_terms

    a, b = key_terms(first_title or ""), key_terms(second_title or "")
    return not a or not b or bool(a & b)


def derive_question(first: str, second: str) -> str | None:
    """The question both sentences answer (see the module docstring), or ``None``.

    The two sentences must name the same proper names (each name of either is named in the
    other: the same subject) and share a content word besides names and values (the attribute);
    the question is the names and the shared words after the question word of the first
    sentence's first date, number or quantity, which the second must state a value of too."""
    from ragsieve.text.kind import VALUE_KINDS_FOR, expected_kind
    from ragsieve.text.terms import stems, words

    a, b = _read_sentence(first), _read_sentence(second)
    kind = a.first_value_kind
    if kind is None or kind not in b.kinds:
        return None
    if not a.names or not b.names or not _names_in(a.names, second) or not _names_in(b.names, first):
        return None
    name_stems = {s for v in a.names for s in stems(v.text)}
    attribute = (a.terms & b.terms) - name_stems
    if not attribute:
        return None
    kept: list[str] = []
    for word in words(first):
        s = stems(word)
        if s and s[0] in attribute and word not in kept:
            kept.append(word)
    question = f"{QUESTION_WORD[kind]} {' '.join(v.text for v in a.names)} {' '.join(kept)}?"
    if kind not in VALUE_KINDS_FOR.get(expected_kind(question), ()):
        return None
    return question


def candidate_pairs(corpus: Corpus, ids: np.ndarray, excluded: Iterable[frozenset[str]] = ()) -> set[tuple[int, int]]:
    """Dense-neighbour and rare-name pairs of passages from different documents, leaving out
    pairs whose documents are in one ``excluded`` group (mirrors)."""
    from ragsieve.values import extract_values

    doc_ids = [c.doc_id for c in corpus.chunks]
    names = [[v.norm for v in extract_values(c.text, ("name",))] for c in corpus.chunks]
    pairs = neighbour_pairs(ids, doc_ids) | rare_name_pairs(names, doc_ids)
    group_of: dict[str, int] = {}
    for g, docs in enumerate(excluded):
        for d in docs:
            group_of[d] = g
    return {
        (a, b) for a, b in pairs
        if group_of.get(doc_ids[a], -1) == -1 or group_of.get(doc_ids[a]) != group_of.get(doc_ids[b])
    }  # fmt: skip


class _Sureness:
    """The extractive reader's probability per sentence, or ``None`` where it does not load."""

    def __init__(self, use: bool) -> None:
        self.reader: Any = None
        self.note = ""
        if not use:
            return
        try:
            from ragsieve.text.reader import ExtractiveReader

            reader = ExtractiveReader()
            reader.warm_up()
            self.reader = reader
        except Exception as exc:  # a missing graph or tokenizer leaves the sureness unknown
            self.note = f"the extractive reader did not load ({exc}); conflicts carry no sureness"
            logger.info(self.note)

    def __call__(self, question: str, sentences: list[str]) -> list[float | None]:
        if self.reader is None:
            return [None] * len(sentences)
        answers = self.reader.read(question, sentences)
        return [float(a.probability) for a in answers]

    def answered(self, question: str, sentences: list[str]) -> bool:
        return self.reader is not None and all(a.answered for a in self.reader.read(question, sentences))


@dataclasses.dataclass(frozen=True)
class _Named:
    """A sentence with what its name check needs, read once per passage: ``keys`` is a set of
    strings of which every name of another sentence found in this one (:func:`_names_in`) holds
    at least one (:func:`_name_keys`), so sentences sharing none cannot name the same names."""

    sentence: _Sentence
    keys: frozenset[str]
    name_keys: tuple[frozenset[str], ...]  # per name of the sentence, its keys
    name_stems: frozenset[str]


def _grams(joined: str) -> set[str]:
    return {"g:" + joined[i : i + 3] for i in range(len(joined) - 2)}


def _name_keys(name: Any) -> frozenset[str]:
    """Strings one of which the text keys of any text naming ``name`` hold (:func:`_text_keys`).

    :func:`ragsieve.values.find_entity`'s forms of a name: its words in a row (the last word as
    written: an initial never stands for it), its leading words, its words with more between, or
    its trailing words (each holds the first or the last word); its initials as one word; the name
    as the initials of a longer one; another spelling (difflib ratio at least 0.9 of two names of
    at least 5 characters: at most a tenth of the characters differ, so the longest block they
    share has at least 3 characters, a shared character 3-gram)."""
    from ragsieve.values import _initials

    toks = tuple(t.rstrip("._") for t in name.tokens)
    toks = tuple(t for t in toks if t)
    if not toks:
        return frozenset()
    keys = {"t:" + toks[0], "t:" + toks[-1], "t:" + _initials(toks)}
    if len(toks) == 1:
        keys.add("i:" + toks[0])
    joined = " ".join(t.rstrip(".") for t in name.tokens)
    if len(joined) >= 5:
        keys |= _grams(joined)
    return frozenset(keys)


def _text_keys(text: str) -> frozenset[str]:
    """The keys a text offers the names it names (:func:`_name_keys`): its words, the initials of
    its names, and the character 3-grams of its names."""
    from ragsieve.values import _initials, read_evidence

    ev = read_evidence(text)
    keys = {"t:" + t.rstrip("._") for t in ev.tokens}
    for v in ev.values:
        if v.kind != "name" or not v.tokens:
            continue
        etoks = tuple(t.rstrip(".") for t in v.tokens)
        keys |= {"t:" + t.rstrip("._") for t in etoks}
        if len(etoks) >= 2:
            keys.add("i:" + _initials(etoks))
        joined = " ".join(etoks)
        if len(joined) >= 5:
            keys |= _grams(joined)
    return frozenset(keys)


@dataclasses.dataclass
class _Row:
    """One passage's sentences that can take part in a conflict (each names a proper name, which
    :func:`derive_question` requires of both), as asking (states a date, number or quantity
    first) and answering (states one), with the answering ones indexed by their name keys."""

    asking: list[_Named]
    answering: list[_Named]
    by_key: dict[str, list[int]]


def _read_row(text: str) -> _Row:
    from ragsieve.text.terms import stems

    asking: list[_Named] = []
    answering: list[_Named] = []
    for s in _sentences(text):
        if not s.names or not s.kinds:
            continue
        named = _Named(s, _text_keys(s.text), tuple(_name_keys(v) for v in s.names),
                       frozenset(x for v in s.names for x in stems(v.text)))
        answering.append(named)
        if s.first_value_kind is not None:
            asking.append(named)
    by_key: dict[str, list[int]] = {}
    for i, named in enumerate(answering):
        for k in named.keys:
            by_key.setdefault(k, []).append(i)
    return _Row(asking, answering, by_key)


def _may_conflict(a: _Named, b: _Named) -> bool:
    """The parts of :func:`derive_question`'s conditions read without reading the question: the
    kind, a shared attribute word, and each name of either sentence holding a key of the other."""
    sa, sb = a.sentence, b.sentence
    return (
        sa.first_value_kind in sb.kinds
        and bool((sa.terms & sb.terms) - a.name_stems)
        and all(k & b.keys for k in a.name_keys)
        and all(k & a.keys for k in b.name_keys)
    )


def _sentence_pairs(ra: _Row, rb: _Row) -> list[tuple[str, str]]:
    """The sentence pairs of two passages that can conflict, in the order the exhaustive loop
    (:func:`_all_sentence_pairs`) meets them: answering sentences are looked up by the keys of the
    asking one's first name, which every pair that names the same names shares."""
    out: list[tuple[str, str]] = []
    for a in ra.asking:
        found: set[int] = set()
        for k in a.name_keys[0]:
            found.update(rb.by_key.get(k, ()))
        for j in sorted(found):
            b = rb.answering[j]
            if _may_conflict(a, b):
                out.append((a.sentence.text, b.sentence.text))
    return out


def _all_sentence_pairs(first: str, second: str) -> list[tuple[str, str]]:
    """Every sentence pair of two passages the question is derived for: the reference the indexed
    :func:`_sentence_pairs` must agree with (tests only)."""
    return [(sa.text, sb.text) for sa in _sentences(first) if sa.first_value_kind is not None
            for sb in _sentences(second) if sb.kinds and sa.terms & sb.terms]


@dataclasses.dataclass(frozen=True)
class PairConflict:
    """One sentence pair of a candidate passage pair that the detector found in conflict: the
    two sentences (``first`` from the lower row), the derived question, the two values read,
    their kind and the detector's decision. What a pair's check yields (cached by the
    incremental audit: it depends on the two passages alone)."""

    first: str
    second: str
    question: str
    first_value: str
    second_value: str
    kind: str
    decision: str

    def to_list(self) -> list[str]:
        return [self.first, self.second, self.question, self.first_value, self.second_value, self.kind,
                self.decision]


@dataclasses.dataclass
class ConflictWork:
    """What one conflict scan did: candidate pairs read now, pairs whose result was reused, and
    each pair's conflicts (rows in the scanned corpus) for the next, incremental, scan."""

    read: int = 0
    reused: int = 0
    results: dict[tuple[int, int], list[PairConflict]] = dataclasses.field(default_factory=dict)
    sureness: dict[tuple[str, str, str], tuple[float | None, float | None, bool]] = dataclasses.field(
        default_factory=dict)


def find_conflicts(
    corpus: Corpus,
    ids: np.ndarray,
    mirrored: Iterable[frozenset[str]] = (),
    use_reader: bool = True,
    progress: ProgressFn | None = None,
) -> tuple[list[Finding], int, str]:
    """Conflict findings, the number of candidate pairs read, and a note (empty when none)."""
    return _find_conflicts(corpus, ids, mirrored, use_reader, progress)


def _find_conflicts(
    corpus: Corpus,
    ids: np.ndarray,
    mirrored: Iterable[frozenset[str]] = (),
    use_reader: bool = True,
    progress: ProgressFn | None = None,
    exhaustive: bool = False,
) -> tuple[list[Finding], int, str]:
    """:func:`find_conflicts`; ``exhaustive`` derives a question for every sentence pair (the
    reference the tests compare the indexed sentence pairs with)."""
    findings, work, note = scan_conflicts(corpus, ids, mirrored, use_reader, progress, exhaustive=exhaustive)
    return findings, work.read, note


def scan_conflicts(
    corpus: Corpus,
    ids: np.ndarray,
    mirrored: Iterable[frozenset[str]] = (),
    use_reader: bool = True,
    progress: ProgressFn | None = None,
    *,
    known: Callable[[int, int], list[PairConflict] | None] | None = None,
    known_sureness: Mapping[tuple[str, str, str], tuple[float | None, float | None, bool]] | None = None,
    exhaustive: bool = False,
) -> tuple[list[Finding], ConflictWork, str]:
    """Conflict findings, the work done and a note. ``known(a, b)`` gives a candidate pair's
    result from an earlier scan (``None``: read it now): its two passages are unchanged, so its
    result is too; ``known_sureness`` the reader's sureness of earlier findings. The findings
    are those of reading every pair."""
    from ragsieve.conflict import ConflictDetector

    pairs = sorted(candidate_pairs(corpus, ids, list(mirrored)))
    detector = ConflictDetector()
    work = ConflictWork()
    rows: dict[int, _Row] = {}  # each passage's sentences, read once however many pairs it is in

    def row(r: int) -> _Row:
        if r not in rows:
            rows[r] = _read_row(corpus.chunks[r].text)
        return rows[r]

    for n, (a, b) in enumerate(pairs, 1):
        if progress and n % 256 == 0:
            progress("conflicts", n, len(pairs))
        earlier = known(a, b) if known is not None else None
        if earlier is not None:
            work.reused += 1
            work.results[(a, b)] = earlier
            continue
        work.read += 1
        work.results[(a, b)] = _check_pair(corpus, a, b, row, detector, exhaustive)
    if progress:
        progress("conflicts", len(pairs), len(pairs))
    sureness = _Sureness(use_reader)
    seen: set[tuple[str, str, str]] = set()
    findings: list[Finding] = []
    for a, b in pairs:
        ca, cb = corpus.chunks[a], corpus.chunks[b]
        for found in work.results[(a, b)]:
            key = (min(ca.doc_id, cb.doc_id), max(ca.doc_id, cb.doc_id), found.question.lower())
            if key in seen:
                continue
            seen.add(key)
            sure_key = (found.question, found.first, found.second)
            if known_sureness is not None and sure_key in known_sureness:
                work.sureness[sure_key] = known_sureness[sure_key]
            else:
                sentences = [found.first, found.second]
                sure = sureness(found.question, sentences)
                work.sureness[sure_key] = (sure[0], sure[1], sureness.answered(found.question, sentences))
            findings.append(_finding(corpus, (a, b), found, work.sureness[sure_key]))
    return findings, work, sureness.note


def _check_pair(corpus: Corpus, a: int, b: int, row: Callable[[int], _Row], detector: Any,
                exhaustive: bool) -> list[PairConflict]:
    """The conflicting sentence pairs of passages ``a`` and ``b`` (rows, ``a`` < ``b``)."""
    ca, cb = corpus.chunks[a], corpus.chunks[b]
    if not same_topic(ca.title, cb.title):
        return []
    if exhaustive:
        sentence_pairs = _all_sentence_pairs(ca.text, cb.text)
    else:
        ra, rb = row(a), row(b)
        if not ra.asking or not rb.answering:
            return []
        sentence_pairs = _sentence_pairs(ra, rb)
    out: list[PairConflict] = []
    asked: set[str] = set()
    for ta, tb in sentence_pairs:
        question = derive_question(ta, tb)
        if question is None or question.lower() in asked:
            continue
        hits = [corpus.hit(a)._replace(chunk=dataclasses.replace(ca, text=ta)),
                corpus.hit(b)._replace(chunk=dataclasses.replace(cb, text=tb), rank=2)]
        report = detector.detect(question, hits)
        if not report.conflict:
            continue
        asked.add(question.lower())
        by_position = {p.position: p for p in report.answers}
        first, second = by_position.get(1), by_position.get(2)
        kind = first.value.kind if first is not None and first.value is not None else report.expected
        out.append(PairConflict(ta, tb, question, first.answer if first is not None else "",
                                second.answer if second is not None else "", str(kind), str(report.decision)))
    return out


def _finding(corpus: Corpus, rows: tuple[int, int], found: PairConflict,
             sure: tuple[float | None, float | None, bool]) -> Finding:
    members = []
    for r, s in zip(rows, (found.first, found.second), strict=True):
        citation, link = corpus.citation(r)
        c = corpus.chunks[r]
        members.append(Member(c.doc_id, c.id, citation, corpus.hosts[r], s, link))
    known = [x for x in sure[:2] if x is not None]
    score = min(known) if known else 0.5
    severity: Literal["high", "medium"] = "high" if sure[2] else "medium"
    evidence = f"{members[0].doc_id} says {found.first_value}, {members[1].doc_id} says {found.second_value} " \
               f"({found.question})"
    return Finding(
        kind="conflict", score=score, severity=severity, members=tuple(members), evidence=evidence,
        values=ConflictValues(found.question, found.kind, found.first_value, found.second_value, sure[0], sure[1]),
        details={"decision": found.decision},
    )
