"""Evidence selection: which retrieved candidates reach the generator.

A selector sees the ranked candidates and returns the subset to use, recording its
decisions in the trace. :class:`TopKSelector` keeps the first ``k``; the chain-of-evidence
stage provides ``ragsieve.coe.ScopeCoESelector``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ragsieve.types import SearchHit, Trace


@runtime_checkable
class Selector(Protocol):
    def select(self, query: str, hits: list[SearchHit], trace: Trace) -> list[SearchHit]: ...

    def to_dict(self) -> dict[str, Any]: ...


class TopKSelector:
    """Keep the ``k`` best-ranked candidates (plain RAG).

    Example:
        >>> from ragsieve.types import Trace
        >>> TopKSelector(k=3).select("q", [], Trace("q"))
        []
    """

    def __init__(self, k: int = 5) -> None:
        self.k = k

    def select(self, query: str, hits: list[SearchHit], trace: Trace) -> list[SearchHit]:
        kept = hits[: self.k]
        trace.record(
            "select",
            method="top-k",
            k=self.k,
            kept=[h.chunk.id for h in kept],
            dropped=[{"id": h.chunk.id, "reason": f"rank {h.rank} > k={self.k}"} for h in hits[self.k :]],
        )
        return kept

    def to_dict(self) -> dict[str, Any]:
        return {"type": "top-k", "k": self.k}


__all__ = ["Selector", "TopKSelector"]
