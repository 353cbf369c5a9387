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


class StageContractError(RagsieveError):
    """A stage broke its declared contract: it changed a pipeline state field it does not list
    in ``writes``, or left a graded signal that is not declared (``ragsieve.signals``) or that
    it does not list in ``emits``. The message names the stage, the field or signal and the fix."""


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
    "StageContractError",
    "check_question",
    "check_unicode",
]


def check_question(question: object, what: str = "the question") -> str:
    """``question`` when it is a non-empty string; otherwise an :class:`InputError` that says
    what was passed instead (bytes, a number, None) and how to fix it."""
    if isinstance(question, str):
        if not question.strip():
            raise InputError(f"{what} is empty; pass the question as text")
        return check_unicode(question, what)
    if isinstance(question, bytes | bytearray):
        raise InputError(f"{what} is {type(question).__name__}, not text; decode it first (e.g. data.decode('utf-8'))")
    if question is None:
        raise InputError(f"{what} is None; pass the question as a string")
    raise InputError(f"{what} must be a string, not {type(question).__name__} ({question!r:.40}); pass it as text")


def check_unicode(text: str, what: str = "the question") -> str:
    """``text`` when it encodes as UTF-8; otherwise an :class:`InputError` naming the first
    character that does not: a lone surrogate, which is how Python carries a byte that is not UTF-8
    in a command-line argument (``surrogateescape``) or what a stray ``\\udXXX`` JSON escape decodes to.
    Tokenizers, embedders and HTTP clients fail on such text with an unrelated error, so every
    entry point that takes a question or query checks it here first."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raw = f" (the byte 0x{ord(bad) - 0xDC00:02x}, which is not UTF-8)" if 0xDC80 <= ord(bad) <= 0xDCFF else ""
        raise InputError(
            f"{what} is not valid text: character {exc.start + 1} is a lone surrogate {bad!r}{raw}; "
            "pass it as UTF-8 text (set a UTF-8 locale in the terminal, or re-encode the file with `iconv -t utf-8`)"
        ) from None
    return text
