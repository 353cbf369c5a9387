"""The audit's typed report: findings, their members and evidence, and one JSON schema.

:class:`AuditReport` is what :func:`ragsieve.audit.audit_index` returns, what ``ragsieve audit
--json`` prints and what an HTTP endpoint can return as it is (:meth:`AuditReport.to_json`).
Its JSON shape is :data:`AUDIT_SCHEMA` (documented in docs/audit.md); ``schema_version`` changes
when a field changes meaning or disappears.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

FindingKind = Literal["mirror", "coordinated-voice", "conflict", "harmful-source"]
FINDING_KINDS: tuple[str, ...] = get_args(FindingKind)
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Member:
    """One passage a finding is about: where it is (document, chunk, file or address, host)
    and the sentence of it that shows the problem (the whole chunk text when no one sentence does)."""

    doc_id: str
    chunk_id: str
    citation: str
    host: str
    sentence: str
    link: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id, "chunk_id": self.chunk_id, "citation": self.citation, "host": self.host,
            "sentence": self.sentence, "link": self.link,
        }  # fmt: skip


@dataclass(frozen=True)
class ConflictValues:
    """The two values a conflicting pair states, of one kind, with the reader's sureness of each
    (the extractive reader's probability that the sentence answers the derived question; ``None``
    when the reader was not run)."""

    question: str
    kind: str
    first: str
    second: str
    first_sureness: float | None = None
    second_sureness: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question, "kind": self.kind, "values": [self.first, self.second],
            "sureness": [_round(self.first_sureness), _round(self.second_sureness)],
        }  # fmt: skip


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


@dataclass(frozen=True)
class Finding:
    """One problem in the corpus.

    ``score`` in [0, 1] ranks findings of one kind (higher: surer or worse); ``severity`` is
    ``"high"`` or ``"medium"``; ``members`` the passages involved; ``evidence`` a sentence a
    person reads first; ``original`` (mirrors) the document the others copy when the index can
    tell; ``exclude`` the documents to leave out to fix it (what ``--exclude`` reads);
    ``values`` (conflicts) the two values; ``details`` numbers behind the score."""

    kind: FindingKind
    score: float
    severity: Literal["high", "medium"]
    members: tuple[Member, ...]
    evidence: str
    exclude: tuple[str, ...] = ()
    original: str | None = None
    values: ConflictValues | None = None
    details: dict[str, float | int | str] = field(default_factory=dict)

    @property
    def documents(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m.doc_id for m in self.members))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "score": round(float(self.score), 4),
            "severity": self.severity,
            "documents": list(self.documents),
            "members": [m.to_dict() for m in self.members],
            "evidence": self.evidence,
            "exclude": list(self.exclude),
            "original": self.original,
            "values": self.values.to_dict() if self.values is not None else None,
            "details": dict(self.details),
        }


@dataclass(frozen=True)
class AuditReport:
    """Every finding of one audit of one index generation, ranked (kind order, then score)."""

    index: str
    generation: str
    passages: int
    documents: int
    findings: tuple[Finding, ...]
    checks: tuple[str, ...]
    candidates: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    notes: tuple[str, ...] = ()

    def of_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def counts(self) -> dict[str, int]:
        return {kind: len(self.of_kind(kind)) for kind in FINDING_KINDS}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "index": self.index,
            "generation": self.generation,
            "passages": self.passages,
            "documents": self.documents,
            "checks": list(self.checks),
            "counts": self.counts(),
            "candidates": dict(self.candidates),
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
            "findings": [f.to_dict() for f in self.findings],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON text (:data:`AUDIT_SCHEMA`)."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)


_MEMBER = {
    "type": "object",
    "required": ["doc_id", "chunk_id", "citation", "host", "sentence", "link"],
    "additionalProperties": False,
    "properties": {
        "doc_id": {"type": "string"}, "chunk_id": {"type": "string"}, "citation": {"type": "string"},
        "host": {"type": "string"}, "sentence": {"type": "string"}, "link": {"type": ["string", "null"]},
    },
}  # fmt: skip
_VALUES = {
    "type": "object",
    "required": ["question", "kind", "values", "sureness"],
    "additionalProperties": False,
    "properties": {
        "question": {"type": "string"},
        "kind": {"type": "string"},
        "values": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2},
        "sureness": {"type": "array", "items": {"type": ["number", "null"]}, "minItems": 2, "maxItems": 2},
    },
}
_FINDING = {
    "type": "object",
    "required": ["kind", "score", "severity", "documents", "members", "evidence", "exclude", "original", "values",
                 "details"],
    "additionalProperties": False,
    "properties": {
        "kind": {"enum": list(FINDING_KINDS)},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "severity": {"enum": ["high", "medium"]},
        "documents": {"type": "array", "items": {"type": "string"}},
        "members": {"type": "array", "items": _MEMBER},
        "evidence": {"type": "string"},
        "exclude": {"type": "array", "items": {"type": "string"}},
        "original": {"type": ["string", "null"]},
        "values": {"oneOf": [{"type": "null"}, _VALUES]},
        "details": {"type": "object", "additionalProperties": {"type": ["number", "string"]}},
    },
}  # fmt: skip
AUDIT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ragsieve audit report",
    "type": "object",
    "required": ["schema_version", "index", "generation", "passages", "documents", "checks", "counts",
                 "candidates", "seconds", "notes", "findings"],
    "additionalProperties": False,
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "index": {"type": "string"},
        "generation": {"type": "string"},
        "passages": {"type": "integer", "minimum": 0},
        "documents": {"type": "integer", "minimum": 0},
        "checks": {"type": "array", "items": {"enum": list(FINDING_KINDS)}},
        "counts": {"type": "object", "required": list(FINDING_KINDS),
                   "additionalProperties": {"type": "integer", "minimum": 0}},
        "candidates": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
        "seconds": {"type": "number", "minimum": 0},
        "notes": {"type": "array", "items": {"type": "string"}},
        "findings": {"type": "array", "items": _FINDING},
    },
}  # fmt: skip
