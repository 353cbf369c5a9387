"""The typed records the sieve's stages leave for the stages after them and for the views.

A stage that another stage (or a presenter) reads writes its output as one of these frozen
records into the request's :class:`ragsieve.sieve.state.PipelineState` and records the same
thing in the trace with :meth:`to_event` (the trace's JSON shape is the record's). Readers read
attributes, never trace keys: the ``decide`` stage reads the poison check's voices and the
conflict check's verdict from :class:`PoisonRecord` and :class:`ConflictRecord`, and
:func:`ragsieve.present.present_answer` reads a saved answer's records back with
:meth:`from_event` (one place per record that knows its keys, tolerant of traces written by
earlier versions).

They live in the ground layer, beside the answer types, so the presenters read them without
importing the sieve.

Example:
    >>> record = DecideRecord(decision="answer", confidence=0.4, threshold=0.08, draft="Paris [1].")
    >>> event = {"stage": "decide", **record.to_event()}
    >>> DecideRecord.from_event(event) == record, event["decision"]
    (True, 'answer')
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConflictRecord", "DecideRecord", "DecisionModelChoice", "PoisonRecord", "VoiceRecord"]


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        return ()
    return tuple(str(v) for v in value)


def _float(value: Any, default: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    v = float(value)
    return v if math.isfinite(v) else default


def _optional_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


# ------------------------------------------------------------------------------------ poison
@dataclass(frozen=True)
class VoiceRecord:
    """One coordinated voice the poison check found (``stages.poison.coordination``): its
    members, hosts, documents, tightness, how it was linked (``by``), the passages in its tight
    cluster, and its coordination signal with the values it asserts
    (:class:`ragsieve.voices.Coordination`)."""

    voice: str
    members: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    documents: int = 0
    mean_cosine: float = 0.0
    min_cosine: float = 0.0
    by: tuple[str, ...] = ()
    coordinated: bool = True
    cluster: tuple[str, ...] = ()
    coordination: float = 0.0
    claims: tuple[str, ...] = ()
    exclusive: tuple[str, ...] = ()
    rivals: tuple[str, ...] = ()
    reason: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VoiceRecord:
        """From the voice's trace form (:meth:`to_dict`, or a poison check's ``voice_record``)."""
        return cls(
            voice=str(data.get("voice", "")),
            members=_strings(data.get("members")),
            hosts=_strings(data.get("hosts")),
            documents=int(_float(data.get("documents"))),
            mean_cosine=_float(data.get("mean_cosine")),
            min_cosine=_float(data.get("min_cosine")),
            by=_strings(data.get("by")),
            coordinated=bool(data.get("coordinated", True)),
            cluster=_strings(data.get("cluster")),
            coordination=_float(data.get("coordination")),
            claims=_strings(data.get("claims")),
            exclusive=_strings(data.get("exclusive")),
            rivals=_strings(data.get("rivals")),
            reason=str(data.get("reason") or ""),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "voice": self.voice, "members": list(self.members), "hosts": list(self.hosts),
            "documents": self.documents, "mean_cosine": self.mean_cosine, "min_cosine": self.min_cosine,
            "by": list(self.by), "coordinated": self.coordinated, "cluster": list(self.cluster),
            "coordination": self.coordination, "claims": list(self.claims), "exclusive": list(self.exclusive),
            "rivals": list(self.rivals), "reason": self.reason,
        }  # fmt: skip

    def describe(self) -> str:
        """The voice in words, as a caveat or a veto names it."""
        hosts = sorted(set(self.hosts))
        named = ", ".join(hosts[:3]) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")
        return (
            f"{len(self.cluster)} passages from {self.documents} documents on {len(hosts)} hosts ({named}) "
            f"in one tight cluster (cosine mean {self.mean_cosine:.2f})"
        )


@dataclass(frozen=True)
class PoisonRecord:
    """What the poison check decided: the candidates it dropped, how many it looked at and,
    with ``stages.poison.coordination`` on, the coordinated voices (``None`` with it off, so the
    trace's record has no ``voices`` key then)."""

    dropped: tuple[str, ...] = ()
    candidates: int = 0
    voices: tuple[VoiceRecord, ...] | None = None

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> PoisonRecord:
        voices = event.get("voices")
        return cls(
            dropped=_strings(event.get("dropped")),
            candidates=int(_float(event.get("candidates"))),
            voices=(tuple(VoiceRecord.from_dict(v) for v in voices if isinstance(v, Mapping))
                    if isinstance(voices, Sequence) and not isinstance(voices, str) else None),
        )  # fmt: skip

    def to_event(self) -> dict[str, Any]:
        event: dict[str, Any] = {"dropped": list(self.dropped), "candidates": self.candidates}
        if self.voices is not None:
            event["voices"] = [v.to_dict() for v in self.voices]
        return event

    def coordinated_members(self) -> list[str]:
        """The passages in every coordinated voice's tight cluster, voice by voice."""
        return [cid for voice in self.voices or () for cid in voice.cluster]


# ---------------------------------------------------------------------------------- conflict
@dataclass(frozen=True)
class ConflictRecord:
    """The conflict check's verdict: whether the kept passages disagree on the asked value
    (``conflict``; ``None`` in a record of an older trace that does not say), its decision
    (``stages.conflict.policy``'s, or why there is no disagreement: "consistent", "no-answer",
    "one-document", ...), the statement a reader is shown and the answer groups (each as its
    trace form: ``answer``, ``independent_sources``, ``weight``, ``sources``, ``passages``)."""

    conflict: bool | None = None
    decision: str | None = None
    message: str | None = None
    groups: tuple[Mapping[str, Any], ...] | None = None

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> ConflictRecord:
        groups = event.get("groups")
        conflict = event.get("conflict")
        return cls(
            conflict=None if conflict is None else bool(conflict),
            decision=_optional_str(event.get("decision")),
            message=_optional_str(event.get("message")),
            groups=tuple(dict(g) for g in groups if isinstance(g, Mapping)) if isinstance(groups, list) else None,
        )

    @property
    def found(self) -> bool:
        """Whether the passages disagree."""
        return bool(self.conflict)

    @property
    def extra_groups(self) -> int:
        """Answer groups beyond the first."""
        return max(len(self.groups or ()) - 1, 0)

    @property
    def shown(self) -> bool:
        """Whether a view shows it: a check that found a disagreement, or an older record that
        lists groups without saying (one that says "the sources agree" is not shown)."""
        return self.groups is not None and self.conflict is not False

    def view(self) -> dict[str, Any]:
        """What a view shows of it: its message, decision, groups and verdict, those it has."""
        out: dict[str, Any] = {
            "message": self.message, "decision": self.decision,
            "groups": None if self.groups is None else [dict(g) for g in self.groups], "conflict": self.conflict,
        }  # fmt: skip
        return {k: v for k, v in out.items() if v is not None}


# ------------------------------------------------------------------------------------ decide
@dataclass(frozen=True)
class DecisionModelChoice:
    """Which decision model judged the draft: the generator it was chosen for (its name), the
    family that name falls in (``smollm2``, ``gemma``, or ``served``: the model-agnostic
    default, for a model served over HTTP or any generator without its own), the model file,
    the generator its training drafts came from (its header's ``about.llm``), when no model
    for this family ships and another one decides instead, the note that says so, and the
    declared signals the model does not weigh (``unweighed``: it was trained without them)."""

    generator: str
    family: str
    file: str
    trained_on: str | None = None
    fallback: str | None = None
    unweighed: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"generator": self.generator, "family": self.family, "file": self.file,
                               "trained_on": self.trained_on}  # fmt: skip
        if self.fallback is not None:
            out["fallback"] = self.fallback
        if self.unweighed:
            out["unweighed"] = list(self.unweighed)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecisionModelChoice:
        return cls(str(data.get("generator", "")), str(data.get("family", "")), str(data.get("file", "")),
                   _optional_str(data.get("trained_on")), _optional_str(data.get("fallback")),
                   _strings(data.get("unweighed")))  # fmt: skip


