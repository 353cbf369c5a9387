"""Every reason a check records reads as words: one template per kind, the code kept beside it."""

from __future__ import annotations

import pytest

from ragsieve.present import REASON_TEMPLATES, explain_reason

CODES = {
    "judge: all 10 candidates irrelevant (best 0.23 < 0.41)": "no_relevant_passage",
    "poison: all 4 candidates look like poisoning (restated question or copies)": "all_poisoned",
    "conflict: the sources give 2 different answers": "sources_disagree",
    "generate: the model found no answer in the evidence": "declined",
    "regenerate: the model found no answer in the supported evidence": "declined_after_regeneration",
    "verify: the answer is empty": "empty",
    "verify: none of 1 answer sentences is supported": "unsupported",
    "verify: confidence 0.10 < 0.20": "weak_support",
    'verify: value tie: the evidence states 35 minutes about "charging", not about what the question asks':
        "value_elsewhere",
    "verify: the cited passage [1] says 1999, not 2014, so the answer contradicts its own evidence": "contradiction",
    "responsive: pasted_passage": "pasted_passage",
    "responsive: wrong_kind (the question asks for a date or year; the answer gives none)": "wrong_kind",
    "responsive: restated_question": "restated_question",
    "responsive: ungrounded": "ungrounded",
    "decide: confidence 0.05 < 0.08": "low_confidence",
    "decide: vetoed: the answer is stated only by a coordinated voice, no independent source: 3 passages":
        "coordinated",
    "calibration: confidence 0.1 < threshold 0.3": "calibrated_threshold",
    "calibration: no confidence to compare with the threshold 0.3": "no_confidence",
    "regenerate: 1 of 2 sentences unsupported": "regenerated",
    "unsupported sentences removed from the answer": "sentences_removed",
    "confidence 0.15 >= 0.08": "near_threshold",
}


@pytest.mark.parametrize("code", list(CODES))
def test_each_code_reads_as_one_sentence_of_its_kind(code: str) -> None:
    reason = explain_reason(code)
    assert reason.kind == CODES[code] and reason.kind in REASON_TEMPLATES and reason.code == code
    assert (reason.text[0].isupper() or reason.text[0].isdigit()) and reason.text.endswith(".")
    for fragment in (">=", " < ", "responsive:", "verify:", "decide:", "judge:", "_", "answer sentences is"):
        assert fragment not in reason.text, (fragment, reason.text)


def test_the_briefs_examples() -> None:
    assert explain_reason("confidence 0.15 >= 0.08").text == (
        "The checks' confidence in this answer is low (0.15; answers below 0.08 are withheld).")
    assert explain_reason("responsive: pasted_passage").text == (
        "The answer pasted a passage instead of answering the question.")
    assert explain_reason("verify: none of 1 answer sentences is supported").numbers == {"n": 1.0}


def test_a_combined_abstention_says_both_and_keeps_both_codes() -> None:
    reason = explain_reason("decide: confidence 0.05 < 0.08 (verify: none of 1 answer sentences is supported)")
    assert reason.text.startswith("No sentence of the answer is backed by the passage it cites (1 checked), and the "
                                  "checks' confidence in this answer is too low to give it (0.05;")
    assert [p.kind for p in reason.parts] == ["unsupported"]
    assert reason.numbers == {"confidence": 0.05, "threshold": 0.08}


def test_an_unknown_reason_keeps_its_words_without_the_checks_name() -> None:
    assert explain_reason("filter: every passage was harmful").text == "Every passage was harmful."
