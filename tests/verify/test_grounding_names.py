"""Value grounding ties a name to the fact the question asks about: a name the evidence states
only in a sentence about something else is marked (a failure with ``tie_to_question``), while the
right name and its variants (a shorter form, an initial, the last word alone) are not; a sentence
naming several things the question does not name ties none of them, and a sentence that names
only what the question asks about states no rival answer."""

from __future__ import annotations

from ragsieve.text.kind import expected_kind
from ragsieve.verify.grounding import TIED_KINDS, ground_values

NOBEL = (
    "The 2019 Nobel Prize in Chemistry was awarded to John Goodenough, Stanley Whittingham and Akira Yoshino. "
    "Their lithium-ion work built on cathode studies that Rachid Yazami presented at a conference in 1980."
)
NOBEL_Q = "Who was awarded the 2019 Nobel Prize in Chemistry?"
BRIDGE = (
    "Anna Varga drew the plans in her studio in Szeged. "
    "The Kessel Bridge was designed over three years and opened to traffic after long delays."
)
BRIDGE_Q = "Who designed the Kessel Bridge?"


def test_the_questions_ask_for_a_name() -> None:
    # the tie reads the asked kind; these fixtures test names only if it is a name
    assert expected_kind(NOBEL_Q) == "name" and expected_kind(BRIDGE_Q) == "name"
    assert "name" in TIED_KINDS


def test_a_name_stated_about_another_fact_is_marked_and_fails_when_tied() -> None:
    [check] = ground_values("Rachid Yazami", [NOBEL], given=NOBEL_Q).checks
    assert check.found and check.other_fact.startswith("Their lithium-ion work")  # a signal, not a failure
    tied = ground_values("The prize went to Rachid Yazami.", [NOBEL], given=NOBEL_Q, tie_to_question=True)
    assert not tied.grounded and [c.value.text for c in tied.failed] == ["Rachid Yazami"]
    assert "stated about something else" in tied.explain()
    # names left out of the tied kinds: the old reading, a name anywhere in the evidence counts
    assert ground_values("Rachid Yazami", [NOBEL], given=NOBEL_Q, tie_to_question=True,
                         tie_kinds=("date", "number", "quantity")).grounded  # fmt: skip
    # without the question nothing is tied
    assert ground_values("Rachid Yazami", [NOBEL]).grounded


def test_the_right_name_and_its_variants_are_not_marked() -> None:
    for answer in ("Akira Yoshino", "A. Yoshino", "Yoshino", "The prize went to Akira Yoshino."):
        result = ground_values(answer, [NOBEL], given=NOBEL_Q, tie_to_question=True)
        assert result.grounded, (answer, result.explain())
        assert all(not c.other_fact for c in result.checks)


def test_a_sentence_with_several_names_the_question_does_not_state_ties_none() -> None:
    # which of two names is the answer no question term tells: neither is tied
    both = ground_values("Rachid Yazami shared it with Akira Yoshino.", [NOBEL], given=NOBEL_Q, tie_to_question=True)
    assert both.grounded and all(not c.other_fact for c in both.checks)


def test_a_sentence_naming_only_what_the_question_asks_about_states_no_rival() -> None:
    # the sentence about the design names only the bridge, which the question names: the name
    # of the one who drew the plans is not stated "about another fact"
    right = ground_values("Anna Varga", [BRIDGE], given=BRIDGE_Q, tie_to_question=True)
    assert right.grounded and not right.checks[0].other_fact
    # a rival the question does not name, in the sentence about the design, marks it
    rival = BRIDGE.replace("was designed over", "was designed by Karl Lenz over")
    marked = ground_values("Anna Varga", [rival], given=BRIDGE_Q, tie_to_question=True)
    assert not marked.grounded and marked.failed[0].other_fact.startswith("Anna Varga drew")


def test_a_name_needs_a_rival_sentence_with_most_of_the_terms_and_twice_its_own() -> None:
    # the sentence naming Karl Lenz holds two of the three terms, Anna Varga's one: enough to
    # mark a number (more terms, at least a quarter), not a name (three quarters, twice as many)
    question = "Who designed the steel arches of the Kessel Bridge?"
    evidence = "Anna Varga designed the bridge. Its steel arches were later painted by Karl Lenz."
    assert expected_kind(question) == "name"
    right = ground_values("Anna Varga", [evidence], given=question, tie_to_question=True)
    assert right.grounded and not right.checks[0].other_fact
    # with the rival sentence holding every term, the name is marked
    rival = evidence.replace("were later painted", "were designed")
    marked = ground_values("Anna Varga", [rival], given=question, tie_to_question=True)
    assert not marked.grounded and marked.failed[0].other_fact == "Anna Varga designed the bridge."


AWARDS = (
    "The guild gave two medals in 1990: the medal for the restored harbour crane was won by Lena Hartig, "
    "and the medal for the printed river atlas was won by Omar Castell."
)
AWARDS_Q = "Who won the medal for the restored harbour crane?"


def test_a_name_in_another_clause_of_the_same_sentence_is_marked() -> None:
    # one sentence, two facts: the clause about the crane names Lena Hartig, the clause about the
    # atlas Omar Castell; the atlas's name is stated about another fact
    assert expected_kind(AWARDS_Q) == "name"
    wrong = ground_values("Omar Castell", [AWARDS], given=AWARDS_Q, tie_to_question=True)
    assert not wrong.grounded
    assert wrong.failed[0].other_fact == "and the medal for the printed river atlas was won by Omar Castell."
    for answer in ("Lena Hartig", "L. Hartig", "Hartig"):
        right = ground_values(answer, [AWARDS], given=AWARDS_Q, tie_to_question=True)
        assert right.grounded and not right.checks[0].other_fact, answer


def test_clauses_are_not_split_for_numbers_or_without_a_rival() -> None:
    # dates and numbers are judged by sentence (chosen on the training split): the year of the other
    # clause is not marked
    question = "In which year did the harbour crane reopen?"
    evidence = "The harbour crane reopened in 1990, and the river atlas was printed in 1994."
    assert ground_values("1994", [evidence], given=question, tie_to_question=True).grounded
    # a sentence with one name only is judged whole, whichever clause holds the terms
    alone = "The medal for the restored harbour crane was given in 1990, and it was won by Lena Hartig."
    assert ground_values("Lena Hartig", [alone], given=AWARDS_Q, tie_to_question=True).grounded
