"""A request's readings: the question read once, each passage read at most once.

The checks of one request read the same passages against the same question: the conflict stage
reads every candidate, the select stage looks for the passage that states the answer, the verify
stage reads the evidence again for a contradiction, the poisoning check reads passages for its
voices. :class:`Readings` (one per request, on the sieve's state: ``state.readings``) reads the
question once (:class:`~ragsieve.text.question.QuestionReading`) and each passage at most once
(:class:`PassageReading`): by the rules (:func:`ragsieve.text.passage.passage_answer`), and, when
a caller passes the extractive reader (:class:`ragsieve.text.reader.ExtractiveReader`), by the
reader too, every passage of a call not yet read by it in one batch.

A passage is known by its text: the verify stage's checks get the evidence as texts, the other
stages as hits, and one text reads the same whoever asks; each reading handed out carries its
own hit's chunk id, site and document (empty for a bare text).

With the reader on (``[reading] reader = "minilm"``) the conflict, contradiction and select checks
read the reader's answer (:meth:`PassageReading.reader_answer`, at their own
:class:`~ragsieve.text.passage.ReaderBar`); its scores also reach the decision as the ``reader.*``
signals (:func:`reader_signals`). With it off the checks read by the rules.

Example:
    >>> readings = Readings()
    >>> r = readings.passage("When did the Kessel Bridge open?", "The Kessel Bridge opened in 1931.")
    >>> r.answer.answer, r.sentences
    ('1931', ('The Kessel Bridge opened in 1931.',))
    >>> readings.passage("When did the Kessel Bridge open?", "The Kessel Bridge opened in 1931.") is r
    True
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragsieve.text.passage import (
    Hit,
    PassageAnswer,
    ReaderBar,
    answering_sentence,
    document_of,
    passage_answer,
    passage_sentences,
    same_answer,
    source_of,
    span_answer,
)
from ragsieve.text.question import QuestionReading, read_question
from ragsieve.values import Value, extract_values, find_in, fold

if TYPE_CHECKING:
    from ragsieve.text.reader import ExtractiveReader, ReaderAnswer

__all__ = ["PassageReading", "Readings", "reader_signals", "shared_reader"]


@dataclass(frozen=True)
class PassageReading:
    """One passage read against one question.

    ``answer``: the rules' reading (:func:`ragsieve.text.passage.passage_answer`; its
    ``position`` is 0: a caller that numbers passages sets its own with
    :func:`dataclasses.replace`); ``open_sentence``: for a question asking for a description,
    the sentence that answers it on its own (:func:`ragsieve.text.passage.answering_sentence`).
    The reader's reading (``by_reader`` False until it read the passage): ``span`` (its best
    span, also when it does not answer), ``span_sentence`` (the index in ``sentences`` of the
    sentence holding it, ``None`` when not found), ``span_score`` and ``no_answer_score`` (logit
    sums), ``probability`` (of an answer: the logistic of the margin over the reader's
    threshold), ``answered`` and ``values`` (the typed values in the span when it answers)."""

    question: str
    text: str
    chunk_id: str
    source: str
    document: str
    sentences: tuple[str, ...]
    answer: PassageAnswer
    open_sentence: str | None = None
    by_reader: bool = False
    span: str = ""
    span_sentence: int | None = None
    span_score: float | None = None
    no_answer_score: float | None = None
    probability: float | None = None
    answered: bool = False
    values: tuple[Value, ...] = ()

    def states(self, value: Value) -> bool:
        """Whether the reader's answer is ``value`` (:func:`ragsieve.text.passage.same_answer` on
        a value in the span, else the span's folded text holds the value)."""
        if not self.answered:
            return False
        if self.values:
            return any(same_answer(v, value) for v in self.values)
        return find_in(value, self.span) is not None

    def reader_answer(self, asked: QuestionReading, bar: ReaderBar, position: int = 0) -> PassageAnswer | None:
        """The reader's answer as a :class:`~ragsieve.text.passage.PassageAnswer` (``by =
        "reader"``; :func:`ragsieve.text.passage.span_answer` on its best span), ``confident``
        when its probability and its sentence's key-term cover meet ``bar``; ``None`` when the
        reader has not read this passage. ``asked``: this reading's question, read."""
        if not self.by_reader:
            return None
        sentence = self.sentences[self.span_sentence] if self.span_sentence is not None else ""
        found = span_answer(
            asked, self.text, self.span, sentence, position=position, chunk_id=self.chunk_id, source=self.source
        )
        probability = self.probability or 0.0
        confident = probability >= bar.probability and found.cover >= bar.cover
        reason = found.reason
        if found.value is not None and not confident:
            reason += f"; below the reader bar (probability {probability:.2f}, cover {found.cover:.0%}; not compared)"
        return dataclasses.replace(found, probability=probability, confident=confident, reason=reason)


@functools.lru_cache(maxsize=1)
def shared_reader() -> ExtractiveReader:
    """The shipped extractive reader, one per process (opened on its first read)."""
    from ragsieve.text.reader import ExtractiveReader

    return ExtractiveReader()


