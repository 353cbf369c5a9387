"""One view of an answer and its trace, for every place that shows one.

The terminal (``ragsieve ask``, ``ragsieve demo``), the service (``/v1/ask`` and the chat
endpoint carry it as ``presentation``) and the trace page all show the same thing, built here
once: :func:`present_answer` turns an :class:`ragsieve.types.Answer` (or its ``to_dict()``
form, the JSON ``ragsieve ask --json`` prints) into an :class:`AnswerView`, plain data that
``to_dict()`` makes JSON. Renderers only lay it out; none decides a status, an order or a scale.

What the view fixes for every renderer:

* **statuses**, one per candidate, from :data:`STATUSES` and listed in that order in every
  legend (:data:`STATUS_MEANINGS` says what each means);
* **withdrawn drafts**: text the checks withdrew (a draft the verifier refused before an
  abstention, a draft replaced by regeneration, sentences removed as unsupported), each with its
  reason, so nothing the model said disappears without a word;
* **scores** on one 0-1 scale: retrieval scores divided by the top candidate's (fusion and BM25
  scores have no scale of their own), dense scores as cosines; each candidate keeps its raw
  scores (``raw_scores``) for a renderer to show behind a flag;
* **citations**: each answer sentence with the evidence it cites (``[n]`` = the n-th source) or
  marked as citing none, and the answer's note when a sentence cites nothing;
* the **route** and the retrieval decision as words.

Example:
    >>> from ragsieve.types import Answer, Trace
    >>> view = present_answer(Answer("What is it?", "It is blue.", [], [], Trace("What is it?")))
    >>> view.outcome, [s.text for s in view.sentences], view.citation_note
    ('answered', ['It is blue.'], 'This answer cites no source: it was not drawn from the evidence shown.')
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ragsieve.citations import (
    Citation,
    format_citation,
    marker_positions,
    settle_citations,
    split_cited_sentences,
    states_something,
)

__all__ = [
    "STATUSES", "STATUS_MEANINGS", "AnswerView", "CandidateView", "SearchView", "SentenceView", "SourceView",
    "TimingView", "WithdrawnDraft", "present_answer", "present_search", "relative_scores", "scaled_scores",
]

# Every candidate has one of these statuses; legends list them in this order.
STATUSES: tuple[str, ...] = ("selected", "dropped", "flagged", "not needed", "kept", "unjudged")
STATUS_MEANINGS: dict[str, str] = {
    "selected": "in the evidence the answer was generated from",
    "dropped": "a check removed it (which one and why)",
    "flagged": "a check flagged it but kept it",
    "not needed": "relevant, but the selection did not need it (the minimal cover was complete without it, "
    "or it ranked below the top k)",
    "kept": "passed every check but was not selected",
    "unjudged": "no check looked at it",
}
# Retrieval scores a renderer shows as they are (a cosine is at most 1); the rest are divided by
# the top candidate's.
ABSOLUTE_SCORES = ("dense",)
SCORE_SCALE_NOTE = (
    "scores on a 0-1 scale: fusion and keyword scores divided by the top candidate's (the top = 1.00), "
    "dense scores are cosines"
)


@dataclass(frozen=True)
class SourceView:
    """A cited source: its number in the answer (``[n]``), chunk id and citation."""

    n: int
    id: str
    citation: str
    title: str = ""
    path: str | None = None
    page: int | None = None
    page_label: str | None = None
    heading: str | None = None
    url: str | None = None
    cited: bool = True


@dataclass(frozen=True)
class SentenceView:
    """One answer sentence: the verifier's verdict (``None`` when it did not run) and its sources."""

    text: str
    sources: list[int] = field(default_factory=list)
    supported: bool | None = None
    support: float | None = None  # 0-1
    states_something: bool = True

    @property
    def uncited(self) -> bool:
        return self.states_something and not self.sources


@dataclass(frozen=True)
class WithdrawnDraft:
    """Text the checks withdrew and why; ``sentences`` with their support (0-1) where verified."""

    text: str
    reason: str
    replaced_by: str  # "abstention", "regenerated answer", "the answer without these sentences"
    sentences: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class CandidateView:
    """One retrieved candidate as every renderer shows it."""

    id: str
    rank: int | None
    status: str
    why: str
    score: float  # 0-1, see SCORE_SCALE_NOTE
    raw_scores: dict[str, float]
    scores: dict[str, float]  # each retriever's score on the 0-1 scale
    in_evidence: bool
    cited: bool
    citation: str
    text: str
    title: str = ""
    source: str = ""
    domain: str = ""
    checks: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class TimingView:
    stage: str
    ms: float
    share: float  # of the slowest stage, 0-1 (a bar's length)


