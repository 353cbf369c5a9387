"""The request's readings: the question read once, each passage read at most once per request
(by the rules and by the extractive reader), and the reader's signals."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from tests.helpers import HashEmbedder, copy_corpus
from tests.test_pipeline import MOON_Q, KeywordJudge, QueueLLM, sieve

import ragsieve.text.readings as readings_module
from ragsieve.index import Index
from ragsieve.text.question import read_question
from ragsieve.text.reader import ExtractiveReader, ReaderAnswer
from ragsieve.text.readings import PassageReading, Readings, reader_signals
from ragsieve.types import Chunk, SearchHit

KESSEL_Q = "When did the Kessel Bridge open?"
KESSEL = "The Kessel Bridge spans the Ober. The Kessel Bridge opened in 1931 after four years of work."


def hit(cid: str, text: str) -> SearchHit:
    return SearchHit(Chunk(id=cid, text=text, doc_id=f"doc-{cid}", source=f"{cid}.example"), 1.0, 1, {})


class CountingReader(ExtractiveReader):
    """A stand-in reader (no model): answers the first four-digit year of a passage, and counts
    every passage it is given and every call."""

    def __init__(self) -> None:
        super().__init__()
        self.passages: Counter[tuple[str, str]] = Counter()
        self.calls = 0

    def warm_up(self) -> None:
        pass

    def read(self, question: str, passages: Sequence[str]) -> list[ReaderAnswer]:
        import re

        self.calls += 1
        out = []
        for text in passages:
            self.passages[(question, text)] += 1
            m = re.search(r"\b\d{4}\b", text)
            if m:
                out.append(ReaderAnswer(m.group(), m.start(), m.end(), 5.0, 1.0, True, 0.9, "", m.group()))
            else:
                out.append(ReaderAnswer("", 0, 0, 0.0, 3.0, False, 0.1, "", ""))
        return out


def test_the_question_is_read_once_and_a_passage_once_whoever_asks():
    readings = Readings()
    assert readings.question(KESSEL_Q) is readings.question(KESSEL_Q)
    assert readings.question(KESSEL_Q) == read_question(KESSEL_Q)
    by_text = readings.passage(KESSEL_Q, KESSEL)
    assert by_text.answer.answer == "1931"
    assert by_text.sentences == (
        "The Kessel Bridge spans the Ober.", "The Kessel Bridge opened in 1931 after four years of work."
    )
    # the same text as a hit: the one reading, now knowing its chunk, site and document
    as_hit = readings.passage(KESSEL_Q, hit("c1", KESSEL))
    assert (as_hit.chunk_id, as_hit.source, as_hit.document) == ("c1", "c1.example", "doc-c1")
    assert as_hit.answer.answer == "1931" and as_hit.answer.chunk_id == "c1"
    assert readings.passage(KESSEL_Q, KESSEL) is by_text and by_text.chunk_id == ""
    assert not as_hit.by_reader


def test_two_hits_with_one_text_are_read_once_and_each_keeps_its_own_site(monkeypatch):
    calls: Counter[str] = Counter()
    rules = readings_module.passage_answer

    def counting(question: str, text: str, **kwargs: Any) -> Any:
        calls[text] += 1
        return rules(question, text, **kwargs)

    monkeypatch.setattr(readings_module, "passage_answer", counting)
    a, b = Readings().passages(KESSEL_Q, [hit("c1", KESSEL), hit("c2", KESSEL)])
    assert calls[KESSEL] == 1
    assert (a.chunk_id, a.source, a.answer.source) == ("c1", "c1.example", "c1.example")
    assert (b.chunk_id, b.source, b.answer.source) == ("c2", "c2.example", "c2.example")


def test_the_reader_reads_the_unread_passages_of_a_call_in_one_batch():
    readings = Readings()
    reader = CountingReader()
    texts = [KESSEL, "The bridge was painted green.", KESSEL]
    first = readings.passages(KESSEL_Q, texts[:2], reader)
    assert reader.calls == 1 and sum(reader.passages.values()) == 2
    again = readings.passages(KESSEL_Q, texts, reader)
    assert reader.calls == 1, "every passage was read already"
    assert again[0] is again[2] is first[0]
    r = first[0]
    assert r.by_reader and r.answered and r.span == "1931" and r.probability == 0.9
    assert [v.text for v in r.values] == ["1931"]
    assert not first[1].answered and first[1].values == ()
    assert readings.reader_reads == 2


def test_reader_signals_compare_the_draft_with_the_cited_passage_the_reader_is_surest_of():
    readings = Readings()
    hits = [hit("c1", KESSEL), hit("c2", "The bridge was painted green.")]
    read = readings.passages(KESSEL_Q, hits, CountingReader())
    signals = reader_signals(read, "It opened in 1931 [1].", ["c1"])
    assert signals == {"reader.answer_score": 0.9, "reader.no_answer_top": pytest.approx(0.1),
                       "reader.draft_matches_reader": 1.0}  # fmt: skip
    assert reader_signals(read, "It opened in 1947 [1].", ["c1"])["reader.draft_matches_reader"] == 0.0
    # no cited passage answers: nothing to match
    assert reader_signals(read, "It opened in 1947 [2].", ["c2"])["reader.draft_matches_reader"] is None
    unread: list[PassageReading] = Readings().passages(KESSEL_Q, [KESSEL])
    assert set(reader_signals(unread, "1931", ["c1"]).values()) == {None}


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: Any) -> Index:
    root = tmp_path_factory.mktemp("readings")
    return Index.build(copy_corpus(root), root / "idx", embedder=HashEmbedder())


def test_through_the_pipeline_each_passage_is_read_at_most_once_per_request(small_index, monkeypatch):
    reader = CountingReader()
    monkeypatch.setattr(readings_module, "shared_reader", lambda: reader)
    rule_reads: Counter[tuple[str, str]] = Counter()
    rules = readings_module.passage_answer

    def counting_rules(question: str, text: str, **kwargs: Any) -> Any:
        rule_reads[(question, text)] += 1
        return rules(question, text, **kwargs)

    monkeypatch.setattr(readings_module, "passage_answer", counting_rules)
    import ragsieve.sieve.build as build

    monkeypatch.setattr(build, "shared_reader", lambda: reader)
    pipe = sieve(small_index, QueueLLM("Apollo 11 landed on the Moon in July 1969 [1]."),
                 KeywordJudge(relevant=("apollo", "moon"), ambiguous=("mars",)),
                 sieve={"select": "scope-coe"}, reading={"reader": "minilm"})  # fmt: skip
    for _ in range(2):
        reader.passages.clear()
        reader.calls = 0
        rule_reads.clear()
        answer = pipe.ask(MOON_Q)
        assert reader.passages, "the reader read the evidence"
        assert max(reader.passages.values()) == 1, f"a passage was read twice by the reader: {reader.passages}"
        assert reader.calls == 1, "the evidence was read in one batch"
        assert rule_reads and max(rule_reads.values()) == 1, f"a passage was read twice by the rules: {rule_reads}"
        assert answer.text


def test_the_reader_is_off_by_default_and_the_config_switch_puts_it_in_the_verify_stage(small_index, monkeypatch):
    from ragsieve.config import PipelineConfig

    assert PipelineConfig().reading.reader == "rules"
    reader = CountingReader()
    import ragsieve.sieve.build as build

    monkeypatch.setattr(build, "shared_reader", lambda: reader)
    llm = QueueLLM("Apollo 11 landed on the Moon in July 1969 [1].")
    rules = sieve(small_index, llm, KeywordJudge(relevant=("apollo",)))
    on = sieve(small_index, llm, KeywordJudge(relevant=("apollo",)), reading={"reader": "minilm"})
    assert next(s for s in rules.stages if s.name == "verify").reader is None  # type: ignore[attr-defined]
    assert next(s for s in on.stages if s.name == "verify").reader is reader  # type: ignore[attr-defined]
    # the reader's signals ride along; the answer is the rules' either way
    assert rules.ask(MOON_Q).text == on.ask(MOON_Q).text
    assert reader.calls == 1


def test_the_responsiveness_check_takes_the_kind_asked_for_from_the_request_s_reading(small_index, monkeypatch):
    import ragsieve.sieve.build as build
    import ragsieve.verify.responsive as responsive

    reader = CountingReader()
    monkeypatch.setattr(build, "shared_reader", lambda: reader)
    own_reads: Counter[str] = Counter()
    question_reads: Counter[str] = Counter()
    kind_of, read = responsive.expected_kind, readings_module.read_question

    def own(question: str) -> Any:
        own_reads[question] += 1
        return kind_of(question)

    def counting(question: str) -> Any:
        question_reads[question] += 1
        return read(question)

    monkeypatch.setattr(responsive, "expected_kind", own)
    monkeypatch.setattr(readings_module, "read_question", counting)
    pipe = sieve(small_index, QueueLLM("Apollo 11 landed on the Moon in July 1969 [1]."),
                 KeywordJudge(relevant=("apollo", "moon")), reading={"reader": "minilm"})  # fmt: skip
    answer = pipe.ask(MOON_Q)
    checked = answer.trace.stage("responsive")
    assert checked and all(e["expected"] == read(MOON_Q).kind for e in checked)
    assert not own_reads, "the responsiveness check read the question itself"
    assert question_reads[MOON_Q] == 1, "the question is read once per request, whoever asks"
    assert reader.calls == 1 and max(reader.passages.values()) == 1