def _identity(item: Hit | str) -> tuple[str, str, str, str]:
    if isinstance(item, str):
        return item, "", "", ""
    return str(item.chunk.text), str(item.chunk.id), source_of(item), document_of(item)


class Readings:
    """One request's readings (see the module docs): :meth:`question` reads the question once,
    :meth:`passages` each passage at most once, by the rules and, given a reader, by the reader
    (every passage of the call it has not read yet, in one batch). ``reader_reads`` counts the
    passages the reader read."""

    def __init__(self) -> None:
        self._questions: dict[str, QuestionReading] = {}
        self._passages: dict[tuple[str, str], PassageReading] = {}
        self._lock = threading.RLock()
        self.reader_reads = 0

    def question(self, question: str) -> QuestionReading:
        with self._lock:
            asked = self._questions.get(question)
            if asked is None:
                asked = self._questions[question] = read_question(question)
            return asked

    def passage(self, question: str, item: Hit | str, reader: ExtractiveReader | None = None) -> PassageReading:
        """The reading of one passage (a hit or a text)."""
        return self.passages(question, [item], reader)[0]

    def passages(
        self, question: str, items: Sequence[Hit | str], reader: ExtractiveReader | None = None
    ) -> list[PassageReading]:
        """The readings of ``items`` (hits or texts), in their order."""
        with self._lock:
            asked = self.question(question)
            identities = [_identity(item) for item in items]
            for text, *_ in identities:
                key = (question, text)
                if key not in self._passages:
                    self._passages[key] = _read_by_rules(asked, text)
            if reader is not None:
                unread = list(dict.fromkeys(t for t, *_ in identities if not self._passages[(question, t)].by_reader))
                if unread:
                    self.reader_reads += len(unread)
                    for text, found in zip(unread, reader.read(question, unread), strict=True):
                        key = (question, text)
                        self._passages[key] = _with_reader(self._passages[key], found)
            return [_as_item(self._passages[(question, t)], c, s, d) for t, c, s, d in identities]


def _as_item(reading: PassageReading, chunk_id: str, source: str, document: str) -> PassageReading:
    """The text's reading as one item's: with that hit's chunk id, site and document."""
    if (reading.chunk_id, reading.source, reading.document) == (chunk_id, source, document):
        return reading
    answer = dataclasses.replace(reading.answer, chunk_id=chunk_id, source=source)
    return dataclasses.replace(reading, chunk_id=chunk_id, source=source, document=document, answer=answer)


def _read_by_rules(asked: QuestionReading, text: str) -> PassageReading:
    answer = passage_answer(asked.question, text, position=0, asked=asked)
    opened = answering_sentence(asked.question, text, asked) if asked.kind == "description" else None
    return PassageReading(
        question=asked.question,
        text=text,
        chunk_id="",
        source="",
        document="",
        sentences=tuple(s for _, s in passage_sentences(text)),
        answer=answer,
        open_sentence=opened,
    )


def _with_reader(reading: PassageReading, found: ReaderAnswer) -> PassageReading:
    index = reading.sentences.index(found.sentence) if found.sentence in reading.sentences else None
    return dataclasses.replace(
        reading,
        by_reader=True,
        span=found.span,
        span_sentence=index,
        span_score=found.score,
        no_answer_score=found.no_answer_score,
        probability=found.probability,
        answered=found.answered,
        values=tuple(extract_values(found.text)) if found.answered else (),
    )


def reader_signals(readings: Sequence[PassageReading], draft: str, cited: Sequence[str]) -> dict[str, float | None]:
    """The ``reader.*`` signals (:mod:`ragsieve.signals`) from the reader's readings of the
    evidence (best-ranked first) and the draft answer with the chunk ids it cites:

    * ``reader.answer_score``: the highest answer probability among the evidence passages;
    * ``reader.no_answer_top``: the best-ranked passage's no-answer probability (1 - its answer
      probability);
    * ``reader.draft_matches_reader``: 1 when the draft states the reader's answer from the cited
      passage it is most sure of (a value of the span, or the span's words), 0 when it does not,
      ``None`` when no cited passage answers.

    Every signal is ``None`` when the reader read none of them."""
    read = [r for r in readings if r.by_reader and r.probability is not None]
    if not read:
        return {"reader.answer_score": None, "reader.no_answer_top": None, "reader.draft_matches_reader": None}
    matches: float | None = None
    answering = [r for r in read if r.answered and r.chunk_id in set(cited)]
    if answering:
        best = max(answering, key=lambda r: r.probability or 0.0)
        if best.values:
            matches = float(any(find_in(v, draft) is not None for v in best.values))
        else:
            matches = float(" ".join(fold(best.span).split()) in " ".join(fold(draft).split()))
    return {
        "reader.answer_score": max(r.probability or 0.0 for r in read),
        "reader.no_answer_top": 1.0 - (read[0].probability or 0.0),
        "reader.draft_matches_reader": matches,
    }
