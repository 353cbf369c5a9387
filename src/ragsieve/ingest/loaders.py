"""Load documents from a folder: .txt, .md, .json/.jsonl, .csv, .pdf, .html.

Files that cannot be read (binary, not UTF-8, malformed, unreadable) are skipped with a
warning and counted in :class:`IngestReport`; they are never dropped silently.

Each document keeps where its text came from, as :class:`Segment` s that chunks never cross: one
per PDF page (with its number and label) and one per Markdown/HTML section (with its heading
path). HTML is reduced to its main content by trafilatura (no navigation, headers, footers or
repeated nested text); PDF pages are read by pypdf and cleaned of layout debris
(:func:`clean_pdf_pages`).
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import logging
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ragsieve.config import IngestConfig
from ragsieve.errors import IngestError
from ragsieve.io import sha256_file

logger = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = {".txt", ".md", ".markdown", ".json", ".jsonl", ".csv", ".pdf", ".html", ".htm"}
DEFAULT_DOMAIN = "default"
# Record fields that hold the record's original address, in the order they are looked up.
URL_FIELDS = ("url", "link", "source_url")
# Folder names that say what format the files are in rather than what they are about; a domain
# taken from one of them routes questions by file type (see :func:`file_type_domains`).
FILE_TYPE_FOLDERS = frozenset(
    {"html", "htm", "pdf", "pdfs", "md", "markdown", "txt", "text", "texts", "json", "jsonl", "csv", "doc", "docx",
     "xml", "web", "pages"}
)


@dataclass
class Segment:
    """A stretch of a document that chunks never cross: a PDF page or a Markdown/HTML section.

    ``offset`` is where ``text`` starts in the text that chunk offsets count in: the document's
    ``text`` for sections, the page itself (0) for PDF pages.
    """

    text: str
    offset: int = 0
    page: int | None = None
    page_label: str | None = None
    heading: list[str] = field(default_factory=list)
    # How many characters at the start of ``text`` are headings: chunking keeps them with the
    # sentence after them, as its context, never as a chunk of their own.
    heading_chars: int = 0


@dataclass
class Document:
    """One logical document before chunking.

    ``segments`` split ``text`` into pages or sections (empty: the whole text is one segment);
    ``url`` is a record's original address (a ``url``, ``link`` or ``source_url`` field).
    """

    doc_id: str
    text: str
    source: str
    domain: str
    title: str
    path: str  # file path relative to the ingested folder
    metadata: dict[str, Any] = field(default_factory=dict)
    segments: list[Segment] = field(default_factory=list)
    url: str | None = None

    def parts(self) -> list[Segment]:
        """The segments to chunk: ``segments``, or the whole text as one."""
        return self.segments or [Segment(self.text)]


@dataclass
class SkippedFile:
    path: str
    reason: str


@dataclass
class IngestReport:
    files_seen: int = 0
    files_loaded: int = 0
    documents: int = 0
    skipped: list[SkippedFile] = field(default_factory=list)

    def skip(self, path: str, reason: str) -> None:
        logger.warning("skipping %s: %s", path, reason)
        self.skipped.append(SkippedFile(path, reason))


class _SkipFile(Exception):  # noqa: N818 - control flow, never escapes the loader
    pass


def file_hash(path: Path) -> str:
    """Content hash that decides whether a re-ingest must re-chunk a file."""
    return sha256_file(path)


def safe_relpath(rel: Path) -> str:
    """A file's path relative to the ingested folder as text that is always valid UTF-8.

    Names with bytes that are not UTF-8 (read by Python as surrogate escapes) keep those bytes
    visibly escaped (``caf\\xe9.txt``), so they can be stored, printed and compared.
    """
    text = rel.as_posix()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def iter_files(
    root: Path, follow_symlinks: bool = False, skipped: list[tuple[str, str]] | None = None
) -> list[Path]:
    """Supported files under ``root`` (hidden files and folders excluded), sorted.

    Symlinks that resolve inside ``root`` are followed; ones that leave it (or are broken) are
    skipped and listed in ``skipped`` as ``(relative path, reason)`` unless ``follow_symlinks``.
    """
    if root.is_file():
        return [root] if root.suffix.lower() in SUPPORTED_SUFFIXES else []
    real_root = root.resolve()
    found: list[Path] = []
    seen_dirs: set[Path] = set()

    def note(path: Path, reason: str) -> None:
        if skipped is not None:
            skipped.append((safe_relpath(path.relative_to(root)), reason))

    def walk(folder: Path) -> None:
        real = folder.resolve()
        if real in seen_dirs:
            return  # a link back to a folder already walked
        seen_dirs.add(real)
        try:
            entries = sorted(folder.iterdir())
        except OSError as exc:
            note(folder, f"unreadable folder ({exc.strerror}); check permissions")
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                try:
                    target = entry.resolve(strict=True)
                except (OSError, RuntimeError):
                    note(entry, "broken symlink; fix or remove it")
                    continue
                if not follow_symlinks and not target.is_relative_to(real_root):
                    note(entry, f"symlink to {target}, outside the ingested folder; --follow-symlinks includes it")
                    continue
            if entry.is_dir():
                walk(entry)
            elif entry.is_file() and entry.suffix.lower() in SUPPORTED_SUFFIXES:
                found.append(entry)

    walk(root)
    return sorted(found)


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise _SkipFile("binary content (NUL bytes); remove it or convert it to text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _SkipFile(f"not valid UTF-8 (byte {exc.start}); convert it, e.g. `iconv -f latin1 -t utf-8`") from exc


def _site(url: str) -> str:
    host = urlparse(url).netloc or url
    return host.lower().removeprefix("www.")


def _domain_for(rel: str, record: dict[str, Any] | None, config: IngestConfig) -> str:
    for pattern, domain in config.domain_rules.items():
        if fnmatch.fnmatchcase(rel, pattern):
            return domain
    if config.partition_by == "none":
        return DEFAULT_DOMAIN
    if config.partition_by == "folder":
        parts = rel.split("/")
        return parts[0] if len(parts) > 1 else DEFAULT_DOMAIN
    if record is not None and record.get(config.partition_by) not in (None, ""):
        value = record[config.partition_by]
        if isinstance(value, dict | list):
            raise ValueError(f"field {config.partition_by!r} is a JSON {type(value).__name__}, not a name")
        return str(value).strip() or DEFAULT_DOMAIN
    return DEFAULT_DOMAIN


_FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL)


def front_matter_tags(text: str) -> list[str]:
    """The ``tags:`` of a Markdown/text file's YAML front matter (a list, or one text with
    commas); none when the file has no front matter or it is not a YAML mapping."""
    import yaml

    match = _FRONT_MATTER.match(text)
    if match is None:
        return []
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return []
    raw = data.get("tags") if isinstance(data, dict) else None
    if isinstance(raw, str):
        raw = raw.split(",")
    if not isinstance(raw, list):
        return []
    return [str(t).strip() for t in raw if isinstance(t, str | int | float) and str(t).strip()]


def document_tags(rel: str, config: IngestConfig, own: list[str] | None = None) -> list[str]:
    """A document's tags: ``own`` (front matter, a record's ``tags`` field), then each folder of
    ``rel`` (``hr/policies/x.md``: ``hr``, ``hr/policies``) when ``ingest.folder_tags`` is on,
    then the tags of every ``ingest.tag_rules`` glob ``rel`` matches; first occurrence kept."""
    tags = list(own or [])
    if config.folder_tags:
        parts = rel.split("/")[:-1]
        tags.extend("/".join(parts[: i + 1]) for i in range(len(parts)))
    for pattern, rule_tags in config.tag_rules.items():
        if fnmatch.fnmatchcase(rel, pattern):
            tags.extend(rule_tags)
    return list(dict.fromkeys(t.strip() for t in tags if t.strip()))


def _record_tags(value: Any) -> list[str]:
    if isinstance(value, str):
        return [t for t in value.split(",") if t.strip()]
    if isinstance(value, list):
        return [str(t) for t in value if isinstance(t, str | int | float)]
    return []


def _with_tags(metadata: dict[str, Any], tags: list[str]) -> dict[str, Any]:
    if tags:  # untagged documents keep the metadata they had before tags existed
        return {**metadata, "tags": tags}
    return {k: v for k, v in metadata.items() if k != "tags"}


def _title_from_markdown(text: str, fallback: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("#"):
            return line.lstrip("#").strip()
        if line:
            break
    return fallback


def _load_records(
    path: Path, rel: str, config: IngestConfig, warnings: list[tuple[str, str]] | None = None
) -> Iterator[Document]:
    """JSON/JSONL/CSV rows: one document per record.

    A malformed JSONL line is skipped on its own (reported in ``warnings`` as ``file:line``);
    the file's other records are kept.
    """
    text = _read_text(path)
    rows: list[tuple[str, dict[str, Any]]]  # (where, record)
    suffix = path.suffix.lower()
    bad: list[tuple[str, str]] = []
    if suffix == ".jsonl":
        rows = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                bad.append((f"{rel}:{lineno}", f"line {lineno} is not valid JSON ({exc.msg}); fix or remove it"))
                continue
            if not isinstance(obj, dict):
                bad.append((f"{rel}:{lineno}", f"line {lineno} is not a JSON object; fix or remove it"))
                continue
            rows.append((f"line {lineno}", obj))
        if bad and not rows:
            raise _SkipFile(f"no valid JSON line ({bad[0][1]})")
    elif suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _SkipFile(f"not valid JSON ({exc.msg} at line {exc.lineno})") from exc
        items = data if isinstance(data, list) else [data]
        if not all(isinstance(r, dict) for r in items):
            raise _SkipFile("expected a JSON object or a list of objects")
        rows = [(f"record {i + 1}", r) for i, r in enumerate(items)]
    else:
        rows = [(f"record {i + 1}", r) for i, r in enumerate(csv.DictReader(io.StringIO(text)))]
    first_with_id: dict[str, str] = {}
    for i, (where, row) in enumerate(rows):
        body = row.get(config.text_field)
        if not isinstance(body, str) or not body.strip():
            raise _SkipFile(
                f"{where} has no text in field {config.text_field!r}; "
                "set ingest.text_field to the field that holds the text"
            )
        try:
            json.dumps(row, ensure_ascii=False, default=str).encode("utf-8")
            domain = _domain_for(rel, row, config)
        except (UnicodeEncodeError, ValueError) as exc:
            reason = "holds text that is not valid Unicode" if isinstance(exc, UnicodeEncodeError) else str(exc)
            bad.append((f"{rel} {where}", f"{where} {reason}; fix or remove it"))
            continue
        rid = str(row.get(config.id_field) or i)
        if rid in first_with_id:
            # One repeated id must not refuse the whole ingest: keep the first record, skip this one.
            bad.append((
                f"{rel} {where}",
                f"{where} repeats id {rid!r} of {first_with_id[rid]}; skipped. Give each record a unique "
                f"{config.id_field!r} to ingest both",
            ))
            continue
        first_with_id[rid] = where
        metadata = {k: row[k] for k in config.metadata_fields if k in row}
        source_value = row.get(config.source_field) if config.source_field else row.get("url") or row.get("source")
        source = _site(str(source_value)) if source_value else rel
        yield Document(
            doc_id=f"{rel}#{rid}",
            text=body,
            source=source,
            domain=domain,
            title=str(row.get(config.title_field) or ""),
            path=rel,
            metadata=_with_tags(metadata, document_tags(rel, config, _record_tags(metadata.get("tags")))),
            url=record_url(row),
        )
    for entry in bad:
        logger.warning("skipping %s: %s", *entry)
    if warnings is not None:
        warnings.extend(bad)


def record_url(row: dict[str, Any]) -> str | None:
    """A record's original ``http(s)`` address: its first ``url``, ``link`` or ``source_url`` field that holds one."""
    for name in URL_FIELDS:
        value = row.get(name)
        if isinstance(value, str) and urlparse(value.strip()).scheme.lower() in ("http", "https"):
            return value.strip()
    return None


