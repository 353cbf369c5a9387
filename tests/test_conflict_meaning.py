"""The conflict bar's meaning bar: a passage's sentence closest to the question by the embedder
answers it when its cosine reaches the bar, even where the question's words are paraphrased."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ragsieve.config import ConflictConfig, validate_config
from ragsieve.conflict import ConflictDetector, sentence_cosines
from ragsieve.errors import ConfigError
from ragsieve.text.passage import MeaningBar, passage_answer
from ragsieve.types import Chunk, SearchHit

QUESTION = "When did the Kessel Bridge open to traffic?"
# The question's key terms: kessel, bridg, open, traffic. Neither answering sentence holds its
# predicate ("open", "traffic"): the literal bar reads neither passage.
CARS_1931 = "The Kessel Bridge carried its first cars in 1931."
CARS_1947 = "Cars first crossed the Kessel Bridge in 1947."
DESIGNED = "The Kessel Bridge was designed in 1925."
GREEN = "The Kessel Bridge is painted green."


class TableEmbedder:
    """Vectors looked up by text: the question on the first axis, each sentence at the cosine
    with the question the test gives it (``1 - c^2`` on the second axis keeps it unit length)."""

    def __init__(self, cosines: dict[str, float]) -> None:
        self.cosines = cosines
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = []
        for text in texts:
            c = 1.0 if text == QUESTION else self.cosines[text]
            rows.append([c, float(np.sqrt(max(0.0, 1.0 - c * c)))])
        return np.asarray(rows, dtype=np.float32)


def hit(cid: str, text: str, source: str) -> SearchHit:
    return SearchHit(Chunk(id=cid, text=text, doc_id=cid, source=source), 1.0, 1, {})


def two_sites(a: str, b: str) -> list[SearchHit]:
    return [hit("a", a, "site-a.example"), hit("b", b, "site-b.example")]


def test_the_closest_sentence_above_the_bar_answers_a_paraphrased_question() -> None:
    embedder = TableEmbedder({CARS_1931: 0.8, CARS_1947: 0.75, GREEN: 0.3})
    hits = two_sites(f"{CARS_1931} {GREEN}", f"{GREEN} {CARS_1947}")
    # the literal bar alone reads no answer: neither sentence holds "open" or "traffic"
    literal = ConflictDetector(meaning=None).detect(QUESTION, hits)
    assert not literal.conflict and all(a.value is None for a in literal.answers)
    report = ConflictDetector(embedder=embedder, meaning=MeaningBar(0.6)).detect(QUESTION, hits)
    assert report.conflict and report.decision == "both"
    assert report.message == "The sources disagree: 1931 (site-a.example, [1]) vs 1947 (site-b.example, [2])."
    first = report.answers[0]
    assert first.closest and first.cosine == pytest.approx(0.8, abs=1e-3) and first.cover == 0.5
    assert "closest in meaning" in first.reason
    data = first.to_dict()
    assert data["closest"] and data["compared"] and data["cosine"] == pytest.approx(0.8, abs=1e-3)
    # one batch per question: the question and every sentence of the passages about its entities
    assert len(embedder.calls) == 1 and embedder.calls[0][0] == QUESTION and len(embedder.calls[0]) == 5


def test_below_the_bar_or_below_the_floor_nothing_is_compared() -> None:
    embedder = TableEmbedder({CARS_1931: 0.8, CARS_1947: 0.55, GREEN: 0.3})
    hits = two_sites(f"{CARS_1931} {GREEN}", f"{GREEN} {CARS_1947}")
    # 1947's sentence is its passage's closest, but under the bar: only one side answers
    report = ConflictDetector(embedder=embedder, meaning=MeaningBar(0.6)).detect(QUESTION, hits)
    assert not report.conflict and report.decision == "consistent" and report.chosen == "1931"
    # a floor of every key term: the closest sentences hold half of them, so neither is read
    strict = ConflictDetector(embedder=embedder, meaning=MeaningBar(0.5, floor=1.0)).detect(QUESTION, hits)
    assert not strict.conflict and strict.decision == "no-answer"


def test_only_the_passages_closest_sentence_meets_the_bar() -> None:
    # in passage b the closest sentence is about the design, not the opening: its year is read as
    # b's answer (the closest sentence first), and 1947 in a sentence under it is not compared
    embedder = TableEmbedder({CARS_1931: 0.8, CARS_1947: 0.7, DESIGNED: 0.72, GREEN: 0.3})
    hits = two_sites(CARS_1931, f"{CARS_1947} {DESIGNED}")
    report = ConflictDetector(embedder=embedder, meaning=MeaningBar(0.6)).detect(QUESTION, hits)
    assert report.answers[1].answer == "1925" and report.answers[1].closest
    assert "1947" not in {g.answer for g in report.groups}
    # under a bar above the design sentence's cosine, b has no closest sentence and answers nothing
    report = ConflictDetector(embedder=embedder, meaning=MeaningBar(0.75)).detect(QUESTION, hits)
    assert report.answers[1].value is None and not report.conflict


def test_a_passage_about_another_entity_is_neither_read_nor_embedded() -> None:
    other = "The Marren Bridge first carried cars in 1962."
    embedder = TableEmbedder({CARS_1931: 0.8, other: 0.9})
    report = ConflictDetector(embedder=embedder, meaning=MeaningBar(0.6)).detect(QUESTION, two_sites(CARS_1931, other))
    assert not report.conflict and report.answers[1].value is None
    assert embedder.calls == [[QUESTION, CARS_1931]]


def test_passage_answer_checks_the_cosines_it_is_given() -> None:
    with pytest.raises(ValueError, match="2 cosines for 1 sentences"):
        passage_answer(QUESTION, CARS_1931, cosines=[0.9, 0.1], meaning=MeaningBar(0.5))
    with pytest.raises(ConfigError):
        MeaningBar(1.5)
    with pytest.raises(ConfigError):
        MeaningBar(0.5, floor=-0.1)
    assert MeaningBar(0.5).closest([0.2, 0.7, 0.7]) == 1 and MeaningBar(0.8).closest([0.2, 0.7]) is None


def test_the_literal_bar_is_unchanged_without_an_embedder() -> None:
    hits = two_sites(CARS_1931, CARS_1947)
    report = ConflictDetector(meaning=MeaningBar(0.0, floor=0.0)).detect(QUESTION, hits)
    assert not report.conflict and all(a.cosine is None and not a.closest for a in report.answers)
    assert "cosine" not in report.to_dict()["passages"][0]


def test_the_detector_round_trips_its_bar() -> None:
    detector = ConflictDetector(meaning=MeaningBar(0.55, 0.0))
    again = ConflictDetector.from_dict(detector.to_dict())
    assert again.meaning == MeaningBar(0.55, 0.0)
    assert "meaning" not in ConflictDetector(meaning=None).to_dict()
    assert ConflictDetector.from_dict(ConflictDetector(meaning=None).to_dict()).meaning is None


def test_the_stage_hands_the_shared_embedder_to_a_configured_bar() -> None:
    from ragsieve.sieve.conflict import ConflictStage
    from ragsieve.sieve.state import Ref

    embedder = TableEmbedder({})
    asked: list[bool] = []

    def shared() -> Any:
        asked.append(True)
        return embedder

    cfg = validate_config({"stages": {"conflict": {"meaning_cosine": 0.6, "meaning_floor": 0.0}}})
    assert cfg.stages.conflict.meaning_cosine == 0.6
    stage = ConflictStage(cfg.stages.conflict, Ref(), lambda: None, lambda: None, shared)
    detector = stage.detector()
    assert detector.meaning == MeaningBar(0.6, 0.0) and detector.embedder is embedder
    # without a bar (the library's default is off) the embedder is not asked for
    asked.clear()
    plain = ConflictStage(ConflictConfig(), Ref(), lambda: None, lambda: None, shared).detector()
    assert plain.meaning is None and plain.embedder is None and not asked


def test_sentence_cosines_with_the_bundled_embedder(embedder: Any) -> None:
    # the real model: the sentence that says the bridge first carried cars is closer to "when did
    # it open to traffic" than one about its colour, and a passage's rows follow its sentences
    rows = sentence_cosines(embedder, QUESTION, [f"{GREEN} {CARS_1947}", CARS_1931])
    assert len(rows) == 2 and len(rows[0]) == 2 and len(rows[1]) == 1
    assert rows[0][1] > rows[0][0]
    assert all(-1.0 <= c <= 1.0 for row in rows for c in row)
