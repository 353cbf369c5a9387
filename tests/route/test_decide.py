"""Multi-domain routing and the unsure fallback (pure function)."""

from __future__ import annotations

import pytest

from ragsieve.route import RouteDecision, RouteStats, decide


def test_single_domain_when_confident() -> None:
    d = decide({"a": 0.95, "b": 0.03, "c": 0.02}, mass_threshold=0.9, unsure_threshold=0.5)
    assert d.domains == ["a"] and not d.fallback and d.kind == "single"


def test_multi_domain_until_mass_reached() -> None:
    d = decide({"a": 0.55, "b": 0.30, "c": 0.15}, mass_threshold=0.8, unsure_threshold=0.5)
    assert d.domains == ["a", "b"] and d.multi and d.kind == "multi"
    assert "0.85" in d.reason


def test_max_domains_caps_the_set() -> None:
    d = decide(
        {"a": 0.5, "b": 0.3, "c": 0.15, "d": 0.05}, mass_threshold=0.99, unsure_threshold=0.1, max_domains=2
    )
    assert d.domains == ["a", "b"]


def test_unsure_falls_back_to_global() -> None:
    d = decide({"a": 0.4, "b": 0.35, "c": 0.25}, mass_threshold=0.9, unsure_threshold=0.5)
    assert d.domains is None and d.fallback and d.kind == "fallback"
    assert "unsure" in d.reason
    assert decide({}).fallback


def test_threshold_edges() -> None:
    # Exactly at the unsure threshold is not unsure; exactly at the mass threshold stops.
    d = decide({"a": 0.5, "b": 0.5}, mass_threshold=0.5, unsure_threshold=0.5)
    assert d.domains == ["a"]
    # ties broken by name for determinism
    assert decide({"b": 0.5, "a": 0.5}, 1.0, 0.0).domains == ["a", "b"]


def test_stats_count_each_kind() -> None:
    stats = RouteStats()
    for probs in ({"a": 0.99, "b": 0.01}, {"a": 0.6, "b": 0.4}, {"a": 0.3, "b": 0.3, "c": 0.4}):
        stats.add(decide(probs, mass_threshold=0.9, unsure_threshold=0.5))
    stats.add(RouteDecision(None, {}, False, "--route all"))
    assert stats.to_dict() == {"total": 4, "single": 1, "multi": 1, "fallback": 1, "global": 1}
    assert stats.rate("fallback") == pytest.approx(0.25)


def test_to_dict_is_json_serialisable() -> None:
    import json

    d = decide({"a": 0.7123456, "b": 0.2876544}, 0.9, 0.5)
    assert json.loads(json.dumps(d.to_dict()))["probabilities"]["a"] == 0.7123
