"""The checks read with the extractive reader ([reading] reader = "minilm"): the conflict detector
compares the reader's answers, the contradiction check asks whether the draft's value is the
reader's answer in a cited passage, the select stage keeps the passage holding the reader's best
answer. A scripted reader (no model) stands in for it: each passage's span and probability are
given, so each test says exactly what the reader read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from ragsieve.conflict import ConflictDetector
from ragsieve.errors import ConfigError
from ragsieve.sieve.select import answer_stating
from ragsieve.text.passage import ReaderBar, span_answer
from ragsieve.text.question import read_question
from ragsieve.text.reader import ExtractiveReader, ReaderAnswer, sentence_holding
from ragsieve.text.readings import Readings
from ragsieve.types import Chunk, SearchHit
from ragsieve.verify.grounding import find_contradiction

KESSEL_Q = "When did the Kessel Bridge open?"


def hit(cid: str, text: str, site: str) -> SearchHit:
    return SearchHit(Chunk(id=cid, text=text, doc_id=f"doc-{cid}", source=site), 1.0, 1, {})


class ScriptedReader(ExtractiveReader):
    """Answers each passage with the span and probability ``script`` gives it (no answer, at
    probability 0.05, for a passage it does not list)."""

    def __init__(self, script: Mapping[str, tuple[str, float]]) -> None:
        super().__init__()
        self.script = dict(script)

    def warm_up(self) -> None:
        pass

    def read(self, question: str, passages: Sequence[str]) -> list[ReaderAnswer]:
        out = []
        for text in passages:
            span, probability = self.script.get(text, ("", 0.05))
            start = text.find(span) if span else 0
            end = start + len(span)
            answered = probability > 0.5
            out.append(
                ReaderAnswer(span if answered else "", start, end, 5.0, 1.0, answered, probability,
                             sentence_holding(text, start, end), span)
            )  # fmt: skip
        return out


def test_a_span_is_read_for_a_value_of_the_asked_kind_never_one_the_question_states():
    asked = read_question("How long is the Tarn Viaduct, opened in 1884?")
    text = "The Tarn Viaduct opened in 1884. The Tarn Viaduct is 312 metres long."
    found = span_answer(asked, text, "312 metres", "The Tarn Viaduct is 312 metres long.")
    assert found.value is not None and found.value.text == "312 metres" and found.by == "reader" and found.clear
    # the question's own year is not its answer
    assert span_answer(asked, text, "1884", "The Tarn Viaduct opened in 1884.").value is None
    # two lengths in one span are not one answer
    assert not span_answer(asked, text, "312 metres or 290 metres", "The Tarn Viaduct is 312 metres long.").clear


def test_a_span_answers_nothing_about_another_entity_or_for_a_description():
    text = "The Ober Bridge opened in 1931."
    assert span_answer(read_question(KESSEL_Q), text, "1931", text).value is None
    described = span_answer(read_question("What is graphene?"), "Graphene is carbon.", "carbon", "Graphene is carbon.")
    assert described.value is None and "description" in described.reason


def test_a_yes_no_stance_is_read_from_the_clause_holding_the_span():
    asked = read_question("Did the Kessel Bridge open in 1931?")
    text = "The Kessel Bridge did not open in 1931, because the steel arrived late."
    assert span_answer(asked, text, "did not open in 1931", text).answer == "no"
    yes = "The Kessel Bridge opened in 1931, and no one was hurt."
    assert span_answer(asked, yes, "opened in 1931", yes).answer == "yes"


def test_the_reader_bar_rejects_what_it_cannot_mean():
    with pytest.raises(ConfigError):
        ReaderBar(1.5)
    with pytest.raises(ConfigError):
        ReaderBar(0.5, cover=-0.1)


A = "The Kessel Bridge opened in 1931 after four years of work."
B = "The Kessel Bridge opened to traffic in 1947."
C = "The Kessel Bridge opened in June 1931."


def test_two_sites_whose_reader_answers_differ_conflict_and_forms_of_one_answer_agree():
    reader = ScriptedReader({A: ("1931", 0.99), B: ("1947", 0.99), C: ("June 1931", 0.99)})
    detector = ConflictDetector(reader=reader, reader_bar=ReaderBar(0.7, 1.0))
    report = detector.detect(KESSEL_Q, [hit("a", A, "site-a.example"), hit("b", B, "site-b.example")])
    assert report.conflict and sorted(g.answer for g in report.groups) == ["1931", "1947"]
    assert {p.by for p in report.answers} == {"reader"}
    assert all(p.to_dict()["probability"] == 0.99 for p in report.answers)
    agreed = detector.detect(KESSEL_Q, [hit("a", A, "site-a.example"), hit("c", C, "site-c.example")])
    assert not agreed.conflict and agreed.decision == "consistent"


def test_an_unsure_reader_answer_is_recorded_not_compared():
    reader = ScriptedReader({A: ("1931", 0.99), B: ("1947", 0.6)})
    report = ConflictDetector(reader=reader, reader_bar=ReaderBar(0.7, 1.0)).detect(
        KESSEL_Q, [hit("a", A, "site-a.example"), hit("b", B, "site-b.example")]
    )
    assert not report.conflict
    unsure = report.answers[1]
    assert unsure.answer == "1947" and not unsure.states_answer and "below the reader bar" in unsure.reason
    # the same answers at a lower bar are compared
    lower = ConflictDetector(reader=reader, reader_bar=ReaderBar(0.5, 1.0)).detect(
        KESSEL_Q, [hit("a", A, "site-a.example"), hit("b", B, "site-b.example")]
    )
    assert lower.conflict


def test_a_span_whose_sentence_lacks_the_question_s_terms_is_not_compared_at_a_full_cover():
    other = "The Kessel Bridge carries the B12. Traffic rose in 1947."
    reader = ScriptedReader({A: ("1931", 0.99), other: ("1947", 0.99)})
    hits = [hit("a", A, "site-a.example"), hit("b", other, "site-b.example")]
    assert not ConflictDetector(reader=reader, reader_bar=ReaderBar(0.7, 1.0)).detect(KESSEL_Q, hits).conflict
    assert ConflictDetector(reader=reader, reader_bar=ReaderBar(0.7, 0.0)).detect(KESSEL_Q, hits).conflict


def test_the_contradiction_check_reads_the_cited_passage_s_answer_with_the_reader():
    reader = ScriptedReader({A: ("1931", 0.99)})
    bar = ReaderBar(0.9, 0.5)
    found = find_contradiction(KESSEL_Q, "It opened in 1947 [1].", [A], reader=reader, reader_bar=bar)
    assert found is not None and found.explain() == "the cited passage [1] says 1931, not 1947"
    assert find_contradiction(KESSEL_Q, "In 1931 [1].", [A], reader=reader, reader_bar=bar) is None


def test_an_unsure_reader_contradicts_nothing_unless_the_rules_read_below_its_bar():
    reader = ScriptedReader({A: ("1931", 0.8)})
    bar = ReaderBar(0.9, 0.5)
    draft = "It opened in 1947 [1]."
    assert find_contradiction(KESSEL_Q, draft, [A], reader=reader, reader_bar=bar) is None
    assert find_contradiction(KESSEL_Q, draft, [A]) is not None  # the rules read 1931
    fallback = find_contradiction(KESSEL_Q, draft, [A], reader=reader, reader_bar=bar, rules_fallback=True)
    assert fallback is not None and fallback.evidence == "1931"


def test_select_keeps_the_passage_holding_the_reader_s_best_answer():
    first = "The Kessel Bridge opened its second lane in 1958."
    hits = [hit("p", first, "s.example"), hit("a", A, "s.example")]
    readings = Readings()
    # the rules take the first passage stating a year near the question's terms
    assert answer_stating(KESSEL_Q, hits, Readings()) is hits[0]
    reader = ScriptedReader({first: ("1958", 0.55), A: ("1931", 0.97)})
    assert answer_stating(KESSEL_Q, hits, readings, reader) is hits[1]
    # no passage the reader answers: the rules choose
    assert answer_stating(KESSEL_Q, hits, Readings(), ScriptedReader({})) is hits[0]
