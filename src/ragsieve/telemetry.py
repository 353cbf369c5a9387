"""OpenTelemetry spans for the pipeline's stages and LLM calls, free when OpenTelemetry is absent.

With ``opentelemetry-api`` installed (the ``otel`` extra) and in use by the application (it has
imported ``opentelemetry.trace``, as setting a tracer provider does), every stage of a question
runs inside a span named ``ragsieve.stage.<name>`` and every LLM call inside
``ragsieve.llm.<operation>``; what exports them (console, OTLP, an in-memory exporter in tests) is
the application's choice, set up with ``opentelemetry-sdk`` as usual. Otherwise :func:`span` is a
no-op context manager: nothing is imported and nothing is recorded.

Example:
    >>> with span("ragsieve.stage.judge", candidates=12):
    ...     pass
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

TRACER_NAME = "ragsieve"

_tracer: Any = None


def _get_tracer() -> Any:
    """The ``ragsieve`` tracer once the application uses OpenTelemetry, else ``None``.

    ragsieve never imports OpenTelemetry itself: an application that exports spans has imported
    ``opentelemetry.trace`` to set its tracer provider, and one that has not would only pay the
    import (and its entry-point scan) at every cold start for spans nobody reads. The lookup is a
    dictionary read until the module appears."""
    global _tracer
    if _tracer is None:
        module = sys.modules.get("opentelemetry.trace")
        if module is not None:
            # A proxy tracer: it follows whatever provider the application sets, now or later.
            _tracer = module.get_tracer(TRACER_NAME)
    return _tracer


def _attribute(value: Any) -> Any:
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, bool | int | float | str) for v in value):
        return list(value)
    return str(value)


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A span named ``name`` around the block (``None`` is yielded without OpenTelemetry).

    Attribute values that OpenTelemetry cannot hold are recorded as their ``str``; ``None``
    values are left out. An exception leaving the block is recorded on the span and re-raised."""
    tracer = _get_tracer()
    if tracer is None:
        yield None
        return
    with tracer.start_as_current_span(name) as current:
        for key, value in attributes.items():
            if value is not None:
                current.set_attribute(f"ragsieve.{key}", _attribute(value))
        yield current


def traced(name: str) -> Callable[[F], F]:
    """Decorator: the function runs inside :func:`span` ``name`` (a plain call without OpenTelemetry)."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            if _get_tracer() is None:
                return fn(*args, **kwargs)
            with span(name):
                return fn(*args, **kwargs)

        return cast(F, inner)

    return wrap


def set_attributes(current: Any, **attributes: Any) -> None:
    """Add attributes to a span :func:`span` yielded (nothing when it yielded ``None``)."""
    if current is None:
        return
    for key, value in attributes.items():
        if value is not None:
            current.set_attribute(f"ragsieve.{key}", _attribute(value))


__all__ = ["TRACER_NAME", "set_attributes", "span", "traced"]
