"""Turning router probabilities into the partitions to search (pure functions).

Beyond the paper (whose stated limitation is queries spanning several domains): route to
the smallest set of top domains whose probability mass reaches ``mass_threshold`` (at most
``max_domains``), and fall back to the global index when the top probability is below
``unsure_threshold``.

Example:
    >>> decide({"code": 0.55, "health": 0.40, "debate": 0.05}, mass_threshold=0.9, unsure_threshold=0.3)
    RouteDecision(domains=['code', 'health'], probabilities={'code': 0.55, 'health': 0.4, 'debate': 0.05}, \
fallback=False, reason='top 2 domains hold 0.95 >= 0.9 of the probability')
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class RouteDecision(NamedTuple):
    """Where one query is searched. ``domains=None`` means the global (unpartitioned) index."""

    domains: list[str] | None
    probabilities: dict[str, float]
    fallback: bool
    reason: str

    @property
    def multi(self) -> bool:
        return self.domains is not None and len(self.domains) > 1

    @property
    def kind(self) -> str:
        """``fallback``, ``multi``, ``single``, or ``global`` (searched everything on request)."""
        if self.fallback:
            return "fallback"
        if self.domains is None:
            return "global"
        return "multi" if self.multi else "single"

    def to_dict(self) -> dict[str, Any]:
        return {
            "domains": self.domains,
            "probabilities": {k: round(v, 4) for k, v in self.probabilities.items()},
            "fallback": self.fallback,
            "reason": self.reason,
        }


def decide(
    probabilities: Mapping[str, float],
    mass_threshold: float = 0.9,
    unsure_threshold: float = 0.5,
    max_domains: int = 3,
) -> RouteDecision:
    """The top domains covering ``mass_threshold`` of the probability, or the global index."""
    probs = {str(k): float(v) for k, v in sorted(probabilities.items(), key=lambda kv: (-kv[1], kv[0]))}
    if not probs:
        return RouteDecision(None, {}, True, "no domain probabilities: searched the global index")
    ranked = list(probs.items())
    top_domain, top_p = ranked[0]
    if top_p < unsure_threshold:
        return RouteDecision(
            None,
            probs,
            True,
            f"router unsure: top domain {top_domain} has p={top_p:.2f} < {unsure_threshold}; "
            "searched the global index",
        )
    chosen: list[str] = []
    mass = 0.0
    for domain, p in ranked[: max(1, max_domains)]:
        chosen.append(domain)
        mass += p
        if mass >= mass_threshold - 1e-12:
            break
    if len(chosen) == 1:
        reason = f"top domain {top_domain} has p={top_p:.2f}"
        reason += (
            f" >= {mass_threshold}" if mass >= mass_threshold - 1e-12 else f" (max_domains={max_domains})"
        )
    elif mass >= mass_threshold - 1e-12:
        reason = f"top {len(chosen)} domains hold {mass:.2f} >= {mass_threshold} of the probability"
    else:
        reason = f"top {len(chosen)} domains (max_domains) hold {mass:.2f} of the probability"
    return RouteDecision(chosen, probs, False, reason)


@dataclass
class RouteStats:
    """How often each kind of decision happened (single, multi, fallback, global)."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, decision: RouteDecision) -> None:
        self.counts[decision.kind] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def rate(self, kind: str) -> float:
        return self.counts[kind] / self.total if self.total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, **{k: self.counts[k] for k in ("single", "multi", "fallback", "global")}}


__all__ = ["RouteDecision", "RouteStats", "decide"]
