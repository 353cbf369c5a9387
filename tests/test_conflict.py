"""Conflict detection: isolate each passage's answer, group, count independent sources, decide."""

from __future__ import annotations

from typing import Any

import pytest

from ragsieve.conflict import ConflictDetector, independent_sources, jaccard
from ragsieve.errors import ConfigError
from ragsieve.text.kind import expected_kind
from ragsieve.text.passage import document_of, passage_answer
from ragsieve.types import Chunk, SearchHit


def hit(cid: str, text: str, source: str, url: str | None = None, doc: str | None = None) -> SearchHit:
    meta = {"url": url} if url else {}
    return SearchHit(Chunk(id=cid, text=text, doc_id=doc or cid, source=source, metadata=meta), 1.0, 1, {})


# The two-site bridge corpus: two sites disagree on the opening year, a third document is about
# another bridge.
BRIDGE_A = (
    "The Kessel Bridge spans the Ober river at Hallstadt. Construction began in 1927, and the Kessel Bridge "
    "opened to traffic in 1931 after four years of work."
)
BRIDGE_B = (
    "Hallstadt's Kessel Bridge is a steel arch bridge. Work was halted by the war, and the Kessel Bridge was "
    "finally opened in 1947."
)
OTHER_BRIDGE = "The Marren Bridge, downstream of Hallstadt, opened in 1962 and carries the railway."
QUESTION = "When did the Kessel Bridge open?"


def bridge_hits() -> list[SearchHit]:
    return [
        hit("a", BRIDGE_A, "site-a.example"),
        hit("b", BRIDGE_B, "site-b.example"),
        hit("c", OTHER_BRIDGE, "site-c.example"),
    ]


def test_expected_kind_of_a_question() -> None:
    assert expected_kind("When did the bridge open?") == "date"
    assert expected_kind("In what year was it built?") == "date"
    assert expected_kind("Who discovered it?") == "name"
    assert expected_kind("How many people live there?") == "number"
    assert expected_kind("Is Paris in France?") == "yes/no"
    assert expected_kind("What is graphene made of?") == "description"


def test_two_site_bridge_corpus_names_both_years() -> None:
    report = ConflictDetector().detect(QUESTION, bridge_hits())
    assert report.conflict and report.decision == "both"
    assert sorted(g.answer for g in report.groups) == ["1931", "1947"]
    assert report.message == "The sources disagree: 1931 (site-a.example, [1]) vs 1947 (site-b.example, [2])."
    # the other bridge's year is not a third answer: that passage does not name the Kessel Bridge
    assert report.answers[2].value is None and "Kessel Bridge" in report.answers[2].reason
    data = report.to_dict()
    assert data["conflict"] and {g["answer"] for g in data["groups"]} == {"1931", "1947"}
    assert data["passages"][0]["answer"] == "1931"


def test_values_that_differ_inside_one_document_are_not_a_conflict() -> None:
    # two paragraphs of one web page (one address, different #fragments) give two years: the page
    # describes two things, it does not disagree with itself
    page = "https://bridges.example/kessel"
    hits = [
        hit("p1", BRIDGE_A, "bridges.example", url=page + "#p1"),
        hit("p2", BRIDGE_B, "bridges.example", url=page + "#p2"),
    ]
    report = ConflictDetector(policy="abstain").detect(QUESTION, hits)
    assert not report.conflict
    assert report.decision == "one-document"
    assert sorted(g.answer for g in report.groups) == ["1931", "1947"]
    assert report.message.startswith("One document gives several values (1931 ")
    # the same two paragraphs on two sites are a conflict
    apart = [
        hit("p1", BRIDGE_A, "a.example", url="https://a.example/k"),
        hit("p2", BRIDGE_B, "b.example", url="https://b.example/k"),
    ]
    assert ConflictDetector(policy="abstain").detect(QUESTION, apart).decision == "abstain"


