"""``ragsieve mcp``: the checked answers as Model Context Protocol tools, for assistants
(editors, chat clients, agents) that speak MCP.

Two tools over one index: ``ask`` (the checked answer: outcome, citations with their locations,
the checks' reasons in words and any withdrawn draft, laid out by :mod:`ragsieve.present`) and
``search`` (ranked passages). The server runs over stdio (a client starts it as a subprocess)
or over streamable HTTP behind the same API key and Host allow-list as ``ragsieve serve``.

Needs the ``mcp`` extra (the official MCP Python SDK). Importing this package is light;
:mod:`ragsieve.mcp.server` loads the SDK.

Example:
    >>> from ragsieve.config import PipelineConfig
    >>> from ragsieve.serve.engine import Engine
    >>> from ragsieve.mcp.server import build_server  # doctest: +SKIP
    >>> server = build_server(Engine(PipelineConfig(index_dir="demo-index")))  # doctest: +SKIP
"""

from __future__ import annotations
