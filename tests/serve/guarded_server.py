"""Serve the fake-engine app with ``ragsieve serve``'s uvicorn settings in its own process (not a
test module), so a test can measure the server's memory apart from its own.

Usage: python guarded_server.py INDEX_DIR PORT_FILE [MAX_BODY_BYTES]. Writes the bound port to
PORT_FILE once listening.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import uvicorn  # noqa: E402
from tests.serve.fakes import fake_engine  # noqa: E402

from ragsieve.serve.app import ServeSettings, create_app  # noqa: E402
from ragsieve.serve.server import ConnectionLimits, uvicorn_config  # noqa: E402


def main() -> None:
    index_dir, port_file = Path(sys.argv[1]), Path(sys.argv[2])
    max_body = int(sys.argv[3]) if len(sys.argv) > 3 else 4 * 1024 * 1024
    app = create_app(fake_engine(index_dir), ServeSettings(max_body_bytes=max_body, warm_up=True))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn_config(app, host="127.0.0.1", port=0, limits=ConnectionLimits(), graceful_s=5)
    server = uvicorn.Server(config)
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(sock.getsockname()[1]))
    tmp.replace(port_file)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
