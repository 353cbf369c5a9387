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
* **inert links**: every Markdown image and link in the answer (and in a withdrawn draft) to an
  address that is neither a document of its evidence nor a host the operator allows
  (``present.allow_link_hosts``) is made inert (:func:`ragsieve.citations.inert_links`), listed in
  ``inert_links`` and said in ``notes``, so no surface fetches or offers an address a retrieved
  passage slipped into the answer;
* the **route** and the retrieval decision as words;
* **reasons in words**: every abstention, withdrawn draft and caveat says in a plain sentence what
  the evidence says and why it matters (:data:`REASON_TEMPLATES`, one sentence per kind of reason,
  the one place they are worded; :func:`explain_reason`), while the JSON keeps each check's own
  reason code, its kind and its numbers (:class:`Reason`).

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
    evidence_documents,
    format_citation,
    inert_links,
    marker_positions,
    settle_citations,
    split_cited_sentences,
    states_something,
)
from ragsieve.records import ConflictRecord, DecideRecord

__all__ = [
    "REASON_TEMPLATES", "STATUSES", "STATUS_MEANINGS", "AnswerView", "CandidateView", "Reason", "SearchView",
    "SentenceView", "SourceView", "TimingView", "WithdrawnDraft", "explain_reason", "present_answer", "present_search",
    "reason_text", "relative_scores", "scaled_scores",
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
    reason: str  # in words (REASON_TEMPLATES)
    replaced_by: str  # "abstention", "regenerated answer", "the answer without these sentences"
    sentences: list[dict[str, Any]] = field(default_factory=list)
    code: str = ""  # the check's own reason, as the trace records it
    kind: str = ""  # a key of REASON_TEMPLATES


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
    abstain_reason: str | None = None  # in words (REASON_TEMPLATES); the check's code: abstain_code
    abstain_code: str | None = None
    confidence: float | None = None
    threshold: float | None = None  # the decide stage's: answers below it are withheld
    confidence_note: str | None = None  # the confidence in words, with the threshold when known
    pipeline: str | None = None
    index_generation: str | None = None
    sentences: list[SentenceView] = field(default_factory=list)
    citation_note: str | None = None
    # the decide stage answered but a check, or a confidence near the threshold, leaves the answer
    # not fully confirmed: why (e.g. where the evidence states the answer's value instead)
    caveat: str | None = None  # in words; the decide record's own text: caveat_code
    caveat_code: str | None = None
    # every reason shown above (abstention, caveat, withdrawn drafts) with its code, kind and numbers
    reasons: list[dict[str, Any]] = field(default_factory=list)
    sources: list[SourceView] = field(default_factory=list)
    withdrawn: list[WithdrawnDraft] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)  # the retrieval decision
    notes: list[str] = field(default_factory=list)  # extraction, regeneration, citation markers removed
    # the images and links made inert (kind, target, host, reason): addresses outside the corpus
    inert_links: list[dict[str, str]] = field(default_factory=list)
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


