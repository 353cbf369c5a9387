"""An answer never contradicts its own evidence: drafts a new user met on the demo corpus, through
``Pipeline`` with a deterministic fake LLM, the hash embedder and the bundled decision model. The
cited passage gives the year (1999) or the person (Neil Bartlett) the question asks for and the
draft states another (2014; Lord Rayleigh and William Ramsay, whom the passage names for argon):
the draft is withdrawn naming both values, or a name is answered with the passage's sentence that
states it. A drafted year the passage gives only about another fact (1931, when Kistler made the
first aerogels; the passage says 1999 for the first space mission) is the value tie's: a caveat
naming both values, withdrawn where it is a veto. A right draft is kept."""

from __future__ import annotations

import pytest
from tests.helpers import HashEmbedder
from tests.sieve.test_trust_acceptance import FakeLLM, KeywordJudge

from ragsieve.config import validate_config
from ragsieve.demo import demo_corpus_dir
from ragsieve.index import Index
from ragsieve.options import DEFAULT_VETOES
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.types import Answer
from ragsieve.verify import LexicalEmbeddingJudge
from ragsieve.verify.grounding import find_contradiction

DEMO_DOCS = ("nanoscience/046-aerogels.txt", "chemistry/042-noble-gases.md", "physics/036-laser.md")
AEROGEL_Q = "When was silica aerogel first used on a space mission?"
NOBLE_Q = "Who made the first noble gas compound?"


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("contradictions")
    corpus = root / "corpus"
    for rel in DEMO_DOCS:
        target = corpus / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((demo_corpus_dir() / rel).read_text(encoding="utf-8"), encoding="utf-8")
    return Index.build(corpus, root / "idx", embedder=HashEmbedder())


def ask(index: Index, question: str, reply: str, relevant: tuple[str, ...], **config: object) -> Answer:
    cfg = validate_config({"stages": {"need": {"mode": "always"}, "route": {"domain": "all"}}, **config})
    pipe = Pipeline(cfg, index=index, llm=FakeLLM(lambda q, passages: reply), judge=KeywordJudge(relevant=relevant),
                    claim_judge=LexicalEmbeddingJudge(embedding_weight=0.0))  # fmt: skip
    return pipe.ask(question)


def contradictions(ans: Answer) -> list[dict[str, object]]:
    return [r for r in ans.trace.stage("verify") if "contradiction" in r]


def caveat(ans: Answer) -> str:
    records = ans.trace.stage("decide")
    return str(records[-1].get("caveat") or "") if records else ""


def test_the_aerogel_year_is_withdrawn_naming_both_values_as_a_veto(demo_index: Index) -> None:
    draft = "NASA's Stardust mission, launched in 2014 [1]."
    ans = ask(demo_index, AEROGEL_Q, draft, ("aerogel",), decide={"vetoes": ["contradiction"]})
    assert ans.abstained
    assert ans.abstain_reason is not None
    assert "says 1999, not 2014" in ans.abstain_reason
    assert "1999" in ans.text and "2014" in ans.text
    (record,) = contradictions(ans)
    assert record["vetoed"] is True and record["contradiction"]["family"] == "numeric"  # type: ignore[index]


def test_the_aerogel_year_by_default(demo_index: Index) -> None:
    """Withdrawn when the measured precision made numeric contradictions a default veto; else
    answered with a caveat that names both values."""
    ans = ask(demo_index, AEROGEL_Q, "NASA's Stardust mission, launched in 2014 [1].", ("aerogel",))
    assert contradictions(ans)
    if "contradiction.numeric" in DEFAULT_VETOES or "contradiction" in DEFAULT_VETOES:
        assert ans.abstained and "says 1999, not 2014" in (ans.abstain_reason or "")
    elif ans.abstained:
        assert "says 1999, not 2014" in (ans.abstain_reason or "")
    else:
        assert "says 1999, not 2014" in caveat(ans)


def test_the_noble_gas_name_is_answered_with_the_evidence_s_name_as_a_veto(demo_index: Index) -> None:
    draft = "Lord Rayleigh and William Ramsay [1]."
    ans = ask(demo_index, NOBLE_Q, draft, ("noble",), decide={"vetoes": ["contradiction"]})
    (record, *_) = contradictions(ans)
    assert record["contradiction"]["evidence"] == "Neil Bartlett"  # type: ignore[index]
    assert record["contradiction"]["draft"] == "Lord Rayleigh and William Ramsay"  # type: ignore[index]
    if ans.abstained:
        assert "says Neil Bartlett, not Lord Rayleigh and William Ramsay" in (ans.abstain_reason or "")
    else:
        assert "Neil Bartlett" in ans.text and "Rayleigh" not in ans.text
        assert any(r.get("replaced") == draft for r in ans.trace.stage("verify"))


