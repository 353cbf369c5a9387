from __future__ import annotations

import pytest

from ragsieve.text.sentences import find_list, normalize_lists, render_list, split_sentences
from ragsieve.verify.claims import split_claim_markers, split_claims


@pytest.mark.parametrize(("text", "expected"), [
    ("Dr. Smith cooled mercury to 4.2 kelvin. It lost its resistance.",
     ["Dr. Smith cooled mercury to 4.2 kelvin.", "It lost its resistance."]),
    ("The U.S. Senate met on Jan. 5. Nothing passed.", ["The U.S. Senate met on Jan. 5.", "Nothing passed."]),
    ('She said "It works. Really." and left. Then she returned.',
     ['She said "It works. Really." and left.', "Then she returned."]),
    ("It costs $3.50, i.e. very little. Prices rose 2.5% in 2020.",
     ["It costs $3.50, i.e. very little.", "Prices rose 2.5% in 2020."]),
    ("First paragraph without a stop\n\nSecond one.", ["First paragraph without a stop", "Second one."]),
    ("The team won 3. They celebrated.", ["The team won 3.", "They celebrated."]),
])
def test_abbreviations_decimals_quotes_stay_whole(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("1. Heike Kamerlingh Onnes 2. 1911", ["Heike Kamerlingh Onnes; 1911."]),
    ("1) Walther Meissner 2) Robert Ochsenfeld 3) 1933", ["Walther Meissner; Robert Ochsenfeld; 1933."]),
    ("Answer: (1) Leiden, (2) 1911.", ["Answer: Leiden; 1911."]),
    ("- Paris\n- Lyon\n* Nice", ["Paris; Lyon; Nice."]),
    ("• graphene [1]\n• graphite [2]", ["graphene [1]; graphite [2]."]),
    ("1. Paris is the capital of France.\n2. Lyon lies on the Rhone river.",
     ["Paris is the capital of France.", "Lyon lies on the Rhone river."]),
    ("Two parts:\n1. Onnes\n2. 1911\n\nBoth are in the evidence.",
     ["Two parts: Onnes; 1911.", "Both are in the evidence."]),
])
def test_lists_become_clean_sentences(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize("text", [
    "It was discovered in 1911. 2 years later it was explained.",
    "Mercury was cooled to 4.2 kelvin.",
    "Chapter 2. The methods are described here.",
    "He came 2. Then 3. Then left.",  # numbered, but not from 1: no list
])
def test_no_list_where_there_is_none(text):
    assert find_list(text) is None
    assert normalize_lists(text) == text


def test_render_list_mixes_phrases_and_sentences():
    assert render_list(["Onnes", "It happened in Leiden in 1911."]) == "Onnes. It happened in Leiden in 1911."
    assert render_list(["", "[1]"]) == ""
    assert render_list(["Onnes,", "1911 and"]) == "Onnes; 1911."


def test_claims_of_a_numbered_answer_are_one_sentence_with_its_markers():
    claims = split_claim_markers("1. Heike Kamerlingh Onnes [1] 2. 1911 [1]")
    assert [c.text for c in claims] == ["Heike Kamerlingh Onnes [1]; 1911 [1]."]
    assert claims[0].markers == [1, 1]
    # a marker after the stop still belongs to the sentence before it
    assert split_claims("Mitochondria make ATP. [1] Dr. Jones found it in 1962 [2].") == [
        "Mitochondria make ATP. [1]", "Dr. Jones found it in 1962 [2]."]