# ---------------------------------------------------------------------- reasons in words
# One sentence (a clause: the renderer starts it with a capital and ends it with a full stop) per
# kind of reason a check gives for an abstention, a withdrawn draft or a caveat: what the evidence
# says and why that matters. The only place these are worded; the checks record their own codes
# ("decide: confidence 0.05 < 0.08"), which the JSON keeps beside the words.
REASON_TEMPLATES: dict[str, str] = {
    "no_relevant_passage": (
        "none of the {n} retrieved passages is relevant to the question (the best scores {best} on the relevance "
        "judge's 0-1 scale; a passage needs {lower} to count), so there is no evidence to answer from"
    ),
    "all_poisoned": (
        "every one of the {n} relevant passages restates the question or copies another passage, the pattern of "
        "planted text, so none of them is trusted as evidence"
    ),
    "all_injected": (
        "every one of the {n} relevant passages consists of instructions addressed to the assistant rather "
        "than information, so none of them is used as evidence"
    ),
    "sources_disagree": (
        "the sources give {n} different answers to the question, and this configuration withholds an answer "
        "rather than pick one"
    ),
    "declined": "the model found no answer to the question in the passages it was given",
    "declined_after_regeneration": (
        "asked again with only the passages that backed its first draft, the model found no answer in them"
    ),
    "empty": "the model's answer was empty",
    "unsupported": "no sentence of the answer is backed by the passage it cites ({n} checked)",
    "weak_support": (
        "the evidence backs the answer only weakly (support {confidence}; the verifier withholds answers "
        "below {threshold})"
    ),
    "value_elsewhere": "the answer's value appears in the evidence only about something else: {detail}",
    "contradiction": "{detail}, so the answer contradicts its own evidence",
    "pasted_passage": "the answer pasted a passage instead of answering the question",
    "restated_question": "the answer restates the question instead of answering it",
    "wrong_kind": "the answer does not give the kind of answer the question asks for",
    "ungrounded": "the value the answer gives is not in the passage it cites",
    "no_words": "the answer has no words",
    "low_confidence": (
        "the checks' confidence in this answer is too low to give it ({confidence}; answers below {threshold} "
        "are withheld)"
    ),
    "near_threshold": (
        "the checks' confidence in this answer is low ({confidence}; answers below {threshold} are withheld)"
    ),
    "coordinated": (
        "the answer is stated only by passages that look written together, with no independent source: {detail}"
    ),
    "calibrated_threshold": (
        "the answer's confidence ({confidence}) is below the threshold calibrated for this configuration "
        "({threshold})"
    ),
    "no_confidence": "the answer has no confidence to compare with the threshold calibrated for it ({threshold})",
    "regenerated": (
        "{unsupported} of the draft's {sentences} sentences are not backed by the passages they cite, so the "
        "answer was written again from the passages that backed the rest"
    ),
    "sentences_removed": "these sentences are not backed by the passages they cite, so they were removed",
    "other": "{detail}",
}
# The responsiveness check's ways of not answering (ragsieve.verify.responsive) and their kinds.
_RESPONSIVE_KINDS = {"pasted_passage": "pasted_passage", "restated_question": "restated_question",
                     "wrong_kind": "wrong_kind", "ungrounded": "ungrounded", "empty": "no_words"}
# Kinds whose check left a detail worth a parenthesis (which value, which words were copied).
_WITH_DETAIL = ("pasted_passage", "restated_question", "wrong_kind", "ungrounded", "no_words")
_NUM = r"(\d+(?:\.\d+)?(?:e-?\d+)?)"


@dataclass(frozen=True)
class Reason:
    """A check's reason as the reader gets it: ``text``, one plain sentence
    (:data:`REASON_TEMPLATES`), and for programs the check's own ``code``, the reason's ``kind``
    (a key of :data:`REASON_TEMPLATES`) and its ``numbers``; ``parts``: the reasons it combines.

    >>> r = explain_reason("decide: confidence 0.05 < 0.08")
    >>> r.kind, r.numbers, r.text
    ('low_confidence', {'confidence': 0.05, 'threshold': 0.08}, \
"The checks' confidence in this answer is too low to give it (0.05; answers below 0.08 are withheld).")
    """

    code: str
    kind: str
    text: str
    numbers: dict[str, float] = field(default_factory=dict)
    parts: list[Reason] = field(default_factory=list)
    about: str = ""  # where it is shown: "abstention", "caveat", "withdrawn draft"

    def to_dict(self) -> dict[str, Any]:
        return {"about": self.about, "kind": self.kind, "code": self.code, "numbers": dict(self.numbers),
                "text": self.text, "parts": [p.to_dict() for p in self.parts]}


def _pair(a: float, b: float) -> tuple[str, str]:
    """Two numbers with enough decimals that they differ (never "0.41; below 0.41")."""
    for d in range(2, 7):
        x, y = f"{a:.{d}f}", f"{b:.{d}f}"
        if x != y:
            return x, y
    return f"{a:.2f}", f"{b:.2f}"


def _sentence(clause: str) -> str:
    clause = clause.strip()
    if not clause:
        return clause
    clause = clause[0].upper() + clause[1:]
    return clause if clause.endswith((".", "!", "?")) else clause + "."


def reason_text(kind: str, detail: str = "", **numbers: Any) -> str:
    """The sentence for a reason of ``kind`` (a key of :data:`REASON_TEMPLATES`) with its numbers;
    ``confidence``/``threshold`` and ``best``/``lower`` are printed with enough decimals to differ.

    >>> reason_text("near_threshold", confidence=0.15, threshold=0.08)
    "The checks' confidence in this answer is low (0.15; answers below 0.08 are withheld)."
    """
    return _sentence(_clause(kind, detail, numbers))


