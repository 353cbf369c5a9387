"""The conflict check's indexed sentence pairs (only sentences whose proper names can match) give
the same findings as deriving a question for every sentence pair, and the name keys they are
indexed by are held by every written form of a name that :func:`find_entity` accepts."""

from __future__ import annotations

import numpy as np
import pytest

from ragsieve.audit.conflicts import (
    _all_sentence_pairs,
    _find_conflicts,
    _name_keys,
    _read_row,
    _sentence_pairs,
    _text_keys,
)
from ragsieve.audit.corpus import Corpus
from ragsieve.types import Chunk
from ragsieve.values import extract_values, find_entity

# (name as written in one sentence, a sentence naming it in another written form)
NAME_FORMS = [
    ("John Henry Seadlund", "Seadlund was executed in 1938."),  # trailing word
    ("Sony Corporation", "Sony opened a plant in 1961."),  # leading word
    ("International Business Machines", "IBM opened a plant in 1961."),  # initials
    ("IBM", "International Business Machines opened a plant in 1961."),  # the initials of a name
    ("Tchaikovsky", "Tchaikowsky wrote the ballet in 1876."),  # another spelling
    ("Mari Fitzduff", "Mari Christine Fitzduff wrote it in 1999."),  # more words between
    ("John Kennedy", "John F. Kennedy was elected in 1960."),  # a middle initial
    ("J. Smith", "John Smith was elected in 1960."),  # an initial for a first name
]


@pytest.mark.parametrize(("written", "sentence"), NAME_FORMS)
def test_every_form_find_entity_accepts_shares_a_name_key(written, sentence):
    (name,) = extract_values(written, ("name",))
    assert find_entity(name, sentence) is not None, "the example must be a form find_entity accepts"
    assert _name_keys(name) & _text_keys(sentence)


def test_different_names_share_no_key():
    (name,) = extract_values("Einstein", ("name",))
    assert not _name_keys(name) & _text_keys("Bohr received the Nobel Prize in 1922.")


def _corpus() -> Corpus:
    """Passages of several sentences: planted conflicts (the same names in another written form
    among them), and distractors that share an attribute but not the names, the names but not
    the attribute, or state no name at all."""
    passages = [
        ("bridge-a", "Kessel Bridge", "The river is wide here. The Kessel Bridge opened in 1931. "
         "Einstein received the Nobel Prize in 1921. It carries two lanes."),
        ("bridge-b", "Kessel Bridge history", "Many towns grew along it. The Kessel Bridge opened to traffic in 1947. "
         "Bohr received the Nobel Prize in 1922. The Kessel Bridge is made of stone."),
        ("ballet-a", "Swan Lake ballet", "Tchaikovsky wrote Swan Lake in 1876. The ballet has four acts."),
        ("ballet-b", "Swan Lake premiere", "Tchaikowsky wrote Swan Lake in 1877. It premiered in Moscow."),
        ("plant-a", "IBM plant", "International Business Machines opened the Vimodrone plant in 1961. "
         "It employed 900 people."),
        ("plant-b", "IBM plant workers", "IBM opened the Vimodrone plant in 1963. The plant employed 1,200 people."),
        ("dam-a", "Oder Dam", "The Oder Dam opened in 1950. The Oder Dam is 40 metres tall."),
        ("dam-b", "Oder Dam and Kessel Bridge", "The Kessel Bridge opened in 1931. The Oder Dam is 55 metres tall."),
        ("plain-a", "Rainfall", "Rainfall was 30 mm in 2001. Nothing here names anyone."),
        ("plain-b", "Rainfall records", "Rainfall was 45 mm in 2001. The records were kept by hand."),
    ]
    chunks = [Chunk(f"c{i}", text, doc, f"host{i}.example", title=title)
              for i, (doc, title, text) in enumerate(passages)]
    # every passage is every other's dense neighbour, so each pair is a candidate
    return Corpus.of(chunks, np.ones((len(chunks), 8), dtype=np.float32) + np.eye(len(chunks), 8, dtype=np.float32))


def _summary(findings) -> list[tuple[tuple[str, ...], tuple[str, ...], str]]:
    return [(f.documents, tuple(m.sentence for m in f.members), f.evidence) for f in findings]


def test_indexed_sentence_pairs_give_the_exhaustive_findings():
    corpus = _corpus()
    ids, _ = corpus.neighbours()
    fast, pairs, _ = _find_conflicts(corpus, ids, use_reader=False)
    slow, slow_pairs, _ = _find_conflicts(corpus, ids, use_reader=False, exhaustive=True)
    assert pairs == slow_pairs
    assert _summary(fast) == _summary(slow)
    found = {frozenset(f.documents) for f in fast}
    # the planted conflicts are there (a test that cannot pass by both finding nothing) ...
    assert frozenset({"bridge-a", "bridge-b"}) in found and frozenset({"dam-a", "dam-b"}) in found
    # names in another written form (another spelling, initials) are not left out by the index
    assert frozenset({"ballet-a", "ballet-b"}) in found and frozenset({"plant-a", "plant-b"}) in found
    # ... and the distractors are not: other names, or no names at all
    assert frozenset({"plain-a", "plain-b"}) not in found
    assert not any("Einstein" in m.sentence or "Bohr" in m.sentence for f in fast for m in f.members)


def test_the_index_reads_fewer_sentence_pairs():
    chunks = _corpus().chunks
    indexed = sum(len(_sentence_pairs(_read_row(a.text), _read_row(b.text)))
                  for a in chunks for b in chunks if a is not b)
    every = sum(len(_all_sentence_pairs(a.text, b.text)) for a in chunks for b in chunks if a is not b)
    assert 0 < indexed < every / 2, (indexed, every)
