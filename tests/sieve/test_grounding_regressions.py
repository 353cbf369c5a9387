"""Value grounding marks a value stated about another fact than the question asks (through the
default sieve a caveat naming where the evidence states it, not a veto; a failure when asked for:
``tie_values``), and matches a name in its variants, through ``Pipeline`` (hash embedder, keyword
judge, a fake LLM with a fixed reply) and ``verify_answer``."""

from __future__ import annotations

import pytest
from tests.sieve.test_trust_acceptance import KeywordJudge, build_index, fixed, sieve

from ragsieve.cli import render_answer
from ragsieve.config import validate_config
from ragsieve.present import present_answer
from ragsieve.serve.app import answer_content
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.verify import LexicalEmbeddingJudge
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
WRONG_CHARGE = "The Zephyr X2 battery takes 35 minutes to charge [1]."
RIGHT_CHARGE = "The Zephyr X2 battery takes 90 minutes to charge [1]."


READERS = ["rules", pytest.param("minilm", marks=pytest.mark.slow)]


def default_sieve(index, reply: str, keyword: str, reader: str = "rules", **verify: object) -> Pipeline:
    """The default sieve (its decide stage and bundled decision model included) over ``index``;
    ``reader``: how the checks read passages (the rules, or the extractive reader: "minilm")."""
    data: dict[str, object] = {"sieve": {"need": "always", "route": "all"}, "reading": {"reader": reader}}
    if verify:
        data["stages"] = {"verify": verify}
    return Pipeline(validate_config(data), index=index, llm=fixed(reply), judge=KeywordJudge(relevant=(keyword,)),
                    claim_judge=LexicalEmbeddingJudge(embedding_weight=0.0))  # fmt: skip


@pytest.mark.parametrize("reader", READERS)
def test_through_the_default_sieve_the_time_to_80_percent_is_answered_with_a_caveat_naming_it(devices, reader):
    ans = default_sieve(devices, WRONG_CHARGE, "zephyr", reader).ask(CHARGE_Q)
    [tie] = [f for c in ans.claims for f in c.other_facts]
    assert tie["text"] == "35 minutes" and tie["other_fact"] == "With the fast charger it reaches 80 % in 35 minutes"
    assert tie["evidence_answer"] == "90 minutes"
    [decided] = ans.trace.stage("decide")
    assert decided["signals"]["verify.value_other_fact"] == 1.0
    if ans.abstained:  # the combined confidence fell below the threshold: the abstention says why
        assert decided["decision"] == "abstain" and "value tie" in ans.abstain_reason
        assert "35 minutes" in ans.text and "80 %" in ans.text
        return
    # not a veto: the answer stands, with a caveat that names both values: what the passage says
    # for the charge time, and what it gives the draft's value about
    assert "35 minutes" in ans.text and decided["decision"] == "caveat"
    expected = ('the cited passage [1] says 90 minutes for this, and gives 35 minutes only about '
                '"With the fast charger it reaches 80 % in 35 minutes"')  # fmt: skip
    assert expected in decided["caveat"]
    view = present_answer(ans)  # what the terminal, the service and the page show
    assert view.caveat is not None and expected in view.caveat
    assert expected in answer_content(ans.to_dict())
    assert any(line.strip().startswith("caveat: The checks could not confirm this answer: the answer's value "
                                       "appears in the evidence only about something else")
               for line in render_answer(ans, 200))


@pytest.mark.parametrize("reader", READERS)
def test_through_the_default_sieve_the_right_charge_time_has_no_tie_caveat(devices, reader):
    ans = default_sieve(devices, RIGHT_CHARGE, "zephyr", reader).ask(CHARGE_Q)
    assert not ans.abstained and "90 minutes" in ans.text
    assert all(not c.other_facts and not c.value_failures for c in ans.claims)
    [decided] = ans.trace.stage("decide")
    assert decided["signals"]["verify.value_other_fact"] == 0.0 and decided["withdrawal"] is None
    assert "value tie" not in (decided.get("caveat") or "") and "value tie" not in (present_answer(ans).caveat or "")


def test_the_tie_is_a_veto_only_when_listed_and_off_when_switched_off(devices):
    vetoed = Pipeline(
        validate_config({"sieve": {"need": "always", "route": "all"}, "decide": {"vetoes": ["value_tie"]}}),
        index=devices, llm=fixed(WRONG_CHARGE), judge=KeywordJudge(relevant=("zephyr",)),
        claim_judge=LexicalEmbeddingJudge(embedding_weight=0.0),
    ).ask(CHARGE_Q)  # fmt: skip
    assert vetoed.abstained and "value tie" in vetoed.abstain_reason and "80 %" in vetoed.text
    assert vetoed.text.startswith("I can't give the draft answer 35 minutes: the cited passage [1] says 90 minutes")
    off = default_sieve(devices, WRONG_CHARGE, "zephyr", tie_values="off").ask(CHARGE_Q)
    assert "verify.value_other_fact" not in off.trace.stage("decide")[0]["signals"]
    assert "value tie" not in (off.trace.stage("decide")[0].get("withdrawal") or "")
    # without a decide stage (every other withdrawal a veto there) the tie is recorded, not a veto
    undecided = sieve(devices, fixed(WRONG_CHARGE), KeywordJudge(relevant=("zephyr",))).ask(CHARGE_Q)
    assert not undecided.abstained and "35 minutes" in undecided.text
    assert any("80 %" in r.get("value_tie", "") for r in undecided.trace.stage("verify"))
    failed = default_sieve(devices, WRONG_CHARGE, "zephyr", tie_values="fail", regenerate=False).ask(CHARGE_Q)
    [verdict] = failed.claims
    assert not verdict.supported and "80 %" in verdict.value_failures[0]["other_fact"]


