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


class ModelError(RagsieveError):
    """A model file does not load or a model server cannot be reached."""


class LLMOutputError(RagsieveError):
    """An LLM returned output that does not fit the requested schema or labels."""


class MissingExtraError(RagsieveError):
    """A feature needs a library from an optional extra that is not installed."""


__all__ = [
    "ConfigError",
    "IndexStoreError",
    "IngestError",
    "InputError",
    "LLMOutputError",
    "MissingExtraError",
    "ModelError",
    "RagsieveError",
]
