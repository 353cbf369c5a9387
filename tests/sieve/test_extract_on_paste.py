"""The verify stage's answer extracted from a pasted passage (``sieve.extract_on_paste``): a
model that pastes the evidence instead of answering, twice, gets the evidence sentence that
states the value asked for (an open question: the sentence on its terms), cited and verified; a
question with no such value, a polar question, the option switched off, and a passage about
another entity abstain as before."""

from __future__ import annotations

import pytest
from tests.helpers import HashEmbedder, copy_corpus
from tests.sieve.test_streaming import StreamingLLM
from tests.test_pipeline import MOON_Q, KeywordJudge, QueueLLM, sieve

from ragsieve.index import Index
from ragsieve.sieve.events import Final, Retracted, Token
from ragsieve.types import Chunk, SearchHit
from ragsieve.verify.responsive import answer_responsively, extract_from_paste

MOON_PASSAGE = (
    "The Moon is Earth's only natural satellite. It orbits Earth once every 27.3 days.\n"
    "The first crewed landing on the Moon was Apollo 11 in July 1969, when Neil Armstrong stepped onto the surface."
)
MOON_ANSWER = (
    "The first crewed landing on the Moon was Apollo 11 in July 1969, when Neil Armstrong stepped onto the surface [1]."
)
MOON_ID = "astronomy/moon.txt:0"


@pytest.fixture(scope="module")
def hash_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("paste")
    return Index.build(copy_corpus(root), root / "idx", embedder=HashEmbedder())


def _moon_judge() -> KeywordJudge:
    return KeywordJudge(relevant=("moon",), ambiguous=("sun",))


def _extracted(answer) -> list[dict]:
    return [e for e in answer.trace.stage("responsive") if e.get("attempt") == "extracted"]


# ------------------------------------------------------------------------------ the sieve
def test_a_model_that_pastes_twice_gets_the_sentence_stating_the_year(hash_index):
    llm = QueueLLM(MOON_PASSAGE)
    answer = sieve(hash_index, llm, _moon_judge()).ask(MOON_Q)
    assert len(llm.prompts) == 2  # the paste, then the retry that pasted again
    reasons = [e["reason"] for e in answer.trace.stage("responsive")]
    assert reasons[:2] == ["pasted_passage", "pasted_passage"]
    assert not answer.abstained and answer.abstain_reason is None
    position = [h.chunk.id for h in answer.evidence].index(MOON_ID) + 1
    assert answer.text == MOON_ANSWER.replace("[1]", f"[{position}]")
    assert "July 1969" in answer.text and answer.cited_ids == [MOON_ID]
    assert [c.supported for c in answer.claims] == [True] and answer.claims[0].cited_ids == [MOON_ID]
    assert answer.confidence is not None and answer.confidence > 0.0
    [record] = _extracted(answer)
    assert record["ok"] and record["reason"] == "ok" and record["chunk_id"] == MOON_ID
    assert record["position"] == position and "July 1969" in record["sentence"]
    assert "abstain" not in {e["stage"] for e in answer.trace.events}


def test_a_person_question_gets_the_sentence_naming_the_person(hash_index):
    answer = sieve(hash_index, QueueLLM(MOON_PASSAGE), _moon_judge()).ask("Who stepped onto the Moon first?")
    assert not answer.abstained and "Neil Armstrong" in answer.text and answer.cited_ids == [MOON_ID]
    assert _extracted(answer)[0]["ok"]


def test_no_value_of_the_asked_kind_in_the_evidence_abstains_as_before(hash_index):
    answer = sieve(hash_index, QueueLLM(MOON_PASSAGE), _moon_judge()).ask("When did the Moon form?")
    assert answer.abstained and answer.abstain_reason == "responsive: pasted_passage"
    assert answer.text.startswith("I can't give an answer the evidence supports")
    [record] = _extracted(answer)
    assert not record["ok"] and record["reason"] == "nothing_extracted"


def test_a_polar_question_abstains_without_extracting(hash_index):
    answer = sieve(hash_index, QueueLLM(MOON_PASSAGE), _moon_judge()).ask("Did Apollo 11 land on the Moon?")
    assert answer.abstained and answer.abstain_reason == "responsive: pasted_passage"
    assert _extracted(answer) == []


def test_an_open_question_is_answered_with_the_pasted_passages_sentence_on_its_terms(hash_index):
    answer = sieve(hash_index, QueueLLM(MOON_PASSAGE), _moon_judge()).ask("What is the Moon?")
    assert not answer.abstained and answer.cited_ids == [MOON_ID]
    assert answer.text.startswith("The Moon is Earth's only natural satellite [")
    [record] = _extracted(answer)
    assert record["ok"] and record["sentence"] == "The Moon is Earth's only natural satellite."


def test_switched_off_it_abstains_as_before(hash_index):
    pipe = sieve(hash_index, QueueLLM(MOON_PASSAGE), _moon_judge(), sieve={"extract_on_paste": False})
    answer = pipe.ask(MOON_Q)
    assert answer.abstained and answer.abstain_reason == "responsive: pasted_passage"
    assert _extracted(answer) == [] and "July 1969" not in answer.text


