"""Slow clients cannot lock others out: 600 connections dripping their headers or their body (one
byte at a time, never pausing long) from two loopback addresses, while a health probe from a third
address must answer within 1 s throughout. Each connection is refused at once (per-client cap) or
closed at the total header/body deadline; health and metrics count both. Bounded: 600 connections,
about 5 s, loopback only."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import httpx
import pytest
from tests.serve.fakes import ServerThread, fake_engine, write_index_dir

from ragsieve.serve.app import ServeSettings, create_app
from ragsieve.serve.server import ConnectionLimits, guarded_protocol

PER_CLIENT = 64
HEADER_TIMEOUT_S = 2.0
BODY_TIMEOUT_S = 2.0
# Each dripping client sends one byte this often: never a long pause, so only a total limit stops it.
DRIP_S = 0.25
# Safety stop for the test itself (the server should have closed everything long before).
ATTACK_LIMIT_S = 12.0


async def _drip(port: int, source: str, phase: str) -> tuple[str, float]:
    """One slow client: complete headers then a dripped body (``phase="body"``), or dripped
    headers that never complete (``phase="headers"``). Returns how it ended and when."""
    start = time.monotonic()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    except OSError:
        return "connect-failed", 0.0
    head = b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n"
    if phase == "body":
        writer.write(head + b"\r\n")
        drip = b"x"
    else:
        writer.write(head + b"X-Slow: ")  # a header value that never ends
        drip = b"a"
    outcome = "still-open"
    try:
        while time.monotonic() - start < ATTACK_LIMIT_S:
            try:
                data = await asyncio.wait_for(reader.read(4096), DRIP_S)
            except asyncio.TimeoutError:
                writer.write(drip)
                await writer.drain()
                continue
            if not data:
                outcome = "closed" if outcome == "still-open" else outcome
                break
            if b" 408 " in data.split(b"\r\n", 1)[0]:
                outcome = "408"
    except (ConnectionError, OSError):
        outcome = "closed" if outcome == "still-open" else outcome
    finally:
        writer.close()
    return outcome, time.monotonic() - start


def _probe(url: str, stop: threading.Event, latencies: list[float], statuses: list[int]) -> None:
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.1")) as client:
        while not stop.is_set():
            start = time.monotonic()
            try:
                statuses.append(client.get(f"{url}/v1/health", timeout=5).status_code)
            except httpx.HTTPError:
                statuses.append(0)
            latencies.append(time.monotonic() - start)
            stop.wait(0.2)


@pytest.mark.parametrize("n", [600])
def test_slow_drip_connections_do_not_stop_health_from_answering(tmp_path: Path, n: int) -> None:
    app = create_app(
        fake_engine(write_index_dir(tmp_path / "idx")), ServeSettings(body_timeout_s=BODY_TIMEOUT_S, warm_up=True)
    )
    limits = ConnectionLimits(
        header_timeout_s=HEADER_TIMEOUT_S, max_connections=512, max_connections_per_client=PER_CLIENT
    )
    server = ServerThread(app)
    server.server.config.http = guarded_protocol(limits, stats=app.state.connections)
    server.server.config.limit_concurrency = limits.max_connections
    with server:
        assert httpx.get(f"{server.url}/v1/health", timeout=5).status_code == 200
        stop = threading.Event()
        latencies: list[float] = []
        statuses: list[int] = []
        prober = threading.Thread(target=_probe, args=(server.url, stop, latencies, statuses), daemon=True)
        prober.start()

        async def attack() -> list[tuple[str, float]]:
            body = [_drip(server.port, "127.0.0.2", "body") for _ in range(n // 2)]
            headers = [_drip(server.port, "127.0.0.3", "headers") for _ in range(n - n // 2)]
            return await asyncio.gather(*body, *headers)

        start = time.monotonic()
        results = asyncio.run(attack())
        elapsed = time.monotonic() - start
        stop.set()
        prober.join(timeout=10)
        health = httpx.get(f"{server.url}/v1/health", timeout=5).json()
        metrics = httpx.get(f"{server.url}/metrics", timeout=5).text

    outcomes = [outcome for outcome, _ in results]
    held_open = outcomes.count("still-open")
    assert held_open == 0, f"{held_open} slow clients still held after {elapsed:.1f} s"
    assert "connect-failed" not in outcomes
    assert statuses and all(status == 200 for status in statuses), statuses
    assert max(latencies) < 1.0, f"a health probe took {max(latencies):.2f} s"
    # Every slow client was either refused as it connected or cut at its total deadline.
    held = sorted(seconds for _, seconds in results)
    assert held[-1] < max(HEADER_TIMEOUT_S, BODY_TIMEOUT_S) + 3.0, held[-1]
    counts = health["connections"]
    assert counts["refused"].get("max_connections_per_client", 0) == n - 2 * PER_CLIENT
    assert counts["timed_out"].get("headers", 0) == PER_CLIENT
    assert counts["timed_out"].get("body", 0) == PER_CLIENT
    assert outcomes.count("408") == PER_CLIENT  # the body drippers were told why
    assert 'ragsieve_connections_refused_total{reason="max_connections_per_client"}' in metrics
    assert 'ragsieve_connections_timed_out_total{phase="body"}' in metrics


def test_a_steady_body_drip_is_cut_at_the_total_deadline_not_the_pause(tmp_path: Path) -> None:
    """A byte every 0.2 s never pauses for the 1 s limit, yet the request ends at about 1 s."""
    from fastapi.testclient import TestClient  # noqa: F401  (the serve extra is installed)

    app = create_app(fake_engine(write_index_dir(tmp_path / "idx")), ServeSettings(body_timeout_s=1.0))
    server = ServerThread(app)
    server.server.config.http = guarded_protocol(ConnectionLimits(), stats=app.state.connections)
    with server:

        async def one() -> tuple[str, float]:
            return await _drip(server.port, "127.0.0.1", "body")

        outcome, seconds = asyncio.run(one())
    assert outcome == "408"
    assert 0.9 < seconds < 3.0, seconds
