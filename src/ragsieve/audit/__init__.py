"""Corpus audit: problems of an index found once, at the source, before any question.

One finding kind per module: :mod:`~ragsieve.audit.mirrors` (documents that copy another),
:mod:`~ragsieve.audit.coordinated` (coordinated voices), :mod:`~ragsieve.audit.conflicts`
(documents stating different values for one fact) and :mod:`~ragsieve.audit.harmful` (sources
data importance would prune, given labelled questions). :func:`audit_index` runs them and
returns an :class:`AuditReport` (docs/audit.md has its JSON schema).

Example::

    >>> from ragsieve.audit import FINDING_KINDS
    >>> FINDING_KINDS
    ('mirror', 'coordinated-voice', 'conflict', 'harmful-source')
"""

from __future__ import annotations

from ragsieve.audit.report import (
    AUDIT_SCHEMA,
    FINDING_KINDS,
    AuditReport,
    ConflictValues,
    Finding,
    FindingKind,
    Member,
)
from ragsieve.audit.run import audit_index, audit_with_state

__all__ = [
    "AUDIT_SCHEMA",
    "FINDING_KINDS",
    "AuditReport",
    "ConflictValues",
    "Finding",
    "FindingKind",
    "Member",
    "audit_index",
    "audit_with_state",
]
