"""ragsieve: retrieval-augmented generation that controls the quality of retrieved knowledge.

The public API is re-exported lazily so that ``import ragsieve`` stays cheap: heavy
dependencies (torch, faiss, llama.cpp) load only when a component is warmed up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "Chunk": "ragsieve.types",
    "SearchHit": "ragsieve.types",
    "Trace": "ragsieve.types",
    "Index": "ragsieve.api",
    "Pipeline": "ragsieve.sieve.pipeline",
    "PipelineConfig": "ragsieve.config",
    "RagsieveError": "ragsieve.errors",
}

if TYPE_CHECKING:
    from ragsieve.api import Index
    from ragsieve.config import PipelineConfig
    from ragsieve.errors import RagsieveError
    from ragsieve.sieve.pipeline import Pipeline
    from ragsieve.types import Chunk, SearchHit, Trace

__all__ = [
    "Chunk",
    "Index",
    "Pipeline",
    "PipelineConfig",
    "RagsieveError",
    "SearchHit",
    "Trace",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ragsieve' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