def file_type_domains(domains: set[str] | list[str], config: IngestConfig) -> list[str]:
    """Domains that come from folders named after a file type (``pdf/``, ``html/``, ``md/``...).

    Such a domain routes questions by format rather than topic. Empty unless domains are taken
    from folders; a domain a rule in ``ingest.domain_rules`` names on purpose is not reported.
    """
    if config.partition_by != "folder":
        return []
    chosen = set(config.domain_rules.values())
    return sorted(d for d in set(domains) if d.lower() in FILE_TYPE_FOLDERS and d not in chosen)


def warn_file_type_domains(domains: set[str] | list[str], config: IngestConfig) -> list[str]:
    """Log (and return) the warning :func:`file_type_domains` calls for; every ingest path calls this."""
    bad = file_type_domains(domains, config)
    if bad:
        logger.warning(
            "domain%s %s come%s from folder names that look like file types, so questions would be routed by "
            "format rather than topic; group the files by topic in folders, set ingest.domain_rules "
            "(e.g. {'pdf/manual*': 'manuals'}), or set ingest.partition_by to a record field or 'none'",
            "s" if len(bad) > 1 else "",
            ", ".join(f"{d!r}" for d in bad),
            "" if len(bad) > 1 else "s",
        )
    return bad


# --------------------------------------------------------------------------- PDF
_DOT_LEADER = re.compile(r"[ \t]*(?:[.·•][ \t]*){4,}|[ \t]*(?:…[ \t]*){2,}")
_LINE_END_HYPHEN = re.compile(r"(\w)[-\u00ad][ \t]*\n[ \t]*(?=[a-z])")
_DIGITS = re.compile(r"\d+")


