"""Cases a new user met on the demo corpus and a PDF manual, through ``Pipeline`` with a
deterministic fake LLM, the hash embedder and the bundled decision model: a right draft whose
wording differs from the evidence is kept ("Sony Corporation" for "Sony", "694 nanometers" for
"694 nanometres"), a wrong name the passage mentions for another prize is not accepted with high
confidence, and the minimal cover keeps the page that states the value asked for. Each case runs with
the passages read by the rules and by the shipped extractive reader (``[reading] reader``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.helpers import HashEmbedder
from tests.sieve.test_trust_acceptance import FakeLLM, KeywordJudge

from ragsieve.config import validate_config
from ragsieve.demo import demo_corpus_dir
from ragsieve.index import Index
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.types import Chunk, SearchHit, Trace
from ragsieve.verify import LexicalEmbeddingJudge

DEMO_DOCS = (
    "chemistry/019-lithium-ion-batteries.md",
    "physics/036-laser.md",
    "nanoscience/002-plenty-of-room-at-the-bottom.md",
)


@pytest.fixture(params=["rules", pytest.param("minilm", marks=pytest.mark.slow)])
def reader(request: pytest.FixtureRequest) -> str:
    """How the checks read passages: the rules, or the shipped extractive reader (a real model)."""
    return str(request.param)


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("regressions")
    corpus = root / "corpus"
    for rel in DEMO_DOCS:
        target = corpus / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((demo_corpus_dir() / rel).read_text(encoding="utf-8"), encoding="utf-8")
    return Index.build(corpus, root / "idx", embedder=HashEmbedder())


def sieve(index: Index, reply: str, relevant: tuple[str, ...], **config: object) -> Pipeline:
    cfg = validate_config({"sieve": {"need": "always", "route": "all"}, **config})
    return Pipeline(cfg, index=index, llm=FakeLLM(lambda q, passages: reply), judge=KeywordJudge(relevant=relevant),
                    claim_judge=LexicalEmbeddingJudge(embedding_weight=0.0))  # fmt: skip


@pytest.mark.parametrize(
    "question, reply, relevant",
    [
        ("Which company commercialised the lithium-ion battery?", "Sony Corporation [1].", ("sony",)),
        ("At what wavelength did the first working laser emit light?", "694 nanometers [1].", ("694",)),
    ],
)
def test_a_right_draft_worded_unlike_the_evidence_is_kept(
    demo_index: Index, question: str, reply: str, relevant: tuple[str, ...], reader: str
) -> None:
    ans = sieve(demo_index, reply, relevant, reading={"reader": reader}).ask(question)
    assert not ans.abstained, ans.abstain_reason
    assert ans.text == reply  # the draft as written, not a replacement
    assert ans.trace.stage("decide")[-1]["draft"] == reply


def test_a_wrong_name_from_the_same_passage_is_not_accepted_with_high_confidence(
    demo_index: Index, reader: str
) -> None:
    # the passage gives William McLellan the motor prize and Tom Newman the text prize
    question = "Who claimed Feynman's prize for a working electric motor only 1/64 inch on each side?"
    ans = sieve(demo_index, "Tom Newman [1].", ("feynman", "mclellan"), reading={"reader": reader}).ask(question)
    assert ans.abstained or (ans.confidence is not None and ans.confidence < 0.5), ans.confidence


# ---------------------------------------------------------------------------- selection
MANUAL = {
    1: "Conveyor belt drive, overview. Check the belt tension and the belt alignment before first use; "
       "the tension adjuster sits on the left frame.",
    2: "Belt tension specification. The belt tension is 450 N, measured at mid-span with the drive stopped.",
    3: "Maintenance. Replace the belt every 2000 operating hours and clean the rollers monthly.",
}  # fmt: skip
BELT_Q = "What is the belt tension?"


@pytest.fixture(scope="module")
def manual_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    chunks = [
        Chunk(id=f"manual.pdf:p{page}", text=text, doc_id="manual.pdf", source="manual.pdf", title="Drive manual")
        for page, text in MANUAL.items()
    ]
    return Index.from_chunks(chunks, tmp_path_factory.mktemp("manual") / "idx", embedder=HashEmbedder())


class FirstPageCover:
    """A minimal cover that, like the one the user met, keeps page 1 only."""

    def select(self, query: str, hits: Sequence[SearchHit], trace: Trace | None = None) -> list[SearchHit]:
        return [h for h in hits if h.chunk.id.endswith("p1")]


def belt_pipeline(index: Index, reader: str = "rules") -> Pipeline:
    return sieve(index, "The belt tension is 450 N [1].", ("belt",), sieve={"need": "always", "route": "all",
                                                                          "select": "scope-coe"},
                 reading={"reader": reader})  # fmt: skip


def test_the_cover_keeps_the_page_that_states_the_value_asked_for(manual_index: Index, reader: str) -> None:
    pipe = belt_pipeline(manual_index, reader)
    select = next(s for s in pipe.stages if s.name == "select")
    select.selectors.built["scope-coe"] = FirstPageCover()  # type: ignore[attr-defined]
    ans = pipe.ask(BELT_Q)
    kept = [h.chunk.id for h in ans.evidence]
    assert "manual.pdf:p2" in kept and "manual.pdf:p1" in kept
    decisions = {d["id"]: d for d in ans.trace.decisions if d["check"] == "select"}
    assert decisions["manual.pdf:p2"]["verdict"] == "kept"
    assert "stating the kind of value asked for" in decisions["manual.pdf:p2"]["reason"]
    assert decisions["manual.pdf:p3"]["verdict"] == "dropped"


def test_the_real_cover_keeps_the_page_that_states_the_value(manual_index: Index, reader: str) -> None:
    ans = belt_pipeline(manual_index, reader).ask(BELT_Q)
    assert "manual.pdf:p2" in [h.chunk.id for h in ans.evidence]


def test_without_scope_coe_nothing_is_added(manual_index: Index, tmp_path: Path) -> None:
    pipe = sieve(manual_index, "The belt tension is 450 N [1].", ("belt",),
                 sieve={"need": "always", "route": "all", "select": "top-k"}, retrieval={"k": 1})  # fmt: skip
    assert len(pipe.ask(BELT_Q).evidence) == 1
