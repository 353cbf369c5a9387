"""``ragsieve mcp``: the MCP server over stdio (default) or streamable HTTP. Imports stay light
here: the MCP SDK loads only when the command runs."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from ragsieve.console import INDEX_HELP
from ragsieve.serve.cli import (
    API_KEY_ENV,
    KEYS_FILE_HELP,
    check_port,
    host_allow_list,
    key_ring,
    open_engine,
    read_api_key,
    refuse_open_bind,
)

logger = logging.getLogger(__name__)


def mcp_command(
    index: Path | None = typer.Option(
        None, "--index", metavar="DIR", help=INDEX_HELP + " Re-ingests are picked up live."
    ),
    config: Path | None = typer.Option(None, "--config", help="TOML/YAML config file."),
    pipeline: str | None = typer.Option(None, "--pipeline", help="Pipeline: plain, task-adaptive or sieve."),
    llm_url: str | None = typer.Option(None, "--llm-url", help="Use an OpenAI-compatible LLM server."),
    model: str | None = typer.Option(None, "--model", help="GGUF path (llama-cpp) or model name (openai)."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads for llama.cpp."),
    deadline: float = typer.Option(120.0, "--deadline", min=0.1, help="Seconds one question may take (then an error)."),
    http: bool = typer.Option(False, "--http", help="Serve streamable HTTP at /mcp instead of stdio."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (--http); non-loopback needs an API key."),
    port: int = typer.Option(8765, "--port", callback=check_port, help="TCP port (--http), 1-65535."),
    api_key_file: Path | None = typer.Option(
        None, "--api-key-file", help=f"File holding the API key (--http; else ${API_KEY_ENV})."
    ),
    keys_file: Path | None = typer.Option(None, "--keys-file", metavar="FILE", help="--http: " + KEYS_FILE_HELP),
    allowed_host: list[str] = typer.Option(
        [], "--allowed-host",
        help="Extra Host name to answer to (--http, repeatable); loopback binds answer only to the bound address, "
        "localhost, 127.0.0.1 and ::1.",
    ),
) -> None:
    """Serve the index to assistants over the Model Context Protocol: tools ask (the checked answer) and
    search. stdio by default (the client starts this command); --http for streamable HTTP at /mcp."""
    from ragsieve.extras import require

    require("mcp", "mcp", "`ragsieve mcp`")

    from ragsieve.mcp.server import MCP_PATH, build_server, http_app

    key = read_api_key(api_key_file) if http else None
    if keys_file is not None and not http:
        raise typer.BadParameter("--keys-file is for --http; over stdio the client that starts the server reads all")
    if http:
        refuse_open_bind(host, key, "the MCP server", keys_file)
    keys = key_ring(key, keys_file) if http else None
    engine = open_engine(config, index, pipeline, model, threads, llm_url)
    server = build_server(engine, local=not http, deadline_s=deadline)
    logger.setLevel(min(logger.getEffectiveLevel(), logging.INFO))
    if not http:
        import anyio

        logger.info("ragsieve MCP server on stdio for %s", index)
        anyio.run(server.run_stdio_async)
        return

    uvicorn = require("uvicorn", "mcp", "`ragsieve mcp --http`")
    from ragsieve.serve.server import ConnectionLimits, uvicorn_config

    application = http_app(server, api_key=keys, allowed_hosts=host_allow_list(host, allowed_host))
    url_host = f"[{host}]" if ":" in host else host
    logger.info("ragsieve MCP server for %s on http://%s:%d%s", index, url_host, port, MCP_PATH)
    uvicorn.Server(
        uvicorn_config(application, host=host, port=port, limits=ConnectionLimits(), graceful_s=int(deadline) + 1)
    ).run()
