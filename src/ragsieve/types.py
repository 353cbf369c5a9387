"""Data types shared by every stage: chunks, search hits and request traces."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, NamedTuple

Verdict = Literal["kept", "dropped", "flagged"]
VERDICTS: tuple[str, ...] = ("kept", "dropped", "flagged")


@dataclass(frozen=True)
class Chunk:
    """A retrievable unit of text with the metadata every stage relies on.

    ``source`` is the data source the importance stage weighs (a file, or a site for
    web data); ``domain`` is the partition the router picks (by default the first
    folder level under the ingested path).

    Where the text came from, so a citation can be opened (all ``None`` for chunks built
    before ingest recorded them, or made by hand): ``path`` is the file relative to the
    ingested folder; ``page`` the 1-based PDF page (a chunk never crosses a page) and
    ``page_label`` the label the PDF prints on it, when the PDF defines labels; ``heading`` the
    Markdown/HTML heading path (outermost first) of the section the chunk lies in;
    ``char_start``/``char_end`` the chunk's span in the extracted text of its page (PDF) or
    document (everything else); ``url`` the original address of a JSON/CSV record.
    """

    id: str
    text: str
    doc_id: str
    source: str
    domain: str = "default"
    title: str = ""
    position: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    page: int | None = None
    page_label: str | None = None
    heading: list[str] | None = None
    char_start: int | None = None
    char_end: int | None = None
    url: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        # Location fields are written only when known, so chunks without them (hand-made, or
        # from an index built earlier) keep their old, smaller serialisation.
        for name in LOCATION_FIELDS:
            if data[name] is None:
                del data[name]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Chunk:
        return cls(**data)

    def location(self) -> dict[str, Any]:
        """The source-location fields (``None`` where unknown), as ``--json`` and the API carry them."""
        return {name: getattr(self, name) for name in LOCATION_FIELDS}


# The Chunk fields that say where its text came from (see :class:`Chunk`).
LOCATION_FIELDS: tuple[str, ...] = ("path", "page", "page_label", "heading", "char_start", "char_end", "url")


class SearchHit(NamedTuple):
    """One ranked result. ``scores`` holds each retriever's raw score (e.g. ``dense``,
    ``sparse``) and the fused score under ``fused``; absent retrievers are missing."""

    chunk: Chunk
    score: float
    rank: int
    scores: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.chunk.id,
            "rank": self.rank,
            "score": self.score,
            "scores": dict(self.scores),
            "source": self.chunk.source,
            "domain": self.chunk.domain,
            "title": self.chunk.title,
            "text": self.chunk.text,
            **self.chunk.location(),
            "citation": _citation_text(self.chunk),
        }


def _citation_text(chunk: Chunk) -> str:
    # Imported here, on first use: most callers never serialise a hit.
    from ragsieve.citations import Citation, format_citation

    return format_citation(Citation.from_chunk(chunk))


@dataclass
class Trace:
    """What happened while answering one request, stage by stage.

    Stages append JSON-serialisable records with :meth:`record`; timings come from
    :meth:`timed`. The trace is what ``--json`` prints and what users read to see which
    evidence was kept or dropped and why.
    """

    query: str
    events: list[dict[str, Any]] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # One entry per judgement a check made about one candidate (see :meth:`decide`); the CLI,
    # the service's page and ``ragsieve eval`` read these rather than parsing stage records.
    decisions: list[dict[str, Any]] = field(default_factory=list)

    def record(self, stage: str, **data: Any) -> None:
        self.events.append({"stage": stage, **data})

    def decide(
        self,
        check: str,
        chunk_id: str,
        verdict: Verdict,
        reason: str,
        score: float | None = None,
        **extra: Any,
    ) -> None:
        """Record that ``check`` kept, dropped or flagged candidate ``chunk_id`` and why."""
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}")
        entry: dict[str, Any] = {"check": check, "id": chunk_id, "verdict": verdict, "reason": reason}
        if score is not None:
            entry["score"] = round(float(score), 6)
        entry.update(extra)
        self.decisions.append(entry)

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = (time.perf_counter() - start) * 1000.0
            self.timings_ms[stage] = self.timings_ms.get(stage, 0.0) + elapsed

    def count_llm(self, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        self.llm_calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens

    def stage(self, name: str) -> list[dict[str, Any]]:
        """All records of one stage, in order."""
        return [e for e in self.events if e["stage"] == name]

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "events": self.events,
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "decisions": self.decisions,
        }


@dataclass(frozen=True)
class ClaimVerdict:
    """Whether one sentence of an answer is supported by the evidence it cites."""

    sentence: str
    cited_ids: list[str]
    supported: bool
    score: float  # the judge's support probability or similarity, in [0, 1]
    judge: str  # which judge decided (e.g. "llm-logprob", "lexical-embedding")
    # What the sentence was checked against: "cited" (the evidence its [n] markers name),
    # "all" (it cites nothing, so every evidence piece) or "none" (there was no evidence).
    against: str = "cited"
    # Value grounding (ragsieve.verify.grounding): how many values the sentence states (None when
    # the check did not run), each value the cited evidence does not state with what it says
    # instead, and the values the cited evidence does state.
    values_checked: int | None = None
    value_failures: list[dict[str, Any]] = field(default_factory=list)
    evidence_values: list[dict[str, Any]] = field(default_factory=list)
    # Values the evidence states only about another fact than the question asks (a signal, not a
    # failure; each with ``other_fact``, the clause that states it).
    other_facts: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Answer:
    """The result of :meth:`ragsieve.sieve.pipeline.Pipeline.ask`.

    ``abstained`` is a first-class outcome: ``text`` then says what the evidence does and does
    not support and ``abstain_reason`` says which check decided. ``confidence`` (in [0, 1], higher
    is more trusted) orders answers for risk-coverage evaluation; ``None`` when the pipeline
    computes none. ``claims`` holds the verifier's verdict on each answer sentence.
    """

    question: str
    text: str
    evidence: list[SearchHit]
    cited_ids: list[str]
    trace: Trace
    abstained: bool = False
    abstain_reason: str | None = None
    confidence: float | None = None
    claims: list[ClaimVerdict] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.text,
            "abstained": self.abstained,
            "abstain_reason": self.abstain_reason,
            "confidence": self.confidence,
            "cited_ids": self.cited_ids,
            "claims": [c.to_dict() for c in self.claims],
            "evidence": [h.to_dict() for h in self.evidence],
            "trace": self.trace.to_dict(),
        }
