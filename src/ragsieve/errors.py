"""Exceptions raised by ragsieve.

Every error names the problem and what to do about it; the CLI prints the message
without a traceback and exits with a non-zero status.
"""

from __future__ import annotations


class RagsieveError(Exception):
    """Base class for every error ragsieve raises on purpose."""


class ConfigError(RagsieveError):
    """A configuration value is missing, malformed or inconsistent."""


class InputError(RagsieveError):
    """A query, label set or other user input cannot be used as given."""


class IngestError(RagsieveError):
    """A file or folder cannot be ingested."""


class IndexStoreError(RagsieveError):
    """An index directory is missing, corrupt or incompatible."""


class DamagedFileError(IndexStoreError):
    """A file an index (or its router) reads does not match the size or checksum recorded when
    it was written. ``role`` says what the file is for (never its path: the service may show it
    to clients) and ``repair`` the command that rebuilds it."""

    def __init__(self, message: str, *, role: str, repair: str) -> None:
        super().__init__(message)
        self.role = role
        self.repair = repair


class ModelError(RagsieveError):
    """A model file does not load or a model server cannot be reached."""


class LLMOutputError(RagsieveError):
    """An LLM returned output that does not fit the requested schema or labels."""


class MissingExtraError(RagsieveError):
    """A feature needs a library from an optional extra that is not installed."""


__all__ = [
    "ConfigError",
    "DamagedFileError",
    "IndexStoreError",
    "IngestError",
    "InputError",
    "LLMOutputError",
    "MissingExtraError",
    "ModelError",
    "RagsieveError",
    "check_question",
]


def check_question(question: object, what: str = "the question") -> str:
    """``question`` when it is a non-empty string; otherwise an :class:`InputError` that says
    what was passed instead (bytes, a number, None) and how to fix it."""
    if isinstance(question, str):
        if not question.strip():
            raise InputError(f"{what} is empty; pass the question as text")
        return question
    if isinstance(question, bytes | bytearray):
        raise InputError(f"{what} is {type(question).__name__}, not text; decode it first (e.g. data.decode('utf-8'))")
    if question is None:
        raise InputError(f"{what} is None; pass the question as a string")
    raise InputError(f"{what} must be a string, not {type(question).__name__} ({question!r:.40}); pass it as text")
