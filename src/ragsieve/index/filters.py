"""Metadata filters: ``where={"domain": "physics", "entities.person": ["Curie", "Bohr"]}``.

A key is a chunk attribute (``domain``, ``source``, ``title``, ``doc_id``) or a dotted path
into ``chunk.metadata``; a list value matches any of its items; a value matches a list
attribute when it is one of its elements.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ragsieve.errors import InputError
from ragsieve.types import Chunk

_ATTRIBUTES = {"domain", "source", "title", "doc_id", "id"}


def parse_where(expressions: Sequence[str]) -> dict[str, Any]:
    """Parse CLI ``key=value`` expressions; ``key=a,b`` means any of a or b."""
    where: dict[str, Any] = {}
    for expr in expressions:
        if "=" not in expr:
            raise InputError(f"filter {expr!r} is not of the form key=value, e.g. domain=physics")
        key, value = expr.split("=", 1)
        key, value = key.strip(), value.strip()
        if not key or not value:
            raise InputError(f"filter {expr!r} needs both a key and a value, e.g. domain=physics")
        values = [v.strip() for v in value.split(",") if v.strip()]
        where[key] = values if len(values) > 1 else values[0]
    return where


def _lookup(chunk: Chunk, key: str) -> Any:
    if key in _ATTRIBUTES:
        return getattr(chunk, key)
    node: Any = chunk.metadata
    for part in key.removeprefix("metadata.").split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _matches(actual: Any, wanted: Any) -> bool:
    wanted_set = {str(w) for w in (wanted if isinstance(wanted, list | tuple | set) else [wanted])}
    if isinstance(actual, list | tuple | set):
        return any(str(a) in wanted_set for a in actual)
    return actual is not None and str(actual) in wanted_set


_SCALARS = (str, int, float, bool)


def known_fields(chunks: Sequence[Chunk]) -> set[str]:
    """Every key a filter can match in ``chunks``: the attributes and each metadata path present."""
    fields = set(_ATTRIBUTES)

    def walk(node: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            path = f"{prefix}{key}"
            fields.add(path)
            if isinstance(value, dict):
                walk(value, path + ".")

    for c in chunks:
        if c.metadata:
            walk(c.metadata, "")
    return fields


def check_where(where: Any, fields: set[str]) -> None:
    """Reject a filter that could only ever match nothing by mistake: unknown keys, odd values."""
    if not isinstance(where, dict):
        raise InputError(f"where must be a mapping of field to value(s), e.g. {{'domain': 'physics'}}; got {where!r}")
    for key, wanted in where.items():
        if not isinstance(key, str) or not key:
            raise InputError(f"filter keys must be field names, got {key!r}")
        if key not in fields and key.removeprefix("metadata.") not in fields:
            shown = ", ".join(sorted(fields)[:30]) + (" ..." if len(fields) > 30 else "")
            raise InputError(f"no chunk in this index has a field {key!r} to filter on; the fields are: {shown}")
        values = wanted if isinstance(wanted, list | tuple | set) else [wanted]
        if not values or not all(isinstance(v, _SCALARS) for v in values):
            raise InputError(
                f"filter {key!r} needs a text or number value, or a non-empty list of them; got {wanted!r}"
            )


def where_mask(chunks: Sequence[Chunk], where: dict[str, Any]) -> np.ndarray:
    """Boolean mask over ``chunks`` of those matching every condition."""
    mask = np.ones(len(chunks), dtype=bool)
    for key, wanted in where.items():
        mask &= np.fromiter((_matches(_lookup(c, key), wanted) for c in chunks), dtype=bool, count=len(chunks))
    return mask