@dataclass
class AnswerView:
    """Everything a renderer shows about one answer, in the order it is shown."""

    question: str
    outcome: str  # "answered" or "abstained"
    text: str
    abstain_reason: str | None = None
    confidence: float | None = None
    pipeline: str | None = None
    index_generation: str | None = None
    sentences: list[SentenceView] = field(default_factory=list)
    citation_note: str | None = None
    # the decide stage answered but a check, or a confidence near the threshold, leaves the answer
    # not fully confirmed: why (e.g. where the evidence states the answer's value instead)
    caveat: str | None = None
    sources: list[SourceView] = field(default_factory=list)
    withdrawn: list[WithdrawnDraft] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)  # the retrieval decision
    notes: list[str] = field(default_factory=list)  # extraction, regeneration, citation markers removed
    route: str | None = None
    judge: str | None = None
    claim_judge: str | None = None
    candidates: list[CandidateView] = field(default_factory=list)
    statuses: list[dict[str, str]] = field(default_factory=list)
    score_note: str = SCORE_SCALE_NOTE
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    values_checked: int = 0
    value_failures: list[dict[str, Any]] = field(default_factory=list)
    timings: list[TimingView] = field(default_factory=list)
    total_ms: float = 0.0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    stage_records: list[dict[str, Any]] = field(default_factory=list)
    search_only: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["sentences"] = [{**asdict(s), "uncited": s.uncited} for s in self.sentences]
        return data


@dataclass
class SearchView:
    """A search result: the query and its hits on the 0-1 scale (raw scores kept)."""

    query: str
    candidates: list[CandidateView]
    score_note: str = SCORE_SCALE_NOTE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------- scores
def relative_scores(candidates: Sequence[Mapping[str, Any]]) -> list[float]:
    """Each candidate's retrieval score on a 0-1 scale: divided by the top candidate's, so the
    best reads 1.00 whatever the retriever (fusion scores such as 0.033 have no scale of their own).

    >>> relative_scores([{"score": 0.032}, {"score": 0.016}])
    [1.0, 0.5]
    """
    raw = [_number(c.get("score")) for c in candidates]
    top = max(raw, default=0.0)
    return [max(r, 0.0) / top if top > 0 else 0.0 for r in raw]


