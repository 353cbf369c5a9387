"""Citations a user can open: where a chunk's text came from, as text and as a link.

Pure functions over :class:`ragsieve.types.Chunk` (and the ``SearchHit``/``to_dict`` forms of
it); nothing here reads files or the network. A citation reads ``manual.pdf:6`` for page 6 of a
PDF, ``guide/install.md#Install > Linux`` for a Markdown or HTML section, the record's address for
a JSON/CSV row that has one, and the full chunk id otherwise. Ids and paths are never cut.

Example:
    >>> from ragsieve.types import Chunk
    >>> chunk = Chunk(id="manual.pdf:3", text="...", doc_id="manual.pdf", source="manual.pdf",
    ...               path="manual.pdf", page=6, page_label="iv")
    >>> c = Citation.from_chunk(chunk)
    >>> format_citation(c)
    'manual.pdf:6 (page iv)'
    >>> citation_uri(c, "/data/corpus")
    'file:///data/corpus/manual.pdf#page=6'
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import PurePath, PurePosixPath
from typing import Any, Protocol
from urllib.parse import quote, urlparse


class LocatedChunk(Protocol):
    """What a citation reads from a chunk (:class:`ragsieve.types.Chunk` has these fields);
    a protocol rather than an import, because ``ragsieve.types`` builds its ``citation``
    field with this module."""

    @property
    def id(self) -> str: ...
    @property
    def path(self) -> str | None: ...
    @property
    def page(self) -> int | None: ...
    @property
    def page_label(self) -> str | None: ...
    @property
    def heading(self) -> list[str] | None: ...
    @property
    def char_start(self) -> int | None: ...
    @property
    def char_end(self) -> int | None: ...
    @property
    def url(self) -> str | None: ...

__all__ = ["HEADING_SEPARATOR", "Citation", "citation_uri", "format_citation"]

# Joins a heading path (outermost first) in citations: ``guide.md#Install > Linux``.
HEADING_SEPARATOR = " > "
_WEB_SCHEMES = ("http", "https")


@dataclass(frozen=True)
class Citation:
    """Where one cited passage came from.

    ``path`` is relative to the ingested folder; ``page`` is 1-based (PDF) and ``page_label`` the
    label the PDF prints on that page; ``heading`` the section's heading path joined with
    :data:`HEADING_SEPARATOR`; ``start``/``end`` the passage's character span in the extracted
    text of its page (PDF) or document; ``url`` the record's original address.
    """

    chunk_id: str
    path: str | None = None
    page: int | None = None
    page_label: str | None = None
    heading: str | None = None
    start: int | None = None
    end: int | None = None
    url: str | None = None

    @classmethod
    def from_chunk(cls, chunk: LocatedChunk) -> Citation:
        heading = HEADING_SEPARATOR.join(h for h in chunk.heading or [] if h) or None
        return cls(
            chunk_id=chunk.id,
            path=chunk.path,
            page=chunk.page,
            page_label=chunk.page_label,
            heading=heading,
            start=chunk.char_start,
            end=chunk.char_end,
            url=chunk.url,
        )

    @classmethod
    def from_hit(cls, hit: Any) -> Citation:
        """From a :class:`ragsieve.types.SearchHit` or its ``to_dict()`` form (an ``evidence``
        entry of ``--json``)."""
        if not isinstance(hit, dict):
            return cls.from_chunk(hit.chunk)
        heading = hit.get("heading")
        if isinstance(heading, list):
            heading = HEADING_SEPARATOR.join(str(h) for h in heading if h) or None
        return cls(
            chunk_id=str(hit.get("id", "")),
            path=hit.get("path"),
            page=hit.get("page"),
            page_label=hit.get("page_label"),
            heading=heading,
            start=hit.get("char_start"),
            end=hit.get("char_end"),
            url=hit.get("url"),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def format_citation(c: Citation) -> str:
    """The citation as a person reads it, never cut: ``path:page``, ``path#heading``, the URL or the id.

    A page label that differs from the page number is added (``manual.pdf:6 (page iv)``); a
    record with an address is cited by that address; anything without a known location by its
    whole chunk id.
    """
    if c.url and not c.path:
        return c.url
    if c.path is None:
        return c.url or c.chunk_id
    if c.page is not None:
        text = f"{c.path}:{c.page}"
        if c.page_label and c.page_label != str(c.page):
            text += f" (page {c.page_label})"
        return text
    if c.heading:
        return f"{c.path}#{c.heading}"
    if c.url:
        return c.url
    # A record of a JSON/CSV file without an address: the id names the record inside the file.
    doc_part = c.chunk_id.rsplit(":", 1)[0]
    return doc_part if doc_part.startswith(c.path + "#") else c.path


def citation_uri(c: Citation, root: str | PurePath | None) -> str | None:
    """A link that opens the cited source, or ``None`` when there is none.

    The record's ``http(s)`` address when it has one; otherwise a ``file://`` URI of ``path``
    under ``root`` (the ingested folder), with ``#page=N`` for a PDF page (the fragment PDF
    viewers open at). ``root`` made absolute against the current folder if relative; no file
    is read, so the link may name a file that has since moved.
    """
    if c.url and urlparse(c.url).scheme.lower() in _WEB_SCHEMES:
        return c.url
    if c.path is None or root is None:
        return None
    base = PurePosixPath(_absolute(str(root)))
    rel = PurePosixPath(c.path)
    if rel.is_absolute() or ".." in rel.parts:
        return None  # not a path under the ingested folder
    uri = "file://" + quote(str(base / rel), safe="/:@!$&'()*+,;=-._~")
    if c.page is not None:
        uri += f"#page={c.page}"
    return uri


def _absolute(root: str) -> str:
    import os

    return os.path.abspath(root).replace(os.sep, "/")
