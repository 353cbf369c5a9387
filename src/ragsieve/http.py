"""JSON over HTTP with retries, shared by the OpenAI-compatible LLM and embedding clients."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
from typing import Any

from ragsieve.errors import ModelError

logger = logging.getLogger(__name__)


class HTTPStatusError(Exception):
    """A 4xx answer (other than 429) the caller may handle, e.g. an unsupported parameter."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status
        self.body = body


def make_client(base_url: str, api_key_env: str, timeout_s: float) -> Any:
    """An ``httpx.Client`` for ``base_url``, with a bearer token from ``api_key_env`` when it is set."""
    import httpx

    headers = {"Content-Type": "application/json"}
    key = os.environ.get(api_key_env)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)


def post_json(
    client: Any,
    path: str,
    payload: dict[str, Any],
    *,
    service: str,
    max_retries: int,
    backoff_s: float,
) -> dict[str, Any]:
    """POST ``payload`` and return the JSON answer.

    Connection errors, timeouts, 429 and 5xx are retried with exponential backoff
    (``backoff_s * 2**attempt`` with 10% jitter, or the server's ``Retry-After``, at most 60 s);
    when retries run out a :class:`ModelError` names ``service`` and the fix. Other 4xx
    answers raise :class:`HTTPStatusError` at once.
    """
    import httpx

    url = str(client.base_url).rstrip("/") + "/" + path.lstrip("/")
    last = ""
    for attempt in range(max_retries + 1):
        wait = backoff_s * (2**attempt) * (1.0 + 0.1 * random.random())
        try:
            resp = client.post(path, json=payload)
        except (httpx.ConnectError, httpx.TimeoutException, httpx.RemoteProtocolError) as exc:
            last = f"{type(exc).__name__}: {exc}"
            if attempt < max_retries:
                logger.warning("%s %s: %s; retry %d in %.2fs", service, url, last, attempt + 1, wait)
                time.sleep(wait)
                continue
            raise ModelError(
                f"could not reach {service} at {url} after {attempt + 1} attempts ({last}); start it or fix base_url"
            ) from exc
        if resp.status_code == 429 or resp.status_code >= 500:
            last = f"HTTP {resp.status_code}: {resp.text[:200]}"
            if attempt < max_retries:
                retry_after = resp.headers.get("Retry-After")
                if retry_after is not None:
                    with contextlib.suppress(ValueError):
                        wait = min(float(retry_after), 60.0)
                logger.warning("%s %s: %s; retry %d in %.2fs", service, url, last, attempt + 1, wait)
                time.sleep(wait)
                continue
            raise ModelError(
                f"{service} at {url} kept failing ({last}) after {attempt + 1} attempts; "
                "check the server logs or lower the request rate"
            )
        if resp.status_code >= 400:
            raise HTTPStatusError(resp.status_code, resp.text)
        try:
            data: dict[str, Any] = resp.json()
        except ValueError as exc:
            raise ModelError(
                f"{service} at {url} returned non-JSON ({resp.text[:200]!r}); "
                "check that base_url points at an OpenAI-compatible API"
            ) from exc
        return data
    raise ModelError(f"could not reach {service} at {url}; start it or fix base_url")  # pragma: no cover