def scaled_scores(candidates: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """Each candidate's per-retriever scores (``scores``) on the 0-1 scale: ``dense`` as it is
    (a cosine, clipped to 0-1), every other divided by the best candidate's score of that kind."""
    keys = list(dict.fromkeys(k for c in candidates for k in (c.get("scores") or {})))
    tops = {k: max((_number((c.get("scores") or {}).get(k)) for c in candidates), default=0.0) for k in keys}
    out: list[dict[str, float]] = []
    for c in candidates:
        raw = c.get("scores") or {}
        row: dict[str, float] = {}
        for k in keys:
            if k not in raw:
                continue
            v = _number(raw[k])
            if k in ABSOLUTE_SCORES:
                row[k] = round(min(max(v, 0.0), 1.0), 6)
            else:
                row[k] = round(max(v, 0.0) / tops[k], 6) if tops[k] > 0 else 0.0
        out.append(row)
    return out


def _number(value: Any) -> float:
    try:
        return float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0


# ---------------------------------------------------------------------- answer
def _as_dict(answer: Any) -> dict[str, Any]:
    if hasattr(answer, "to_dict") and not isinstance(answer, Mapping):
        return dict(answer.to_dict())
    data = dict(answer or {})
    if isinstance(data.get("ragsieve_trace"), Mapping):  # a chat completion
        data = dict(data["ragsieve_trace"])
    if "trace" not in data and isinstance(data.get("events"), list):  # a bare trace
        data = {"question": data.get("query", ""), "trace": data}
    return data


def _status(decisions: list[dict[str, Any]], in_evidence: bool) -> tuple[str, str]:
    """A candidate's status (one of :data:`STATUSES`) and why, from the checks' decisions."""
    removed = next((d for d in decisions if d.get("verdict") == "dropped" and d.get("check") != "select"), None)
    flagged = next((d for d in decisions if d.get("verdict") == "flagged"), None)
    unneeded = next((d for d in decisions if d.get("verdict") == "dropped" and d.get("check") == "select"), None)
    if in_evidence:
        return "selected", (f"flagged by {flagged['check']}: {flagged.get('reason', '')}" if flagged else "")
    if removed is not None:
        return "dropped", f"{removed.get('check')}: {removed.get('reason', '')}"
    if flagged is not None:
        return "flagged", f"{flagged.get('check')}: {flagged.get('reason', '')}"
    if unneeded is not None:
        return "not needed", str(unneeded.get("reason", ""))
    return ("kept" if decisions else "unjudged"), ""


def _candidates(
    hits: list[dict[str, Any]], decisions: list[dict[str, Any]], evidence_ids: set[str], cited: set[str]
) -> list[CandidateView]:
    by_id: dict[str, list[dict[str, Any]]] = {}
    for d in decisions:
        by_id.setdefault(str(d.get("id")), []).append(d)
    out = []
    for hit, score, scaled in zip(hits, relative_scores(hits), scaled_scores(hits), strict=True):
        cid = str(hit.get("id", ""))
        mine = by_id.get(cid, [])
        status, why = _status(mine, cid in evidence_ids)
        out.append(CandidateView(
            id=cid,
            rank=hit.get("rank"),
            status=status,
            why=why,
            score=round(score, 6),
            raw_scores=({k: _number(v) for k, v in (hit.get("scores") or {}).items()}
                        or {"score": _number(hit.get("score"))}),
            scores=scaled,
            in_evidence=cid in evidence_ids,
            cited=cid in cited,
            citation=_citation(hit),
            text=str(hit.get("text") or ""),
            title=str(hit.get("title") or ""),
            source=str(hit.get("source") or ""),
            domain=str(hit.get("domain") or ""),
            checks=[{k: v for k, v in d.items() if k != "id"} for d in mine],
        ))
    return out


def _citation(hit: Mapping[str, Any]) -> str:
    """The hit's citation in today's scheme (``path#page=N``), also for JSON written before it."""
    if hit.get("path") or hit.get("url"):
        return format_citation(Citation.from_hit(dict(hit)))
    return str(hit.get("citation") or hit.get("id") or "")


def _route_words(events: list[dict[str, Any]]) -> str | None:
    """The route as a sentence: what was searched and why."""
    route = next((e for e in events if e.get("stage") == "route"), None)
    if route is None:
        return None
    searched = [s for s in route.get("searched") or [] if s != "<global>"]
    where = ("the " + ", ".join(searched) + (" partitions" if len(searched) > 1 else " partition")) if searched else (
        "the whole index")
    mode = route.get("mode")
    if mode == "fixed":
        return f"searched {where}, as asked"
    if mode == "auto":
        probs = route.get("probabilities") or {}
        ranked = sorted(((str(k), _number(v)) for k, v in probs.items()), key=lambda kv: -kv[1])[:3]
        odds = ", ".join(f"{k} {round(100 * p)}%" for k, p in ranked)
        words = f"searched {where}: the router chose it" + (f" ({odds})" if odds else "")
        if route.get("fallback"):
            words = f"searched {where}: the router was unsure" + (f" ({odds})" if odds else "")
        reason = str(route.get("reason") or "").strip()
        return words + (f"; {reason}" if reason else "")
    return f"searched {where}"


# Trace records of a generation (the generator records what it said as ``draft``).
GENERATIONS = ("generate", "responsive_generate", "regenerate_generate")


def _verified(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"text": str(r.get("sentence", "")), "supported": bool(r.get("supported")),
             "support": _number(r.get("score"))} for r in rows]


def _why_replaced(later: list[dict[str, Any]]) -> str:
    """Why a generation was followed by another: the first refusal among the records after it."""
    for e in later:
        if e.get("stage") == "responsive" and e.get("ok") is False:
            detail = str(e.get("detail") or "").strip()
            return f"responsive: {e.get('reason')}" + (f" ({detail})" if detail else "")
        if e.get("stage") == "regenerate" and not e.get("skipped"):
            return f"regenerate: {e.get('reason', '')}"
    return "the checks asked for another answer"