def test_streaming_retracts_the_paste_and_streams_the_extracted_answer(hash_index):
    events = list(sieve(hash_index, StreamingLLM(MOON_PASSAGE), _moon_judge()).stream(MOON_Q))
    final = events[-1]
    assert isinstance(final, Final) and not final.answer.abstained and "July 1969" in final.answer.text
    retracted = [e for e in events if isinstance(e, Retracted)]
    assert len(retracted) == 1 and retracted[0].replacement == "regenerated"
    assert retracted[0].text.strip() == MOON_PASSAGE.strip() and retracted[0].attempt == "generate"
    assert "extracted from the pasted passage" in retracted[0].reason
    after = [e for e in events[events.index(retracted[0]) + 1 :] if isinstance(e, Token)]
    assert [(e.text, e.attempt) for e in after] == [(final.answer.text, "responsive_extract")]
    assert final.streamed_is_final


def test_streaming_an_abstention_after_a_paste_retracts_it_as_before(hash_index):
    pipe = sieve(hash_index, StreamingLLM(MOON_PASSAGE), _moon_judge(), sieve={"extract_on_paste": False})
    events = list(pipe.stream(MOON_Q))
    retracted = [e for e in events if isinstance(e, Retracted)]
    assert [r.replacement for r in retracted] == ["abstained"] and events[-1].answer.abstained
    assert {e.attempt for e in events if isinstance(e, Token)} == {"generate"}


# ------------------------------------------------------------------------------ another entity
TAY = ("The Tay Bridge carries the railway across the Firth of Tay. The first Tay Bridge opened in 1878 and "
       "fell in a storm in December 1879, and its replacement opened in 1887.")
FORTH = "The Forth Bridge is a cantilever railway bridge in Scotland. The Forth Bridge opened on 4 March 1890."
FORTH_Q = "When did the Forth Bridge open?"
# its answering sentence is longer than any one answer sentence should be: a paste itself
CANAL = ("The Grand Union Canal links London and Birmingham. The Grand Union Canal opened in 1929 after the "
         "amalgamation of the Regent's Canal, the Grand Junction Canal, the Warwick and Birmingham Canal, the "
         "Warwick and Napton Canal and the Birmingham and Warwick Junction Canal with several smaller waterways "
         "of the English Midlands.")


@pytest.fixture(scope="module")
def bridge_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("bridges")
    corpus = root / "corpus" / "bridges"
    corpus.mkdir(parents=True)
    (corpus / "tay.txt").write_text(TAY, encoding="utf-8")
    (corpus / "forth.txt").write_text(FORTH, encoding="utf-8")
    (corpus / "canal.txt").write_text(CANAL, encoding="utf-8")
    return Index.build(root / "corpus", root / "idx", embedder=HashEmbedder())


def test_a_pasted_passage_about_another_entity_gives_way_to_the_next_passage(bridge_index):
    answer = sieve(bridge_index, QueueLLM(TAY), KeywordJudge(relevant=("bridge",))).ask(FORTH_Q)
    assert {h.chunk.id for h in answer.evidence} == {"bridges/tay.txt:0", "bridges/forth.txt:0"}
    assert not answer.abstained and "1890" in answer.text and "1878" not in answer.text
    assert answer.cited_ids == ["bridges/forth.txt:0"]
    assert _extracted(answer)[0]["chunk_id"] == "bridges/forth.txt:0"


def test_a_pasted_passage_about_another_entity_alone_abstains(bridge_index):
    # only the Tay passage is kept: it does not name the Forth Bridge, so it answers nothing
    answer = sieve(bridge_index, QueueLLM(TAY), KeywordJudge(relevant=("tay",))).ask(FORTH_Q)
    assert [h.chunk.id for h in answer.evidence] == ["bridges/tay.txt:0"]
    assert answer.abstained and answer.abstain_reason == "responsive: pasted_passage"
    assert "1878" not in answer.text and _extracted(answer)[0]["reason"] == "nothing_extracted"


def test_an_extracted_sentence_that_fails_the_check_abstains_as_before(bridge_index):
    answer = sieve(bridge_index, QueueLLM("Evidence: " + CANAL), KeywordJudge(relevant=("canal",))).ask(
        "When did the Grand Union Canal open?"
    )
    assert [h.chunk.id for h in answer.evidence] == ["bridges/canal.txt:0"]
    assert answer.abstained and answer.abstain_reason == "responsive: pasted_passage" and "1929" not in answer.text
    [record] = _extracted(answer)
    assert not record["ok"] and record["reason"] == "pasted_passage" and "1929" in record["sentence"]

    from ragsieve.cli import render_answer

    assert any("was refused: pasted_passage" in line for line in render_answer(answer, 80))


