"""Citations a user can open: where a chunk's text came from, as text and as a link.

Pure functions over :class:`ragsieve.types.Chunk` (and the ``SearchHit``/``to_dict`` forms of
it); nothing here reads files or the network. Ids and paths are never cut.

One scheme, so a chunk and a page are never confused:

* a **chunk id** is ``<path>:<n>``: the file relative to the ingested folder and the chunk's
  0-based position in it (``manual.pdf:3`` is the fourth chunk of ``manual.pdf``, on whatever
  page). Ids are what ``--json``, the trace and ``/v1/passages/{id}`` use;
* a **citation** is ``<path>#<place>``: ``manual.pdf#page=6`` for page 6 of a PDF (1-based, the
  fragment PDF viewers open at; its printed label added as ``(page iv)`` when it differs),
  ``guide/install.md#Install > Linux`` for a Markdown or HTML section, the record's address for
  a JSON/CSV row that has one, and the full chunk id otherwise. A citation never has the
  ``:<n>`` form, so a page number cannot be read as a chunk position or the other way round.

:func:`settle_citations` makes an answer's ``[n]`` markers trustworthy: markers that point at no
evidence are removed, and a sentence that states something without a marker is given the one
evidence passage that shares its words, or stays without a citation (renderers then say so).

Example:
    >>> from ragsieve.types import Chunk
    >>> chunk = Chunk(id="manual.pdf:3", text="...", doc_id="manual.pdf", source="manual.pdf",
    ...               path="manual.pdf", page=6, page_label="iv")
    >>> c = Citation.from_chunk(chunk)
    >>> format_citation(c)
    'manual.pdf#page=6 (page iv)'
    >>> citation_uri(c, "/data/corpus")
    'file:///data/corpus/manual.pdf#page=6'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
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

__all__ = [
    "HEADING_SEPARATOR", "Citation", "SettledCitations", "citation_uri", "format_citation", "marker_positions",
    "settle_citations", "split_cited_sentences",
]

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
    """The citation as a person reads it, never cut: ``path#page=N``, ``path#heading``, the URL or the id.

    A page label that differs from the page number is added (``manual.pdf#page=6 (page iv)``); a
    record with an address is cited by that address; anything without a known location by its
    whole chunk id.
    """
    if c.url and not c.path:
        return c.url
    if c.path is None:
        return c.url or c.chunk_id
    if c.page is not None:
        text = f"{c.path}#page={c.page}"
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


# ---------------------------------------------------------------------- markers in an answer
_MARKER_RE = re.compile(r"\s*\[(\d{1,3})\]")
_ONLY_MARKERS_RE = re.compile(r"^(?:\s*\[\d{1,3}\])+\s*[.!?]?\s*$")
_LEADING_MARKERS_RE = re.compile(r"^(?:\s*\[\d{1,3}\])+\s*")
_WORD_RE = re.compile(r"[^\W_]+")
# Words that say nothing about which passage a sentence comes from.
_STOP = frozenset(
    (  # noqa: SIM905
        "a an the of in on at to for from by with and or is are was were be been being it its this that these "
        "those as which who whom whose what when where why how do does did has have had not no but also can "
        "could will would may might there their they he she his her them than then so such about into over "
        "under i you we our your my me us one evidence passage passages source sources according states stated"
    ).split()
)
# A sentence that says the evidence holds no answer states nothing to cite.
_DECLINE_RE = re.compile(
    r"\b(?:i (?:do not|don't|cannot|can't) (?:know|answer|say|tell)|no (?:answer|information)|not (?:stated|mentioned|"
    r"given|specified|provided)|does not (?:say|state|mention)|doesn't (?:say|state|mention))\b",
    re.IGNORECASE,
)
# An unmarked sentence is given a passage only when they share at least this many content words
# (or every content word of a sentence that has fewer): one shared common word is chance.
MIN_SHARED_WORDS = 2


def marker_positions(text: str) -> list[int]:
    """The evidence positions (1-based) of the ``[n]`` markers in ``text``, in order, each once.

    >>> marker_positions("Paris [2] is in France [1], [2].")
    [2, 1]
    """
    return list(dict.fromkeys(int(m.group(1)) for m in _MARKER_RE.finditer(text)))


def _content_words(text: str) -> set[str]:
    return {w for w in (m.group(0).lower() for m in _WORD_RE.finditer(text)) if w not in _STOP and len(w) > 1}


def states_something(sentence: str) -> bool:
    """Whether ``sentence`` (markers aside) states something a source should back: it has a
    content word and is not a refusal (``I don't know``)."""
    bare = _MARKER_RE.sub("", sentence)
    return bool(_content_words(bare)) and not _DECLINE_RE.search(bare)


def split_cited_sentences(text: str) -> list[str]:
    """The sentences of ``text`` with each ``[n]`` marker kept on the sentence it follows: a
    piece that is only markers (``X is Y. [1]``), and markers opening any sentence but the first
    (``X is Y. [1] Z is W.``), join the sentence before it.

    >>> split_cited_sentences("Paris is in France. [1] It is large [2].")
    ['Paris is in France. [1]', 'It is large [2].']
    """
    from ragsieve.sentences import split_sentences

    out: list[str] = []
    for piece in split_sentences(text):
        if out and _ONLY_MARKERS_RE.match(piece):
            out[-1] = out[-1] + " " + piece.strip()
            continue
        lead = _LEADING_MARKERS_RE.match(piece)
        if out and lead:  # "X is Y. [1] Z is W.": the [1] cites the sentence before it
            out[-1] = out[-1] + " " + lead.group(0).strip()
            piece = piece[lead.end() :]
        out.append(piece)
    return out


def _cite(sentence: str, position: int) -> str:
    """``sentence`` with ``[position]`` before its closing punctuation (as the answer prompt asks)."""
    text = sentence.rstrip()
    marker = f"[{position}]"
    if text[-1:] in (".", "!", "?"):
        return f"{text[:-1].rstrip()} {marker}{text[-1]}"
    return f"{text} {marker}"


@dataclass(frozen=True)
class SettledCitations:
    """An answer after :func:`settle_citations`: its text with every sentence's marker (``text``),
    the chunk ids its markers name (in order), the stray markers removed, the sentences that were
    given a marker, the sentences that state something yet cite nothing, and the answer with only
    the stray markers removed (``model_text``: the model's words, which the pipeline keeps as the
    answer so that exact-match scoring and log-probabilities of the answer do not change)."""

    text: str
    cited_ids: list[str]
    removed_markers: list[int] = field(default_factory=list)
    model_text: str = ""
    attributed: list[str] = field(default_factory=list)
    uncited: list[str] = field(default_factory=list)


def settle_citations(
    text: str, evidence: Sequence[tuple[str, str]], cited_ids: Sequence[str] = ()
) -> SettledCitations:
    """Make every ``[n]`` marker of an answer point at evidence and give unmarked sentences one.

    ``evidence`` is the answer's evidence as ``(chunk id, text)`` pairs in the order the prompt
    numbered them (``[1]`` is the first); ``cited_ids`` what the generator attributed without
    markers (its similarity attribution), preferred for an unmarked sentence. Steps:

    1. a marker ``[n]`` with no ``n``-th evidence is removed (it cites nothing the user can open);
    2. a sentence that states something (:func:`states_something`) but has no marker gets the
       marker of the passage sharing the most content words with it: among ``cited_ids`` when the
       generator attributed any (at least one shared word), else among all evidence when they share
       at least :data:`MIN_SHARED_WORDS` words; otherwise it stays uncited and is listed in ``uncited``;
    3. ``cited_ids`` of the result are the ids the markers name, in order of first appearance,
       plus any attributed id no sentence took (the generator's attribution is kept, not lost).

    A text that needs no change is returned as it was (list formatting and spacing intact).

    Example:
        >>> ev = [("a.md:0", "The restocking fee is 60 euros for opened items."), ("b.md:0", "Shipping is free.")]
        >>> s = settle_citations("The restocking fee is 60 euros. [3] Shipping costs nothing [2].", ev)
        >>> s.text
        'The restocking fee is 60 euros [1]. Shipping costs nothing [2].'
        >>> s.cited_ids, s.removed_markers
        (['a.md:0', 'b.md:0'], [3])
        >>> s.model_text  # what the pipeline keeps as the answer: only the stray marker gone
        'The restocking fee is 60 euros. Shipping costs nothing [2].'
    """
    n = len(evidence)
    removed = [int(m.group(1)) for m in _MARKER_RE.finditer(text) if not 1 <= int(m.group(1)) <= n]
    if removed:
        text = _MARKER_RE.sub(lambda m: m.group(0) if 1 <= int(m.group(1)) <= n else "", text).strip()
        text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    model_text = text
    attributed: list[str] = []
    uncited: list[str] = []
    if n and text:
        ids = [cid for cid, _ in evidence]
        words = [_content_words(passage) for _, passage in evidence]
        preferred = [ids.index(cid) for cid in cited_ids if cid in ids]
        sentences = split_cited_sentences(text)
        rewritten: list[str] = []
        for sentence in sentences:
            if marker_positions(sentence) or not states_something(sentence):
                rewritten.append(sentence)
                continue
            mine = _content_words(sentence)
            shared = [len(mine & w) for w in words]
            pool = preferred or list(range(n))
            best = max(pool, key=lambda j: (shared[j], -pool.index(j)))
            # among the generator's attributed passages one shared word names the passage; among
            # all the evidence it takes MIN_SHARED_WORDS, so that chance does not cite
            needed = 1 if preferred else min(MIN_SHARED_WORDS, len(mine))
            if shared[best] >= needed:
                rewritten.append(_cite(sentence, best + 1))
                attributed.append(sentence)
            else:
                rewritten.append(sentence)
                uncited.append(sentence)
        if attributed:
            text = " ".join(rewritten)
    positions = marker_positions(text)
    ids_out = [evidence[p - 1][0] for p in positions]
    ids_out += [cid for cid in cited_ids if cid not in ids_out and any(cid == e[0] for e in evidence)]
    return SettledCitations(
        text=text, cited_ids=ids_out, removed_markers=removed, model_text=model_text, attributed=attributed,
        uncited=uncited,
    )


def settle_answer(
    text: str, evidence: Sequence[Any], cited_ids: Sequence[str], trace: Any = None, abstained: bool = False
) -> tuple[str, list[str]]:
    """:func:`settle_citations` on an answer's text and its evidence (``SearchHit``s), as the
    pipeline assembles the answer: returns the answer without its stray markers and the ids every
    sentence cites, and records a ``settle_citations`` event in ``trace`` (markers removed, each
    unmarked sentence with the source it was given, sentences citing nothing) when there is any.
    The markers given to unmarked sentences are not written into the answer (renderers show them:
    :func:`ragsieve.present.present_answer` settles the same text the same way), so the model's
    words are scored as they were. An abstention cites nothing and is returned as it is."""
    if abstained or not text:
        return text, list(cited_ids)
    pairs = [(hit.chunk.id, hit.chunk.text) for hit in evidence]
    settled = settle_citations(text, pairs, cited_ids)
    if trace is not None and (settled.removed_markers or settled.attributed or settled.uncited):
        trace.record(
            "settle_citations",
            removed_markers=settled.removed_markers,
            attributed=settled.attributed,
            uncited=settled.uncited,
        )
    return settled.model_text, settled.cited_ids
