"""Conflicting sources: read what each passage answers on its own, then compare.

Selection that keeps one passage of a contradicting pair throws away the signal a reader needs.
:class:`ConflictDetector` isolates, then aggregates:

1. **isolate** – for each passage, the answer it supports *on its own*
   (:func:`passage_answer`): a value of the kind the question asks for (the learned
   :func:`ragsieve.text.kind.expected_kind`: a date, number, quantity, name or yes/no; a
   question asking for a description has no single value to compare) in the passage's sentence
   that best covers the question's key terms, nearest to them in the clause that holds them,
   never a value the question itself states; a passage that does not name the question's own
   entities answers nothing (it is about something else). With an
   :class:`ragsieve.llm.base.LLM` the short answer is asked of the model instead, constrained
   to JSON, and kept only where the passage states it. An answer takes part in a disagreement
   only above a bar (:attr:`PassageAnswer.states_answer`): its sentence holds every key term of
   the question (:data:`CONFLICT_TERM_COVER`) and its clause states one value of the asked kind
   (a list of laureates, or two thresholds in one clause, is not one answer); below the bar it
   is recorded in the report, not compared. An unclear case is not a conflict. Optionally (a
   :class:`MeaningBar` with the index's embedder; off by default, :data:`CONFLICT_MEANING_BAR`)
   the passage's sentence closest in meaning to the question also meets the bar when its cosine
   reaches the bar's: a paraphrased question misses the literal one;
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

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args
from urllib.parse import urldefrag, urlparse

from ragsieve.config import ConflictPolicy
from ragsieve.errors import ConfigError, LLMOutputError
from ragsieve.sentences import split_clauses
from ragsieve.text.kind import VALUE_KINDS_FOR, AnswerKind, expected_kind  # noqa: F401  (re-exported)
from ragsieve.text.terms import NEGATIONS, key_terms, stems, words
from ragsieve.types import SearchHit
from ragsieve.values import Value, extract_values, find_entity, find_in, same_measure

logger = logging.getLogger(__name__)

CONFLICT_POLICIES: tuple[str, ...] = get_args(ConflictPolicy)
# decisions on several answer groups that are not a disagreement between sources
NOT_A_DISAGREEMENT: tuple[str, ...] = ("one-document", "different-kinds")
# Near-duplicate threshold on the Jaccard similarity of word 3-shingles. Chosen on the unit-test
# fixtures and by arithmetic, not on a benchmark: one changed word in a 40-word passage changes
# 3 of 38 shingles (Jaccard ~0.85), light copy-editing stays above ~0.7, while two passages
# that merely share a topic sit below 0.2.
NEAR_DUPLICATE_JACCARD = 0.6

# Share of the question's key terms a sentence must hold for its value to be read as the
# passage's answer (what an extraction from a pasted passage needs).
MIN_TERM_COVER = 0.5
# Share a sentence must hold for its answer to count in a disagreement: all of them. A passage
# whose sentence leaves out part of what is asked (the year of a prize, "super" of
# superhydrophobic, "tributary" of "the major tributary of the Rhine") may be answering a
# neighbouring question; it is recorded, not compared. A lower cover picked on the training split
# (`python benchmarks/conflicts.py --choose-cover`) surfaced more conflicts but let false ones
# through on the held-out sets, so it was not adopted.
CONFLICT_TERM_COVER = 1.0


@dataclass(frozen=True)
class MeaningBar:
    """The meaning bar of :data:`CONFLICT_MEANING_BAR`: the cosine the passage's closest sentence
    needs, and the share of the question's key terms it must still hold."""

    cosine: float
    floor: float = MIN_TERM_COVER

    def __post_init__(self) -> None:
        if not -1.0 <= self.cosine <= 1.0:
            raise ConfigError(f"the meaning bar's cosine must be in [-1, 1], got {self.cosine}")
        if not 0.0 <= self.floor <= 1.0:
            raise ConfigError(f"the meaning bar's key-term floor must be in [0, 1], got {self.floor}")

    def closest(self, cosines: Sequence[float]) -> int | None:
        """The index of the sentence with the highest cosine when it reaches the bar (the first on
        a tie), else ``None``."""
        if not cosines:
            return None
        top = max(range(len(cosines)), key=lambda i: (cosines[i], -i))
        return top if cosines[top] >= self.cosine else None