# ------------------------------------------------------------------------------ the pure function
def _hit(cid: str, text: str, rank: int) -> SearchHit:
    return SearchHit(Chunk(id=cid, text=text, doc_id=cid, source=cid), 1.0, rank, {})


def test_extract_from_paste_tries_the_most_copied_passage_first():
    sun = _hit("sun", "The Sun is the star at the centre of the Solar System.", 1)
    first = _hit("a", "The Forth Bridge was designed by John Fowler. The Forth Bridge opened on 4 March 1890.", 2)
    second = _hit("b", "The Forth Bridge opened on 5 March 1891, a rival almanac says.", 3)
    # the reply pasted the third passage: its sentence, not the first passage's, is the answer
    found = extract_from_paste(FORTH_Q, [sun, first, second], second.chunk.text)
    assert found is not None and found.position == 3 and found.hit is second and "1891" in found.sentence
    found = extract_from_paste(FORTH_Q, [sun, first, second], first.chunk.text)
    assert found is not None and found.position == 2 and found.sentence == "The Forth Bridge opened on 4 March 1890."
    # nothing copied: evidence order
    found = extract_from_paste(FORTH_Q, [sun, first, second], "Bridges are nice.")
    assert found is not None and found.position == 2


def test_extract_from_paste_has_nothing_for_a_polar_question():
    assert extract_from_paste("Is the Forth Bridge a railway bridge?", [FORTH], FORTH) is None


def test_an_open_question_gets_the_sentence_on_its_terms():
    found = extract_from_paste("What is the Forth Bridge?", [TAY, FORTH], FORTH)
    assert found is not None and found.position == 2
    assert found.sentence == "The Forth Bridge is a cantilever railway bridge in Scotland."
    # a passage about another entity answers nothing; neither does one without the question's terms
    assert extract_from_paste("What is the Forth Bridge?", [TAY], TAY) is None
    assert extract_from_paste("What does the Forth Bridge carry over the estuary?", [FORTH], FORTH) is None


def test_extract_from_paste_normalises_whitespace():
    found = extract_from_paste(FORTH_Q, ["The Forth   Bridge\nopened on 4 March 1890."], "x")
    assert found is not None and found.sentence == "The Forth Bridge opened on 4 March 1890."


def test_answer_responsively_extracts_from_a_second_paste_unless_told_not_to():
    replies = iter(["Evidence: " + FORTH, "Evidence: [2] " + FORTH])
    out = answer_responsively(FORTH_Q, [TAY, FORTH], lambda _: next(replies))
    assert not out.abstained and out.text == "The Forth Bridge opened on 4 March 1890 [2]."
    assert [a["verdict"]["reason"] for a in out.attempts] == ["pasted_passage", "pasted_passage", "ok"]
    assert out.attempts[-1]["extracted"] == {"position": 2, "sentence": "The Forth Bridge opened on 4 March 1890."}
    replies = iter(["Evidence: " + FORTH, "Evidence: [2] " + FORTH])
    out = answer_responsively(FORTH_Q, [TAY, FORTH], lambda _: next(replies), extract_on_paste=False)
    assert out.abstained and len(out.attempts) == 2


# ------------------------------------------------------------------------------ how it is shown
def test_the_terminal_view_says_the_answer_was_extracted(hash_index):
    from ragsieve.cli import render_answer

    answer = sieve(hash_index, QueueLLM(MOON_PASSAGE), _moon_judge()).ask(MOON_Q)
    position = _extracted(answer)[0]["position"]
    view = render_answer(answer, 80)
    assert all(len(line) <= 80 for line in view)
    assert f"answer extracted from the pasted passage [{position}] ({MOON_ID})" in view
    abstained = sieve(hash_index, QueueLLM(MOON_PASSAGE), _moon_judge()).ask("When did the Moon form?")
    assert any(line.startswith("nothing extracted from the pasted passage") for line in render_answer(abstained, 80))
    off = sieve(hash_index, QueueLLM(MOON_PASSAGE), _moon_judge(), sieve={"extract_on_paste": False}).ask(MOON_Q)
    assert not any("extracted" in line for line in render_answer(off, 80))


# ------------------------------------------------------------------------------ the option
def test_the_option_keys_cached_answers_only_where_it_changes_them():
    from ragsieve.config import NEUTRAL_DEFAULTS, PipelineConfig, validate_config

    assert PipelineConfig().sieve.extract_on_paste is True
    assert NEUTRAL_DEFAULTS[("sieve", "extract_on_paste")] is False
    # on (the default) the sieve's key has it; off, the key is the one from before it existed
    assert PipelineConfig().answer_identity()["sieve"]["extract_on_paste"] is True
    off = validate_config({"sieve": {"extract_on_paste": False}}).answer_identity()
    assert "extract_on_paste" not in off["sieve"]
    for value in (True, False):  # another pipeline runs no verify stage: its key never has it
        plain = validate_config({"pipeline": "plain", "sieve": {"extract_on_paste": value}})
        assert "extract_on_paste" not in plain.answer_identity()["sieve"]
