"""Ten concurrent 200 MB request bodies against a server in its own process: every one gets 413
and the server's resident memory stays within 100 MB of its idle value."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.serve.fakes import write_index_dir

REPO = Path(__file__).resolve().parents[2]
BODY_BYTES = 200 * 1024 * 1024
CHUNK = 64 * 1024

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _body(total: int) -> Iterator[bytes]:
    """The body, generated as it is sent: the test never holds more than one chunk."""
    head = b'{"query": "'
    yield head
    sent = len(head)
    block = b"a" * CHUNK
    while sent + CHUNK < total - 2:
        yield block
        sent += CHUNK
    yield b"a" * (total - 2 - sent) + b'"}'


def _send_huge(port: int, chunked: bool) -> bytes:
    """Send a 200 MB body (declared or chunked) until the server answers; return the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        framing = b"Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {BODY_BYTES}\r\n".encode()
        sock.sendall(
            b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + framing + b"\r\n"
        )
        try:
            for piece in _body(BODY_BYTES):
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:
                    break  # the server has answered: stop sending, as any HTTP client does
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            else:
                if chunked:
                    sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        reply = b""
        sock.settimeout(30)
        while b"\r\n\r\n" not in reply:
            data = sock.recv(65536)
            if not data:
                break
            reply += data
        return reply


def test_ten_concurrent_200mb_bodies_get_413_without_growing_the_server(tmp_path: Path) -> None:
    index_dir = write_index_dir(tmp_path / "idx")
    port_file = tmp_path / "port"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "serve" / "guarded_server.py"), str(index_dir), str(port_file)],
        env=env, cwd=REPO, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        port = int(port_file.read_text())
        url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                if httpx.get(f"{url}/v1/health", timeout=2).json()["status"] == "ok":
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        for _ in range(3):  # settle allocator and lazy imports on ordinary traffic first
            assert httpx.post(f"{url}/v1/search", json={"query": "carbon"}, timeout=10).status_code == 200
        idle = _rss_bytes(proc.pid)
        peak = idle
        stop = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not stop.is_set():
                peak = max(peak, _rss_bytes(proc.pid))
                time.sleep(0.01)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        replies: list[bytes] = [b""] * 10

        def one(i: int) -> None:
            replies[i] = _send_huge(port, chunked=i % 2 == 0)

        senders = [threading.Thread(target=one, args=(i,)) for i in range(10)]
        for t in senders:
            t.start()
        for t in senders:
            t.join(timeout=60)
        time.sleep(0.2)
        stop.set()
        sampler.join()
        still_ok = httpx.post(f"{url}/v1/search", json={"query": "carbon"}, timeout=10).status_code
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    statuses = [r.split(b"\r\n", 1)[0] for r in replies]
    assert all(s.startswith(b"HTTP/1.1 413") for s in statuses), statuses
    assert all(b"4194304 bytes" in r or b"content-length" in r.lower() for r in replies)
    grown_mb = (peak - idle) / 2**20
    assert peak - idle < 100 * 1024 * 1024, f"server RSS grew {grown_mb:.0f} MB (idle {idle / 2**20:.0f} MB)"
    assert still_ok == 200