# The meaning bar, beside the literal one: a sentence also meets the bar when it is its passage's
# sentence closest in meaning to the question (cosine of the embedder's vectors of the question
# and of each sentence), that cosine is at least ``cosine``, and it holds at least ``floor`` of
# the question's key terms. A paraphrased question ("When was the base set up?" for a sentence
# saying "established") misses the literal bar; the closest sentence of a passage that is about
# the question's entities is what the passage says on it. Chosen on the training split only
# (`python benchmarks/conflicts.py --choose-meaning`); ``None``: off, the literal bar alone.
CONFLICT_MEANING_BAR: MeaningBar | None = None


def sentence_cosines(embedder: Any, question: str, passages: Sequence[str]) -> list[list[float]]:
    """Per passage, the cosine of each of its sentences (:func:`_sentences`, in order) with the
    question, from one batch of ``embedder`` (vectors normalised here whatever the embedder does)."""
    import numpy as np

    from ragsieve.embed.base import l2_normalize

    split = [[s for _, s in _sentences(text)] for text in passages]
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


# ----------------------------------------------------------------------------- question analysis
def _stems(text: str) -> list[str]:
    return stems(text)


# ----------------------------------------------------------------------------- isolate
@dataclass
class PassageAnswer:
    """What one passage answers on its own (``value`` is ``None`` when it answers nothing).

    ``cover``: the share of the question's key terms its answering sentence holds; ``clear``:
    whether the clause that answers states one value of the asked kind (a list of names, or a
    clause giving two thresholds, is not one answer). Only a clear answer with a cover of at least
    :data:`CONFLICT_TERM_COVER` (every key term) counts in a disagreement (:attr:`states_answer`)."""

    position: int  # 1-based, as the passages are numbered to the reader
    chunk_id: str
    source: str
    value: Value | None
    answer: str  # normalised answer text shown to people ("" when none)
    sentence: str = ""
    reason: str = ""
    by: str = "extract"  # "extract" | "llm"
    cover: float = 0.0
    clear: bool = True
    stance: bool = False  # a yes/no stance rather than a value
    # the answering sentence's cosine with the question (``None``: the meaning bar was off), and
    # whether it meets the meaning bar (its passage's closest sentence, at or above the bar)
    cosine: float | None = None
    closest: bool = False

    @property
    def states_answer(self) -> bool:
        """Whether this answer may take part in a disagreement: a clear value in a sentence with
        all the question's key terms, or in the passage's sentence closest in meaning to the
        question when the meaning bar is on (:class:`MeaningBar`); a model's yes/no stance reads
        the whole passage, which needs a sentence with half of them (it is about the question)."""
        bar = MIN_TERM_COVER if self.stance and self.by == "llm" else CONFLICT_TERM_COVER
        return self.value is not None and self.clear and (self.cover >= bar or self.closest)

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "chunk_id": self.chunk_id,
            "source": self.source,
            "answer": self.answer,
            "value": self.value.to_dict() if self.value is not None else None,
            "sentence": self.sentence,
            "reason": self.reason,
            "by": self.by,
            "cover": round(self.cover, 3),
            "clear": self.clear,
            "compared": self.states_answer,
        } | ({"cosine": round(self.cosine, 3), "closest": self.closest} if self.cosine is not None else {})


def _sentences(text: str) -> list[tuple[int, str]]:
    from ragsieve.sentences import split_sentences

    out: list[tuple[int, str]] = []
    pos = 0
    for s in split_sentences(text) or [text]:
        found = text.find(s[:20], pos)
        out.append((found if found >= 0 else pos, s))
        pos = max(pos, found + 1)
    return out


def _polar_stance(clause: str) -> str:
    # a negation in the clause that holds the question's terms, not anywhere in the sentence
    return "no" if set(words(clause)) & NEGATIONS else "yes"


def _not_about(question: str, q_names: Sequence[Value], text: str) -> str:
    """Why ``text`` is not about what ``question`` asks ("" when it is): it must name every
    proper name of the question, in any of the name's forms (:func:`ragsieve.values.find_entity`:
    "Seadlund" for "John Henry Seadlund", "Mari Christine Fitzduff" for "Mari Fitzduff", "IBM" for
    "International Business Machines"; not a shortened form that the text also uses for another
    name); a question without one must have all its key terms in it."""
    missing = [v.text for v in q_names if find_entity(v, text) is None]
    if missing:
        return f"does not name {', '.join(missing)}"
    if not q_names:
        # without a named entity, the question's key terms say what it is about: a passage
        # that lacks one of them ("superconductivity" in a passage on isotopes that mentions a
        # discovery) is about something else and answers nothing
        absent = sorted(key_terms(question) - set(_stems(text)))
        if absent:
            return f"does not mention {', '.join(absent)}"
    return ""


