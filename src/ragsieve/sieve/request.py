"""The per-request options of every way to ask a pipeline, written once: :class:`AskOptions`.

``Pipeline.ask``, ``ask_with_events``, ``stream``, ``aask`` and ``astream`` each take the
question and ``**options: Unpack[AskOptions]``; :func:`takes_ask_options` gives each the
explicit keyword-only signature those options make (``help()``, ``inspect.signature`` and the
service's check of what a pipeline takes all see ``no_retrieval``, ``k``, ``route``, ``where``
and ``task``); :func:`ask_options`, where they are read, refuses an unknown keyword as Python
would. A new per-request option is one
entry here (and its reading in ``Pipeline.ask_with_events``, where the request's
:class:`~ragsieve.sieve.state.PipelineState` is made).

Example:
    >>> from ragsieve.sieve.request import ask_options
    >>> ask_options({"k": 3})
    {'no_retrieval': False, 'k': 3, 'route': None, 'where': None, 'task': None}
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypedDict, TypeVar


class AskOptions(TypedDict, total=False):
    """What a caller may set for one question (each optional; :data:`ASK_DEFAULTS` when left out).

    ``no_retrieval``: answer without retrieval; ``k``: passages the answer is generated from
    (``retrieval.k`` when ``None``); ``route``: a partition to search, ``"auto"`` (the router)
    or ``"all"`` (the config's route when ``None``); ``where``: metadata filters on the
    candidates; ``task``: force the task-adaptive preset's path (a task label)."""

    no_retrieval: bool
    k: int | None
    route: str | None
    where: dict[str, Any] | None
    task: str | None


# each option's value when the caller leaves it out, in AskOptions' order
ASK_DEFAULTS: dict[str, Any] = {"no_retrieval": False, "k": None, "route": None, "where": None, "task": None}
ASK_OPTIONS: tuple[str, ...] = tuple(AskOptions.__annotations__)


def ask_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """Every option, ``given`` over :data:`ASK_DEFAULTS`; a ``TypeError`` naming an unknown key."""
    unknown = [key for key in given if key not in ASK_DEFAULTS]
    if unknown:
        raise TypeError(
            f"unexpected keyword argument {unknown[0]!r}; a question takes {', '.join(ASK_OPTIONS)}"
        )
    return {**ASK_DEFAULTS, **given}


F = TypeVar("F", bound=Callable[..., Any])


def _annotation(name: str) -> Any:
    """An option's type as written in :class:`AskOptions` (its text, not a ``ForwardRef``)."""
    annotation = AskOptions.__annotations__[name]
    return getattr(annotation, "__forward_arg__", annotation)


def takes_ask_options(method: F) -> F:
    """Give ``method`` (``def m(self, question, [positional ...,] **options)``) the signature with
    each of :class:`AskOptions` as a keyword-only parameter, for ``help()`` and
    ``inspect.signature``. The options are checked where they are read (:func:`ask_options`)."""
    own = inspect.signature(method)
    positional = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    keywords = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=ASK_DEFAULTS[name],
                          annotation=_annotation(name))  # fmt: skip
        for name in ASK_OPTIONS
    ]
    method.__signature__ = own.replace(parameters=[*positional, *keywords])  # type: ignore[attr-defined]
    return method


__all__ = ["ASK_DEFAULTS", "ASK_OPTIONS", "AskOptions", "ask_options", "takes_ask_options"]
