"""The saved corpus audit as a prior (``stages.retrieve.audit_prior``): passages of documents in a
coordinated voice, or of sources that hurt, start with less trust; the trace says why; a saved
audit is only parsed and schema-checked, and one that fails the check (or describes another
generation) marks nothing; the option is off by default."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.helpers import HashEmbedder

from ragsieve.audit import AuditReport, Finding, Member
from ragsieve.audit.saved import read_saved, save_report, saved_path
from ragsieve.config import JudgeConfig, PipelineConfig, RetrievalConfig
from ragsieve.errors import IndexStoreError
from ragsieve.index import Index
from ragsieve.sieve.build import StageResources
from ragsieve.sieve.judge import JudgeStage, RelevanceScores
from ragsieve.sieve.prior import AuditPrior
from ragsieve.sieve.retrieve import CandidateSearch
from ragsieve.sieve.state import PipelineState, Ref
from ragsieve.types import Answer, Chunk, Trace

TOPIC = "The Morrow dam on the Vell river was finished in {} after {} years of work."


class FixedJudge:
    name = "fixed"
    upper = 0.6
    lower = 0.2

    def warm_up(self) -> None:
        pass

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        return [0.9 for _ in passages]


@pytest.fixture
def index(tmp_path: Path) -> Index:
    chunks = [Chunk(f"voice-{i}", TOPIC.format(1874, 4 + i), f"voice-{i}", f"https://site{i}.example/dam")
              for i in range(3)]
    chunks += [Chunk("ad", TOPIC.format(1874, 9) + " Buy now.", "ad", "ads.example"),
               Chunk("gold", TOPIC.format(1902, 6), "gold", "rivers.example")]
    opened = Index.from_chunks(chunks, tmp_path / "idx", embedder=HashEmbedder())
    yield opened
    opened.close()


def _member(doc: str, host: str) -> Member:
    return Member(doc, doc, doc, host, "The Morrow dam was finished in 1874.")


def _save(index: Index, generation: str | None = None) -> Path:
    voice = Finding("coordinated-voice", 0.93, "high",
                    tuple(_member(f"voice-{i}", f"site{i}.example") for i in range(3)),
                    "3 passages from 3 documents form one tight cluster", exclude=("voice-0", "voice-1", "voice-2"))
    harmful = Finding("harmful-source", 1.0, "high", (_member("ad", "ads.example"),), "source ads.example hurts",
                      exclude=("ad",), details={"source": "ads.example", "weight": 0.0})
    report = AuditReport(str(index.dir), generation or index.generation, len(index), len(index),
                         (voice, harmful), ("coordinated-voice", "harmful-source"))
    return save_report(index.dir, report)


def _search(index: Index, prior: AuditPrior | None) -> tuple[list, Trace]:
    search = CandidateSearch(Ref(index), RetrievalConfig(mode="sparse"), sieve=True, wide=False, prior=prior)
    trace = Trace("When was the Morrow dam finished?")
    return search("When was the Morrow dam finished?", trace, k=5), trace


def test_marked_sources_start_with_less_trust_and_the_trace_says_why(index: Index) -> None:
    _save(index)
    hits, trace = _search(index, AuditPrior(0.5))
    weights = {h.chunk.id: h.scores.get("source_weight") for h in hits}
    assert weights == {"voice-0": 0.5, "voice-1": 0.5, "voice-2": 0.5, "ad": 0.5, "gold": 1.0}
    assert hits[0].chunk.id == "gold"  # re-ranked: the unmarked passage's score is no longer halved
    why = {d["id"]: d["reason"] for d in trace.decisions if d["check"] == "audit-prior"}
    assert set(why) == {"voice-0", "voice-1", "voice-2", "ad"}
    assert "coordinated voice of 3 documents on 3 hosts" in why["voice-1"] and index.generation in why["voice-1"]
    assert "a source that hurt answers" in why["ad"] and "starts with trust 0.50" in why["ad"]
    record = next(r for r in trace.events if r["stage"] == "retrieve")
    assert record["audit_prior"]["marked"] == 4 and "3 documents, 1 sources marked" in record["audit_prior"]["note"]
    # the judge weighs relevance by that trust: the marked passages fall below its upper bar
    config = JudgeConfig(cover_entities=False)
    state = PipelineState("q?")
    kept = JudgeStage(RelevanceScores(lambda: FixedJudge(), config), config).run("q?", hits, Trace("q?"), state)
    assert not isinstance(kept, Answer)
    assert state.relevance_labels == {"gold": "relevant", "voice-0": "ambiguous", "voice-1": "ambiguous",
                                      "voice-2": "ambiguous", "ad": "ambiguous"}


def test_without_a_saved_audit_or_the_prior_nothing_changes(index: Index) -> None:
    plain, _ = _search(index, None)
    unsaved, trace = _search(index, AuditPrior(0.5))
    assert [(h.chunk.id, h.scores) for h in unsaved] == [(h.chunk.id, h.scores) for h in plain]
    assert "no saved audit of generation" in next(r for r in trace.events if r["stage"] == "retrieve")[
        "audit_prior"]["note"]
    _save(index)
    _, trace = _search(index, None)
    assert not [d for d in trace.decisions if d["check"] == "audit-prior"]


def test_a_saved_audit_is_schema_checked_and_must_describe_the_generation(index: Index) -> None:
    path = _save(index)
    data = json.loads(path.read_text())
    data["findings"][0]["members"][0]["doc_id"] = {"__import__": "os"}  # not a string: refused, never run
    path.write_text(json.dumps(data))
    with pytest.raises(IndexStoreError, match="does not match the audit schema"):
        read_saved(index.dir, index.generation)
    hits, trace = _search(index, AuditPrior(0.5))
    assert not any("audit_prior" in h.scores for h in hits)
    assert "refused" in next(r for r in trace.events if r["stage"] == "retrieve")["audit_prior"]["note"]
    other = _save(index, generation="20000101T000000000000-abcdef")
    other.rename(saved_path(index.dir, index.generation))
    with pytest.raises(IndexStoreError, match="describes generation 20000101T000000000000-abcdef"):
        read_saved(index.dir, index.generation)
    path.write_text("not json {")
    with pytest.raises(IndexStoreError, match="is not JSON"):
        read_saved(index.dir, index.generation)


def test_the_prior_is_off_by_default_and_built_when_asked(index: Index) -> None:
    def search_of(config: PipelineConfig) -> CandidateSearch:
        return StageResources(config, Ref(index), Ref(None), sieve=True, judge=FixedJudge(), selector=None,
                              claim_judge=None).search

    assert search_of(PipelineConfig()).prior is None
    config = PipelineConfig.model_validate({"stages": {"retrieve": {"audit_prior": True, "audit_trust": 0.25}}})
    prior = search_of(config).prior
    assert isinstance(prior, AuditPrior) and prior.trust == 0.25
