"""What one passage answers on its own, read by rules: :func:`passage_answer` and its kin.

The isolate step of every check that compares passages (the conflict stage's disagreement, the
select stage's answer-stating passage, the verify stage's contradiction and pasted-passage
extraction, the poisoning check's voices): for each passage, the answer it supports *on its
own*. A value of the kind the question asks for (the learned
:func:`ragsieve.text.kind.expected_kind`: a date, number, quantity, name or yes/no; a question
asking for a description has no single value to read) in the passage's sentence that best covers
the question's key terms, nearest to them in the clause that holds them, never a value the
question itself states; a passage that does not name the question's own entities answers nothing
(it is about something else). An answer is firm enough to be compared
(:attr:`PassageAnswer.states_answer`) when its sentence holds every key term of the question
(:data:`CONFLICT_TERM_COVER`) and its clause states one value of the asked kind. With an
:class:`ragsieve.llm.base.LLM` the short answer is asked of the model instead
(:func:`llm_passage_answer`), constrained to JSON, and kept only where the passage states it.

The question is read once (:class:`ragsieve.text.question.QuestionReading`); a request's readings
are cached by :class:`ragsieve.text.readings.Readings`. These are the rules; the extractive reader
(:mod:`ragsieve.text.reader`) reads beside them.

Example:
    >>> passage_answer("When did the Kessel Bridge open?", "The Kessel Bridge opened in 1931.").answer
    '1931'
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urldefrag, urlparse

from ragsieve.errors import ConfigError, LLMOutputError
from ragsieve.text.kind import VALUE_KINDS_FOR
from ragsieve.text.question import QuestionReading, read_question
from ragsieve.text.sentences import split_clauses, split_sentences
from ragsieve.text.terms import NEGATIONS, stems, words
from ragsieve.values import Value, extract_values, find_entity, find_in, same_measure

__all__ = [
    "Hit",
    "CONFLICT_MEANING_BAR",
    "CONFLICT_TERM_COVER",
    "MIN_TERM_COVER",
    "MeaningBar",
    "PassageAnswer",
    "ReaderBar",
    "answering_sentence",
    "document_of",
    "llm_passage_answer",
    "not_about",
    "passage_answer",
    "passage_sentences",
    "same_answer",
    "source_of",
    "span_answer",
]

logger = logging.getLogger(__name__)


class Hit(Protocol):
    """A retrieved passage as the readers see it: a :class:`ragsieve.types.SearchHit` (named by
    shape, so the text layer imports nothing above it)."""

    @property
    def chunk(self) -> Any: ...

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


@dataclass(frozen=True)
class ReaderBar:
    """When the extractive reader's answer (:func:`span_answer`) is firm enough to be compared:
    its probability (:attr:`ragsieve.text.reader.ReaderAnswer.probability`, 0.5 at the reader's
    own no-answer threshold) is at least ``probability`` and the sentence holding the span holds
    at least ``cover`` of the question's key terms."""

    probability: float
    cover: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ConfigError(f"the reader bar's probability must be in [0, 1], got {self.probability}")
        if not 0.0 <= self.cover <= 1.0:
            raise ConfigError(f"the reader bar's key-term cover must be in [0, 1], got {self.cover}")



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
    by: str = "extract"  # "extract" | "llm" | "reader"
    cover: float = 0.0
    clear: bool = True
    stance: bool = False  # a yes/no stance rather than a value
    # the answering sentence's cosine with the question (``None``: the meaning bar was off), and
    # whether it meets the meaning bar (its passage's closest sentence, at or above the bar)
    cosine: float | None = None
    closest: bool = False
    # read by the extractive reader (``by = "reader"``, :func:`span_answer`): its answer
    # probability, and whether it meets the reader bar it was read at (:class:`ReaderBar`)
    probability: float | None = None
    confident: bool = False

    @property
    def states_answer(self) -> bool:
        """Whether this answer may take part in a disagreement: a clear value in a sentence with
        all the question's key terms, or in the passage's sentence closest in meaning to the
        question when the meaning bar is on (:class:`MeaningBar`); a model's yes/no stance reads
        the whole passage, which needs a sentence with half of them (it is about the question);
        the extractive reader's clear value when it meets its bar (:class:`ReaderBar`)."""
        if self.by == "reader":
            return self.value is not None and self.clear and self.confident
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
        } | ({"cosine": round(self.cosine, 3), "closest": self.closest} if self.cosine is not None else {}) | (
            {"probability": round(self.probability, 4)} if self.probability is not None else {}
        )