def test_a_second_document_agreeing_with_one_of_a_documents_values_is_not_a_conflict() -> None:
    # document d1 states both years in two chunks; d2 states one of them: no document states
    # only the other year, so no two documents disagree
    hits = [
        hit("d1-a", BRIDGE_A, "one.example", doc="d1"),
        hit("d1-b", BRIDGE_B, "one.example", doc="d1"),
        hit("d2", "The Kessel Bridge opened in 1947, sixteen years late.", "two.example", doc="d2"),
    ]
    report = ConflictDetector().detect(QUESTION, hits)
    assert report.decision == "one-document" and not report.conflict
    # a third document stating only 1931 makes it a disagreement between documents
    hits.append(hit("d3", "The Kessel Bridge opened in 1931.", "three.example", doc="d3"))
    assert ConflictDetector().detect(QUESTION, hits).decision == "both"


def test_only_values_of_the_asked_kind_are_read() -> None:
    # "how much voltage": one passage answers with the cell's voltage; another names the man who
    # described it and a year, which answer other questions and are not read as answers
    question = "How much voltage does a Daniell cell produce?"
    hits = [
        hit("a", "A Daniell cell produces a voltage of about 1.1 volts.", "a.example"),
        hit("b", "The Daniell cell voltage was first described by John Daniell in 1836.", "b.example"),
    ]
    report = ConflictDetector(policy="abstain").detect(question, hits)
    assert [p.answer for p in report.answers] == ["1.1 volt", ""]
    assert report.decision == "consistent" and not report.conflict


def test_a_passage_about_something_else_is_not_named() -> None:
    # two sites disagree on the voltage; a third passage names a man and a year, about something else
    question = "How much voltage does a Daniell cell produce?"
    hits = [
        hit("a", "A Daniell cell produces a voltage of about 1.1 volts.", "a.example"),
        hit("b", "A Daniell cell produces a voltage of 1.5 volts.", "b.example"),
        hit("c", "The Daniell cell voltage was first described by John Daniell in 1836.", "c.example"),
    ]
    report = ConflictDetector().detect(question, hits)
    assert report.decision == "both" and report.conflict
    assert sorted(g.answer for g in report.groups) == ["1.1 volts", "1.5 volts"]
    assert report.answers[2].value is None and not report.set_aside
    assert "Daniell (" not in report.message and "1.5 volts" in report.message


def test_document_of_a_passage() -> None:
    def chunk_hit(**kw: Any) -> SearchHit:
        base: dict[str, Any] = {"id": "c", "text": "t", "doc_id": "notes.md", "source": "notes.md"}
        return SearchHit(Chunk(**{**base, **kw}), 1.0, 1, {})

    assert document_of(chunk_hit()) == "notes.md"
    assert document_of(chunk_hit(url="https://x.example/page#s2")) == "https://x.example/page"
    assert document_of(chunk_hit(metadata={"url": "https://x.example/a?id=3#p1"})) == "https://x.example/a?id=3"
    assert document_of(chunk_hit(source="https://wiki.example/Rhine#p4", doc_id="p4")) == "https://wiki.example/Rhine"
    assert document_of(chunk_hit(doc_id="data.jsonl#r1", source="site.example")) == "data.jsonl#r1"


def test_policies_abstain_and_trusted() -> None:
    abstain = ConflictDetector(policy="abstain").detect(QUESTION, bridge_hits())
    assert abstain.decision == "abstain" and abstain.chosen is None and "can't give one answer" in abstain.message
    even = ConflictDetector(policy="trusted").detect(QUESTION, bridge_hits())
    assert even.decision == "both"  # equal trust: no group is clearly ahead
    trusted = ConflictDetector(policy="trusted", source_weights={"site-b.example": 3.0, "site-a.example": 0.5})
    report = trusted.detect(QUESTION, bridge_hits())
    assert report.decision == "trusted" and report.chosen == "1947"
    with pytest.raises(ConfigError, match="unknown conflict policy"):
        ConflictDetector(policy="vote")


