"""Load documents from a folder: .txt, .md, .json/.jsonl, .csv, .pdf, .html.

Files that cannot be read (binary, not UTF-8, malformed, unreadable) are skipped with a
warning and counted in :class:`IngestReport`; they are never dropped silently.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ragsieve.config import IngestConfig
from ragsieve.errors import IngestError

logger = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = {".txt", ".md", ".markdown", ".json", ".jsonl", ".csv", ".pdf", ".html", ".htm"}
DEFAULT_DOMAIN = "default"


@dataclass
class Document:
    """One logical document before chunking."""

    doc_id: str
    text: str
    source: str
    domain: str
    title: str
    path: str  # file path relative to the ingested folder
    metadata: dict[str, Any] = field(default_factory=dict)


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
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def iter_files(root: Path) -> list[Path]:
    """Supported files under ``root`` (hidden files and folders excluded), sorted."""
    if root.is_file():
        return [root] if root.suffix.lower() in SUPPORTED_SUFFIXES else []
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and p.suffix.lower() in SUPPORTED_SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


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


def _domain_for(rel: Path, record: dict[str, Any] | None, config: IngestConfig) -> str:
    if config.partition_by == "folder":
        return rel.parts[0] if len(rel.parts) > 1 else DEFAULT_DOMAIN
    if record is not None and record.get(config.partition_by) not in (None, ""):
        return str(record[config.partition_by])
    return DEFAULT_DOMAIN


def _title_from_markdown(text: str, fallback: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("#"):
            return line.lstrip("#").strip()
        if line:
            break
    return fallback


def _load_records(path: Path, rel: Path, config: IngestConfig) -> Iterator[Document]:
    """JSON/JSONL/CSV rows: one document per record."""
    text = _read_text(path)
    rows: list[dict[str, Any]]
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise _SkipFile(f"line {lineno} is not valid JSON ({exc.msg}); fix or remove it") from exc
            if not isinstance(obj, dict):
                raise _SkipFile(f"line {lineno} is not a JSON object")
            rows.append(obj)
    elif suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _SkipFile(f"not valid JSON ({exc.msg} at line {exc.lineno})") from exc
        rows = data if isinstance(data, list) else [data]
        if not all(isinstance(r, dict) for r in rows):
            raise _SkipFile("expected a JSON object or a list of objects")
    else:
        rows = list(csv.DictReader(io.StringIO(text)))
    for i, row in enumerate(rows):
        body = row.get(config.text_field)
        if not isinstance(body, str) or not body.strip():
            raise _SkipFile(
                f"record {i + 1} has no text in field {config.text_field!r}; "
                "set ingest.text_field to the field that holds the text"
            )
        rid = str(row.get(config.id_field) or i)
        metadata = {k: row[k] for k in config.metadata_fields if k in row}
        source_value = row.get(config.source_field) if config.source_field else row.get("url") or row.get("source")
        source = _site(str(source_value)) if source_value else rel.as_posix()
        yield Document(
            doc_id=f"{rel.as_posix()}#{rid}",
            text=body,
            source=source,
            domain=_domain_for(rel, row, config),
            title=str(row.get(config.title_field) or ""),
            path=rel.as_posix(),
            metadata=metadata,
        )


def _load_pdf(path: Path) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(str(path))
        return "\n\n".join((page.extract_text() or "") for page in reader.pages)
    except (PdfReadError, ValueError, KeyError) as exc:
        raise _SkipFile(f"PDF could not be parsed ({exc}); re-export it or remove it") from exc


def _load_html(path: Path) -> tuple[str, str]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(_read_text(path), "html.parser")
    for tag in soup(["script", "style", "nav", "footer", "header", "noscript"]):
        tag.decompose()
    title = soup.title.get_text(strip=True) if soup.title else ""
    blocks = [el.get_text(" ", strip=True) for el in soup.find_all(["h1", "h2", "h3", "p", "li", "td", "pre"])]
    text = "\n\n".join(b for b in blocks if b) or soup.get_text("\n", strip=True)
    return text, title


def load_file(path: Path, root: Path, config: IngestConfig) -> list[Document]:
    """Documents of one file; raises ``_SkipFile`` for unusable files."""
    rel = path.relative_to(root) if path != root else Path(path.name)
    size_mb = path.stat().st_size / 2**20
    if size_mb > config.max_file_mb:
        raise _SkipFile(f"{size_mb:.1f} MB exceeds ingest.max_file_mb={config.max_file_mb}; raise the limit")
    suffix = path.suffix.lower()
    if suffix in {".json", ".jsonl", ".csv"}:
        return list(_load_records(path, rel, config))
    if suffix == ".pdf":
        text, title = _load_pdf(path), path.stem
    elif suffix in {".html", ".htm"}:
        text, title = _load_html(path)
        title = title or path.stem
    else:
        text = _read_text(path)
        title = _title_from_markdown(text, path.stem) if suffix in {".md", ".markdown"} else path.stem
        if suffix in {".md", ".markdown"}:
            text = re.sub(r"^#+\s*", "", text, flags=re.M)
    if not text.strip():
        raise _SkipFile("no text could be extracted")
    return [
        Document(
            doc_id=rel.as_posix(),
            text=text,
            source=rel.as_posix(),
            domain=_domain_for(rel, None, config),
            title=title,
            path=rel.as_posix(),
        )
    ]


def load_folder(
    root: str | Path, config: IngestConfig | None = None, report: IngestReport | None = None
) -> Iterator[Document]:
    """Yield the documents under ``root``; skipped files are recorded in ``report``."""
    config = config or IngestConfig()
    root = Path(root)
    if not root.exists():
        raise IngestError(f"{root} does not exist; pass a folder or file to ingest")
    report = report if report is not None else IngestReport()
    files = iter_files(root)
    if not files:
        raise IngestError(f"{root} holds no supported files ({', '.join(sorted(SUPPORTED_SUFFIXES))})")
    base = root if root.is_dir() else root.parent
    for path in files:
        report.files_seen += 1
        try:
            docs = load_file(path, base, config)
        except _SkipFile as exc:
            report.skip(path.relative_to(base).as_posix(), str(exc))
            continue
        except OSError as exc:
            report.skip(path.relative_to(base).as_posix(), f"unreadable ({exc.strerror}); check permissions")
            continue
        report.files_loaded += 1
        report.documents += len(docs)
        yield from docs
