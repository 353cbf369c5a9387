"""Load documents from a folder: .txt, .md, .json/.jsonl, .csv, .pdf, .html.

Files that cannot be read (binary, not UTF-8, malformed, unreadable) are skipped with a
warning and counted in :class:`IngestReport`; they are never dropped silently.
"""

from __future__ import annotations

import csv
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
from ragsieve.io import sha256_file

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
    if config.partition_by == "folder":
        parts = rel.split("/")
        return parts[0] if len(parts) > 1 else DEFAULT_DOMAIN
    if record is not None and record.get(config.partition_by) not in (None, ""):
        value = record[config.partition_by]
        if isinstance(value, dict | list):
            raise ValueError(f"field {config.partition_by!r} is a JSON {type(value).__name__}, not a name")
        return str(value).strip() or DEFAULT_DOMAIN
    return DEFAULT_DOMAIN


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
            metadata=metadata,
        )
    for entry in bad:
        logger.warning("skipping %s: %s", *entry)
    if warnings is not None:
        warnings.extend(bad)


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
    if suffix == ".pdf":
        text, title = _load_pdf(path), stem
    elif suffix in {".html", ".htm"}:
        text, title = _load_html(path)
        title = title or stem
    else:
        text = _read_text(path)
        title = _title_from_markdown(text, stem) if suffix in {".md", ".markdown"} else stem
        if suffix in {".md", ".markdown"}:
            text = re.sub(r"^#+\s*", "", text, flags=re.M)
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