def test_mirror_copy_with_one_changed_fact_is_a_conflict_not_a_silent_win() -> None:
    gold = hit("gold", BRIDGE_A, "wiki", url="https://en.wikipedia.org/wiki/Kessel_Bridge")
    mirror_text = BRIDGE_A.replace("opened to traffic in 1931", "opened to traffic in 1939")
    mirror = hit("mirror", mirror_text, "mirror", url="https://www.wiki-mirror.example/Kessel_Bridge")
    copy2 = hit("mirror2", mirror_text, "mirror", url="https://wiki-mirror.example/page2")
    report = ConflictDetector().detect(QUESTION, [mirror, copy2, gold])
    assert report.conflict and {g.answer for g in report.groups} == {"1931", "1939"}
    by_answer = {g.answer: g for g in report.groups}
    assert by_answer["1939"].count == 1  # two copies on one host count once
    assert by_answer["1931"].count == 1
    assert "wikipedia.org" in report.message and "wiki-mirror.example" in report.message


def test_near_duplicate_copies_on_different_hosts_count_once() -> None:
    copies = [hit(f"c{i}", BRIDGE_A + f" Page {i}.", f"host{i}.example") for i in range(3)]
    assert jaccard(copies[0].chunk.text, copies[1].chunk.text) > 0.6
    assert len(independent_sources(copies)) == 1
    report = ConflictDetector().detect(QUESTION, [*copies, hit("b", BRIDGE_B, "site-b.example")])
    counts = {g.answer: g.count for g in report.groups}
    assert counts == {"1931": 1, "1947": 1}
    # distinct texts on distinct hosts are distinct sources
    assert len(independent_sources(bridge_hits())) == 3


def test_agreeing_passages_are_consistent() -> None:
    other_words = "Opened in June 1931, the Kessel Bridge was the longest arch in the region."
    report = ConflictDetector().detect(QUESTION, [hit("a", BRIDGE_A, "a.example"), hit("d", other_words, "d.example")])
    assert not report.conflict and report.decision == "consistent" and report.chosen is not None
    assert report.groups[0].count == 2 and "agree" in report.message


def test_passages_about_different_entities_do_not_conflict() -> None:
    report = ConflictDetector().detect(QUESTION, [hit("a", BRIDGE_A, "a.example"), hit("c", OTHER_BRIDGE, "c.example")])
    assert not report.conflict


def test_who_questions_group_name_variants() -> None:
    q = "Who discovered the Meissner effect?"
    one = hit("1", "The Meissner effect was discovered by Walther Meissner in 1933.", "a.example")
    two = hit("2", "The Meissner effect is named after W. Meissner, who discovered it.", "b.example")
    three = hit("3", "The Meissner effect was discovered by Heike Onnes.", "c.example")
    assert passage_answer(q, one.chunk.text).answer == "walther meissner"
    report = ConflictDetector().detect(q, [one, two, three])
    assert report.conflict and len(report.groups) == 2
    assert {g.count for g in report.groups} == {1, 2}


class ShortAnswerLLM:
    model_name = "fake"

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies

    def warm_up(self) -> None:
        pass

    def generate_json(self, prompt: Any, schema: dict[str, Any], *, max_tokens: int = 256) -> dict[str, Any]:
        text = prompt[-1]["content"]
        return {"answer": next((a for k, a in self.replies.items() if k in text), "unknown")}


class RecordingLLM(ShortAnswerLLM):
    """Records each passage prompt it is asked about."""

    def __init__(self, replies: dict[str, str]) -> None:
        super().__init__(replies)
        self.asked: list[str] = []

    def generate_json(self, prompt: Any, schema: dict[str, Any], *, max_tokens: int = 256) -> dict[str, Any]:
        self.asked.append(prompt[-1]["content"])
        return super().generate_json(prompt, schema, max_tokens=max_tokens)


def test_llm_short_answers_are_kept_only_where_the_passage_states_them() -> None:
    llm = ShortAnswerLLM({"four years": "1931", "steel arch": "1950"})  # the second is not in its passage
    report = ConflictDetector(llm=llm).detect(QUESTION, bridge_hits())
    assert [a.answer for a in report.answers] == ["1931", "", ""]
    assert "not in the passage" in report.answers[1].reason and not report.conflict
    polar = ConflictDetector(llm=ShortAnswerLLM({"1931": "yes", "1947": "no"}))
    r = polar.detect("Did the Kessel Bridge open before 1940?", bridge_hits()[:2])
    assert r.conflict and {g.answer for g in r.groups} == {"yes", "no"}


