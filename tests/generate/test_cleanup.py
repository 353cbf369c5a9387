from __future__ import annotations

import pytest

from ragsieve.generate.cleanup import clean_answer


@pytest.mark.parametrize(("reply", "expected"), [
    ("The answer is: Graphene.", "Graphene."),
    ("The answer is Graphene.", "Graphene."),
    ("the final answer to the question is: graphene", "Graphene."),
    ("Answer: Graphene [1].", "Graphene [1]."),
    ("**Answer:** Graphene [1]", "Graphene [1]."),
    ("A: 1911 [2]", "1911 [2]."),
    ("Based on the provided context, Leiden is the city [1].", "Leiden is the city [1]."),
    ("According to the evidence [2], the bridge opened in 1931.", "The bridge opened in 1931 [2]."),
    ("Sure! Here is the answer: Marie Curie [3].", "Marie Curie [3]."),
    ("From the passages: the tower is 330 metres tall [1].", "The tower is 330 metres tall [1]."),
    ("The answer is that it melts at 30 degrees [2].", "It melts at 30 degrees [2]."),
    ("Here's the answer based on the provided evidence:\n\nGraphene [1]", "Graphene [1]."),
    ("The evidence [2] states that the bridge opened in 1931.", "The bridge opened in 1931 [2]."),
])
def test_leading_filler_is_removed(reply, expected):
    assert clean_answer(reply).text == expected


@pytest.mark.parametrize(("reply", "expected"), [
    ("1. Heike Kamerlingh Onnes 2. 1911", "Heike Kamerlingh Onnes; 1911."),
    ("Answer:\n1. Walther Meissner [1]\n2. 1933 [1]", "Walther Meissner [1]; 1933 [1]."),
    ("- Leiden\n- 1911", "Leiden; 1911."),
])
def test_numbered_fragments_become_one_sentence(reply, expected):
    assert clean_answer(reply).text == expected


@pytest.mark.parametrize(("reply", "expected"), [
    ("Paris is the capital of France [1]. Sources: [1], [2]", "Paris is the capital of France [1]. [2]"),
    ("Paris is the capital of France [1]. (Sources: [1])", "Paris is the capital of France [1]."),
    ("Onnes found it in 1911 [1", "Onnes found it in 1911."),
    ("Onnes found it in 1911 [1]. []", "Onnes found it in 1911 [1]."),
    ("Leiden [2]\n\nReferences: [2]", "Leiden [2]."),
    ("Leiden.\n\nReferences: [2]", "Leiden. [2]"),
])
def test_trailing_citation_debris(reply, expected):
    assert clean_answer(reply).text == expected


def test_prompt_echo_keeps_the_answer_section():
    reply = ("Evidence:\n[1] The Atomic Force Microscope images surfaces.\n\nQuestion: Who invented it?\n\n"
             "Answer: Gerd Binnig [1]")
    out = clean_answer(reply)
    assert out.text == "Gerd Binnig [1]."
    assert out.removed and "kept the text under the answer label" in out.changes


def test_evidence_label_alone_leaves_the_paste_visible():
    out = clean_answer("Evidence: [1] The Atomic Force Microscope is a scanning probe microscope.")
    assert out.text.startswith("[1] The Atomic Force Microscope")  # the responsiveness check sees the paste
    assert "removed the label Evidence:" in out.changes


def test_echoed_question_is_dropped():
    out = clean_answer("Who discovered it? Heike Kamerlingh Onnes did [1].", question="Who discovered it?")
    assert out.text == "Heike Kamerlingh Onnes did [1]."


@pytest.mark.parametrize("reply", [
    "Paris is the capital of France [1].",
    "A-ha is a Norwegian band [2].",
    "In 1911, Onnes cooled mercury to 4.2 kelvin [1].",
    "I don't know.",
    "Answers vary between sources, but 1911 is given [1].",
    "The evidence of fraud was found in 1911 [1].",
])
def test_clean_answers_are_left_alone(reply):
    out = clean_answer(reply)
    assert out.text == reply and not out.changed and out.changes == []


def test_to_dict_lists_what_was_removed():
    d = clean_answer("The answer is: Graphene.").to_dict()
    assert d["text"] == "Graphene." and d["original"] == "The answer is: Graphene."
    assert d["removed"] == ["The answer is:"]
