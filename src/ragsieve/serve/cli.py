"""``ragsieve serve`` and ``ragsieve trace view``. Imports stay light here: fastapi and uvicorn
load only when a command runs."""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ragsieve.console import INDEX_HELP
from ragsieve.errors import ConfigError

if TYPE_CHECKING:
    from ragsieve.serve.engine import Engine
    from ragsieve.serve.keys import KeyRing

logger = logging.getLogger(__name__)

API_KEY_ENV = "RAGSIEVE_API_KEY"

app = typer.Typer(help="Look at request traces.", no_args_is_help=True)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(ipaddress.ip_address(info[4][0]).is_loopback for info in socket.getaddrinfo(host, None))
        except (OSError, ValueError):
            return False


def read_api_key(key_file: Path | None, env: str = API_KEY_ENV) -> str | None:
    """The API key from ``key_file`` (first line) or the environment variable ``env``."""
    if key_file is not None:
        try:
            lines = key_file.read_text(encoding="utf-8").strip().splitlines()
        except OSError as exc:
            raise ConfigError(
                f"cannot read the API key file {key_file} ({exc}); check the path and permissions"
            ) from exc
        key = lines[0].strip() if lines else ""
        if not key:
            raise ConfigError(f"the API key file {key_file} is empty; write the key on its first line")
        return key
    key = os.environ.get(env, "").strip()
    return key or None


def refuse_open_bind(host: str, key: str | None, what: str, keys_file: Path | None = None) -> None:
    """A :class:`ConfigError` when ``host`` accepts connections from other machines and no API
    key is set: ``what`` ("the service", "the MCP server") would answer anyone who can reach it."""
    if not is_loopback(host) and key is None and keys_file is None:
        raise ConfigError(
            f"binding {host} exposes {what} beyond this machine; set an API key "
            f"(${API_KEY_ENV}, --api-key-file FILE or --keys-file FILE) or bind 127.0.0.1"
        )


KEYS_FILE_HELP = (
    "TOML file of API keys, each with the partitions, document tags and paths it may read (or all = true); "
    "re-read when it changes (docs/sharing.md). The --api-key-file / $" + API_KEY_ENV + " key stays an all-access key."
)


def key_ring(api_key: str | None, keys_file: Path | None) -> KeyRing:
    """The keys a command accepts; a bad keys file fails here, before a port opens."""
    from ragsieve.serve.keys import KeyRing

    return KeyRing(api_key=api_key, keys_file=keys_file)


def open_engine(
    config: Path | None,
    index: Path | None,
    pipeline: str | None,
    model: str | None,
    threads: int | None,
    llm_url: str | None,
    allow_link_hosts: list[str] | None = None,
) -> Engine:
    """The service's :class:`~ragsieve.serve.engine.Engine` from a command's options (the config
    file, then the options over it, as ``ragsieve ask`` reads them), with its index opened: a
    missing or corrupt index fails here, before a port opens or a client connects."""
    from ragsieve.config import apply_overrides, load_with_overrides
    from ragsieve.console import resolve_index_dir
    from ragsieve.serve.engine import Engine

    overrides: dict[str, object] = {
        "index_dir": str(index) if index else None, "pipeline": pipeline, "llm.model": model, "llm.n_threads": threads,
    }
    if llm_url:
        overrides.update({"llm.backend": "openai", "llm.base_url": llm_url})
    cfg = load_with_overrides(config, overrides)
    if allow_link_hosts:  # added to the config's own
        hosts = list(dict.fromkeys([*cfg.present.allow_link_hosts, *allow_link_hosts]))
        cfg = apply_overrides(cfg, {"present.allow_link_hosts": hosts})
    index = resolve_index_dir(index, cfg.index_dir)
    engine = Engine(apply_overrides(cfg, {"index_dir": str(index)}))
    engine.snapshot()
    return engine


def check_port(port: int) -> int:
    """``port`` when it is a TCP port the service can announce (1-65535). 0 is refused too: the
    system would pick a free port, and the start-up line and clients could not know which."""
    if not 1 <= port <= 65535:
        raise typer.BadParameter(
            f"{port} is not a TCP port to listen on; use a number from 1 to 65535 (e.g. --port 8000; "
            "0, any free port, is not taken: nothing would say which port the service got)"
        )
    return port