def test_a_charge_time_answered_with_the_time_to_80_percent_is_marked_and_fails_when_tied():
    from ragsieve.verify import verify_answer

    wrong_reply = WRONG_CHARGE
    # without the tie the value is found (a signal marks it as stated about another fact)
    [check] = ground_values("35 minutes", [CHARGER], given=CHARGE_Q).checks
    assert check.found and "80 %" in check.other_fact
    # tied (verify_answer(tie_values=True)), the value fails and says where the evidence states it
    [verdict] = verify_answer(wrong_reply, [CHARGER], LexicalEmbeddingJudge(embedding_weight=0.0),
                              question=CHARGE_Q, tie_values=True)  # fmt: skip
    assert not verdict.supported and "80 %" in verdict.value_failures[0]["other_fact"]
    [right] = verify_answer(RIGHT_CHARGE, [CHARGER], LexicalEmbeddingJudge(embedding_weight=0.0),
                            question=CHARGE_Q, tie_values=True)  # fmt: skip
    assert right.supported and not right.value_failures


@pytest.mark.parametrize("reader", READERS)
def test_a_name_variant_of_the_right_answer_is_supported(devices, reader):
    judge = KeywordJudge(relevant=("walkman",))
    ans = sieve(devices, fixed("The Walkman was made by Sony Corporation [1]."), judge, reader).ask(
        "Who made the Walkman?"
    )
    assert not ans.abstained and "Sony Corporation" in ans.text
    assert all(c.supported and not c.value_failures for c in ans.claims)
    # and through the default sieve, its decide stage included: the one sentence that names the
    # maker is the one about making it, so no tie and no caveat
    reply = "The Walkman was made by Sony Corporation [1]."
    ans = default_sieve(devices, reply, "walkman", reader).ask("Who made the Walkman?")
    assert not ans.abstained and "Sony Corporation" in ans.text
    assert all(c.supported and not c.value_failures and not c.other_facts for c in ans.claims)
    assert "value tie" not in (ans.trace.stage("decide")[0].get("caveat") or "")


def test_a_name_stated_about_another_fact_is_marked_and_the_right_name_is_not(devices):
    # a prize claimed for a person the passage names in another sentence (about cathode studies)
    # is marked as stated about another fact; the laureate is not
    question = "Who was awarded the 2019 Nobel Prize in Chemistry?"
    judge = KeywordJudge(relevant=("nobel",))
    wrong = sieve(devices, fixed("The 2019 Nobel Prize in Chemistry was awarded to Rachid Yazami [1]."), judge,
                  responsive=False).ask(question)  # fmt: skip
    [tie] = [f for c in wrong.claims for f in c.other_facts]
    assert tie["text"] == "Rachid Yazami" and "cathode studies" in tie["other_fact"]
    assert any("Rachid Yazami" in r.get("value_tie", "") for r in wrong.trace.stage("verify"))
    right = sieve(devices, fixed("The 2019 Nobel Prize in Chemistry was awarded to Akira Yoshino [1]."), judge,
                  responsive=False).ask(question)  # fmt: skip
    assert all(not c.other_facts and not c.value_failures for c in right.claims)


def test_without_the_question_a_value_anywhere_in_the_evidence_counts():
    # the old reading, kept where no question is given (e.g. verifying a free text)
    assert ground_values("It reaches full charge in 35 minutes.", [CHARGER]).grounded
    tied = ground_values("It reaches full charge in 35 minutes.", [CHARGER], given=CHARGE_Q, tie_to_question=True)
    assert not tied.grounded and "stated about something else" in tied.explain()


def test_a_tied_value_records_what_the_evidence_states_for_the_asked_fact_and_where():
    # the value the sentence about the charge time states, and which of the texts states it: the
    # verify stage names both values and the passage's number from them
    [check] = ground_values("35 minutes", [WALKMAN, CHARGER], given=CHARGE_Q).checks
    assert check.found and check.rival == "90 minutes" and check.rival_in == 1
    assert check.to_dict()["evidence_answer"] == "90 minutes" and check.to_dict()["evidence_index"] == 1
    [right] = ground_values("90 minutes", [WALKMAN, CHARGER], given=CHARGE_Q).checks
    assert not right.other_fact and not right.rival and right.rival_in is None


def test_the_tie_names_the_passage_by_its_number_in_the_evidence():
    from ragsieve.sieve.state import PipelineState
    from ragsieve.sieve.verify import VerifyStage
    from ragsieve.types import Chunk, SearchHit
    from ragsieve.verify import verify_answer

    hits = [SearchHit(Chunk(f"c{i}", t, f"d{i}", f"s{i}"), 1.0, i, {}) for i, t in enumerate((WALKMAN, CHARGER))]
    state = PipelineState(question=CHARGE_Q)
    state.evidence = hits
    judge = LexicalEmbeddingJudge(embedding_weight=0.0)
    for reply in ("The Zephyr X2 battery takes 35 minutes to charge [2].", "It takes 35 minutes to charge."):
        [claim] = verify_answer(reply, hits, judge, question=CHARGE_Q)
        [tie] = claim.other_facts
        said = VerifyStage._tie_statement(state, claim, tie)
        assert said.startswith("the cited passage [2] says 90 minutes for this, and gives 35 minutes only about"), said