def _clause(kind: str, detail: str, numbers: Mapping[str, Any]) -> str:
    values: dict[str, Any] = dict(numbers)
    for a, b in (("confidence", "threshold"), ("best", "lower")):
        if isinstance(values.get(a), float) and isinstance(values.get(b), float):
            values[a], values[b] = _pair(values[a], values[b])
    for k, v in values.items():
        if isinstance(v, float):
            values[k] = f"{v:.2f}" if k not in ("n", "sentences", "unsupported") else f"{v:g}"
    template = REASON_TEMPLATES.get(kind, "{detail}")
    text = template.format(detail=detail.strip().rstrip("."), **values)
    if detail and "{detail}" not in template and kind in _WITH_DETAIL:
        text += f" ({detail.strip().rstrip('.')})"
    return text


def _reason(code: str, kind: str, detail: str = "", about: str = "", parts: Sequence[Reason] = (),
            **numbers: Any) -> Reason:
    clause = _clause(kind, detail, numbers)
    if parts:
        clause = ", and ".join([*(p.text.rstrip(".") for p in parts), clause])
    nums = {k: float(v) for k, v in numbers.items() if isinstance(v, (int, float))}
    return Reason(code=code, kind=kind, text=_sentence(clause), numbers=nums, parts=list(parts), about=about)


def _responsive_detail(reason: str, events: Sequence[Mapping[str, Any]]) -> str:
    """The responsiveness check's own detail for its last verdict of ``reason`` (which value was
    missing, how many words were copied)."""
    for e in reversed(events):
        if e.get("stage") == "responsive" and e.get("reason") == reason and e.get("ok") is False:
            return str(e.get("detail") or "")
    return ""


def explain_reason(code: str | None, events: Sequence[Mapping[str, Any]] = (), about: str = "") -> Reason:
    """``code`` (a check's reason as the trace and ``Answer.abstain_reason`` record it) as a
    :class:`Reason`: its kind, its numbers and a plain sentence. ``events``: the trace's records,
    for the details a code leaves out. A reason of no known kind keeps its words, without the
    name of the check that gave it.

    >>> explain_reason("responsive: pasted_passage").text
    'The answer pasted a passage instead of answering the question.'
    >>> explain_reason("verify: none of 1 answer sentences is supported").text
    'No sentence of the answer is backed by the passage it cites (1 checked).'
    """
    code = str(code or "").strip()
    r = _explain(code, list(events))
    return Reason(r.code, r.kind, r.text, r.numbers, r.parts, about)