def test_the_model_is_not_asked_about_a_passage_whose_answer_could_not_count() -> None:
    # the painted-bridge passage names the bridge but has no sentence about its opening, so
    # whatever the model read from it could not take part in a disagreement: no call is spent on
    # it (nor on the Marren Bridge passage, which is about another bridge)
    painted = hit("d", "The Kessel Bridge was painted green in 1990 by the town of Hallstadt.", "site-d.example")
    llm = RecordingLLM({"four years": "1931", "finally": "1947", "green": "1990"})
    report = ConflictDetector(llm=llm).detect(QUESTION, [*bridge_hits(), painted])
    assert len(llm.asked) == 2 and not any("Marren" in a or "green" in a for a in llm.asked)
    assert "does not name" in report.answers[2].reason and report.answers[2].value is None
    assert "not asked" in report.answers[3].reason and report.answers[3].value is None
    assert report.conflict and sorted(g.answer for g in report.groups) == ["1931", "1947"]


def test_the_model_reads_only_passages_about_every_entity_the_question_names() -> None:
    # a yes/no question about two people, each page about one of them: neither page answers it,
    # so the model's "yes" from one and "no" from the other are no disagreement
    q = "Were Henrik Varnum and Anna Keller both engineers?"
    pages = [
        hit("a", "Henrik Varnum was a Danish engineer who built the Ober canal.", "a.example"),
        hit("b", "Anna Keller was a Swiss painter; she was never an engineer.", "b.example"),
    ]
    llm = RecordingLLM({"Danish": "yes", "Swiss": "no"})
    report = ConflictDetector(llm=llm).detect(q, pages)
    assert not report.conflict and llm.asked == []
    assert all("does not name" in a.reason for a in report.answers)


def test_the_question_s_own_entity_is_not_the_model_s_answer() -> None:
    llm = ShortAnswerLLM({"Hallstadt": "the Kessel Bridge"})
    report = ConflictDetector(llm=llm).detect("Where is the Kessel Bridge?", [hit("a", BRIDGE_A, "a.example")])
    [answer] = report.answers
    assert answer.value is None and "what the question asks about" in answer.reason and not report.conflict


# A person named in full by one site and by the surname alone by the other.
VARNUM_Q = "When was Henrik Aldous Varnum born?"
VARNUM_FULL = "Henrik Aldous Varnum was a Danish engineer. Henrik Aldous Varnum was born in 1871 in Aarhus."
VARNUM_SURNAME = "The Ober canal was his work. Varnum was born in 1874, the son of a miller."


def test_a_passage_naming_the_entity_by_its_surname_answers_and_conflicts() -> None:
    answer = passage_answer(VARNUM_Q, VARNUM_SURNAME)
    assert answer.answer == "1874" and answer.cover == 1.0 and answer.states_answer
    report = ConflictDetector().detect(
        VARNUM_Q, [hit("a", VARNUM_FULL, "a.example"), hit("b", VARNUM_SURNAME, "b.example")]
    )
    assert report.conflict and sorted(g.answer for g in report.groups) == ["1871", "1874"]


def test_a_surname_shared_with_another_person_is_not_the_entity() -> None:
    # the passage names another Varnum: "Varnum" alone may be either, so it answers nothing
    brother = "Peter Varnum ran the mill. Varnum was born in 1874, the son of a miller."
    # a different person with the same given name
    namesake = "Henrik Solberg was a Danish engineer born in 1874."
    assert passage_answer(VARNUM_Q, brother).reason.startswith("does not name")
    assert passage_answer(VARNUM_Q, namesake).reason.startswith("does not name")
    for other in (brother, namesake):
        report = ConflictDetector().detect(VARNUM_Q, [hit("a", VARNUM_FULL, "a.example"), hit("b", other, "b.example")])
        assert not report.conflict


def test_the_entity_in_another_form_is_not_its_own_answer() -> None:
    # "Who" asked of a passage naming the entity with a middle name: the entity is not the answer
    question = "Who trained Mari Fitzduff?"
    text = "Owen Laird trained Mari Christine Fitzduff in Dublin."
    assert passage_answer(question, text).answer == "owen laird"
