"""``ragsieve serve``: the library over HTTP (OpenAI-compatible chat, ask/search/classify,
health, Prometheus metrics) and a page that shows what each check kept and dropped.

Needs the ``serve`` extra (fastapi, uvicorn, prometheus-client). Importing this package is
light; :func:`create_app` and :class:`Engine` load on first use.

Example:
    >>> from ragsieve.config import PipelineConfig
    >>> from ragsieve.serve import Engine, create_app
    >>> app = create_app(Engine(PipelineConfig(index_dir="demo-index")))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

__all__ = ["Engine", "ServeSettings", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from ragsieve.serve.engine import Engine

        return Engine
    if name in ("ServeSettings", "create_app"):
        from ragsieve.serve import app

        return getattr(app, name)
    raise AttributeError(name)
