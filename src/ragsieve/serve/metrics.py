"""Prometheus metrics of the service (``GET /metrics``), in a registry per app so tests can
build several apps in one process."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_STAGE_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,48}$")
# Stage names come from the pipeline's trace; cap the label set so a misbehaving stage
# cannot grow the metric without bound.
_MAX_STAGES = 64

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class ServiceMetrics:
    """Request counts, errors, 429s, latency per endpoint and per pipeline stage, LLM queue depth."""

    def __init__(
        self,
        queue_depth: Callable[[], float],
        llm_busy: Callable[[], float],
        connections: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter(
            "ragsieve_http_requests", "HTTP requests answered", ["endpoint", "method", "status"], registry=self.registry
        )
        self.errors = Counter(
            "ragsieve_http_errors", "Answers with status >= 400, 429 excepted", ["endpoint", "status"],
            registry=self.registry,
        )
        self.rejected = Counter(
            "ragsieve_http_rejected", "429 answers: the LLM queue was full", ["endpoint"], registry=self.registry
        )
        self.latency = Histogram(
            "ragsieve_http_request_duration_seconds", "Time to answer a request", ["endpoint"],
            buckets=_LATENCY_BUCKETS, registry=self.registry,
        )
        self.stage = Histogram(
            "ragsieve_stage_duration_seconds", "Time per pipeline stage, from the request traces", ["stage"],
            buckets=_LATENCY_BUCKETS, registry=self.registry,
        )
        self.reloads = Counter("ragsieve_index_reloads", "Index re-opened after a re-ingest", registry=self.registry)
        depth = Gauge("ragsieve_llm_queue_depth", "Requests waiting for the LLM", registry=self.registry)
        depth.set_function(queue_depth)
        busy = Gauge("ragsieve_llm_busy", "1 while the LLM is answering a request", registry=self.registry)
        busy.set_function(llm_busy)
        self._stages: set[str] = set()
        if connections is not None:
            self.registry.register(_ConnectionCollector(connections))

    def observe_request(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint, method, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)
        if status == 429:
            self.rejected.labels(endpoint).inc()
        elif status >= 400:
            self.errors.labels(endpoint, str(status)).inc()

    def observe_trace(self, trace: dict[str, Any]) -> None:
        timings = trace.get("timings_ms") if isinstance(trace, dict) else None
        if not isinstance(timings, dict):
            return
        for stage, ms in timings.items():
            if not isinstance(ms, int | float):
                continue
            name = stage if isinstance(stage, str) and _STAGE_NAME.match(stage) else "other"
            if name not in self._stages:
                if len(self._stages) >= _MAX_STAGES:
                    name = "other"
                self._stages.add(name)
            self.stage.labels(name).observe(float(ms) / 1000.0)

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _ConnectionCollector:
    """Open, refused and timed-out connections, read from the server's counts at each scrape."""

    def __init__(self, summary: Callable[[], dict[str, Any]]) -> None:
        self.summary = summary

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        counts = self.summary()
        yield GaugeMetricFamily("ragsieve_connections_open", "Client connections open now", value=counts["open"])
        refused = CounterMetricFamily(
            "ragsieve_connections_refused", "Connections closed as they opened, by cap", labels=["reason"]
        )
        for reason, n in sorted(counts["refused"].items()):
            refused.add_metric([reason], n)
        yield refused
        timed_out = CounterMetricFamily(
            "ragsieve_connections_timed_out", "Requests closed for taking too long to send (headers or body)",
            labels=["phase"],
        )
        for phase, n in sorted(counts["timed_out"].items()):
            timed_out.add_metric([phase], n)
        yield timed_out
