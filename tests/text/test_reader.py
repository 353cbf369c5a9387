"""The extractive reader: windows and span decoding (no model), the shipped graph against the
training framework's logits (parity fixture written by ``benchmarks/train_reader.py --export``),
hand-written passages (written before the trained model was run on them) and one question
against many passages in one call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragsieve.text.reader import (
    ExtractiveReader,
    ReaderAnswer,
    best_spans,
    encode_windows,
    load_tokenizer,
    sentence_holding,
    whole_words,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "reader_parity.npz"
FP32_GRAPH = ROOT / "runs" / "reader" / "reader_fp32.onnx"  # local only (gitignored): the unquantised export
# int8 dynamic quantisation moves logits: the spans must agree, the logits within this many units.
INT8_LOGIT_TOLERANCE = 1.5
FP32_LOGIT_TOLERANCE = 1e-3


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return load_tokenizer()


@pytest.fixture(scope="module")
def reader() -> ExtractiveReader:
    r = ExtractiveReader()
    r.warm_up()
    return r


# ------------------------------------------------------------------ windows and decoding, no model


def test_a_short_passage_is_one_window_with_its_offsets(tokenizer: Any) -> None:
    passage = "Canberra is the capital of Australia."
    w = encode_windows(tokenizer, "What is the capital?", [passage])
    assert w.input_ids.shape[0] == 1
    assert w.input_ids[0, 0] == 101
    context = np.flatnonzero(w.starts[0] >= 0)
    assert passage[w.starts[0, context[0]] : w.ends[0, context[0]]] == "Canberra"
    # The passage's tokens are segment 1, the question's segment 0.
    assert (w.token_type_ids[0, context] == 1).all()
    assert w.token_type_ids[0, 0] == 0


def test_a_long_passage_is_read_in_overlapping_windows_that_cover_every_token(tokenizer: Any) -> None:
    passage = " ".join(f"word{i}" for i in range(400))
    w = encode_windows(tokenizer, "Which word?", [passage, "short"], max_length=128, stride=32)
    rows = np.flatnonzero(w.passage == 0)
    assert len(rows) > 2
    assert w.attention_mask.sum(axis=1).max() <= 128
    covered = set()
    for r in rows:
        covered |= {int(s) for s in w.starts[r] if s >= 0}
    n_tokens = len(tokenizer.encode(passage, add_special_tokens=False).ids)
    assert len(covered) == len({o[0] for o in tokenizer.encode(passage, add_special_tokens=False).offsets})
    assert n_tokens > 128
    assert (w.passage[-1:] == 1).all()


def test_best_spans_picks_the_highest_start_plus_end_in_the_passage() -> None:
    start = np.array([[5.0, 0.0, 3.0, 0.0, 9.0]])
    end = np.array([[5.0, 0.0, 0.0, 4.0, -9.0]])
    context = np.array([[False, True, True, True, False]])
    first, last, score, null = best_spans(start, end, context, max_answer_tokens=30)
    assert (int(first[0]), int(last[0])) == (2, 3)
    assert score[0] == pytest.approx(7.0)
    assert null[0] == pytest.approx(10.0)


def test_the_sentence_holding_a_span() -> None:
    passage = "Graphene is carbon. Penicillin was found by Alexander Fleming in 1928. It changed medicine."
    start = passage.index("Alexander")
    assert sentence_holding(passage, start, start + len("Alexander Fleming")) == (
        "Penicillin was found by Alexander Fleming in 1928."
    )
    assert sentence_holding(passage, 3, 3) == ""


def test_a_span_inside_a_word_is_widened_to_the_whole_word() -> None:
    passage = "Penicillin was found by Fleming."
    assert whole_words(passage, 3, 10) == (0, 10)
    assert whole_words(passage, 24, 27) == (24, 31)
    assert whole_words(passage, 0, 10) == (0, 10)


def test_reader_round_trips_through_to_dict() -> None:
    r = ExtractiveReader(threshold=1.5, batch_size=8)
    again = ExtractiveReader.from_dict(json.loads(json.dumps(r.to_dict())))
    assert again.to_dict() == r.to_dict()
    assert again._session is None  # light __init__


# ------------------------------------------------------------------ the shipped graph


@pytest.mark.slow
def test_the_shipped_int8_graph_matches_the_torch_model_on_fixed_inputs(reader: ExtractiveReader) -> None:
    ref = np.load(FIXTURE)
    feeds = {k: ref[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    start, end = reader._session.run(["start_logits", "end_logits"], feeds)
    mask = ref["attention_mask"].astype(bool)
    assert np.abs(start - ref["start_logits"])[mask].max() < INT8_LOGIT_TOLERANCE
    assert np.abs(end - ref["end_logits"])[mask].max() < INT8_LOGIT_TOLERANCE
    context = (ref["token_type_ids"] == 1) & mask
    context[np.arange(len(context)), mask.sum(axis=1) - 1] = False  # the closing [SEP]
    got = best_spans(start, end, context)
    want = best_spans(ref["start_logits"], ref["end_logits"], context)
    assert (got[0] == want[0]).all() and (got[1] == want[1]).all()


@pytest.mark.skipif(not FP32_GRAPH.is_file(), reason="the fp32 export is local to a training run")
def test_the_fp32_export_matches_the_torch_model() -> None:
    import onnxruntime as ort

    ref = np.load(FIXTURE)
    session = ort.InferenceSession(str(FP32_GRAPH), providers=["CPUExecutionProvider"])
    start, end = session.run(
        ["start_logits", "end_logits"], {k: ref[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    )
    mask = ref["attention_mask"].astype(bool)
    assert np.abs(start - ref["start_logits"])[mask].max() < FP32_LOGIT_TOLERANCE
    assert np.abs(end - ref["end_logits"])[mask].max() < FP32_LOGIT_TOLERANCE


def test_the_shipped_graph_states_how_it_was_made() -> None:
    meta = json.loads((ROOT / "src" / "ragsieve" / "resources" / "reader_minilm.onnx.json").read_text())
    for key in ("threshold", "training_data", "split", "counts", "steps", "seed", "validation", "command"):
        assert key in meta
    assert (ROOT / "src" / "ragsieve" / "resources" / "reader_minilm.onnx").stat().st_size <= 25_000_000


# ------------------------------------------------------------------ behaviour (hand-written)

ANSWERABLE = [
    (
        "Who discovered penicillin?",
        "Penicillin was discovered in 1928 by Alexander Fleming, a Scottish physician, "
        "at St Mary's Hospital in London.",
        "Fleming",
    ),
    (
        "In what year did the Eiffel Tower open?",
        "The Eiffel Tower opened in 1889 as the entrance arch to the World's Fair held in Paris.",
        "1889",
    ),
    (
        "What is the capital of Australia?",
        "Canberra is the capital city of Australia. "
        "It was chosen in 1908 as a compromise between Sydney and Melbourne.",
        "Canberra",
    ),
]

UNANSWERABLE = [
    ("Who discovered penicillin?", "The Eiffel Tower opened in 1889 as the entrance arch to the World's Fair."),
    ("What is the capital of Australia?", "Graphene is a single layer of carbon atoms in a hexagonal lattice."),
]


@pytest.mark.slow
@pytest.mark.parametrize(("question", "passage", "expected"), ANSWERABLE)
def test_an_answering_passage_gives_its_span(
    reader: ExtractiveReader, question: str, passage: str, expected: str
) -> None:
    answer = reader.read(question, [passage])[0]
    assert isinstance(answer, ReaderAnswer)
    assert answer.answered
    assert expected in answer.text
    assert passage[answer.start : answer.end] == answer.text
    assert answer.text in answer.sentence
    assert answer.score > answer.no_answer_score


@pytest.mark.slow
@pytest.mark.parametrize(("question", "passage"), UNANSWERABLE)
def test_a_passage_without_the_answer_gives_no_answer(reader: ExtractiveReader, question: str, passage: str) -> None:
    answer = reader.read(question, [passage])[0]
    assert not answer.answered
    assert answer.text == ""
    assert answer.probability < 0.5


@pytest.mark.slow
def test_one_question_against_many_passages_in_one_call(reader: ExtractiveReader) -> None:
    question = "Who discovered penicillin?"
    filler = " ".join(["The hospital's records of the period describe many other experiments in detail."] * 30)
    passages = [
        ANSWERABLE[0][1],
        UNANSWERABLE[0][1],
        ANSWERABLE[2][1],
        filler + " " + ANSWERABLE[0][1],  # longer than one window: the answer is in the last one
        *[p for _, p in UNANSWERABLE] * 4,
    ]
    together = reader.read(question, passages)
    assert len(together) == len(passages)
    alone = [reader.read(question, [p])[0] for p in passages]
    for a, b, passage in zip(together, alone, passages, strict=True):
        assert (a.start, a.end, a.answered) == (b.start, b.end, b.answered)
        # Dynamic int8 quantises activations with one scale per batch, so batch-mates move the
        # scores (by up to about half a logit on these passages); spans and decisions stay.
        assert a.score == pytest.approx(b.score, abs=1.0)
        assert passage[a.start : a.end] == a.span
    assert "Fleming" in together[0].text
    assert "Fleming" in together[3].span
    assert together[3].start > len(filler)
    assert reader.read(question, []) == []