def _cover(terms: set[str], q_names: Sequence[Value], sentence: str, passage: str) -> float:
    """The share of the question's key terms ``sentence`` (of ``passage``) holds; the words of a
    question's name count as held where the sentence names its entity in another form
    (:func:`ragsieve.values.find_entity`, read against the whole passage's names): "Seadlund was
    executed in 1938" holds "John Henry Seadlund"."""
    held = terms & set(_stems(sentence))
    for v in q_names:
        own = (terms - held) & set(_stems(v.text))
        if own and find_entity(v, sentence, within=passage) is not None:
            held |= own
    return len(held) / max(1, len(terms))


def _is_form_of(v: Value, name: Value) -> bool:
    # the whole of ``v`` is another form of the question's ``name`` ("Mari Christine Fitzduff" of
    # "Mari Fitzduff"), not a name that merely holds it ("Walther Meissner" holds "Meissner")
    match = find_entity(name, v.text)
    return match is not None and match.evidence.tokens == v.tokens


def _predicate(terms: set[str], q_names: Sequence[Value]) -> set[str]:
    # the question's terms besides its entities' own words (its predicate: "open", "discover"),
    # which tell the sentence about what is asked apart from other sentences about the entity;
    # the entity's words are in every sentence about it
    name_terms = {t for v in q_names for t in _stems(v.text)}
    return (terms - name_terms) or terms


def answering_sentence(question: str, text: str) -> str | None:
    """The sentence of ``text`` that answers an open question (``"What is the Forth Bridge?"``,
    no single value asked for) on its own: the passage must be about the question's entities
    (as in :func:`passage_answer`), and the sentence holds a predicate term and at least half of
    the question's key terms, the most of them (the earliest on a tie). ``None`` when no sentence
    does.

    >>> answering_sentence("What is the Forth Bridge?",
    ...                    "It is in Scotland. The Forth Bridge is a cantilever railway bridge. It opened in 1890.")
    'The Forth Bridge is a cantilever railway bridge.'
    """
    q_names = list(extract_values(question, ("name",)))
    if _not_about(question, q_names, text):
        return None
    terms = key_terms(question)
    predicate = _predicate(terms, q_names)
    best: tuple[float, str] | None = None
    for _, sentence in _sentences(text):
        sentence_words = set(_stems(sentence))
        cover = _cover(terms, q_names, sentence, text)
        if cover >= MIN_TERM_COVER and predicate & sentence_words and (best is None or cover > best[0]):
            best = (cover, sentence)
    return best[1] if best else None


def _asked_about(v: Value, q_values: Sequence[Value]) -> bool:
    """Whether ``v`` is one of the question's own values (``q_values``, of its kind): what a
    question asks about is not its answer ("Where is the Rhine?" is not answered by "Rhine")."""
    return any(find_in(v, qv.text) is not None for qv in q_values if qv.kind == v.kind)


def _distinct(values: Sequence[Value]) -> list[Value]:
    out: list[Value] = []
    for v in values:
        if not any(find_in(v, o.text) is not None or find_in(o, v.text) is not None for o in out):
            out.append(v)
    return out