def serve(
    index: Path | None = typer.Option(
        None, "--index", metavar="DIR", help=INDEX_HELP + " Re-ingests are picked up live."
    ),
    config: Path | None = typer.Option(None, "--config", help="TOML/YAML config file."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind; non-loopback needs an API key."),
    port: int = typer.Option(8000, "--port", callback=check_port, help="TCP port, 1-65535."),
    pipeline: str | None = typer.Option(None, "--pipeline", help="Default pipeline: plain, task-adaptive or sieve."),
    api_key_file: Path | None = typer.Option(
        None, "--api-key-file", help=f"File holding the API key (else ${API_KEY_ENV})."
    ),
    keys_file: Path | None = typer.Option(None, "--keys-file", metavar="FILE", help=KEYS_FILE_HELP),
    queue_size: int = typer.Option(16, "--queue-size", min=1, help="Requests allowed to wait for the LLM (then 429)."),
    deadline: float = typer.Option(120.0, "--deadline", min=0.1, help="Per-request deadline in seconds (then 504)."),
    llm_url: str | None = typer.Option(None, "--llm-url", help="Use an OpenAI-compatible LLM server."),
    model: str | None = typer.Option(None, "--model", help="GGUF path (llama-cpp) or model name (openai)."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads for llama.cpp."),
    max_body_bytes: int = typer.Option(
        4 * 1024 * 1024, "--max-body-bytes", min=1024, help="Largest request body accepted (then 413)."
    ),
    allowed_host: list[str] = typer.Option(
        [], "--allowed-host",
        help="Extra Host name to answer to (repeatable). Loopback binds answer only to the bound address, "
        "localhost, 127.0.0.1 and ::1 (a DNS-rebinding guard); other binds check Host only when this is given.",
    ),
    allow_link_host: list[str] = typer.Option(
        [], "--allow-link-host",
        help="Host an answer may link to or show an image from (repeatable; '*.example.org' for its subdomains), "
        "added to the config's present.allow_link_hosts. Every other image and link to an address outside the "
        "corpus is made inert in the answer.",
    ),
    header_timeout: float = typer.Option(
        10.0, "--header-timeout", min=0.1,
        help="Seconds a client has to send all its request headers, however steadily (then closed).",
    ),
    body_timeout: float = typer.Option(
        30.0, "--body-timeout", min=0.1,
        help="Seconds a client has to send all its request body after the headers, however steadily (then 408).",
    ),
    max_connections: int = typer.Option(
        512, "--max-connections", min=1, help="Open connections allowed at once (more are refused)."
    ),
    max_connections_per_client: int = typer.Option(
        64, "--max-connections-per-client", min=0,
        help="Open connections allowed from one client address (more are refused; 0: no limit). Behind a "
        "reverse proxy on this host every client has the proxy's address: raise it or set 0.",
    ),
) -> None:
    """Serve the index over HTTP: OpenAI-compatible chat, /v1/ask, /v1/search, /metrics and a trace page."""
    from ragsieve.extras import require

    for module in ("fastapi", "prometheus_client"):
        require(module, "serve", "`ragsieve serve`")
    uvicorn = require("uvicorn", "serve", "`ragsieve serve`")

    from ragsieve.serve.app import ServeSettings, create_app
    from ragsieve.serve.server import ConnectionLimits, uvicorn_config

    key = read_api_key(api_key_file)
    refuse_open_bind(host, key, "the service", keys_file)
    keys = key_ring(key, keys_file)
    engine = open_engine(config, index, pipeline, model, threads, llm_url, allow_link_host)
    settings = ServeSettings(
        api_key=key, keys=keys, queue_size=queue_size, deadline_s=deadline, max_body_bytes=max_body_bytes,
        body_timeout_s=body_timeout, allowed_hosts=host_allow_list(host, allowed_host),
    )
    application = create_app(engine, settings)
    # The start-up line is news, not a problem: INFO, shown without --verbose.
    logger.setLevel(min(logger.getEffectiveLevel(), logging.INFO))
    logger.info("ragsieve serving %s on http://%s:%d/ (page at /, OpenAPI at /docs)", index, host, port)
    limits = ConnectionLimits(
        header_timeout_s=header_timeout, max_connections=max_connections,
        max_connections_per_client=max_connections_per_client,
    )
    uvicorn.Server(
        uvicorn_config(application, host=host, port=port, limits=limits, graceful_s=int(deadline) + 1)
    ).run()


def host_allow_list(host: str, extra: list[str]) -> frozenset[str] | None:
    """The Host names the service answers to: on for loopback binds (the bound address,
    localhost, 127.0.0.1, ::1 and ``extra``); for other binds only when ``extra`` is given."""
    from ragsieve.serve.guard import allowed_hosts_for

    if is_loopback(host) or extra:
        return allowed_hosts_for(host, extra)
    return None


@app.command("view")
def view(
    trace: Path = typer.Argument(..., help="JSON from `ragsieve ask --json` (or a search result / chat answer)."),
    out: Path = typer.Option(..., "-o", "--out", help="HTML file to write."),
) -> None:
    """Write the trace page for a saved trace as one self-contained HTML file."""
    from ragsieve.io import atomic_write_text
    from ragsieve.serve.page import load_trace, render_page

    atomic_write_text(out, render_page(load_trace(trace)))
    typer.echo(f"wrote {out}")
