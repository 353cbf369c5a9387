"""Which partitions to search and how evidence is chosen are one key each, for every preset
(``stages.route.domain``, ``stages.select.method``); left unset, the preset's own applies
(``ragsieve.options.PRESET_ROUTE`` / ``PRESET_SELECT``: plain RAG stays plain, the sieve routes
and covers). The top-level ``route`` and ``select`` plain RAG read before are still read, with a
warning naming the new key, and every earlier config keeps what each preset did."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from ragsieve import config as config_module
from ragsieve.config import (
    DeprecatedConfigKeyWarning,
    InvalidConfigError,
    PipelineConfig,
    RouteStageConfig,
    SelectConfig,
    apply_overrides,
    load_config,
    validate_config,
)
from ragsieve.options import PRESET_ROUTE, PRESET_SELECT
from ragsieve.sieve.build import StageResources, build_stages
from ragsieve.sieve.state import Ref, preset_stages


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    # each old key warns once per process: every test starts with none warned yet
    monkeypatch.setattr(config_module, "_warned_keys", set())


def built(cfg: PipelineConfig, preset: str) -> dict[str, Any]:
    """What the stages built for ``preset`` from ``cfg`` search and select."""
    cfg = cfg.model_copy(update={"pipeline": preset})
    sieve = preset == "sieve"
    resources = StageResources(
        cfg, Ref(missing="no index"), Ref(missing="no llm"), sieve=sieve, judge=None, selector=None, claim_judge=None
    )
    stages: dict[str, Any] = {s.name: s for s in build_stages(cfg, preset_stages(cfg), resources)}
    return {
        "route": stages["route"].default_route,
        "close_margin": stages["route"].close_margin,
        "select": stages["select"].method,
        "wide": resources.search.wide,
    }


def test_each_option_is_one_key_with_its_default_stated_once():
    assert "route" not in PipelineConfig.model_fields and "select" not in PipelineConfig.model_fields
    # the sections say "the preset's own"; the presets' values are stated in ragsieve.options alone
    assert RouteStageConfig.model_fields["domain"].default is None
    assert SelectConfig.model_fields["method"].default is None
    assert (PRESET_ROUTE["plain"], PRESET_SELECT["plain"]) == ("all", "top-k")
    assert (PRESET_ROUTE["sieve"], PRESET_SELECT["sieve"]) == ("auto", "scope-coe")
    # the default behaviour of both pipelines: plain RAG searches everything and takes the top k
    # (no routing, no selection check); the sieve routes, with its close margin, and covers
    default = PipelineConfig()
    assert built(default, "plain") == {"route": "all", "close_margin": None, "select": "top-k", "wide": False}
    assert built(default, "sieve") == {"route": "auto", "close_margin": 0.2, "select": "scope-coe", "wide": False}
    # "direct" is plain RAG
    assert default.stages.route.domain_for("direct") == "all" and default.stages.select.method_for("direct") == "top-k"


def test_one_key_sets_every_preset():
    cfg = validate_config({"stages": {"route": {"domain": "physics"}, "select": {"method": "scope-coe"}}})
    assert built(cfg, "plain") == {"route": "physics", "close_margin": None, "select": "scope-coe", "wide": True}
    assert built(cfg, "sieve")["route"] == "physics" and built(cfg, "sieve")["select"] == "scope-coe"
    cli = apply_overrides(PipelineConfig(), {"stages.select.method": "top-k"})  # what `ask --select top-k` sets
    assert built(cli, "sieve")["select"] == built(cli, "plain")["select"] == "top-k"


def test_an_earlier_file_with_the_top_level_keys_still_works_and_names_the_new_keys(tmp_path: Path):
    path = tmp_path / "ragsieve.toml"
    path.write_text('pipeline = "plain"\nroute = "physics"\nselect = "scope-coe"\n', encoding="utf-8")
    with pytest.warns(DeprecatedConfigKeyWarning) as caught:
        cfg = load_config(path)
    messages = [str(w.message) for w in caught]
    assert any("config key route is deprecated" in m and "stages.route.domain" in m for m in messages), messages
    assert any("config key select is deprecated" in m and "stages.select.method" in m for m in messages), messages
    assert {w.filename for w in caught} == {str(path)}  # the warning points at the user's file
    assert (cfg.stages.route.domain, cfg.stages.select.method) == ("physics", "scope-coe")
    assert built(cfg, "plain")["route"] == "physics" and built(cfg, "plain")["select"] == "scope-coe"
    # the new keys warn about nothing
    path.write_text('pipeline = "plain"\n[stages.route]\ndomain = "physics"\n[stages.select]\nmethod = "scope-coe"\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_config(path) == cfg


# Earlier configs, and what each preset searched and selected with them before one key set both
# (plain RAG read the top-level keys; the sieve its section, or the flat [sieve] table, with a
# top-level route other than "all" binding it too). A dump of an earlier default config holds
# every key at its default.
EARLIER_DUMP = {
    "route": "all", "select": "top-k", "stages": {"route": {"domain": "auto"}, "select": {"method": "scope-coe"}}
}
EARLIER: list[tuple[dict[str, Any], tuple[str, str], tuple[str, str]]] = [
    # config, (plain route, plain select), (sieve route, sieve select)
    (EARLIER_DUMP, ("all", "top-k"), ("auto", "scope-coe")),
    ({**EARLIER_DUMP, "pipeline": "plain"}, ("all", "top-k"), ("auto", "scope-coe")),
    ({"route": "auto"}, ("auto", "top-k"), ("auto", "scope-coe")),
    ({"route": "physics"}, ("physics", "top-k"), ("physics", "scope-coe")),
    ({"route": "all", "stages": {"route": {"domain": "all"}}}, ("all", "top-k"), ("all", "scope-coe")),
    ({"select": "scope-coe", "pipeline": "plain"}, ("all", "scope-coe"), ("auto", "scope-coe")),
    ({"select": "top-k"}, ("all", "top-k"), ("auto", "scope-coe")),
    ({"sieve": {"need": "always", "route": "all", "select": "top-k"}}, ("all", "top-k"), ("all", "top-k")),
    ({"sieve": {"route": "auto", "select": "scope-coe"}, "pipeline": "plain"}, ("all", "top-k"), ("auto", "scope-coe")),
]  # fmt: skip


@pytest.mark.parametrize(("data", "plain", "sieve"), EARLIER)
def test_an_earlier_config_keeps_what_each_preset_did(data, plain, sieve):
    with pytest.warns(DeprecatedConfigKeyWarning):
        cfg = validate_config(data)
    got_plain, got_sieve = built(cfg, "plain"), built(cfg, "sieve")
    assert (got_plain["route"], got_plain["select"]) == plain
    assert (got_sieve["route"], got_sieve["select"]) == sieve
    # and the layout caches of answers key on is the one of before: plain RAG's keys at the top,
    # the sieve's in the flat table
    layout = cfg.legacy_layout()
    assert (layout["route"], layout["select"]) == plain
    assert layout["sieve"]["select"] == sieve[1]
    with pytest.warns(DeprecatedConfigKeyWarning):
        assert validate_config(layout) == cfg


def test_the_default_layout_caches_key_on_is_unchanged():
    layout = PipelineConfig().legacy_layout()
    assert (layout["route"], layout["select"]) == ("all", "top-k")
    assert (layout["sieve"]["route"], layout["sieve"]["select"]) == ("auto", "scope-coe")
    assert layout["stages"] == {}


def test_where_the_two_presets_differed_the_configs_own_pipeline_decides_and_the_warning_says_so():
    with pytest.warns(DeprecatedConfigKeyWarning, match=r"stages\.route\.domain, now sets both: it reads 'all'"):
        cfg = validate_config({"pipeline": "plain", "sieve": {"route": "physics"}})
    assert built(cfg, "plain")["route"] == "all"
    with pytest.warns(DeprecatedConfigKeyWarning, match=r"stages\.select\.method, now sets both: it reads 'top-k'"):
        cfg = validate_config({"select": "scope-coe", "stages": {"select": {"method": "top-k"}}})
    assert built(cfg, "sieve")["select"] == "top-k"


def test_a_bad_value_under_the_earlier_key_is_refused_naming_the_key():
    refused = pytest.raises(InvalidConfigError, match="stages.select.method.*'shred'")
    with pytest.warns(DeprecatedConfigKeyWarning), refused:
        validate_config({"select": "shred"})
    with pytest.raises(InvalidConfigError, match="stages.route.domain"):
        validate_config({"route": 3})


def test_code_reading_the_top_level_attributes_gets_its_presets_value_with_a_warning():
    with pytest.warns(DeprecationWarning, match="config.stages.route.domain"):
        assert PipelineConfig(pipeline="plain").route == "all"
    with pytest.warns(DeprecationWarning, match="config.stages.select.method"):
        assert PipelineConfig().select == "scope-coe"