@functools.lru_cache(maxsize=4096)
def passage_sentences(text: str) -> tuple[tuple[int, str], ...]:
    """The sentences of ``text`` (:func:`ragsieve.text.sentences.split_sentences`; the text
    itself when it has none), each with where it starts in ``text``. Cached: a passage is read
    again on every question that retrieves it, and splitting is most of a rule reading's time."""
    out: list[tuple[int, str]] = []
    pos = 0
    for s in split_sentences(text) or [text]:
        found = text.find(s[:20], pos)
        out.append((found if found >= 0 else pos, s))
        pos = max(pos, found + 1)
    return tuple(out)


def _polar_stance(clause: str) -> str:
    # a negation in the clause that holds the question's terms, not anywhere in the sentence
    return "no" if set(words(clause)) & NEGATIONS else "yes"


def answers_nothing(asked: QuestionReading, text: str) -> str:
    """Why ``text`` answers nothing to the question, whatever it states ("" when it may): a
    question asking for a description has no single value to read, and a passage that does not
    name the question's entities (:func:`not_about`) is not about it. Both readers, the rules'
    (:func:`passage_answer`) and the extractive reader's (:func:`span_answer`), start here."""
    if asked.kind == "description":
        return "the question asks for a description, not one value"
    return not_about(asked, text)


def not_about(asked: QuestionReading, text: str) -> str:
    """Why ``text`` is not about what the question (``asked``) asks ("" when it is): it must name every
    proper name of the question, in any of the name's forms (:func:`ragsieve.values.find_entity`:
    "Seadlund" for "John Henry Seadlund", "Mari Christine Fitzduff" for "Mari Fitzduff", "IBM" for
    "International Business Machines"; not a shortened form that the text also uses for another
    name); a question without one must have all its key terms in it."""
    missing = [v.text for v in asked.names if find_entity(v, text) is None]
    if missing:
        return f"does not name {', '.join(missing)}"
    if not asked.names:
        # without a named entity, the question's key terms say what it is about: a passage
        # that lacks one of them ("superconductivity" in a passage on isotopes that mentions a
        # discovery) is about something else and answers nothing
        absent = sorted(asked.terms - set(stems(text)))
        if absent:
            return f"does not mention {', '.join(absent)}"
    return ""


def _cover(terms: frozenset[str], q_names: Sequence[Value], sentence: str, passage: str) -> float:
    """The share of the question's key terms ``sentence`` (of ``passage``) holds; the words of a
    question's name count as held where the sentence names its entity in another form
    (:func:`ragsieve.values.find_entity`, read against the whole passage's names): "Seadlund was
    executed in 1938" holds "John Henry Seadlund"."""
    held = terms & set(stems(sentence))
    for v in q_names:
        own = (terms - held) & set(stems(v.text))
        if own and find_entity(v, sentence, within=passage) is not None:
            held |= own
    return len(held) / max(1, len(terms))


def _is_form_of(v: Value, name: Value) -> bool:
    # the whole of ``v`` is another form of the question's ``name`` ("Mari Christine Fitzduff" of
    # "Mari Fitzduff"), not a name that merely holds it ("Walther Meissner" holds "Meissner")
    match = find_entity(name, v.text)
    return match is not None and match.evidence.tokens == v.tokens


