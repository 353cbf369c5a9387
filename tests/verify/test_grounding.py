"""Value grounding in verification: wrong years, converted units and invented identifiers are
refused whatever the overlap score; the same sentences with the evidence's values are accepted."""

from __future__ import annotations

from tests.helpers import HashEmbedder

from ragsieve.types import Chunk, SearchHit
from ragsieve.verify import LexicalEmbeddingJudge, verify_answer
from ragsieve.verify.grounding import apply_grounding, ground_values

MEISSNER = (
    "The Meissner effect is the expulsion of a magnetic field from the interior of a material as it becomes "
    "superconducting. Walther Meissner and Robert Ochsenfeld discovered it in 1933. The effect shows that a "
    "superconductor is more than a perfect conductor."
)
MERCURY = (
    "Heike Kamerlingh Onnes discovered it in 1911 in Leiden, when mercury cooled with liquid helium lost all "
    "resistance at about 4.2 kelvin."
)
# The table of contents of a PDF manual, as a chunker cuts it.
TOC = (
    "Contents 1 Introduction .......... 3 2 Encoding rules .......... 5 2.1 ASN1_item_d2i and ASN1_item_i2d "
    ".......... 7 2.2 d2i_X509 .......... 9 2.3 BIO_new_mem_buf .......... 11 3 Error handling .......... 14"
)


def judge() -> LexicalEmbeddingJudge:
    return LexicalEmbeddingJudge(embedder=HashEmbedder(), embedding_weight=0.5)


def hit(cid: str, text: str) -> SearchHit:
    return SearchHit(Chunk(id=cid, text=text, doc_id=cid, source="s"), 1.0, 1, {})


def test_wrong_year_is_refused_and_names_both_years() -> None:
    wrong = "Walther Meissner and Robert Ochsenfeld discovered it in 1912 [1]."
    [v] = verify_answer(wrong, [hit("meissner", MEISSNER)], judge())
    assert not v.supported
    [failure] = v.value_failures
    assert failure["text"] == "1912" and failure["evidence_says"]["text"] == "1933"
    assert {"kind": "date", "text": "1933", "norm": "1933"} in v.evidence_values
    assert v.score < 0.5
    # the judge alone passes it: the check adds to the judge
    [plain] = verify_answer(wrong, [hit("meissner", MEISSNER)], judge(), value_grounding=False)
    assert plain.supported and plain.values_checked is None and plain.value_failures == []
    [right] = verify_answer(wrong.replace("1912", "1933"), [hit("meissner", MEISSNER)], judge())
    assert right.supported and right.values_checked == 3 and right.value_failures == []


def test_name_variants_and_swapped_names() -> None:
    assert ground_values("W. Meissner and R. Ochsenfeld found it in 1933.", MEISSNER).grounded
    assert ground_values("WALTHER MEIßNER found it.", MEISSNER.replace("Meissner", "Meißner")).grounded
    swapped = ground_values("Walther Ochsenfeld found it in 1933.", MEISSNER)
    assert [c.value.text for c in swapped.failed] == ["Walther Ochsenfeld"]
    assert swapped.failed[0].nearest is not None


def test_converted_unit_error_is_refused_and_the_right_conversion_accepted() -> None:
    ev = [hit("hg", MERCURY)]
    bad = "Mercury lost all resistance at 4.2 kelvin, which is about 1.875 Kelvin [1]."
    [v] = verify_answer(bad, ev, judge())
    assert not v.supported and [f["text"] for f in v.value_failures] == ["1.875 Kelvin"]
    [v_plain] = verify_answer(bad, ev, judge(), value_grounding=False)
    assert v_plain.supported
    good = "Mercury lost all resistance at 4.2 kelvin, which is about −268.95 degrees Celsius [1]."
    [ok] = verify_answer(good, ev, judge())
    assert ok.supported, ok.value_failures
    assert ground_values("It lost resistance at -269 °C.", MERCURY).grounded  # rounded conversion
    assert not ground_values("It lost resistance at -250 °C.", MERCURY).grounded


def test_invented_identifier_is_refused_and_a_real_one_accepted() -> None:
    ev = [hit("toc", TOC)]
    lexical = LexicalEmbeddingJudge(embedding_weight=0.0)
    [bad] = verify_answer("The encoding rules section covers ASN1_DEN[1].", ev, lexical)
    assert verify_answer("The encoding rules section covers ASN1_DEN[1].", ev, lexical, value_grounding=False)[
        0
    ].supported
    assert not bad.supported and bad.value_failures[0]["kind"] == "identifier"
    assert bad.value_failures[0]["evidence_says"]["text"].startswith("ASN1_item")
    [good] = verify_answer("The encoding rules section covers ASN1_item_d2i [1].", ev, lexical)
    assert good.supported, good.value_failures


def test_values_given_by_the_question_need_no_evidence() -> None:
    ev = ["It was discovered in 1933 by two German physicists."]
    sentence = "The Meissner effect was discovered in 1933 [1]."
    assert not verify_answer(sentence, ev, judge())[0].supported
    [v] = verify_answer(sentence, ev, judge(), question="When was the Meissner effect discovered?")
    assert v.supported


def test_uncited_sentences_are_grounded_against_all_evidence_and_values_must_be_in_the_cited_one() -> None:
    ev = ["Frank Herbert wrote Dune.", "Dune appeared in 1965."]
    v1, v2 = verify_answer("Dune appeared in 1965. Herbert wrote Dune in 1965 [1].", ev, judge())
    assert v1.against == "all" and v1.supported
    assert v2.against == "cited" and not v2.supported  # 1965 is in [2], not in the cited [1]


def test_apply_grounding_keeps_a_grounded_verdict_and_caps_a_failed_one() -> None:
    from ragsieve.types import ClaimVerdict

    verdict = ClaimVerdict("Dune appeared in 1999.", ["1"], True, 0.9, "j")
    failed = apply_grounding(verdict, ground_values(verdict.sentence, "Dune appeared in 1965."), 0.5)
    assert not failed.supported and failed.score < 0.5 and failed.value_failures[0]["text"] == "1999"
    assert failed.to_dict()["value_failures"][0]["evidence_says"]["text"] == "1965"
    kept = apply_grounding(verdict, ground_values("It appeared in 1965.", "Dune appeared in 1965."), 0.5)
    assert kept.supported and kept.score == 0.9 and kept.values_checked == 1


def test_a_date_question_ties_a_time_read_as_a_quantity() -> None:
    # "the 10th century" and "300 years ago" are quantities of time to the value reader; asked
    # when, they are dates, and one stated about another fact is marked
    from ragsieve.text.kind import expected_kind

    question = "When was the abbey built?"
    evidence = "The abbey was built in the 10th century. Its library burned down 300 years ago."
    assert expected_kind(question) == "date"
    wrong = ground_values("It was built 300 years ago.", [evidence], given=question, tie_to_question=True)
    assert not wrong.grounded and wrong.failed[0].other_fact == "Its library burned down 300 years ago."
    right = ground_values("It was built in the 10th century.", [evidence], given=question, tie_to_question=True)
    assert right.grounded and all(not c.other_fact for c in right.checks)