def _edge_lines(lines: list[str]) -> tuple[int | None, int | None]:
    """Indices of the first and last non-blank line."""
    filled = [i for i, line in enumerate(lines) if line.strip()]
    return (filled[0], filled[-1]) if filled else (None, None)


def clean_pdf_pages(pages: list[str]) -> list[str]:
    """Remove layout debris from the text of each PDF page, keeping one string per page.

    - a header or footer line repeated at the top or bottom of most pages (page numbers in it
      may differ: ``Page 3 of 9``) is removed, when the document has at least 3 pages;
    - dot leaders of tables of contents (``Introduction ........ 5``) become one space;
    - a word hyphenated at a line end is joined (``exam-\\nple`` -> ``example``) when the next
      line goes on in lower case; soft hyphens are dropped;
    - trailing spaces and runs of blank lines are tidied.
    """
    split = [page.replace("\r\n", "\n").replace("\r", "\n").split("\n") for page in pages]
    if len(split) >= 3:
        tops: Counter[str] = Counter()
        bottoms: Counter[str] = Counter()
        for lines in split:
            first, last = _edge_lines(lines)
            if first is not None and last is not None:
                tops[_DIGITS.sub("#", lines[first].strip())] += 1
                bottoms[_DIGITS.sub("#", lines[last].strip())] += 1
        need = max(3, int(0.6 * len(split) + 0.999))
        for lines in split:
            first, last = _edge_lines(lines)
            if last is not None and bottoms[_DIGITS.sub("#", lines[last].strip())] >= need and last != first:
                lines[last] = ""
            if first is not None and tops[_DIGITS.sub("#", lines[first].strip())] >= need:
                lines[first] = ""
    cleaned = []
    for lines in split:
        text = "\n".join(line.rstrip() for line in lines)
        text = _DOT_LEADER.sub(" ", text)
        text = _LINE_END_HYPHEN.sub(r"\1", text)
        text = text.replace("\u00ad", "")
        text = re.sub(r"\n{3,}", "\n\n", text).strip()
        cleaned.append(text)
    return cleaned


