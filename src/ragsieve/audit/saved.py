"""Audits kept with the index: ``ragsieve audit --save`` writes the report of one generation to
``<index>/audits/<generation>.json``, beside the generations (which are never modified once
published); the sieve's audit prior and the next, incremental audit read it back.

A saved audit is data, never code: it is parsed as JSON and checked against
:data:`~ragsieve.audit.report.AUDIT_SCHEMA` and against the generation it claims to describe
before anything is taken from it; a file that fails is refused with an error naming it (the
prior then gives no source less trust, and says so in the trace). The index's writers remove
the saved audit of a generation when they remove the generation.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragsieve.audit.report import AUDIT_SCHEMA, AuditReport
from ragsieve.errors import IndexStoreError

if TYPE_CHECKING:
    from ragsieve.audit.incremental import AuditState

logger = logging.getLogger(__name__)

AUDITS = "audits"  # the index folder's sub-folder (ragsieve.index.storage.AUDITS names the same)
# a saved audit larger than this is refused before it is parsed (a 300k-passage corpus's audit
# with thousands of findings is a few MB)
MAX_BYTES = 64 * 1024 * 1024
# the extra state an incremental audit reuses, beside the report (ragsieve.audit.incremental)
STATE_SUFFIX = ".state.json"


def saved_path(index_dir: Path, generation: str) -> Path:
    from ragsieve.index.storage import safe_component

    return Path(index_dir) / AUDITS / f"{safe_component(generation, 'generation')}.json"


def save_report(index_dir: Path, report: AuditReport, state: dict[str, Any] | None = None) -> Path:
    """Write ``report`` (of ``report.generation``) into ``index_dir``'s audits folder, and the
    incremental audit's ``state`` beside it; returns the report's path."""
    from ragsieve.io import atomic_write_text

    path = saved_path(index_dir, report.generation)
    path.parent.mkdir(exist_ok=True)
    atomic_write_text(path, report.to_json())
    if state is not None:
        atomic_write_text(path.with_name(path.stem + STATE_SUFFIX), json.dumps(state, separators=(",", ":")))
    return path


def _read_json(path: Path, what: str) -> Any:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise IndexStoreError(f"the saved {what} {path} has {size} bytes, over {MAX_BYTES}; delete it and run "
                                  "`ragsieve audit --save` again")
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise IndexStoreError(f"cannot read the saved {what} {path} ({exc.strerror})") from exc
    except ValueError as exc:
        raise IndexStoreError(f"the saved {what} {path} is not JSON ({exc}); delete it and run "
                              "`ragsieve audit --save` again") from exc


def read_saved(index_dir: Path, generation: str) -> dict[str, Any] | None:
    """The saved audit report of ``generation`` as checked JSON, or ``None`` when none was
    saved. A file that is not the schema's, or describes another generation, is an
    :class:`~ragsieve.errors.IndexStoreError` naming it."""
    import jsonschema

    path = saved_path(index_dir, generation)
    if not path.is_file():
        return None
    data = _read_json(path, "audit")
    try:
        jsonschema.validate(data, AUDIT_SCHEMA)
    except jsonschema.ValidationError as exc:
        raise IndexStoreError(f"the saved audit {path} does not match the audit schema ({exc.message}); delete it "
                              "and run `ragsieve audit --save` again") from None
    if data["generation"] != generation:
        raise IndexStoreError(f"the saved audit {path} describes generation {data['generation']}, not {generation}; "
                              "delete it and run `ragsieve audit --save` again")
    return dict(data)


def read_state(index_dir: Path, generation: str) -> dict[str, Any] | None:
    """The incremental audit's saved state of ``generation`` (unchecked JSON: its reader checks
    each part it takes), or ``None``."""
    path = saved_path(index_dir, generation)
    path = path.with_name(path.stem + STATE_SUFFIX)
    if not path.is_file():
        return None
    data = _read_json(path, "audit state")
    return data if isinstance(data, dict) else None


def save_audit(index_dir: Path, report: AuditReport, state: AuditState) -> Path:
    """:func:`save_report` with the incremental audit's state."""
    return save_report(index_dir, report, state.to_json())


def latest_state(index_dir: Path, generation: str) -> tuple[AuditState | None, str]:
    """The state the audit of ``generation`` can reuse, and a note: the saved state of that
    generation, else the newest saved state of another generation of the index (the one a
    re-ingest replaced). A state that fails its schema check is skipped, with a note."""
    from ragsieve.audit.incremental import AuditState

    folder = Path(index_dir) / AUDITS
    if not folder.is_dir():
        return None, ""
    names = sorted((p.name[: -len(STATE_SUFFIX)] for p in folder.glob(f"*{STATE_SUFFIX}")), reverse=True)
    names.sort(key=lambda name: name != generation)  # this generation's own state first
    notes = []
    for name in names:
        try:
            data = read_state(index_dir, name)
        except IndexStoreError as exc:
            notes.append(str(exc))
            continue
        state = AuditState.parse(data) if data is not None else None
        if state is None or state.generation != name:
            notes.append(f"the saved audit state of generation {name} does not match its schema; not reused")
            continue
        return state, "; ".join(notes)
    return None, "; ".join(notes)


@dataclass(frozen=True)
class TrustMarks:
    """What a saved audit says about trust: the documents in a coordinated voice and the sources
    that hurt, each with the reason a person reads in the trace."""

    generation: str
    documents: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def reason(self, doc_id: str, source: str) -> str | None:
        """Why a passage of ``doc_id`` from ``source`` starts with less trust (``None``: it does not)."""
        return self.documents.get(doc_id) or self.sources.get(source)

    @classmethod
    def of(cls, report: dict[str, Any]) -> TrustMarks:
        """The marks of a checked report (:func:`read_saved`)."""
        documents: dict[str, str] = {}
        sources: dict[str, str] = {}
        for finding in report["findings"]:
            if finding["kind"] == "coordinated-voice":
                hosts = len({m["host"] for m in finding["members"]})
                why = (f"in a coordinated voice of {len(finding['documents'])} documents on {hosts} hosts "
                       f"(audit of generation {report['generation']}, score {finding['score']:.2f})")
                for doc in finding["documents"]:
                    documents.setdefault(doc, why)
            elif finding["kind"] == "harmful-source":
                source = finding["details"].get("source")
                if isinstance(source, str):
                    sources.setdefault(source, f"a source that hurt answers to labelled questions (audit of "
                                               f"generation {report['generation']}, score {finding['score']:.2f})")
        return cls(str(report["generation"]), documents, sources)


def trust_marks(index_dir: Path, generation: str) -> TrustMarks | None:
    """:class:`TrustMarks` of the saved audit of ``generation`` (``None`` when none was saved)."""
    report = read_saved(index_dir, generation)
    return TrustMarks.of(report) if report is not None else None