def _withdrawn(data: dict[str, Any], events: list[dict[str, Any]]) -> list[WithdrawnDraft]:
    """Drafts the checks withdrew, oldest first, each with its reason: every generation that was
    followed by another, the last one when the answer is an abstention or an extracted sentence,
    and sentences the verifier removed."""
    out: list[WithdrawnDraft] = []
    at = [i for i, e in enumerate(events) if e.get("stage") in GENERATIONS and "draft" in e]
    abstained = bool(data.get("abstained"))
    for n, i in enumerate(at):
        end = at[n + 1] if n + 1 < len(at) else len(events)
        between = events[i + 1 : end]
        rows = [e for e in between if e.get("stage") == "verify" and "sentence" in e]
        draft = str(events[i].get("draft") or "")
        if n + 1 < len(at):
            out.append(WithdrawnDraft(draft, _why_replaced(between), "regenerated answer", _verified(rows)))
        elif abstained:
            claims = [{"sentence": c.get("sentence"), "supported": c.get("supported"), "score": c.get("score")}
                      for c in data.get("claims") or []]
            out.append(WithdrawnDraft(draft, str(data.get("abstain_reason") or "no reason given"), "abstention",
                                      _verified(claims or rows)))
        elif any(e.get("stage") == "responsive" and e.get("attempt") == "extracted" and e.get("ok") for e in between):
            out.append(WithdrawnDraft(draft, _why_replaced(between), "sentence extracted from the pasted passage",
                                      _verified(rows)))
    if not at:  # a trace from before generations recorded their drafts: what the verifier saw
        out += _withdrawn_from_claims(data, events)
    for e in events:
        if e.get("stage") == "verify" and e.get("removed"):
            removed = [str(s) for s in e["removed"]]
            rows = [r for r in events if r.get("stage") == "verify" and str(r.get("sentence")) in removed]
            out.append(WithdrawnDraft(" ".join(removed), str(e.get("reason", "unsupported sentences removed")),
                                      "the answer without these sentences",
                                      _verified(rows) or [{"text": s, "supported": False, "support": None}
                                                          for s in removed]))
    return out


def _withdrawn_from_claims(data: dict[str, Any], events: list[dict[str, Any]]) -> list[WithdrawnDraft]:
    out: list[WithdrawnDraft] = []
    attempts: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("stage") == "verify" and "sentence" in e:
            attempts.setdefault(int(e.get("attempt") or 0), []).append(e)
    regen = next((e for e in events if e.get("stage") == "regenerate" and not e.get("skipped")), None)
    if regen is not None and 0 in attempts and 1 in attempts:
        rows = attempts[0]
        out.append(WithdrawnDraft(" ".join(str(r.get("sentence", "")) for r in rows),
                                  f"regenerate: {regen.get('reason', '')}", "regenerated answer", _verified(rows)))
    if data.get("abstained"):
        rows = [{"sentence": c.get("sentence"), "supported": c.get("supported"), "score": c.get("score")}
                for c in data.get("claims") or []] or attempts.get(max(attempts, default=0), [])
        if rows:
            out.append(WithdrawnDraft(" ".join(str(r.get("sentence", "")) for r in rows),
                                      str(data.get("abstain_reason") or "no reason given"), "abstention",
                                      _verified(rows)))
    return out


def _facts(data: dict[str, Any], events: list[dict[str, Any]]) -> list[str]:
    """What decided how the answer was made: the retrieval decision."""
    need = [e for e in events if e.get("stage") == "need"][:1]
    return [("retrieved" if ev.get("retrieve") else "no retrieval") + (f": {ev['reason']}" if ev.get("reason") else "")
            for ev in need]


def _notes(events: list[dict[str, Any]], evidence: list[dict[str, Any]]) -> list[str]:
    """What the checks did to the answer after it was generated: extraction from a pasted
    passage, regeneration, citation markers removed."""
    notes: list[str] = []
    for ev in events:
        if ev.get("stage") == "responsive" and ev.get("attempt") == "extracted":
            pos = ev.get("position")
            if ev.get("ok"):
                notes.append(f"answer extracted from the pasted passage [{pos}] ({ev.get('chunk_id')})")
            elif "position" in ev:
                notes.append(f"the sentence extracted from the pasted passage [{pos}] was refused: "
                             f"{ev.get('reason')} {ev.get('detail', '')}".rstrip())
            else:
                notes.append(f"nothing extracted from the pasted passage: {ev.get('detail', '')}")
        elif ev.get("stage") == "regenerate":
            if ev.get("skipped"):
                notes.append(f"regeneration skipped: {ev.get('reason', '')}")
            else:
                notes.append(f"regenerated with {', '.join(map(str, ev.get('evidence') or []))}: {ev.get('reason')}")
        elif ev.get("stage") == "settle_citations" and ev.get("removed_markers"):
            marks = ", ".join(f"[{n}]" for n in ev["removed_markers"])
            notes.append(f"removed citation marker{'s' if len(ev['removed_markers']) > 1 else ''} {marks}: "
                         f"the answer has {len(evidence)} source{'s' if len(evidence) != 1 else ''}")
    return notes