def _explain(code: str, events: list[Mapping[str, Any]]) -> Reason:  # noqa: C901 - one branch per code
    m = re.match(rf"^judge: all (\d+) candidates irrelevant \(best {_NUM} < {_NUM}\)", code)
    if m:
        return _reason(code, "no_relevant_passage", n=int(m[1]), best=float(m[2]), lower=float(m[3]))
    m = re.match(r"^poison: all (\d+) candidates look like poisoning", code)
    if m:
        return _reason(code, "all_poisoned", n=int(m[1]))
    m = re.match(r"^injection: all (\d+) candidates are instructions to the reader", code)
    if m:
        return _reason(code, "all_injected", n=int(m[1]))
    m = re.match(r"^conflict: the sources give (\d+) different answers", code)
    if m:
        return _reason(code, "sources_disagree", n=int(m[1]))
    if code.startswith("generate: the model found no answer"):
        return _reason(code, "declined")
    if code.startswith("regenerate: the model found no answer"):
        return _reason(code, "declined_after_regeneration")
    if code == "verify: the answer is empty":
        return _reason(code, "empty")
    m = re.match(r"^verify: none of (\d+) answer sentences? (?:is|are) supported", code)
    if m:
        return _reason(code, "unsupported", n=int(m[1]))
    m = re.match(rf"^verify: confidence {_NUM} < {_NUM}$", code)
    if m:
        return _reason(code, "weak_support", confidence=float(m[1]), threshold=float(m[2]))
    m = re.match(r"^(?:verify: )?(.+), so the answer contradicts its own evidence$", code)
    if m:
        return _reason(code, "contradiction", detail=m[1])
    m = re.match(r"^(?:verify: )?value tie: (.*?)(?:, not about what the question asks)?$", code)
    if m:
        return _reason(code, "value_elsewhere", detail=m[1] + ", not about what the question asks")
    m = re.match(r"^responsive: (\w+)(?: \((.*)\))?$", code)
    if m and m[1] in _RESPONSIVE_KINDS:
        return _reason(code, _RESPONSIVE_KINDS[m[1]], detail=m[2] or _responsive_detail(m[1], events))
    m = re.match(rf"^decide: confidence {_NUM} < {_NUM}(?: \((.*)\))?$", code)
    if m:
        parts = [_explain(m[3], events)] if m[3] else []
        return _reason(code, "low_confidence", parts=parts, confidence=float(m[1]), threshold=float(m[2]))
    m = re.match(r"^(?:decide: vetoed: )?the answer is stated only by a coordinated voice, no independent source: "
                 r"(.*)$", code)
    if m:
        return _reason(code, "coordinated", detail=m[1])
    m = re.match(rf"^calibration: confidence {_NUM} < threshold {_NUM}", code)
    if m:
        return _reason(code, "calibrated_threshold", confidence=float(m[1]), threshold=float(m[2]))
    m = re.match(rf"^calibration: no confidence to compare with the threshold {_NUM}", code)
    if m:
        return _reason(code, "no_confidence", threshold=float(m[1]))
    m = re.match(r"^(?:regenerate: )?(\d+) of (\d+) sentences unsupported", code)
    if m:
        return _reason(code, "regenerated", unsupported=int(m[1]), sentences=int(m[2]))
    if code == "unsupported sentences removed from the answer":
        return _reason(code, "sentences_removed")
    m = re.match(rf"^confidence {_NUM} >= {_NUM}$", code)
    if m:
        return _reason(code, "near_threshold", confidence=float(m[1]), threshold=float(m[2]))
    # a reason in words already (or one this catalogue does not know): its words, without the check's name
    words = re.sub(r"^(?:[a-z_]+: )+", "", code) or "the checks gave no reason"
    return _reason(code, "other", detail=words)


def _caveat_reason(record: DecideRecord, events: Sequence[Mapping[str, Any]]) -> Reason:
    """The decide record's caveat in words: the withdrawal it answered despite, the coordinated
    voice, else a confidence within the margin of the threshold (its numbers from the record)."""
    code = record.caveat or ""
    parts: list[Reason] = []
    if record.withdrawal:
        parts.append(_explain(record.withdrawal, list(events)))
    if record.coordinated:
        parts.append(_explain(record.coordinated, list(events)))
    confidence, threshold = record.confidence, record.threshold
    if not parts and confidence is not None and threshold is not None:
        parts.append(_reason(f"confidence {confidence} >= {threshold}", "near_threshold",
                             confidence=confidence, threshold=threshold))
    if not parts:  # a record without its numbers: read its text
        parts.append(_explain(code.removeprefix("not fully confirmed by the checks: "), list(events)))
    clause = ", and ".join(p.text.rstrip(".") for p in parts)
    if parts[0].kind != "near_threshold":  # why it matters: the answer stands unconfirmed
        clause = "the checks could not confirm this answer: " + clause[0].lower() + clause[1:]
    if len(parts) == 1:
        return Reason(code, parts[0].kind, _sentence(clause), parts[0].numbers, parts[0].parts, "caveat")
    return Reason(code, "combined", _sentence(clause), {}, parts, "caveat")


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
        reason = _route_reason(str(route.get("reason") or "").strip())
        return words + (f"; {reason}" if reason else "")
    return f"searched {where}"


def _route_reason(reason: str) -> str:
    """The router's reason (``top 2 domains hold 0.96 >= 0.9 of the probability``) in words."""
    m = re.match(rf"^top (\d+) domains hold {_NUM} >= {_NUM} of the probability$", reason)
    if m:
        return (f"together the top {m[1]} hold {round(100 * float(m[2]))}% of the probability, and "
                f"{round(100 * float(m[3]))}% is enough to search them alone")
    m = re.match(rf"^top (\d+) domains \(max_domains\) hold {_NUM} of the probability$", reason)
    if m:
        return (f"the top {m[1]}, the most it may search (max_domains), hold {round(100 * float(m[2]))}% of "
                "the probability")
    m = re.match(rf"^top domain (\S+) has p={_NUM}(?: >= {_NUM}| \(max_domains=(\d+)\))?$", reason)
    if m:
        words = f"{m[1]} alone holds {round(100 * float(m[2]))}% of the probability"
        if m[3]:
            return words + f", and {round(100 * float(m[3]))}% is enough to search it alone"
        return words + (", and it may search only one (max_domains)" if m[4] else "")
    return reason


