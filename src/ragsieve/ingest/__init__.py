"""Ingestion: load files, split them into sentence-aware chunks, attach metadata."""

from ragsieve.ingest.chunking import TextChunk, chunk_text, count_tokens, split_sentences
from ragsieve.ingest.loaders import (
    SUPPORTED_SUFFIXES,
    Document,
    IngestReport,
    Segment,
    SkippedFile,
    clean_pdf_pages,
    file_hash,
    iter_files,
    load_file,
    load_folder,
    markdown_sections,
)

__all__ = [
    "SUPPORTED_SUFFIXES",
    "Document",
    "IngestReport",
    "Segment",
    "SkippedFile",
    "TextChunk",
    "chunk_text",
    "clean_pdf_pages",
    "count_tokens",
    "file_hash",
    "iter_files",
    "load_file",
    "load_folder",
    "markdown_sections",
    "split_sentences",
]