def _caveat(events: list[dict[str, Any]]) -> str | None:
    """The decide stage's caveat on the answer it kept (the last decision's), if any."""
    decided = [e for e in events if e.get("stage") == "decide" and "decision" in e]
    caveat = decided[-1].get("caveat") if decided else None
    return str(caveat) if caveat else None


def _key(sentence: str) -> str:
    """A sentence compared without its markers, spacing and closing punctuation."""
    return " ".join(_MARKERS.sub(" ", sentence).split()).rstrip(".!? ")


_MARKERS = re.compile(r"\[\d{1,3}\]")


def _sentences(data: dict[str, Any], text: str, ids: list[str]) -> list[SentenceView]:
    """The answer's sentences with their sources and the verifier's verdicts: the answer split
    here, each sentence taking the verdict of the claim with the same words; the verifier's own
    sentences when none matches but they make up the answer (it split it differently)."""
    if data.get("abstained") or not text.strip():
        return []
    claims = [dict(c) for c in data.get("claims") or [] if isinstance(c, Mapping)]
    n = len(ids)
    units: list[tuple[str, dict[str, Any] | None]]
    by_key = {_key(str(c.get("sentence", ""))): c for c in claims}
    units = [(s, by_key.get(_key(s))) for s in split_cited_sentences(text)]
    if claims and not any(c for _, c in units) and _key(" ".join(str(c.get("sentence", "")) for c in claims)) == _key(
        text
    ):
        units = [(str(c.get("sentence", "")), c) for c in claims]  # the verifier split it otherwise
    out = []
    for sentence, claim in units:
        sources = [p for p in marker_positions(sentence) if 1 <= p <= n]
        if claim is not None:
            sources += [ids.index(str(c)) + 1 for c in claim.get("cited_ids") or [] if str(c) in ids]
        out.append(SentenceView(
            text=sentence,
            sources=sorted(set(sources)),
            supported=None if claim is None else bool(claim.get("supported")),
            support=None if claim is None else round(_number(claim.get("score")), 4),
            states_something=states_something(sentence),
        ))
    return out


def _citation_note(sentences: list[SentenceView], abstained: bool) -> str | None:
    if abstained:
        return None
    stating = [s for s in sentences if s.states_something]
    uncited = [s for s in stating if s.uncited]
    if not stating or not uncited:
        return None
    if len(uncited) == len(stating):
        return "This answer cites no source: it was not drawn from the evidence shown."
    return (f"{len(uncited)} of {len(stating)} sentences cite no source (marked 'no source'): "
            "the evidence shown does not back them.")


