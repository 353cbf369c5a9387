"""Routing at request time: query -> :class:`RouteDecision`, never crashing mid-request.

Every problem the router cannot solve (an empty query, a query with no known words, a
router whose domains the index lacks, a single-domain index) becomes a logged fallback to
the global index with the reason in the decision, so the trace shows it.

Example:
    >>> from ragsieve.index import Index                                   # doctest: +SKIP
    >>> index = Index.open("demo-index")                                   # doctest: +SKIP
    >>> router = QueryRouter(index, {"mass_threshold": 0.8})               # doctest: +SKIP
    >>> router.route("What is the band gap of silicon?").domains           # doctest: +SKIP
    ['physics']
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from ragsieve.errors import IndexStoreError, InputError
from ragsieve.route.decide import RouteDecision, RouteStats, decide
from ragsieve.route.router import ARRAY_FILE, LEGACY_MODEL_FILE, MODEL_FILE, DomainRouter
from ragsieve.route.train import ROUTER_DIR, RouteConfig, check_domains, load_router, train_router

logger = logging.getLogger(__name__)


def _fallback(reason: str, probabilities: dict[str, float] | None = None) -> RouteDecision:
    logger.info("routing fell back to the global index: %s", reason)
    return RouteDecision(None, probabilities or {}, True, reason)


class QueryRouter:
    """Decides which partitions of ``index`` to search for each query and counts how often
    it routed to one domain, to several, or fell back to the global index.

    The router is read from ``<index dir>/router``; if none was trained yet it is trained
    from the index's chunks on first use (and saved), so ``--route auto`` works out of the box.
    """

    def __init__(
        self,
        index: Any,
        config: RouteConfig | dict[str, Any] | None = None,
        router: DomainRouter | None = None,
    ) -> None:
        self.index = index
        self.config = RouteConfig.parse(config)
        self.router = router
        self.stats = RouteStats()
        self._domains: list[str] | None = None

    def warm_up(self) -> None:
        if self.router is None:
            saved = self.index.dir / ROUTER_DIR
            # an old pickled router is refused by load_router (with the retrain command) rather
            # than silently replaced by one trained from chunks
            if any((saved / name).is_file() for name in (ARRAY_FILE, MODEL_FILE, LEGACY_MODEL_FILE)):
                self.router = load_router(self.index)
                _convert_quietly(self.router, saved)
            else:
                logger.info("no router in %s: training one from the index's chunks", self.index.dir)
                self.router = train_router(self.index, self.config)
        if self._domains is None:
            self._domains = check_domains([str(c) for c in self.router.classes_], self.index.domains)

    def to_dict(self) -> dict[str, Any]:
        return {"index_dir": str(self.index.dir), "config": self.config.model_dump()}

    def probabilities(self, query: str) -> dict[str, float]:
        """Router probabilities over the index's domains (renormalised if some are missing)."""
        self.warm_up()
        if self.router is None or self._domains is None:  # pragma: no cover - warm_up sets both
            raise IndexStoreError("the router did not load; retrain it with `ragsieve router train`")
        proba = self.router.predict_proba([query])[0]
        probs = {
            str(c): float(p)
            for c, p in zip(self.router.classes_, proba, strict=True)
            if str(c) in self._domains
        }
        total = sum(probs.values())
        return {k: v / total for k, v in probs.items()} if total > 0 else probs

    def route(self, query: str) -> RouteDecision:
        decision = self._route(query)
        self.stats.add(decision)
        return decision

    def _route(self, query: str) -> RouteDecision:
        if not isinstance(query, str) or not query.strip():
            return _fallback("empty query: searched the global index")
        if len(self.index.domains) < 2:
            return _fallback(f"the index has one domain ({', '.join(self.index.domains)}): nothing to route")
        try:
            self.warm_up()
        except (IndexStoreError, InputError) as exc:
            logger.warning("router unavailable (%s); searching the global index", exc)
            return _fallback(f"router unavailable: {exc}")
        if self.router is None:  # pragma: no cover - warm_up sets it
            return _fallback("router unavailable")
        if int(self.router.known_terms([query])[0]) == 0:
            return _fallback("the query has no words the router knows: searched the global index")
        probs = self.probabilities(query)
        return decide(
            probs, self.config.mass_threshold, self.config.unsure_threshold, self.config.max_domains
        )


def _convert_quietly(router: DomainRouter, folder: Any) -> None:
    """Rewrite a router an earlier ragsieve saved with skops as arrays, so the next process
    loads it with numpy alone; a read-only index keeps its skops file."""
    try:
        if router.convert_to_arrays(folder):
            logger.info("converted the router in %s to arrays (router.npz)", folder)
    except OSError as exc:
        logger.info("router in %s left as skops (%s)", folder, exc)


_ROUTERS: weakref.WeakKeyDictionary[Any, QueryRouter] = weakref.WeakKeyDictionary()


def route_query(index: Any, query: str, config: RouteConfig | dict[str, Any] | None = None) -> RouteDecision:
    """Route one query for ``index`` (the pipeline's ``--route auto``); the loaded router is
    kept with the index object so later queries reuse it."""
    cfg = RouteConfig.parse(config)
    qr = _ROUTERS.get(index)
    if qr is None or qr.config != cfg:
        qr = QueryRouter(index, cfg)
        _ROUTERS[index] = qr
    return qr.route(query)


def resolve_route(
    index: Any, query: str, route: str, config: RouteConfig | dict[str, Any] | None = None
) -> RouteDecision:
    """``--route all`` (global index), ``auto`` (the router) or a domain name."""
    if route == "all":
        return RouteDecision(None, {}, False, "--route all: searched the global index")
    if route == "auto":
        return route_query(index, query, config)
    if route not in index.domains:
        raise InputError(
            f"unknown domain {route!r} for --route; this index has "
            f"{', '.join(index.domains) or 'no domains'} (or use auto / all)"
        )
    return RouteDecision([route], {route: 1.0}, False, f"--route {route}")


__all__ = ["QueryRouter", "resolve_route", "route_query"]