def _load_pdf(path: Path) -> list[Segment]:
    """One segment per page (1-based ``page``, and ``page_label`` when the PDF defines labels).

    pypdf, not pypdfium2: pure Python (no native wheel to match), already needed, and it reads
    page labels; its text needs only the light clean-up of :func:`clean_pdf_pages`.
    """
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(str(path))
        texts = [page.extract_text() or "" for page in reader.pages]
        catalog: Any = reader.trailer["/Root"]
        labels = list(reader.page_labels) if "/PageLabels" in catalog else None
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise _SkipFile(f"PDF could not be parsed ({exc}); re-export it or remove it") from exc
    return [
        Segment(text, 0, page=n, page_label=labels[n - 1] if labels and n <= len(labels) else None)
        for n, text in enumerate(clean_pdf_pages(texts), 1)
    ]


# --------------------------------------------------------------------------- HTML and Markdown
def _load_html(path: Path) -> tuple[str, list[Segment], str]:
    """Main content (text, sections, title) by trafilatura: no navigation, header, footer or
    boilerplate, nested lists once; headings kept (as Markdown) for the sections' heading paths."""
    import trafilatura

    html = _read_text(path)
    options: dict[str, Any] = {
        "output_format": "markdown",
        "include_formatting": True,
        "include_tables": True,
        "include_links": False,
        "include_images": False,
        "include_comments": False,
    }
    # Precision first (drops menus and link lists even on short pages); recall when that finds nothing.
    markdown = trafilatura.extract(html, favor_precision=True, **options) or trafilatura.extract(
        html, favor_recall=True, **options
    )
    if not markdown:
        raise _SkipFile("no main text could be extracted from the HTML")
    metadata = trafilatura.extract_metadata(html)
    title = ((metadata.title if metadata is not None else None) or "").strip()
    if title and not markdown.lstrip().startswith("#"):
        # trafilatura takes a heading that repeats the title out of the text (it is the title): put
        # it back as the page's top heading, as a Markdown file keeps its own.
        markdown = f"# {title}\n\n{markdown}"
    text, segments = markdown_sections(markdown)
    return text, segments, title