def present_answer(answer: Any) -> AnswerView:
    """The view of ``answer``: an :class:`~ragsieve.types.Answer`, its ``to_dict()`` form (with
    the service's ``pipeline`` and ``index_generation`` when present), a chat completion with
    ``ragsieve_trace``, a bare trace, or a search result (``hits``)."""
    data = _as_dict(answer)
    if isinstance(data.get("hits"), list) and "evidence" not in data:
        search = present_search(data)
        view = AnswerView(question=str(data.get("query") or ""), outcome="searched", text="",
                          candidates=search.candidates, search_only=True)
        _add_trace(view, data, [])
        return view
    evidence = [dict(h) for h in data.get("evidence") or [] if isinstance(h, Mapping)]
    cited_ids = [str(c) for c in data.get("cited_ids") or []]
    trace = data.get("trace") or {}
    events = [dict(e) for e in trace.get("events") or [] if isinstance(e, Mapping)]
    abstained = bool(data.get("abstained"))
    ids = [str(h.get("id", "")) for h in evidence]
    text = str(data.get("answer") or "")
    if not abstained and text.strip():
        # Answers written before the pipeline settled their citations (saved JSON) get the same
        # treatment here; today's answers come out unchanged.
        text = settle_citations(text, [(i, str(h.get("text") or "")) for i, h in zip(ids, evidence, strict=True)],
                                cited_ids).text
    sentences = _sentences(data, text, ids)
    marked = {p for s in sentences for p in s.sources}
    sources = [
        SourceView(
            n=i, id=str(h.get("id", "")), citation=_citation(h),
            title=str(h.get("title") or ""), path=h.get("path"), page=h.get("page"), page_label=h.get("page_label"),
            heading=Citation.from_hit(h).heading, url=h.get("url"),
            cited=str(h.get("id")) in cited_ids or i in marked,
        )
        for i, h in enumerate(evidence, 1)
    ]
    claims = data.get("claims") or []
    view = AnswerView(
        question=str(data.get("question") or trace.get("query") or ""),
        outcome="abstained" if abstained else "answered",
        text=text,
        abstain_reason=data.get("abstain_reason"),
        confidence=data.get("confidence"),
        pipeline=data.get("pipeline"),
        index_generation=data.get("index_generation"),
        sentences=sentences,
        citation_note=_citation_note(sentences, abstained),
        caveat=None if abstained else _caveat(events),
        sources=sources,
        withdrawn=_withdrawn(data, events),
        facts=_facts(data, events),
        notes=_notes(events, evidence),
        route=_route_words(events),
        claim_judge=str(claims[0].get("judge")) if claims and isinstance(claims[0], Mapping) else None,
    )
    judge = next((e for e in events if e.get("stage") == "judge" and "upper" in e), None)
    if judge is not None:
        view.judge = (f"judge {judge.get('judge')} (0-1): relevant at or above {_number(judge.get('upper')):.2f}, "
                      f"irrelevant below {_number(judge.get('lower')):.2f}")
    retrieved = next((list(e["candidates"]) for e in events if e.get("stage") == "retrieve" and e.get("candidates")),
                     [])
    known = {str(c.get("id")) for c in retrieved}
    retrieved += [h for h in evidence if str(h.get("id")) not in known]
    view.candidates = _candidates(retrieved, list(trace.get("decisions") or []),
                                  {str(h.get("id")) for h in evidence}, set(cited_ids))
    _add_values_and_conflicts(view, data, events)
    _add_trace(view, data, events)
    return view


def _add_values_and_conflicts(view: AnswerView, data: dict[str, Any], events: list[dict[str, Any]]) -> None:
    for c in data.get("claims") or []:
        view.values_checked += int(c.get("values_checked") or 0)
        for f in c.get("value_failures") or []:
            view.value_failures.append({"sentence": c.get("sentence", ""), **f})
    for e in events:
        if e.get("stage") == "conflict" and isinstance(e.get("groups"), list):
            view.conflicts.append({k: e.get(k) for k in ("message", "decision", "groups") if e.get(k) is not None})


def _add_trace(view: AnswerView, data: dict[str, Any], events: list[dict[str, Any]]) -> None:
    trace = data.get("trace") or {}
    timings = {str(k): _number(v) for k, v in (trace.get("timings_ms") or {}).items()}
    top = max(timings.values(), default=0.0)
    view.timings = [TimingView(k, round(v, 3), round(v / top, 6) if top > 0 else 0.0) for k, v in timings.items()]
    view.total_ms = round(sum(v for k, v in timings.items() if k != "warm_up"), 3)
    view.llm_calls = int(trace.get("llm_calls") or 0)
    view.prompt_tokens = int(trace.get("prompt_tokens") or 0)
    view.completion_tokens = int(trace.get("completion_tokens") or 0)
    view.statuses = [{"status": s, "meaning": STATUS_MEANINGS[s]} for s in STATUSES]
    view.stage_records = [
        {k: v for k, v in e.items() if k != "candidates"} for e in events if e.get("stage") != "route"
    ]


def present_search(result: Any) -> SearchView:
    """The view of a search result: ``{"query", "hits"}`` (``--json``, ``/v1/search``) or a list
    of :class:`~ragsieve.types.SearchHit`."""
    if isinstance(result, Mapping):
        query, hits = str(result.get("query") or ""), list(result.get("hits") or [])
    else:
        query, hits = "", list(result)
    rows = [h.to_dict() if hasattr(h, "to_dict") else dict(h) for h in hits]
    decisions: list[dict[str, Any]] = []
    view = _candidates(rows, decisions, set(), set())
    return SearchView(query, [_search_status(c) for c in view])


def _search_status(c: CandidateView) -> CandidateView:
    # A plain search judges nothing: its hits are ranked, not kept or dropped.
    from dataclasses import replace

    return replace(c, status="unjudged")
