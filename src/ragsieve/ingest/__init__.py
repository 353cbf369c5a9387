"""Ingestion: load files, split them into sentence-aware chunks, attach metadata."""

from ragsieve.ingest.chunking import TextChunk, chunk_text, count_tokens, split_sentences
from ragsieve.ingest.loaders import (
    SUPPORTED_SUFFIXES,
    Document,
    IngestReport,
    SkippedFile,
    file_hash,
    iter_files,
    load_file,
    load_folder,
)

__all__ = [
    "SUPPORTED_SUFFIXES",
    "Document",
    "IngestReport",
    "SkippedFile",
    "TextChunk",
    "chunk_text",
    "count_tokens",
    "file_hash",
    "iter_files",
    "load_file",
    "load_folder",
    "split_sentences",
]