def passage_answer(
    question: str,
    text: str,
    *,
    position: int = 1,
    chunk_id: str = "",
    source: str = "",
    cosines: Sequence[float] | None = None,
    meaning: MeaningBar | None = None,
) -> PassageAnswer:
    """The answer ``text`` gives to ``question`` on its own, by extraction (no model).

    The passage must name every proper name of the question (else it is about another entity
    and answers nothing); a question without one must have all its key terms in the passage.
    A question that asks for a description (:func:`ragsieve.text.kind.expected_kind`) has no
    single value to read. Otherwise the answer is, in the sentence that covers the most key terms
    (at least half of them and a predicate term), the value of the expected kind nearest to the
    question's terms inside the clause that holds them, never one the question states. ``cover``
    and ``clear`` say whether the answer is firm enough to be compared
    (:attr:`PassageAnswer.states_answer`).

    ``cosines`` (one per sentence of the passage, :func:`sentence_cosines`) and ``meaning`` turn
    the meaning bar on: the passage's sentence closest to the question, when its cosine reaches
    ``meaning.cosine`` and it holds ``meaning.floor`` of the key terms, is read even without a
    predicate term, is preferred to the other sentences, and its clear answer is compared.
    """
    kind = expected_kind(question)
    q_names = [v for v in extract_values(question, ("name",))]
    base = PassageAnswer(position, chunk_id, source, None, "")
    if kind == "description":
        base.reason = "the question asks for a description, not one value"
        return base
    off_topic = _not_about(question, q_names, text)
    if off_topic:
        base.reason = off_topic
        return base
    terms = key_terms(question)
    predicate = _predicate(terms, q_names)
    q_values = extract_values(question)
    sentences = _sentences(text)
    if cosines is not None and len(cosines) != len(sentences):
        raise ValueError(f"{len(cosines)} cosines for {len(sentences)} sentences")
    top = meaning.closest(cosines) if meaning is not None and cosines is not None else None
    # (closest, score, cover, value, sentence, clear, cosine): a sentence meeting the meaning bar
    # first (never one while the bar is off), then the score
    best: tuple[bool, float, float, Value, str, bool, float | None] | None = None
    for i, (_, sentence) in enumerate(sentences):
        sentence_words = set(_stems(sentence))
        cover = _cover(terms, q_names, sentence, text)
        cosine = cosines[i] if cosines is not None else None
        closest = meaning is not None and i == top and cover >= meaning.floor
        # a sentence answers the question only if it is about what is asked, not merely about
        # the same entity: it holds a predicate term and at least half of the key terms
        # (a fixed rule, chosen before any benchmark was run), or it is the passage's sentence
        # closest in meaning to the question (the meaning bar)
        if not closest and (cover < MIN_TERM_COVER or not predicate & sentence_words):
            continue
        clauses = split_clauses(sentence)
        clause = max(clauses, key=lambda c: (len(terms & set(_stems(c))), -clauses.index(c)))
        if kind == "yes/no":
            if best is None or (closest, cover) > (best[0], best[2]):
                stance = _polar_stance(clause)
                polar = Value("name", stance, stance, (0, 0), tokens=(stance,))
                best = (closest, cover, cover, polar, sentence, True, cosine)
            continue
        clause_words = _stems(clause)
        positions = [i for i, w in enumerate(clause_words) if w in predicate] or [
            i for i, w in enumerate(clause_words) if w in terms
        ]
        candidates = [
            v
            for v in extract_values(clause, VALUE_KINDS_FOR[kind])
            # the question's own entity or value is not its answer
            if not _asked_about(v, q_values)
            and not (v.kind == "name" and set(_stems(v.text)) <= terms)
            and not (v.kind == "name" and any(_is_form_of(v, qv) for qv in q_names))
        ]
        # values of the kind asked for first: for "how long", a length, not the count of piers
        # beside it ("312 metres long and stands on nine piers")
        candidates = [v for v in candidates if v.kind == VALUE_KINDS_FOR[kind][0]] or candidates
        for v in candidates:
            # unclear when the clause states another value that could be the same fact (a
            # second length beside a length; not the mass in "nine stone piers")
            clear = len(_distinct([c for c in candidates if same_measure(c, v)])) == 1
            # token index of the value: count words before its span; a value after the
            # predicate ("opened in 1931") is preferred to one before it by half a word
            idx = len(words(clause[: v.span[0]]))
            dist = min((abs(idx - p) + (0.5 if idx < p else 0.0) for p in positions), default=50.0)
            score = cover - 0.01 * dist
            if best is None or (closest, score) > (best[0], best[1]):
                best = (closest, score, cover, v, sentence, clear, cosine)
    if best is None:
        base.reason = f"states no {kind} near the question's terms"
        base.cosine = max(cosines, default=None) if cosines is not None else None
        return base
    closest, _, cover, value, sentence, clear, cosine = best
    reason = "extracted"
    if not clear:
        reason = "extracted; the answering clause states several values of the kind asked for (not compared)"
    elif cover < CONFLICT_TERM_COVER and closest:
        reason = (
            f"extracted; the sentence holds {cover:.0%} of the question's key terms and is the passage's closest "
            f"in meaning to the question (cosine {cosine:.2f})"
        )
    elif cover < CONFLICT_TERM_COVER:
        reason = f"extracted; the sentence holds {cover:.0%} of the question's key terms (not compared)"
    return PassageAnswer(
        position, chunk_id, source, value, value.norm, sentence, reason,
        cover=cover, clear=clear, stance=kind == "yes/no", cosine=cosine, closest=closest,
    )  # fmt: skip


