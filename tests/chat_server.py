"""A fake OpenAI-compatible chat server on 127.0.0.1 (random port) for tests that need an LLM.

Every chat request is answered with one sentence that cites each numbered passage the prompt
holds (``[1]``, ``[2]``, ...), so citations are exercised without a model; a request for JSON
(``response_format``) gets a "yes" verdict, and a log-probability request a 404 (a server
without that feature), which the library handles. Loopback only.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_MARKER = re.compile(r"^\s*\[(\d+)\]", re.M)


@dataclass
class ChatServer:
    url: str = ""
    paths: list[str] = field(default_factory=list)
    # time.perf_counter() when each request arrived (before its body is read), in order
    arrivals: list[float] = field(default_factory=list)


def _reply_for(body: dict[str, Any]) -> str:
    if body.get("response_format"):
        return json.dumps({"answer": "yes", "score": 1})
    prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict))
    numbers = sorted({int(n) for n in _MARKER.findall(prompt)})[:3] or [1]
    return "The passages state it " + "".join(f"[{n}]" for n in numbers) + "."


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            server.arrivals.append(time.perf_counter())
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            server.paths.append(self.path)
            if not self.path.endswith("/chat/completions") or body.get("logprobs"):
                self._send(404, {"error": {"message": "not supported by this server"}})
                return
            self._send(200, {
                "choices": [{"message": {"role": "assistant", "content": _reply_for(body)}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 9},
            })

        def _send(self, status: int, body: dict[str, Any]) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


@contextmanager
def serve_chat() -> Iterator[ChatServer]:
    """A running fake chat server; its ``url`` is the OpenAI base URL (ending in ``/v1``)."""
    server = ChatServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
