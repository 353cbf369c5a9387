"""Query-to-domain routing over a domain-partitioned index (context-augmented retrieval).

A :class:`DomainRouter` (scikit-learn estimator) predicts each query's domain; a
:class:`QueryRouter` turns its probabilities into the partitions to search, with
multi-domain routing and a fallback to the global index (:class:`RouteDecision`).
"""

from ragsieve.route.decide import RouteDecision, RouteStats, decide
from ragsieve.route.metrics import RouterScores, router_scores
from ragsieve.route.router import CLASSIFIERS, ClassifierName, DomainRouter
from ragsieve.route.runtime import QueryRouter, resolve_route, route_query
from ragsieve.route.train import (
    ROUTER_DIR,
    LabelledTexts,
    RouteConfig,
    check_domains,
    ensure_router,
    examples_from_chunks,
    examples_from_jsonl,
    load_router,
    train_router,
)

__all__ = [
    "CLASSIFIERS",
    "ROUTER_DIR",
    "ClassifierName",
    "DomainRouter",
    "LabelledTexts",
    "QueryRouter",
    "RouteConfig",
    "RouteDecision",
    "RouteStats",
    "RouterScores",
    "check_domains",
    "decide",
    "examples_from_chunks",
    "ensure_router",
    "examples_from_jsonl",
    "load_router",
    "resolve_route",
    "route_query",
    "router_scores",
    "train_router",
]
