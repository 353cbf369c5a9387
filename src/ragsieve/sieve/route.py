"""Stage ``route``: which partitions of the index to search (the domain router, a fixed
domain, or all of them); with a close margin the runner-up domain is searched too."""

from __future__ import annotations

from ragsieve.config import RouterConfig, RouteStageConfig
from ragsieve.errors import InputError
from ragsieve.index import Index
from ragsieve.sieve.state import PipelineState, Ref
from ragsieve.store.protocol import Store
from ragsieve.types import SearchHit, Trace


def resolve_domains(
    index: Index | Store,
    question: str,
    trace: Trace,
    route: str,
    router_options: RouterConfig | None = None,
    close_margin: float | None = None,
) -> list[str] | None:
    """Which partitions to search for ``route`` ("all", "auto" or a domain name): ``None``
    means the global index. ``router_options``: the router's (the config's ``stages.route``)."""
    if route == "all":
        trace.record("route", mode="all", searched=["<global>"])
        return None
    if route == "auto":
        from ragsieve.route import route_query

        decision = route_query(index, question, router_options)
        routed = None if decision.fallback else list(decision.domains or [])
        record = decision.to_dict()
        if routed is not None and len(routed) == 1 and close_margin is not None:
            ranked = sorted(decision.probabilities.items(), key=lambda kv: -kv[1])
            if len(ranked) > 1 and ranked[0][1] - ranked[1][1] <= close_margin:
                routed.append(ranked[1][0])
                record["reason"] = (
                    f"{ranked[0][0]} p={ranked[0][1]:.2f} and {ranked[1][0]} p={ranked[1][1]:.2f} are within "
                    f"{close_margin}: searched both"
                )
        trace.record("route", mode="auto", searched=routed or ["<global>"], **record)
        return routed
    if route not in index.domains:
        raise InputError(f"unknown domain {route!r} for --route; this index has {', '.join(index.domains)}")
    trace.record("route", mode="fixed", searched=[route])
    return [route]


class RouteStage:
    """Which partitions to search (the domain router, or ``--route``); with ``close_margin``
    the runner-up domain is searched too when the router cannot tell the two apart.

    Reads ``state.route`` (a per-request route) and ``state.retrieve``; writes ``state.domains``
    and a ``route`` trace record. Set by ``stages.route.domain`` (unset: the preset's own),
    ``stages.route.close_margin`` and the router's options in ``stages.route``."""

    name = "route"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    writes: tuple[str, ...] = ("domains",)
    emits: tuple[str, ...] = ()

    def __init__(
        self,
        index: Ref[Index | Store],
        default_route: str,
        close_margin: float | None = RouteStageConfig().close_margin,  # None: the routed domains only
        router_options: RouterConfig | None = None,
    ) -> None:
        self.index = index
        self.default_route = default_route
        self.close_margin = close_margin
        self.router_options = router_options if router_options is not None else RouterConfig()

    def warm_up(self) -> None:
        pass

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        if not state.retrieve:
            return candidates
        state.domains = resolve_domains(
            self.index(),
            question,
            trace,
            state.route or self.default_route,
            self.router_options,
            close_margin=self.close_margin,
        )
        return candidates
