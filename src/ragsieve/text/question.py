"""What a question asks, read once: :class:`QuestionReading`.

Every passage reading (:mod:`ragsieve.text.passage`) compares a passage with the same few facts
about the question: the kind of answer it asks for (:func:`ragsieve.text.kind.expected_kind`),
its key terms (:func:`ragsieve.text.terms.key_terms`), the proper names it states and every value
it states (:func:`ragsieve.values.extract_values`). They are read here once per question, not
again for every passage.

Example:
    >>> q = read_question("When did the Kessel Bridge open?")
    >>> q.kind, sorted(q.terms), [v.text for v in q.names]
    ('date', ['bridg', 'kessel', 'open'], ['Kessel Bridge'])
    >>> sorted(q.predicate)
    ['open']
"""

from __future__ import annotations

from dataclasses import dataclass

from ragsieve.text.kind import expected_kind
from ragsieve.text.terms import key_terms, stems
from ragsieve.values import Value, extract_values

__all__ = ["QuestionReading", "read_question"]


@dataclass(frozen=True)
class QuestionReading:
    """One question, read: ``kind`` (the answer kind asked for), ``terms`` (its key terms, folded
    and stemmed), ``names`` (the proper names it states, the entities a passage must be about),
    ``values`` (every value it states: none of them is its answer) and ``predicate`` (its key
    terms besides its names' own words: "open", "discover"; all the terms when that leaves none)."""

    question: str
    kind: str
    terms: frozenset[str]
    names: tuple[Value, ...]
    values: tuple[Value, ...]
    predicate: frozenset[str]


def read_question(question: str) -> QuestionReading:
    """Read ``question`` once (see :class:`QuestionReading`)."""
    terms = frozenset(key_terms(question))
    names = tuple(extract_values(question, ("name",)))
    # the question's terms besides its entities' own words (its predicate: "open", "discover"),
    # which tell the sentence about what is asked apart from other sentences about the entity;
    # the entity's words are in every sentence about it
    name_terms = {t for v in names for t in stems(v.text)}
    return QuestionReading(
        question=question,
        kind=expected_kind(question),
        terms=terms,
        names=names,
        values=tuple(extract_values(question)),
        predicate=frozenset(terms - name_terms) or terms,
    )