def answering_sentence(question: str, text: str, asked: QuestionReading | None = None) -> str | None:
    """The sentence of ``text`` that answers an open question (``"What is the Forth Bridge?"``,
    no single value asked for) on its own: the passage must be about the question's entities
    (as in :func:`passage_answer`), and the sentence holds a predicate term and at least half of
    the question's key terms, the most of them (the earliest on a tie). ``None`` when no sentence
    does.

    >>> answering_sentence("What is the Forth Bridge?",
    ...                    "It is in Scotland. The Forth Bridge is a cantilever railway bridge. It opened in 1890.")
    'The Forth Bridge is a cantilever railway bridge.'
    """
    asked = asked or read_question(question)
    if not_about(asked, text):
        return None
    terms, q_names, predicate = asked.terms, asked.names, asked.predicate
    best: tuple[float, str] | None = None
    for _, sentence in passage_sentences(text):
        sentence_words = set(stems(sentence))
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
    asked: QuestionReading | None = None,
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

    ``cosines`` (one per sentence of the passage, :func:`ragsieve.conflict.sentence_cosines`) and
    ``meaning`` turn the meaning bar on: the passage's sentence closest to the question, when its cosine reaches
    ``meaning.cosine`` and it holds ``meaning.floor`` of the key terms, is read even without a
    predicate term, is preferred to the other sentences, and its clear answer is compared.
    ``asked``: the question already read (:func:`ragsieve.text.question.read_question`).
    """
    asked = asked or read_question(question)
    kind = asked.kind
    q_names = asked.names
    base = PassageAnswer(position, chunk_id, source, None, "")
    unread = answers_nothing(asked, text)
    if unread:
        base.reason = unread
        return base
    terms, predicate, q_values = asked.terms, asked.predicate, asked.values
    sentences = passage_sentences(text)
    if cosines is not None and len(cosines) != len(sentences):
        raise ValueError(f"{len(cosines)} cosines for {len(sentences)} sentences")
    top = meaning.closest(cosines) if meaning is not None and cosines is not None else None
    # (closest, score, cover, value, sentence, clear, cosine): a sentence meeting the meaning bar
    # first (never one while the bar is off), then the score
    best: tuple[bool, float, float, Value, str, bool, float | None] | None = None
    for i, (_, sentence) in enumerate(sentences):
        sentence_words = set(stems(sentence))
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
        clause = max(clauses, key=lambda c: (len(terms & set(stems(c))), -clauses.index(c)))
        if kind == "yes/no":
            if best is None or (closest, cover) > (best[0], best[2]):
                stance = _polar_stance(clause)
                polar = Value("name", stance, stance, (0, 0), tokens=(stance,))
                best = (closest, cover, cover, polar, sentence, True, cosine)
            continue
        clause_words = stems(clause)
        positions = [i for i, w in enumerate(clause_words) if w in predicate] or [
            i for i, w in enumerate(clause_words) if w in terms
        ]
        candidates = [
            v
            for v in extract_values(clause, VALUE_KINDS_FOR[kind])
            # the question's own entity or value is not its answer
            if not _asked_about(v, q_values)
            and not (v.kind == "name" and set(stems(v.text)) <= terms)
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


def span_answer(
    asked: QuestionReading,
    text: str,
    span: str,
    sentence: str,
    *,
    position: int = 0,
    chunk_id: str = "",
    source: str = "",
) -> PassageAnswer:
    """The answer the extractive reader's ``span`` (in ``sentence`` of ``text``) gives to the
    question (``asked``), read with the value readers as :func:`passage_answer` reads a clause: the
    values of the asked kind the span states (never one the question states; the asked kind's own
    values first), ``clear`` when they are one value; a yes/no question's stance is read from the
    clause of ``sentence`` that holds the span (a negation in it: "no"). A passage that does not
    name the question's entities answers nothing (:func:`not_about`), nor does a question asking
    for a description (no single value). ``cover``: the share of the question's key terms
    ``sentence`` holds. Whether the reader was sure enough is the caller's
    (:meth:`ragsieve.text.readings.PassageReading.reader_answer`, :class:`ReaderBar`).

    >>> a = span_answer(read_question("When did the Kessel Bridge open?"), "The Kessel Bridge opened in 1931.",
    ...                 "1931", "The Kessel Bridge opened in 1931.")
    >>> a.answer, a.cover, a.by
    ('1931', 1.0, 'reader')
    """
    kind = asked.kind
    base = PassageAnswer(position, chunk_id, source, None, "", sentence, by="reader")
    unread = answers_nothing(asked, text)
    if unread:
        base.reason = unread
        return base
    if not span.strip():
        base.reason = "the reader found no span"
        return base
    held = sentence or span
    cover = _cover(asked.terms, asked.names, held, text)
    base.cover = cover
    if kind == "yes/no":
        clauses = split_clauses(held) or [held]
        clause = next((c for c in clauses if span in c), None) or max(
            clauses, key=lambda c: (len(asked.terms & set(stems(c))), -clauses.index(c))
        )
        stance = _polar_stance(clause)
        polar = Value("name", stance, stance, (0, 0), tokens=(stance,))
        return PassageAnswer(
            position, chunk_id, source, polar, stance, sentence, "read by the reader", by="reader",
            cover=cover, stance=True,
        )  # fmt: skip
    candidates = [
        v
        for v in extract_values(span, VALUE_KINDS_FOR[kind])
        if not _asked_about(v, asked.values)
        and not (v.kind == "name" and set(stems(v.text)) <= asked.terms)
        and not (v.kind == "name" and any(_is_form_of(v, qv) for qv in asked.names))
    ]
    candidates = _distinct([v for v in candidates if v.kind == VALUE_KINDS_FOR[kind][0]] or candidates)
    if not candidates:
        base.reason = f"the reader's answer {span!r} states no {kind}"
        return base
    value = candidates[0]
    clear = len([c for c in candidates if same_measure(c, value)]) == 1
    reason = "read by the reader" + ("" if clear else "; its span states several values of the kind asked for")
    return PassageAnswer(
        position, chunk_id, source, value, value.norm, sentence, reason, by="reader", cover=cover, clear=clear
    )


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
    asked = read_question(question)
    kind = asked.kind
    polar = kind == "yes/no"
    if kind == "description":
        return PassageAnswer(
            position, chunk_id, source, None, "", reason="the question asks for a description, not one value", by="llm"
        )
    terms, q_names = asked.terms, asked.names
    # as for the rule reader: a passage that does not name each entity the question asks about
    # answers nothing ("Are Verdi and Thomas both opera composers?" from a page on Verdi alone)
    off_topic = not_about(asked, text)
    if off_topic:
        return PassageAnswer(position, chunk_id, source, None, "", reason=off_topic, by="llm")
    # an answer counts in a disagreement only from a sentence that holds the question's terms
    # (:attr:`PassageAnswer.states_answer`), so a passage without one is not worth a model call
    reach = max((_cover(terms, q_names, s, text) for _, s in passage_sentences(text)), default=0.0)
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
    q_values = asked.values
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
        stating = [s for _, s in passage_sentences(text) if find_in(v, s) is not None]
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


def source_of(hit: Hit) -> str:
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


def document_of(hit: Hit) -> str:
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



def same_answer(a: Value, b: Value) -> bool:
    """Whether two answers read from passages are one answer: either states the other
    (:func:`ragsieve.values.find_in`), or, for names, one's tokens are among the other's
    ("Meissner" and "Walther Meissner"; "W. Meissner" and the full name)."""
    if a.kind == "name" and b.kind == "name":
        ta, tb = set(a.tokens), set(b.tokens)
        return find_in(a, b.text) is not None or find_in(b, a.text) is not None or ta <= tb or tb <= ta
    return find_in(a, b.text) is not None or find_in(b, a.text) is not None