@dataclass(frozen=True)
class DecideRecord:
    """What the ``decide`` stage concluded: ``decision`` ("answer", "caveat", "abstain"; ``None``
    in observe mode, which records and never decides), the confidence and the threshold it was
    compared with, the draft, the withdrawal a check asked for (its reason), the signals and those
    that moved the confidence most, the caveat the answer carries, the coordinated voice the draft
    rests on alone, the veto that ended the run, and the decision model that judged it."""

    decision: str | None = None
    confidence: float | None = None
    threshold: float | None = None
    draft: str = ""
    withdrawal: str | None = None
    signals: Mapping[str, float] = field(default_factory=dict)
    moved_by: Mapping[str, float] = field(default_factory=dict)
    caveat: str | None = None
    coordinated: str | None = None
    vetoed: str | None = None
    mode: str = "decide"
    model: DecisionModelChoice | None = None

    @property
    def observed(self) -> bool:
        return self.mode == "observe"

    def to_event(self) -> dict[str, Any]:
        """The ``decide`` trace record's fields (the shape the trace has always had)."""
        if self.observed:
            return {"mode": "observe", "signals": dict(self.signals), "draft": self.draft,
                    "withdrawal": self.withdrawal, "coordinated": self.coordinated}  # fmt: skip
        event: dict[str, Any] = {"decision": self.decision}
        if self.vetoed is not None:
            event["vetoed"] = self.vetoed
        event |= {
            "signals": dict(self.signals), "confidence": self.confidence, "threshold": self.threshold,
            "draft": self.draft, "withdrawal": self.withdrawal, "moved_by": dict(self.moved_by),
        }  # fmt: skip
        if self.coordinated is not None:
            event["coordinated"] = self.coordinated
        if self.caveat is not None:
            event["caveat"] = self.caveat
        if self.model is not None:
            event["model"] = self.model.to_dict()
        return event

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> DecideRecord:
        signals = event.get("signals")
        moved = event.get("moved_by")
        model = event.get("model")
        return cls(
            decision=_optional_str(event.get("decision")),
            confidence=_optional_float(event.get("confidence")),
            threshold=_optional_float(event.get("threshold")),
            draft=str(event.get("draft") or ""),
            withdrawal=_optional_str(event.get("withdrawal")) or None,
            signals={str(k): _float(v) for k, v in signals.items()} if isinstance(signals, Mapping) else {},
            moved_by={str(k): _float(v) for k, v in moved.items()} if isinstance(moved, Mapping) else {},
            caveat=_optional_str(event.get("caveat")) or None,
            coordinated=_optional_str(event.get("coordinated")) or None,
            vetoed=_optional_str(event.get("vetoed")),
            mode=str(event.get("mode") or "decide"),
            model=DecisionModelChoice.from_dict(model) if isinstance(model, Mapping) else None,
        )