def _need_words(reason: str) -> str:
    """The retrieval decision's reason (the ``need`` record's) in words."""
    m = re.match(rf"^task router says answer directly, but the index has a relevant passage \({_NUM} >= {_NUM}\)$",
                 reason)
    if m:
        return (f"the task router would answer from the model alone, but the index has a relevant passage "
                f"(relevance {m[1]}; {m[2]} counts as relevant)")
    m = re.match(rf"^task router says answer directly and no passage is relevant \({_NUM} < {_NUM}\)(.*)$", reason)
    if m:
        words = (f"the task router would answer from the model alone and no passage looked relevant (the best "
                 f"{m[1]}; {m[2]} counts as relevant)")
        if "closed_book=never" in m[3]:
            words += ", but the sieve answers only from evidence (stages.need.closed_book = never): the relevance " \
                     "judge decides"
        return words
    m = re.match(r"^task router: (\S+)$", reason)
    if m:
        return f"the task router classed the question as {m[1].replace('_', ' ')}, which is answered from the documents"
    return reason


# Trace records of a generation (the generator records what it said as ``draft``).
GENERATIONS = ("generate", "responsive_generate", "regenerate_generate")


def _verified(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"text": str(r.get("sentence", "")), "supported": bool(r.get("supported")),
             "support": _number(r.get("score"))} for r in rows]


def _why_replaced(later: list[dict[str, Any]]) -> Reason:
    """Why a generation was followed by another: the first refusal among the records after it."""
    for e in later:
        if e.get("stage") == "responsive" and e.get("ok") is False:
            detail = str(e.get("detail") or "").strip()
            return explain_reason(f"responsive: {e.get('reason')}" + (f" ({detail})" if detail else ""))
        if e.get("stage") == "regenerate" and not e.get("skipped"):
            return explain_reason(f"regenerate: {e.get('reason', '')}")
    return explain_reason("the checks asked for another answer")


def _draft(text: str, why: Reason, replaced_by: str, sentences: list[dict[str, Any]]) -> WithdrawnDraft:
    return WithdrawnDraft(text, why.text, replaced_by, sentences, code=why.code, kind=why.kind)


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
            out.append(_draft(draft, _why_replaced(between), "regenerated answer", _verified(rows)))
        elif abstained:
            claims = [{"sentence": c.get("sentence"), "supported": c.get("supported"), "score": c.get("score")}
                      for c in data.get("claims") or []]
            out.append(_draft(draft, explain_reason(data.get("abstain_reason"), events), "abstention",
                              _verified(claims or rows)))
        elif any(e.get("stage") == "responsive" and e.get("attempt") == "extracted" and e.get("ok") for e in between):
            out.append(_draft(draft, _why_replaced(between), "sentence extracted from the pasted passage",
                              _verified(rows)))
    if not at:  # a trace from before generations recorded their drafts: what the verifier saw
        out += _withdrawn_from_claims(data, events)
    for e in events:
        if e.get("stage") == "verify" and e.get("removed"):
            removed = [str(s) for s in e["removed"]]
            rows = [r for r in events if r.get("stage") == "verify" and str(r.get("sentence")) in removed]
            out.append(_draft(" ".join(removed),
                              explain_reason(str(e.get("reason") or "unsupported sentences removed from the answer")),
                              "the answer without these sentences",
                              _verified(rows) or [{"text": s, "supported": False, "support": None} for s in removed]))
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
        out.append(_draft(" ".join(str(r.get("sentence", "")) for r in rows),
                          explain_reason(f"regenerate: {regen.get('reason', '')}"), "regenerated answer",
                          _verified(rows)))
    if data.get("abstained"):
        rows = [{"sentence": c.get("sentence"), "supported": c.get("supported"), "score": c.get("score")}
                for c in data.get("claims") or []] or attempts.get(max(attempts, default=0), [])
        if rows:
            out.append(_draft(" ".join(str(r.get("sentence", "")) for r in rows),
                              explain_reason(data.get("abstain_reason"), events), "abstention", _verified(rows)))
    return out


