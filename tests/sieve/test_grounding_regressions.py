"""Value grounding marks a value stated about another fact than the question asks (a veto only
when asked for: ``tie_values``), and matches a name in its variants, through ``Pipeline`` (hash
embedder, keyword judge, a fake LLM with a fixed reply) and ``verify_answer``."""

from __future__ import annotations

import pytest
from tests.sieve.test_trust_acceptance import KeywordJudge, build_index, fixed, sieve

from ragsieve.verify.grounding import ground_values

CHARGER = (
    "The Zephyr X2 battery takes 90 minutes to charge fully. With the fast charger it reaches 80 % "
    "in 35 minutes, and the case holds two spare cells."
)
WALKMAN = "The Walkman, a portable cassette player, was made by Sony and first sold in Tokyo in 1979."
NOBEL = (
    "The 2019 Nobel Prize in Chemistry was awarded to John Goodenough, Stanley Whittingham and Akira Yoshino. "
    "Their lithium-ion work built on cathode studies that Rachid Yazami presented at a conference in 1980."
)


@pytest.fixture(scope="module")
def devices(tmp_path_factory):
    return build_index(
        tmp_path_factory.mktemp("devices"),
        {"devices/zephyr.txt": CHARGER, "devices/walkman.txt": WALKMAN, "chemistry/nobel.txt": NOBEL},
    )


CHARGE_Q = "How long does the Zephyr X2 battery take to charge?"


def test_a_charge_time_answered_with_the_time_to_80_percent_is_marked_and_fails_when_tied(devices):
    from ragsieve.verify import LexicalEmbeddingJudge, verify_answer

    judge = KeywordJudge(relevant=("zephyr",))
    wrong_reply = "The Zephyr X2 battery takes 35 minutes to charge [1]."
    # through the sieve the tie is a signal, not a veto (its measured precision is below 0.9):
    # the answer stands, and grounding marks the value as stated about another fact
    ans = sieve(devices, fixed(wrong_reply), judge, responsive=False).ask(CHARGE_Q)
    [check] = ground_values("35 minutes", [CHARGER], given=CHARGE_Q).checks
    assert check.found and "80 %" in check.other_fact
    assert "35 minutes" in ans.text
    # tied (verify_answer(tie_values=True)), the value fails and says where the evidence states it
    [verdict] = verify_answer(wrong_reply, [CHARGER], LexicalEmbeddingJudge(embedding_weight=0.0),
                              question=CHARGE_Q, tie_values=True)  # fmt: skip
    assert not verdict.supported and "80 %" in verdict.value_failures[0]["other_fact"]
    right_reply = "The Zephyr X2 battery takes 90 minutes to charge [1]."
    [right] = verify_answer(right_reply, [CHARGER], LexicalEmbeddingJudge(embedding_weight=0.0),
                            question=CHARGE_Q, tie_values=True)  # fmt: skip
    assert right.supported and not right.value_failures


def test_a_name_variant_of_the_right_answer_is_supported(devices):
    judge = KeywordJudge(relevant=("walkman",))
    ans = sieve(devices, fixed("The Walkman was made by Sony Corporation [1]."), judge).ask("Who made the Walkman?")
    assert not ans.abstained and "Sony Corporation" in ans.text
    assert all(c.supported and not c.value_failures for c in ans.claims)


def test_a_name_stated_elsewhere_in_the_evidence_is_not_tied_to_the_question(devices):
    # names are not tied to the fact (an answer names things besides its answer): a prize
    # claimed for a person the passage names in another sentence still passes value grounding,
    # a known limit stated in the grounding module
    question = "Who was awarded the 2019 Nobel Prize in Chemistry?"
    judge = KeywordJudge(relevant=("nobel",))
    wrong = sieve(devices, fixed("The 2019 Nobel Prize in Chemistry was awarded to Rachid Yazami [1]."), judge,
                  responsive=False).ask(question)  # fmt: skip
    assert all(not c.value_failures for c in wrong.claims)


def test_without_the_question_a_value_anywhere_in_the_evidence_counts():
    # the old reading, kept where no question is given (e.g. verifying a free text)
    assert ground_values("It reaches full charge in 35 minutes.", [CHARGER]).grounded
    tied = ground_values("It reaches full charge in 35 minutes.", [CHARGER], given=CHARGE_Q, tie_to_question=True)
    assert not tied.grounded and "stated about something else" in tied.explain()