_LLM_SCHEMA_TEXT = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 80}},
    "required": ["answer"],
}
_LLM_SCHEMA_POLAR = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["yes", "no", "unknown"]}},
    "required": ["answer"],
}


def llm_passage_answer(
    llm: Any, question: str, text: str, *, position: int, chunk_id: str, source: str
) -> PassageAnswer:
    """The model's short answer from this passage alone, kept only where the passage states it.

    Read as the rule reader reads (:func:`passage_answer`): a passage that does not name every
    proper name of the question (in any of its forms) answers nothing, and a value the question
    states is not its answer; a passage without a sentence that holds the question's key terms is
    not put to the model, since its answer could not take part in a disagreement."""
    kind = expected_kind(question)
    polar = kind == "yes/no"
    if kind == "description":
        return PassageAnswer(
            position, chunk_id, source, None, "", reason="the question asks for a description, not one value", by="llm"
        )
    terms = key_terms(question)
    q_names = extract_values(question, ("name",))
    # as for the rule reader: a passage that does not name each entity the question asks about
    # answers nothing ("Are Verdi and Thomas both opera composers?" from a page on Verdi alone)
    off_topic = _not_about(question, q_names, text)
    if off_topic:
        return PassageAnswer(position, chunk_id, source, None, "", reason=off_topic, by="llm")
    # an answer counts in a disagreement only from a sentence that holds the question's terms
    # (:attr:`PassageAnswer.states_answer`), so a passage without one is not worth a model call
    reach = max((_cover(terms, q_names, s, text) for _, s in _sentences(text)), default=0.0)
    bar = MIN_TERM_COVER if polar else CONFLICT_TERM_COVER
    if reach < bar:
        return PassageAnswer(
            position, chunk_id, source, None, "",
            reason=f"no sentence holds enough of the question's key terms ({reach:.0%} at most, {bar:.0%} needed); "
            "the model was not asked",
            by="llm", cover=reach,
        )  # fmt: skip
    prompt = [
        {
            "role": "system",
            "content": "Answer the question from the passage alone, in a few words. "
            + ("Say yes, no, or unknown." if polar else "Say 'unknown' if the passage does not say."),
        },
        {"role": "user", "content": f"Passage: {text[:1500]}\n\nQuestion: {question}"},
    ]
    try:
        reply = llm.generate_json(prompt, _LLM_SCHEMA_POLAR if polar else _LLM_SCHEMA_TEXT, max_tokens=32)
    except LLMOutputError as exc:
        logger.info("LLM short answer failed for %s: %s; extracting instead", chunk_id, exc)
        return passage_answer(question, text, position=position, chunk_id=chunk_id, source=source)
    answer = str(reply.get("answer", "")).strip()
    if not answer or answer.lower() == "unknown":
        return PassageAnswer(position, chunk_id, source, None, "", reason="the model found no answer", by="llm")
    if polar:
        low = answer.lower()
        return PassageAnswer(
            position,
            chunk_id,
            source,
            Value("name", low, low, (0, 0), tokens=(low,)),
            low,
            by="llm",
            cover=reach,
            stance=True,
        )
    # the question's own entity or value is not its answer ("Where is the Rhine?" -> "Rhine")
    q_values = extract_values(question)
    read = extract_values(answer, VALUE_KINDS_FOR[kind])
    values = [v for v in read if not _asked_about(v, q_values)]
    if read and not values:
        return PassageAnswer(
            position, chunk_id, source, None, "",
            reason=f"the model's answer {answer!r} is what the question asks about, not an answer", by="llm",
        )  # fmt: skip
    grounded = [v for v in values if find_in(v, text) is not None]
    if grounded:
        # the model's value counts in a disagreement only where the passage states it in a
        # sentence that holds the question's terms (as an extracted one)
        v = grounded[0]
        stating = [s for _, s in _sentences(text) if find_in(v, s) is not None]
        cover = max((_cover(terms, q_names, s, text) for s in stating), default=0.0)
        sentence = max(stating, key=lambda s: _cover(terms, q_names, s, text), default="")
        return PassageAnswer(
            position, chunk_id, source, v, v.norm, sentence, "model answer, found in the passage", "llm", cover=cover
        )
    return PassageAnswer(
        position,
        chunk_id,
        source,
        None,
        "",
        reason=f"the model's answer {answer!r} is not in the passage",
        by="llm",
    )