def test_the_noble_gas_name_without_a_veto_is_a_caveat_naming_both(demo_index: Index) -> None:
    ans = ask(demo_index, NOBLE_Q, "Lord Rayleigh and William Ramsay [1].", ("noble",), decide={"vetoes": []})
    assert contradictions(ans)
    said = ans.abstain_reason if ans.abstained else caveat(ans)
    assert "the cited passage [" in (said or "")
    assert "says Neil Bartlett, not Lord Rayleigh and William Ramsay" in (said or "")


@pytest.mark.parametrize(
    "question, reply, relevant",
    [
        (AEROGEL_Q, "NASA's Stardust mission, launched in 1999 [1].", ("aerogel",)),
        (NOBLE_Q, "Neil Bartlett [1].", ("noble",)),
    ],
)
def test_a_right_draft_is_not_withdrawn(
    demo_index: Index, question: str, reply: str, relevant: tuple[str, ...]
) -> None:
    ans = ask(demo_index, question, reply, relevant, decide={"vetoes": ["contradiction"]})
    assert not contradictions(ans)
    assert ans.trace.stage("decide")[-1]["signals"].get("verify.contradiction") == 0.0
    assert not ans.abstained or "contradict" not in (ans.abstain_reason or "")


def test_the_reason_says_what_the_evidence_says_in_one_sentence() -> None:
    evidence = ["The Kessel Bridge was completed in 1931 after four years of work."]
    found = find_contradiction("When was the Kessel Bridge completed?", "It was completed in 1947 [1].", evidence)
    assert found is not None
    assert found.explain() == "the cited passage [1] says 1931, not 1947"
    assert found.family == "numeric"
    # a value the question states is not the draft's answer; a draft stating the passage's value agrees
    assert find_contradiction("When was the Kessel Bridge completed?", "In 1931 [1].", evidence) is None
    assert find_contradiction("Who wrote Hamlet?", "It was completed in 1947.", evidence) is None


ELSEWHERE_YEAR = "1931 [1]."  # what the bundled model drafts for the aerogel question
TIE_SAYS = "the cited passage [1] says 1999 for this, and gives 1931 only about"


def test_a_year_the_passage_gives_about_another_fact_names_both_values_by_default(demo_index: Index) -> None:
    """Withdrawn by default when the tie's measured precision made it a default veto; otherwise
    answered with a caveat (or, below the decide stage's threshold, withdrawn) naming both values."""
    ans = ask(demo_index, AEROGEL_Q, ELSEWHERE_YEAR, ("aerogel",))
    assert not contradictions(ans)  # the passage states 1931: the tie's case, not the contradiction's
    [tie] = [f for c in ans.claims for f in c.other_facts]
    assert tie["text"] == "1931" and tie["evidence_answer"] == "1999" and "Kistler" in tie["other_fact"]
    assert ans.trace.stage("decide")[-1]["signals"]["verify.value_other_fact"] == 1.0
    said = (ans.abstain_reason if ans.abstained else caveat(ans)) or ""
    assert TIE_SAYS in said and "Kistler" in said
    if "value_tie" in DEFAULT_VETOES:
        assert ans.abstained
    elif not ans.abstained:
        assert "1931" in ans.text and ans.trace.stage("decide")[-1]["decision"] == "caveat"


def test_a_year_the_passage_gives_about_another_fact_is_withdrawn_as_a_veto(demo_index: Index) -> None:
    ans = ask(demo_index, AEROGEL_Q, ELSEWHERE_YEAR, ("aerogel",), decide={"vetoes": ["contradiction", "value_tie"]})
    assert ans.abstained and TIE_SAYS in (ans.abstain_reason or "")
    assert ans.text.startswith(f"I can't give the draft answer 1931: {TIE_SAYS}")


@pytest.mark.parametrize("vetoes", [None, ["contradiction", "value_tie"]])
def test_the_right_year_is_not_tied(demo_index: Index, vetoes: list[str] | None) -> None:
    config = {} if vetoes is None else {"decide": {"vetoes": vetoes}}
    ans = ask(demo_index, AEROGEL_Q, "1999 [1].", ("aerogel",), **config)
    assert all(not c.other_facts for c in ans.claims) and not contradictions(ans)
    decided = ans.trace.stage("decide")[-1]
    assert decided["signals"]["verify.value_other_fact"] == 0.0 and decided["withdrawal"] is None
    assert not ans.abstained and "1999" in ans.text
