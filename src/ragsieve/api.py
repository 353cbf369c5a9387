"""The public classes ``import ragsieve`` hands out, where they join components that must not
import each other.

:class:`Index` is :class:`ragsieve.index.Index` with the corpus audit as a method. The audit
reads an index, so ``ragsieve.index`` cannot import ``ragsieve.audit`` (the two packages would
import each other; ``tests/test_layers.py`` forbids that); this module imports both and sits
beside them. Every constructor of the index (``open``, ``build``, ``from_chunks``, and the
generations ``without_documents`` writes) returns this class when called on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ragsieve.audit import AuditReport, audit_index
from ragsieve.audit.corpus import NEIGHBOURS, ProgressFn
from ragsieve.index import Index as _BaseIndex


class Index(_BaseIndex):
    """A searchable, auditable collection of chunks (see :class:`ragsieve.index.Index`).

    Example:
        >>> import shutil
        >>> from ragsieve import Index
        >>> from ragsieve.types import Chunk
        >>> shutil.rmtree("/tmp/ragsieve-doc-api-index", ignore_errors=True)
        >>> chunks = [Chunk(id="a", text="Graphene is one layer of carbon.", doc_id="a", source="a.md")]
        >>> index = Index.from_chunks(chunks, "/tmp/ragsieve-doc-api-index")
        >>> index.audit().counts()["mirror"]
        0
    """

    def audit(
        self,
        *,
        checks: Sequence[str] | None = None,
        questions: str | Path | None = None,
        neighbours: int = NEIGHBOURS,
        use_reader: bool = True,
        progress: ProgressFn | None = None,
    ) -> AuditReport:
        """Audit this generation's passages: :func:`ragsieve.audit.audit_index` with the same
        arguments (docs/audit.md)."""
        return audit_index(self, checks=checks, questions=questions, neighbours=neighbours,
                           use_reader=use_reader, progress=progress)


__all__ = ["Index"]