def _facts(data: dict[str, Any], events: list[dict[str, Any]]) -> list[str]:
    """What decided how the answer was made: the retrieval decision."""
    need = [e for e in events if e.get("stage") == "need"][:1]
    return [("retrieved" if ev.get("retrieve") else "no retrieval")
            + (f": {_need_words(str(ev['reason']))}" if ev.get("reason") else "") for ev in need]


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


def _decided(events: list[dict[str, Any]]) -> list[DecideRecord]:
    """The decide stage's records (:class:`ragsieve.records.DecideRecord`), in order."""
    return [DecideRecord.from_event(e) for e in events if e.get("stage") == "decide"]


def _caveat(events: list[dict[str, Any]]) -> Reason | None:
    """The decide stage's caveat on the answer it kept (the last decision's) in words, if any."""
    decided = [r for r in _decided(events) if r.decision is not None]
    if not decided or not decided[-1].caveat:
        return None
    return _caveat_reason(decided[-1], events)


def _threshold(events: list[dict[str, Any]]) -> float | None:
    """The decide stage's threshold (answers below it are withheld), when it decided."""
    decided = [r.threshold for r in _decided(events) if r.threshold is not None]
    return decided[-1] if decided else None


def _confidence_note(confidence: Any, threshold: float | None) -> str | None:
    if not isinstance(confidence, (int, float)):
        return None
    note = f"confidence {float(confidence):.2f} on a 0-1 scale"
    if threshold is not None:
        note += f" (answers below {_pair(float(confidence), threshold)[1]} are withheld)"
    return note


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


def present_answer(answer: Any, *, allow_link_hosts: Sequence[str] = ()) -> AnswerView:
    """The view of ``answer``: an :class:`~ragsieve.types.Answer`, its ``to_dict()`` form (with
    the service's ``pipeline`` and ``index_generation`` when present), a chat completion with
    ``ragsieve_trace``, a bare trace, or a search result (``hits``).

    ``allow_link_hosts`` (``present.allow_link_hosts``): the hosts the answer may link to besides
    its evidence's documents; every other image and link is made inert (``inert_links``)."""
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
    documents = evidence_documents(evidence)
    inert = inert_links(text, documents, allow_link_hosts)
    text = inert.text
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
    abstention = explain_reason(data.get("abstain_reason"), events, "abstention") if abstained else None
    caveat = None if abstained else _caveat(events)
    view = AnswerView(
        question=str(data.get("question") or trace.get("query") or ""),
        outcome="abstained" if abstained else "answered",
        text=text,
        abstain_reason=abstention.text if abstention else None,
        abstain_code=data.get("abstain_reason"),
        confidence=data.get("confidence"),
        threshold=_threshold(events),
        confidence_note=_confidence_note(data.get("confidence"), _threshold(events)),
        pipeline=data.get("pipeline"),
        index_generation=data.get("index_generation"),
        sentences=sentences,
        citation_note=_citation_note(sentences, abstained),
        caveat=caveat.text if caveat else None,
        caveat_code=caveat.code if caveat else None,
        sources=sources,
        withdrawn=_withdrawn(data, events),
        facts=_facts(data, events),
        notes=_notes(events, evidence),
        route=_route_words(events),
        claim_judge=str(claims[0].get("judge")) if claims and isinstance(claims[0], Mapping) else None,
    )
    removed = list(inert.removed)
    for i, draft in enumerate(view.withdrawn):
        quiet = inert_links(draft.text, documents, allow_link_hosts)
        if quiet.removed:
            view.withdrawn[i] = WithdrawnDraft(quiet.text, draft.reason, draft.replaced_by, draft.sentences,
                                               draft.code, draft.kind)
            removed += quiet.removed
    view.inert_links = [r.to_dict() for r in removed]
    view.notes += list(dict.fromkeys(r.reason for r in removed))
    view.reasons = [r.to_dict() for r in (abstention, caveat) if r is not None] + [
        {"about": "withdrawn draft", "kind": w.kind, "code": w.code, "text": w.reason,
         **{k: v for k, v in explain_reason(w.code, events).to_dict().items() if k in ("numbers", "parts")}}
        for w in view.withdrawn
    ]
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
        # The conflict stage records its verdict with every check ("the sources agree", "no passage
        # states an answer"): only a check that found a conflict is one to show (a record without
        # the verdict, from an older trace, still is).
        if e.get("stage") == "conflict":
            record = ConflictRecord.from_event(e)
            if record.shown:
                view.conflicts.append(record.view())


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
