"""What a new user sees of an answer: every sentence cited or said to cite nothing, chunk ids and
pages that cannot be confused, one view of the answer for the terminal, the page and the service,
errors as plain text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.helpers import HashEmbedder, minimal_pdf

from ragsieve import cli
from ragsieve.citations import Citation, format_citation, settle_citations
from ragsieve.config import PipelineConfig
from ragsieve.index import Index
from ragsieve.llm.base import ContinuationScore, Generation
from ragsieve.present import STATUSES, present_answer, present_search
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.types import Answer, Chunk, ClaimVerdict, SearchHit, Trace

FEE = ("returns.md:0", "Opened items can be returned within 30 days. The restocking fee is 60 euros per order.")
SHIPPING = ("shipping.md:0", "Shipping inside the country is free for orders over 50 euros.")


# ---------------------------------------------------------------- citations
def test_a_stray_marker_is_removed_and_the_sentence_gets_its_source() -> None:
    settled = settle_citations("[2] The restocking fee is 60 euros.", [FEE])
    assert settled.removed_markers == [2]
    assert settled.text == "The restocking fee is 60 euros [1]."
    assert settled.cited_ids == ["returns.md:0"]


def test_an_unmarked_sentence_is_cited_by_the_passage_that_states_it() -> None:
    settled = settle_citations("The restocking fee is 60 euros. Shipping is free over 50 euros [2].", [FEE, SHIPPING])
    assert settled.text == "The restocking fee is 60 euros [1]. Shipping is free over 50 euros [2]."
    assert settled.cited_ids == ["returns.md:0", "shipping.md:0"] and settled.uncited == []


def test_a_sentence_no_passage_backs_stays_uncited_and_the_answer_says_so() -> None:
    settled = settle_citations("Marit Voskuil and Daan Oosterhout.", [FEE, SHIPPING])
    assert settled.cited_ids == [] and settled.uncited == ["Marit Voskuil and Daan Oosterhout."]
    hits = [_hit(*FEE), _hit(*SHIPPING)]
    view = present_answer(Answer("Who founded it?", settled.text, hits, settled.cited_ids, Trace("q")))
    assert view.citation_note and "cites no source" in view.citation_note
    assert [s.uncited for s in view.sentences] == [True]
    lines = cli.render_answer(Answer("Who founded it?", settled.text, hits, [], Trace("q")), 80)
    assert any("no source: Marit Voskuil" in line for line in lines)


def test_a_refusal_needs_no_citation_and_valid_text_is_left_alone() -> None:
    assert settle_citations("I don't know.", [FEE]).uncited == []
    text = "1. Opened items\n2. 60 euros [1]"
    assert settle_citations(text, [FEE]).text == text  # nothing to change: formatting kept


def test_a_pdf_page_citation_cannot_be_read_as_a_chunk_id() -> None:
    chunk = Chunk(id="manual.pdf:1", text="t", doc_id="manual.pdf", source="manual.pdf", path="manual.pdf", page=1)
    citation = format_citation(Citation.from_chunk(chunk))
    assert citation == "manual.pdf#page=1" and citation != chunk.id
    labelled = Chunk(id="g.pdf:0", text="t", doc_id="g.pdf", source="g.pdf", path="g.pdf", page=3, page_label="i")
    assert format_citation(Citation.from_chunk(labelled)) == "g.pdf#page=3 (page i)"


class ReplyLLM:
    """A fixed reply; log-probabilities all equal."""

    model_name = "reply"

    def __init__(self, reply: str) -> None:
        self.reply = reply

    def warm_up(self) -> None:
        pass

    def generate(self, prompt: Any, **_: Any) -> Generation:
        return Generation(self.reply, 50, 10, "stop")

    def continuation_logprobs(self, prompt: Any, continuations: Any) -> list[ContinuationScore]:
        return [ContinuationScore(0.0, 1) for _ in continuations]

    def next_token_logprobs(self, prompt: Any, candidates: Any) -> list[float]:
        return [0.0 for _ in candidates]

    def generate_json(self, prompt: Any, schema: Any, **_: Any) -> Any:
        raise NotImplementedError("no check asks for JSON here")

    def perplexity(self, prompt: Any, answer: str) -> float:
        return 1.0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "reply"}


@pytest.fixture(scope="module")
def pdf_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("pdf")
    (root / "corpus").mkdir()
    (root / "corpus" / "belt.pdf").write_bytes(minimal_pdf("The belt tension is 45 newtons on the drive."))
    (root / "corpus" / "returns.md").write_text(FEE[1], encoding="utf-8")
    return Index.build(root / "corpus", root / "idx", embedder=HashEmbedder())


@pytest.mark.parametrize("reply", ["The belt tension is 45 newtons [7].", "The belt tension is 45 newtons."])
def test_pipeline_answers_cite_the_pdf_page(pdf_index: Index, reply: str) -> None:
    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=pdf_index, llm=ReplyLLM(reply))
    answer = pipe.ask("What is the belt tension?", k=2)
    assert "[7]" not in answer.text and "belt.pdf:0" in answer.cited_ids
    assert answer.text.startswith("The belt tension is 45 newtons")  # the model's words, unchanged
    n = [h.chunk.id for h in answer.evidence].index("belt.pdf:0") + 1
    lines = cli.render_answer(answer, 80)
    assert lines[1] == f"A: The belt tension is 45 newtons [{n}]."  # shown with its openable citation
    assert f"   [{n}] belt.pdf#page=1" in lines
    view = present_answer(answer)
    assert [s.sources for s in view.sentences] == [[n]] and view.citation_note is None
    if "[7]" in reply:
        assert answer.trace.stage("settle_citations")[0]["removed_markers"] == [7]
        assert any("removed citation marker [7]" in line for line in lines)


# ---------------------------------------------------------------- the view
def _hit(cid: str, text: str, score: float = 0.03, rank: int = 1, **scores: float) -> SearchHit:
    chunk = Chunk(id=cid, text=text, doc_id=cid, source=cid.split(":")[0], path=cid.split(":")[0])
    return SearchHit(chunk, score, rank, {"fused": score, **scores})


def _withdrawn_answer() -> Answer:
    """An abstention after the verifier refused a long draft."""
    question = "What is the restocking fee for an opened item returned after the holidays?"
    trace = Trace(query=question)
    hits = [_hit(*FEE, score=0.0328, rank=1, sparse=6.699), _hit(*SHIPPING, score=0.0161, rank=2, sparse=2.1)]
    trace.record("route", mode="auto", searched=["shop"], domains=["shop"],
                 probabilities={"shop": 0.82, "news": 0.18}, fallback=False, reason="")
    trace.record("retrieve", candidates=[h.to_dict() for h in hits])
    trace.decide("judge", SHIPPING[0], "dropped", "irrelevant 0.10", 0.1)
    trace.decide("judge", FEE[0], "kept", "relevant 0.90", 0.9)
    draft = ("The restocking fee for an opened item that is returned after the holidays is seventy-five euros, "
             "charged once per order and deducted from the refund [1].")
    trace.record("verify", attempt=0, sentence=draft, supported=False, score=0.12, cited=[FEE[0]])
    trace.timings_ms.update({"retrieve": 12.0, "judge": 40.0, "generate": 900.0, "verify": 55.0})
    claim = ClaimVerdict(draft, [FEE[0]], False, 0.12, "lexical-embedding")
    return Answer(question, "I can't give an answer the evidence supports.", hits[:1], [], trace, abstained=True,
                  abstain_reason="verify: none of 1 answer sentences is supported", confidence=0.2, claims=[claim])


def test_the_view_is_json_and_shows_the_withdrawn_draft_with_its_reason() -> None:
    view = present_answer(_withdrawn_answer())
    data = json.loads(json.dumps(view.to_dict()))
    assert data == present_answer(_withdrawn_answer().to_dict()).to_dict()  # the object and its JSON agree
    [draft] = data["withdrawn"]
    assert draft["text"].startswith("The restocking fee")
    # the reason in words; its code and kind kept beside it for programs
    assert draft["reason"] == "No sentence of the answer is backed by the passage it cites (1 checked)."
    assert draft["code"] == "verify: none of 1 answer sentences is supported" and draft["kind"] == "unsupported"
    assert data["abstain_reason"] == draft["reason"] and data["abstain_code"] == draft["code"]
    assert [(r["about"], r["kind"], r["numbers"]) for r in data["reasons"]] == [
        ("abstention", "unsupported", {"n": 1.0}), ("withdrawn draft", "unsupported", {"n": 1.0})]
    assert [s["status"] for s in data["statuses"]] == list(STATUSES)
    assert [c["status"] for c in data["candidates"]] == ["selected", "dropped"]
    assert data["candidates"][0]["score"] == 1.0 and data["candidates"][1]["score"] == pytest.approx(0.4909, 1e-3)
    assert data["candidates"][0]["raw_scores"]["sparse"] == 6.699 and data["candidates"][1]["scores"]["sparse"] < 1
    assert data["route"] == "searched the shop partition: the router chose it (shop 82%, news 18%)"
    assert max(t["share"] for t in data["timings"]) == 1.0 and min(t["share"] for t in data["timings"]) < 0.05


def test_terminal_answer_at_80_columns_shows_the_whole_withdrawn_draft() -> None:
    lines = cli.render_answer(_withdrawn_answer(), 80)
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    text = " ".join(" ".join(lines).split())
    assert ("withdrawn draft, replaced by the abstention: No sentence of the answer is backed by the passage it "
            "cites (1 checked).") in text
    assert "verify:" not in text and "answer sentences is supported" not in text
    assert "charged once per order and deducted from the refund [1]." in text  # wrapped, not cut
    assert "…" not in "\n".join(lines[:12])
    assert any(line.startswith("*selected") for line in lines) and any(line.startswith(" dropped") for line in lines)


def test_search_view_puts_every_retriever_on_0_1() -> None:
    hits = [_hit("a.md:0", "x", 0.0328, 1, sparse=6.699, dense=0.61), _hit("b.md:0", "y", 0.0164, 2, sparse=3.3)]
    view = present_search(hits)
    assert [c.scores for c in view.candidates] == [{"fused": 1.0, "sparse": 1.0, "dense": 0.61},
                                                    {"fused": 0.5, "sparse": pytest.approx(0.4926, 1e-3)}]
    assert view.candidates[0].raw_scores["sparse"] == 6.699
    block = cli.hit_block(hits[0], 80, view.candidates[0].scores)
    assert "fused 1.00 dense 0.61 sparse 1.00" in block[2]
    assert "fused 0.0328" in cli.hit_block(hits[0], 80)[2]  # raw, behind --raw-scores


# ---------------------------------------------------------------- errors
def test_errors_print_as_plain_text_with_the_extra_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    # as without the serve extra: fastapi cannot be imported, nor anything built on it
    for name in [m for m in sys.modules if m == "fastapi" or m.startswith(("fastapi.", "ragsieve.serve.app"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "fastapi", None)
    with pytest.raises(SystemExit) as exc:
        cli.main(["serve", "--index", str(tmp_path / "idx")])
    assert exc.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "pip install 'ragsieve[serve]'" in err, err


# ---------------------------------------------------------------- ingest rates
def test_ingest_summary_states_the_rate_its_progress_line_showed() -> None:
    import io

    from ragsieve.cli import _embedded_words
    from ragsieve.console import PlainProgress
    from ragsieve.index import BuildReport

    times = iter([0.0, 1.0, 2.0])
    out = io.StringIO()
    progress = PlainProgress(out, interval_s=0.0, clock=lambda: next(times))
    for done in (128, 256, 384):  # the first batch was embedded before the first report
        progress("embed", done, 384)
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("embedding chunks: 384/384 (100%) 128.0/s,"), last
    report = BuildReport(chunks_embedded=384, embed_seconds=5.0)
    assert _embedded_words(report, progress).endswith("at 128.0 chunks/s")
    # no progress rate (one batch): the embedder's own rate, said the same way
    assert _embedded_words(report, None).endswith("at 76.8 chunks/s")


def test_ask_shows_raw_retrieval_scores_only_behind_the_flag() -> None:
    scaled = "\n".join(cli.render_answer(_withdrawn_answer(), 80))
    raw = "\n".join(cli.render_answer(_withdrawn_answer(), 80, raw_scores=True))
    assert "*selected   1.00 returns.md:0" in scaled and " dropped    0.49 shipping.md:0" in scaled
    assert "*selected   0.0328 returns.md:0" in raw and "raw score" in raw


def test_a_saved_search_result_is_presented_as_ranked_hits() -> None:
    hits = [_hit("a.md:0", "x", 0.0328, 1, sparse=6.7), _hit("b.md:0", "y", 0.0164, 2, sparse=3.3)]
    view = present_answer({"query": "q", "hits": [h.to_dict() for h in hits], "trace": Trace("q").to_dict()})
    assert view.search_only and view.question == "q"
    assert [(c.status, c.score) for c in view.candidates] == [("unjudged", 1.0), ("unjudged", 0.5)]
