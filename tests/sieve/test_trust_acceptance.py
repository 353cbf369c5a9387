"""The sieve's trust checks end to end through ``Pipeline`` (fake LLMs, hash embedder, keyword
judge): wrong values are refused and the corpus's values accepted, an answer that does not
answer is refused, disagreeing sources are surfaced, and a mirror copy with one changed fact
does not silently win over the gold page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.helpers import HashEmbedder

from ragsieve.config import validate_config
from ragsieve.index import Index
from ragsieve.llm.base import ContinuationScore, Generation
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.verify import LexicalEmbeddingJudge

MEISSNER = (
    "The Meissner effect is the expulsion of a magnetic field from a superconductor during its transition. "
    "Walther Meissner and Robert Ochsenfeld discovered it in 1933 by measuring the field outside tin and lead samples."
)
MERCURY = (
    "In 1911 Heike Kamerlingh Onnes found that the electrical resistance of mercury vanished "
    "when the metal was cooled to 4.2 kelvin with liquid helium."
)
ASN1 = (
    "The function d2i_ASN1_OBJECT decodes a DER-encoded ASN.1 object identifier into a structure. "
    "Its counterpart i2d_ASN1_OBJECT encodes one."
)
BREAD = "Sourdough bread rises because wild yeast and lactic acid bacteria ferment the dough."


class FakeLLM:
    """Answers with ``reply(question, passages)``: ``passages`` are the numbered evidence texts of
    the answer prompt. Records every prompt."""

    model_name = "fake"

    def __init__(self, reply) -> None:
        self.reply = reply
        self.prompts: list = []

    def warm_up(self) -> None:
        pass

    def generate(self, prompt, *, max_tokens=256, temperature=0.0, stop=None, seed=None) -> Generation:
        self.prompts.append(prompt)
        user = prompt[-1]["content"]
        passages = re.findall(r"^\[(\d+)\] (.*)$", user, flags=re.MULTILINE)
        question = user.split("Question:", 1)[-1].strip().splitlines()[0]
        return Generation(self.reply(question, [t for _, t in passages]), 100, 10, "stop")

    def generate_json(self, prompt, schema, *, max_tokens=256):
        raise NotImplementedError

    def continuation_logprobs(self, prompt, continuations):
        return [ContinuationScore(0.0, 1) for _ in continuations]

    def next_token_logprobs(self, prompt, candidates):
        return [0.0 for _ in candidates]

    def count_tokens(self, text):
        return len(text.split())

    def to_dict(self):
        return {"backend": "fake"}


def fixed(text: str) -> FakeLLM:
    return FakeLLM(lambda question, passages: text)


def first_passage_sentence(question: str, passages: list[str]) -> str:
    """An extractive model: the last sentence of passage [1], cited."""
    sentence = re.split(r"(?<=\.)\s+", passages[0].strip())[-1].rstrip(".")
    return f"{sentence} [1]."


class KeywordJudge:
    """Relevant when a passage has a ``relevant`` word, ambiguous with an ``ambiguous`` word."""

    name = "keyword"
    upper = 0.6
    lower = 0.3

    def __init__(self, relevant: tuple[str, ...] = (), ambiguous: tuple[str, ...] = ()) -> None:
        self.relevant, self.ambiguous = relevant, ambiguous

    def warm_up(self) -> None:
        pass

    def score(self, question, passages):
        out = []
        for p in passages:
            low = p.lower()
            out.append(
                0.9 if any(w in low for w in self.relevant) else 0.45 if any(w in low for w in self.ambiguous) else 0.1
            )
        return out


def build_index(root: Path, docs: dict[str, str]) -> Index:
    corpus = root / "corpus"
    for rel, text in docs.items():
        path = corpus / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return Index.build(corpus, root / "idx", embedder=HashEmbedder())


def sieve(index: Index, llm: FakeLLM, judge: KeywordJudge, reader: str = "rules", **sieve_options) -> Pipeline:
    # the checks' own verdicts, each withdrawal a veto (without the decide stage, which weighs
    # them instead: tests/sieve/test_decide.py); ``reader``: how the checks read passages
    # ([reading] reader: "rules" or the extractive reader, "minilm")
    data = {"sieve": {"need": "always", "route": "all", **sieve_options}, "ablate": ["decide"],
            "reading": {"reader": reader}}  # fmt: skip
    return Pipeline(
        validate_config(data),
        index=index,
        llm=llm,
        judge=judge,
        claim_judge=LexicalEmbeddingJudge(embedding_weight=0.0),
    )


@pytest.fixture(scope="module")
def facts(tmp_path_factory) -> Index:
    root = tmp_path_factory.mktemp("facts")
    return build_index(
        root,
        {
            "physics/meissner.txt": MEISSNER,
            "physics/mercury.txt": MERCURY,
            "software/asn1.txt": ASN1,
            "food/bread.txt": BREAD,
        },
    )


# ----------------------------------------------------------------------------- value grounding
CASES = [
    # (question, judge keyword, wrong answer, wrong value, right answer)
    (
        "When was the Meissner effect discovered, and by whom?",
        "meissner",
        "Walther Meissner and Robert Ochsenfeld discovered it in 1912 [1].",
        "1912",
        "Walther Meissner and Robert Ochsenfeld discovered it in 1933 [1].",
    ),
    (
        "At what temperature did the resistance of mercury vanish?",
        "mercury",
        "The resistance of mercury vanished at 4.2 kelvin, which is about 1.875 Kelvin [1].",
        "1.875 Kelvin",
        "The resistance of mercury vanished at 4.2 kelvin [1].",
    ),
    (
        "Which function decodes a DER-encoded ASN.1 object identifier?",
        "asn.1",
        "The function ASN1_DEN decodes a DER-encoded ASN.1 object identifier [1].",
        "ASN1_DEN",
        "The function d2i_ASN1_OBJECT decodes a DER-encoded ASN.1 object identifier [1].",
    ),
]


@pytest.mark.parametrize("question, keyword, wrong, value, right", CASES)
def test_a_wrong_value_is_refused_and_the_corpus_value_accepted(facts, question, keyword, wrong, value, right):
    judge = KeywordJudge(relevant=(keyword,))
    refused = sieve(facts, fixed(wrong), judge).ask(question)
    assert refused.abstained and value not in refused.text
    accepted = sieve(facts, fixed(right), judge).ask(question)
    assert not accepted.abstained and accepted.text == right
    assert all(c.supported and not c.value_failures for c in accepted.claims)


@pytest.mark.parametrize("question, keyword, wrong, value, right", CASES)
def test_the_verify_record_names_the_failed_value_and_what_the_evidence_says(
    facts, question, keyword, wrong, value, right
):
    # responsiveness off, so the verify stage itself judges the wrong sentence
    ans = sieve(facts, fixed(wrong), KeywordJudge(relevant=(keyword,)), responsive=False).ask(question)
    # unsupported, or contradicted where the passage answers the question with another value
    # (the contradiction's withdrawal then names the draft's value)
    assert ans.abstained and ("none of 1" in ans.abstain_reason or f", not {value}," in ans.abstain_reason)
    record = next(e for e in ans.trace.stage("verify") if "sentence" in e)
    assert record["supported"] is False and record["values_checked"] >= 1
    assert [f["text"] for f in record["value_failures"]] == [value]
    assert record["evidence_values"], "the evidence's own values are recorded"
    json.dumps(ans.to_dict())


def test_value_grounding_can_be_switched_off(facts):
    question, keyword, wrong, _, _ = CASES[0]
    ans = sieve(facts, fixed(wrong), KeywordJudge(relevant=(keyword,)), responsive=False, value_grounding=False).ask(
        question
    )
    # the judge alone scores the copied sentence as supported: the failure the check exists for
    assert not ans.abstained and ans.claims[0].values_checked is None


# ----------------------------------------------------------------------------- responsiveness
MEISSNER_Q = CASES[0][0]


@pytest.mark.parametrize(
    "reply, reasons",
    [
        ("Evidence: [1] " + MEISSNER, {"pasted_passage"}),
        ("The Meissner effect was discovered, and discovered by whom [1].", {"restated_question"}),
        # cleanup drops the echoed question; what is left names no date or person
        (MEISSNER_Q + " It was discovered [1].", {"restated_question", "wrong_kind"}),
    ],
)
def test_a_pasted_passage_or_a_restated_question_is_not_an_answer(facts, reply, reasons):
    llm = fixed(reply)
    # without the answer extracted from a pasted passage (test_a_pasted_passage_is_answered_from_its_sentence)
    ans = sieve(facts, llm, KeywordJudge(relevant=("meissner",)), extract_on_paste=False).ask(MEISSNER_Q)
    assert ans.abstained and ans.abstain_reason.removeprefix("responsive: ") in reasons
    checks = ans.trace.stage("responsive")
    assert [c["attempt"] for c in checks] == [0, 1] and {c["reason"] for c in checks} <= reasons
    assert len(llm.prompts) == 2  # regenerated once, with an instruction naming what was wrong
    assert llm.prompts[1][-1]["content"] != llm.prompts[0][-1]["content"]
    # the abstention says what the evidence covers and quotes no passage
    assert "covers" in ans.text and MEISSNER[:40] not in ans.text


def test_a_pasted_passage_is_answered_from_its_sentence(facts):
    llm = fixed("Evidence: [1] " + MEISSNER)
    ans = sieve(facts, llm, KeywordJudge(relevant=("meissner",))).ask(MEISSNER_Q)
    sentence = MEISSNER.split(". ", 1)[1].removesuffix(".")
    assert not ans.abstained and ans.text == sentence + " [1]." and ans.cited_ids == ["physics/meissner.txt:0"]
    assert [c["attempt"] for c in ans.trace.stage("responsive")] == [0, 1, "extracted"]
    assert len(llm.prompts) == 2 and [c.supported for c in ans.claims] == [True]


def test_a_retry_that_answers_is_accepted(facts):
    replies = iter(["Evidence: [1] " + MEISSNER, CASES[0][4]])
    ans = sieve(facts, FakeLLM(lambda q, p: next(replies)), KeywordJudge(relevant=("meissner",))).ask(MEISSNER_Q)
    assert not ans.abstained and ans.text == CASES[0][4]
    assert [c["ok"] for c in ans.trace.stage("responsive")] == [False, True]


def test_cleanup_removes_the_models_answer_label(facts):
    ans = sieve(facts, fixed("The answer is: " + CASES[0][4]), KeywordJudge(relevant=("meissner",))).ask(MEISSNER_Q)
    assert not ans.abstained and ans.text == CASES[0][4]
    assert ans.trace.stage("generate")[0]["cleanup"]


# ----------------------------------------------------------------------------- conflicting sources
BRIDGE_Q = "When did the Kessel Bridge open?"
BRIDGE_DOCS = {
    "site-a.example/kessel-bridge.txt": "The Kessel Bridge carries the coast road over the Varn estuary. "
    "The Kessel Bridge opened in 1931, after four years of construction.",
    "site-b.example/kessel-bridge.txt": "Local history notes that the steel arch was finished late. "
    "The Kessel Bridge opened to traffic in 1947 once the wartime repairs were done.",
    "site-a.example/varn.txt": "The Varn estuary is a tidal inlet known for its salt marshes and wading birds.",
}


@pytest.fixture(scope="module")
def bridge(tmp_path_factory) -> Index:
    return build_index(tmp_path_factory.mktemp("bridge"), BRIDGE_DOCS)


@pytest.mark.parametrize("select, k", [("scope-coe", 5), ("top-k", 1)])
def test_two_sites_that_disagree_yield_both_years_and_a_conflict_record(bridge, select, k):
    judge = KeywordJudge(relevant=("kessel",), ambiguous=("varn",))
    pipe = sieve(bridge, FakeLLM(first_passage_sentence), judge, select=select)
    ans = pipe.ask(BRIDGE_Q, k=k)
    assert not ans.abstained
    assert "1931" in ans.text and "1947" in ans.text and "disagree" in ans.text
    assert {"site-a.example/kessel-bridge.txt:0", "site-b.example/kessel-bridge.txt:0"} <= {
        h.chunk.id for h in ans.evidence
    }  # selection kept both sides
    record = ans.trace.stage("conflict")[0]
    assert record["conflict"] is True and record["decision"] == "both"
    groups = {g["answer"]: g for g in record["groups"]}
    assert set(groups) == {"1931", "1947"}
    assert groups["1931"]["sources"][0]["source"] == "site-a.example/kessel-bridge.txt"
    # the citations in the statement point at the evidence as numbered for the answer
    for year, site in (("1931", "site-a"), ("1947", "site-b")):
        n = int(re.search(rf"{year} \({site}\S* \[(\d)\]", ans.text).group(1))
        assert ans.evidence[n - 1].chunk.source.startswith(site)


def test_conflict_policy_abstain_declines_with_the_disagreement(bridge):
    llm = FakeLLM(first_passage_sentence)
    ans = sieve(bridge, llm, KeywordJudge(relevant=("kessel",)), conflict="abstain").ask(BRIDGE_Q)
    assert ans.abstained and ans.abstain_reason.startswith("conflict:")
    assert "1931" in ans.text and "1947" in ans.text and llm.prompts == []


@pytest.mark.parametrize(
    "reply",
    [
        "I don't know.",  # the model declines
        "The Kessel Bridge carries the coast road over the Varn estuary [1].",  # not a year
        "The Kessel Bridge opened in 1950 [1].",  # a year neither source gives
    ],
)
def test_an_abstention_on_disagreeing_sources_names_both_sides(bridge, reply):
    ans = sieve(bridge, fixed(reply), KeywordJudge(relevant=("kessel",), ambiguous=("varn",))).ask(BRIDGE_Q)
    assert ans.abstained
    assert ans.trace.stage("conflict")[0]["conflict"] is True
    # not "the evidence does not state a year": it states two, from two sites
    assert "does not state" not in ans.text and "1950" not in ans.text
    assert re.search(r"The sources disagree: 1931 \(site-a\S*\) vs 1947 \(site-b\S*\)\.", ans.text), ans.text
    assert "[" not in ans.text  # an abstention cites nothing


def test_an_abstention_without_a_conflict_says_what_the_evidence_covers(bridge):
    ans = sieve(bridge, fixed("I don't know."), KeywordJudge(relevant=("varn",))).ask(
        "When did the Varn estuary flood?"
    )
    assert ans.abstained and "disagree" not in ans.text and "it covers" in ans.text


def test_off_topic_passages_are_not_compared(bridge):
    # the judge scores the 1947 site below its lower threshold: an entity rescue would keep it,
    # but it creates no conflict
    ans = sieve(bridge, FakeLLM(first_passage_sentence), KeywordJudge(relevant=("coast",))).ask(BRIDGE_Q)
    record = ans.trace.stage("conflict")[0] if ans.trace.stage("conflict") else None
    assert record is None or record["conflict"] is False


# ----------------------------------------------------------------------------- mirror copies
GOLD = (
    "The Kessel Bridge is a steel arch bridge that carries the coast road across the Varn estuary near the old "
    "fishing harbour of Lindholm. Designed by the engineer Marta Aalto, it replaced a chain ferry that had "
    "crossed the estuary since the eighteenth century, and its central span of 180 metres was the longest in "
    "the region for three decades. The Kessel Bridge opened in 1931 and was widened in the sixties."
)
MIRROR = GOLD.replace("opened in 1931", "opened in 1947")


@pytest.fixture()
def mirrored(tmp_path) -> Index:
    return build_index(
        tmp_path,
        {
            "gold.example/kessel.txt": GOLD,
            "mirror-one.example/kessel.txt": MIRROR,
            "mirror-two.example/kessel.txt": MIRROR,
        },
    )


def test_a_mirror_copy_with_one_changed_fact_does_not_silently_win(mirrored):
    ans = sieve(mirrored, FakeLLM(first_passage_sentence), KeywordJudge(relevant=("kessel",))).ask(BRIDGE_Q)
    assert not ans.abstained and "1931" in ans.text and "1947" in ans.text
    record = ans.trace.stage("conflict")[0]
    groups = {g["answer"]: g for g in record["groups"]}
    assert record["decision"] == "both" and set(groups) == {"1931", "1947"}
    # the mirror copies are one source, however many hosts carry them
    assert groups["1947"]["independent_sources"] == 1 and groups["1931"]["independent_sources"] == 1
    poison = {d["id"]: d for d in ans.trace.decisions if d["check"] == "poison"}
    gold = poison["gold.example/kessel.txt:0"]
    assert gold["verdict"] != "dropped"  # the near-copy with other values is not deduplicated away


def test_learned_source_weights_decide_under_trusted(mirrored):
    mirrored.source_weights = {
        "gold.example/kessel.txt": 1.0,
        "mirror-one.example/kessel.txt": 0.2,
        "mirror-two.example/kessel.txt": 0.2,
    }
    ans = sieve(mirrored, FakeLLM(first_passage_sentence), KeywordJudge(relevant=("kessel",)), conflict="trusted").ask(
        BRIDGE_Q
    )
    assert not ans.abstained and "1931" in ans.text and "1947" not in ans.text
    assert [h.chunk.source for h in ans.evidence] == ["gold.example/kessel.txt"]
    # the judge weighs relevance by the learned weights, so the distrusted copies are dropped
    # there (saying so) and the conflict stage is left with the trusted source's answer
    judged = {d["id"]: d for d in ans.trace.decisions if d["check"] == "judge"}
    for mirror in ("mirror-one.example/kessel.txt:0", "mirror-two.example/kessel.txt:0"):
        assert judged[mirror]["verdict"] == "dropped" and "source weight 0.20" in judged[mirror]["reason"]
    record = ans.trace.stage("conflict")[0]
    assert record["decision"] == "consistent" and [g["answer"] for g in record["groups"]] == ["1931"]


def test_trusted_without_decisive_weights_gives_both(mirrored):
    ans = sieve(mirrored, FakeLLM(first_passage_sentence), KeywordJudge(relevant=("kessel",)), conflict="trusted").ask(
        BRIDGE_Q
    )
    assert "1931" in ans.text and "1947" in ans.text
    assert ans.trace.stage("conflict")[0]["decision"] == "both"


# ----------------------------------------------------------------------------- one document, two values
FILLER = (
    "The estuary road was rebuilt several times, and the harbour board kept careful minutes of every meeting "
    "about tolls, lighting, paint, repairs, ferries, storms and the traffic of carts, buses and lorries. "
)
ONE_FILE = {
    "history/kessel-bridge.txt": "The Kessel Bridge opened in 1931 as a road bridge over the Varn estuary. "
    + FILLER * 6
    + "\n\nThe railway deck under the road was added later: the Kessel Bridge opened to trains in 1947. "
    + FILLER * 6,
}


def test_two_values_inside_one_ingested_document_are_not_a_conflict(tmp_path):
    index = build_index(tmp_path, ONE_FILE)
    chunks = [c for c in index.chunks if c.doc_id == "history/kessel-bridge.txt"]
    assert len(chunks) >= 2  # the two years lie in different chunks of the one file
    pipe = sieve(index, FakeLLM(first_passage_sentence), KeywordJudge(relevant=("kessel",)), conflict="abstain")
    ans = pipe.ask(BRIDGE_Q)
    record = ans.trace.stage("conflict")[0]
    assert sorted(g["answer"] for g in record["groups"]) == ["1931", "1947"]
    assert record["decision"] == "one-document" and record["conflict"] is False
    assert not (ans.abstained and (ans.abstain_reason or "").startswith("conflict:"))
    # no passage is flagged as one side of a disagreement
    assert not [d for d in ans.trace.decisions if d["check"] == "conflict"]