# ----------------------------------------------------------------------------- independent sources
def source_of(hit: SearchHit) -> str:
    """The site a passage comes from: the host of a URL in its metadata, else ``chunk.source``."""
    meta = hit.chunk.metadata or {}
    for key in ("url", "source_url", "link"):
        url = meta.get(key)
        if isinstance(url, str) and url:
            host = urlparse(url).netloc or url
            return host.lower().removeprefix("www.")
    return hit.chunk.source or hit.chunk.doc_id


def _is_url(text: str) -> bool:
    """An absolute address with a scheme and an authority (``https://host/...``), as
    :func:`urllib.parse.urlparse` reads it; a relative path (``chemistry/x.md``) is not one."""
    parts = urlparse(text)
    return bool(parts.scheme and parts.netloc)


def document_of(hit: SearchHit) -> str:
    """The document a passage belongs to: its address without the ``#fragment`` (the chunk's
    ``url``, a URL in its metadata, or a ``source`` that is a URL; paragraphs of one web page
    share it), else ``chunk.doc_id`` (one ingested file or record)."""
    chunk = hit.chunk
    meta = chunk.metadata or {}
    candidates = [chunk.url, *(meta.get(key) for key in ("url", "source_url", "link")), chunk.source]
    for url in candidates:
        if isinstance(url, str) and _is_url(url.strip()):
            return urldefrag(url.strip()).url
    return chunk.doc_id or chunk.source


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


def same_answer(a: Value, b: Value) -> bool:
    """Whether two answers read from passages are one answer: either states the other
    (:func:`ragsieve.values.find_in`), or, for names, one's tokens are among the other's
    ("Meissner" and "Walther Meissner"; "W. Meissner" and the full name)."""
    if a.kind == "name" and b.kind == "name":
        ta, tb = set(a.tokens), set(b.tokens)
        return find_in(a, b.text) is not None or find_in(b, a.text) is not None or ta <= tb or tb <= ta
    return find_in(a, b.text) is not None or find_in(b, a.text) is not None


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
    sentence in one batch per question.

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

    def weight(self, group: SourceGroup) -> float:
        """Trust of one independent source: its best member's weight (1.0 when unknown)."""
        ws = [self.source_weights.get(source_of(h), self.source_weights.get(h.chunk.source, 1.0)) for h in group.hits]
        return max(ws) if ws else 1.0

    def answers(self, question: str, hits: Sequence[SearchHit]) -> list[PassageAnswer]:
        out = []
        meaning = self.meaning if self.embedder is not None and self.llm is None else None
        cosines: list[list[float] | None] = [None] * len(hits)
        if meaning is not None and hits and expected_kind(question) != "description":
            # only the passages about the question's entities are read, so only theirs are embedded
            q_names = list(extract_values(question, ("name",)))
            about = [i for i, h in enumerate(hits) if not _not_about(question, q_names, h.chunk.text)]
            rows = sentence_cosines(self.embedder, question, [hits[i].chunk.text for i in about])
            for i, row in zip(about, rows, strict=True):
                cosines[i] = row
        for i, h in enumerate(hits, 1):
            if self.llm is not None:
                a = llm_passage_answer(
                    self.llm, question, h.chunk.text, position=i, chunk_id=h.chunk.id, source=source_of(h)
                )
            else:
                a = passage_answer(
                    question, h.chunk.text, position=i, chunk_id=h.chunk.id, source=source_of(h),
                    cosines=cosines[i - 1], meaning=meaning,
                )  # fmt: skip
            out.append(a)
        return out

    def detect(
        self, question: str, hits: Sequence[SearchHit], same_source: Mapping[str, str] | None = None
    ) -> ConflictReport:
        """Read each passage's answer, group, count independent sources, decide.
        ``same_source``: chunk id -> cluster key of passages known to be copies of one source
        (:func:`independent_sources`)."""
        answers = self.answers(question, hits)
        report = ConflictReport(question, expected_kind(question), self.policy, answers)
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