def _inline_text(token: Any) -> str:
    parts = []
    for child in token.children or []:
        if child.type in ("text", "code_inline", "html_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif child.type == "image":
            parts.append(child.content)
    return "".join(parts).strip()


def markdown_sections(markdown: str) -> tuple[str, list[Segment]]:
    """Markdown as plain text (markup removed, one block per paragraph, list item, table row
    or code block) and its sections: one :class:`Segment` per heading, with the heading path.

    Headings stay in the text, each opening its section; text before the first heading has an
    empty heading path. A heading with no text of its own before the next heading (``# Graphene``
    straight above ``## Properties``) joins the next section, as context of its text, so it never
    becomes a chunk of its own; a last heading with no text joins the section before it.
    """
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    blocks: list[tuple[str, list[str] | None]] = []  # (text, heading path it opens, or None)
    stack: list[tuple[int, str]] = []
    row: list[str] | None = None
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            title = _inline_text(tokens[i + 1])
            level = int(token.tag[1:])
            stack = [h for h in stack if h[0] < level] + [(level, title)]
            blocks.append((title, [t for _, t in stack]))
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close" and row is not None:
            blocks.append((" | ".join(cell for cell in row if cell), None))
            row = None
        elif token.type == "inline" and not (i > 0 and tokens[i - 1].type == "heading_open"):
            content = _inline_text(token)
            if content.startswith("|") and content.endswith("|"):  # a table row without a header line
                content = " | ".join(cell.strip() for cell in content.strip("|").split("|") if cell.strip())
            if row is not None:
                row.append(content)
            elif content:
                blocks.append((content, None))
        elif token.type in ("fence", "code_block", "html_block") and token.content.strip():
            blocks.append((token.content.rstrip("\n"), None))
    text_parts: list[str] = []
    # each section: [start, heading path, where its headings end, whether it has text of its own]
    sections: list[list[Any]] = [[0, [], 0, False]]
    offset = 0
    for content, opens in blocks:
        if text_parts:
            offset += 2  # the blank line between blocks
        if opens is not None:
            last = sections[-1]
            if len(sections) > 1 and not last[3]:
                last[1], last[2] = opens, offset + len(content)  # a heading-only section: this one continues it
            else:
                sections.append([offset, opens, offset + len(content), False])
        else:
            sections[-1][3] = True
        text_parts.append(content)
        offset += len(content)
    text = "\n\n".join(text_parts)
    if len(sections) > 2 and not sections[-1][3]:
        sections.pop()  # a last heading with no text: the end of the section before it
    segments = []
    for n, (start, heading, headings_end, _) in enumerate(sections):
        end = sections[n + 1][0] if n + 1 < len(sections) else len(text)
        if end > start:
            segments.append(
                Segment(text[start:end].rstrip(), start, heading=heading, heading_chars=headings_end - start)
            )
    return text, segments


def load_file(
    path: Path, root: Path, config: IngestConfig, warnings: list[tuple[str, str]] | None = None
) -> list[Document]:
    """Documents of one file; raises ``_SkipFile`` for unusable files.

    Records dropped from a file that is otherwise kept (a malformed JSONL line) are appended to
    ``warnings`` as ``(location, reason)``.
    """
    rel = safe_relpath(path.relative_to(root) if path != root else Path(path.name))
    size_mb = path.stat().st_size / 2**20
    if size_mb > config.max_file_mb:
        raise _SkipFile(f"{size_mb:.1f} MB exceeds ingest.max_file_mb={config.max_file_mb}; raise the limit")
    suffix = path.suffix.lower()
    if suffix in {".json", ".jsonl", ".csv"}:
        return list(_load_records(path, rel, config, warnings))
    stem = rel.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    segments: list[Segment] = []
    own_tags: list[str] = []
    if suffix == ".pdf":
        segments = _load_pdf(path)
        text, title = "\n\n".join(seg.text for seg in segments), stem
    elif suffix in {".html", ".htm"}:
        text, segments, title = _load_html(path)
        title = title or stem
    elif suffix in {".md", ".markdown"}:
        raw = _read_text(path)
        own_tags = front_matter_tags(raw)
        title = _title_from_markdown(raw, stem)
        text, segments = markdown_sections(raw)
    else:
        text, title = _read_text(path), stem
        own_tags = front_matter_tags(text)
    if not text.strip():
        raise _SkipFile("no text could be extracted")
    return [
        Document(
            doc_id=rel,
            text=text,
            source=rel,
            domain=_domain_for(rel, None, config),
            title=title,
            path=rel,
            metadata=_with_tags({}, document_tags(rel, config, own_tags)),
            segments=[seg for seg in segments if seg.text.strip()],
        )
    ]


def load_folder(
    root: str | Path, config: IngestConfig | None = None, report: IngestReport | None = None
) -> Iterator[Document]:
    """Yield the documents under ``root``; skipped files (and records) are recorded in ``report``."""
    config = config or IngestConfig()
    root = Path(root)
    if not root.exists():
        raise IngestError(f"{root} does not exist; pass a folder or file to ingest")
    report = report if report is not None else IngestReport()
    link_skips: list[tuple[str, str]] = []
    files = iter_files(root, follow_symlinks=config.follow_symlinks, skipped=link_skips)
    for rel, reason in link_skips:
        report.skip(rel, reason)
    if not files:
        raise IngestError(f"{root} holds no supported files ({', '.join(sorted(SUPPORTED_SUFFIXES))})")
    base = root if root.is_dir() else root.parent
    for path in files:
        report.files_seen += 1
        rel = safe_relpath(path.relative_to(base))
        warnings: list[tuple[str, str]] = []
        try:
            docs = load_file(path, base, config, warnings=warnings)
        except _SkipFile as exc:
            report.skip(rel, str(exc))
            continue
        except OSError as exc:
            report.skip(rel, f"unreadable ({exc.strerror}); check permissions")
            continue
        finally:
            report.skipped.extend(SkippedFile(p, r) for p, r in warnings)
        report.files_loaded += 1
        report.documents += len(docs)
        yield from docs
