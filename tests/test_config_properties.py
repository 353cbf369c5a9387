"""Property-based: any dict, TOML, YAML or JSON text gives a valid config or a ConfigError."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsieve.config import PipelineConfig, load_config, validate_config
from ragsieve.errors import ConfigError

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
# real field names, so that generated dicts reach the per-field validators, not only "extra forbidden"
KEYS = st.sampled_from(
    [
        "index_dir", "pipeline", "ablate", "select", "route", "embedder", "llm", "retrieval", "generation",
        "stages", "ingest", "dense_index", "k", "mode", "timeout_s", "max_retries", "backend", "base_url",
        "batch_size", "candidates", "chunking", "max_tokens", "temperature", "dense_weight", "unknown",
        # the stage sections and the earlier keys mapped into them
        "sieve", "need", "poison", "verify", "judge", "filtering", "responsive", "need_threshold", "duplicates",
    ]
) | st.text(max_size=8)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
                      max_leaves=12)


def _check(data: object) -> None:
    try:
        cfg = validate_config(data)  # type: ignore[arg-type]
    except ConfigError as exc:
        assert str(exc)
        return
    assert isinstance(cfg, PipelineConfig)
    for section in (cfg.llm, cfg.embedder):
        assert math.isfinite(section.timeout_s) and section.timeout_s > 0
    # what validates once validates again from its own dump
    assert validate_config(cfg.to_dict()) == cfg


@SETTINGS
@given(st.dictionaries(KEYS, values, max_size=6))
def test_any_dict_is_a_config_or_a_config_error(data: dict) -> None:
    _check(data)


@SETTINGS
@given(values)
def test_any_value_is_a_config_or_a_config_error(data: object) -> None:
    _check(data)


def _to_toml(data: dict) -> str:
    lines = []
    for key, value in data.items():
        if isinstance(value, dict):
            continue
        lines.append(f"{json.dumps(key)} = {json.dumps(value)}")
    for key, value in data.items():
        if isinstance(value, dict):
            lines.append(f"[{json.dumps(key)}]")
            lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items() if not isinstance(v, dict)]
    return "\n".join(lines) + "\n"


toml_safe = st.one_of(st.booleans(), st.integers(-1000, 10**6), st.floats(-1e6, 1e6), st.text(max_size=10))
sections = st.dictionaries(KEYS, toml_safe | st.lists(st.text(max_size=8), max_size=3), max_size=4)


def _load(tmp_path: Path, suffix: str, text: str | bytes) -> None:
    path = tmp_path / f"c{suffix}"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        assert str(path) in str(exc)
        return
    assert isinstance(cfg, PipelineConfig)


@SETTINGS
@given(st.dictionaries(KEYS, toml_safe | sections, max_size=5))
def test_generated_toml_is_a_config_or_a_config_error(tmp_path: Path, data: dict) -> None:
    _load(tmp_path, ".toml", _to_toml(data))


@SETTINGS
@given(st.dictionaries(KEYS, values, max_size=5))
def test_generated_yaml_and_json_are_a_config_or_a_config_error(tmp_path: Path, data: dict) -> None:
    import yaml

    _load(tmp_path, ".yaml", yaml.safe_dump(data, allow_unicode=True))
    try:
        text = json.dumps(data, allow_nan=True)
    except ValueError:
        return
    _load(tmp_path, ".json", text)


@SETTINGS
@pytest.mark.parametrize("suffix", [".toml", ".yaml", ".json"])
@given(text=st.text(max_size=200) | st.binary(max_size=64))
def test_arbitrary_text_is_a_config_or_a_config_error(tmp_path: Path, suffix: str, text: str | bytes) -> None:
    _load(tmp_path, suffix, text)


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_timeouts_must_be_positive_and_finite(value: str) -> None:
    with pytest.raises(ConfigError, match="timeout_s"):
        validate_config({"llm": {"timeout_s": float(value)}})
    with pytest.raises(ConfigError, match="timeout_s"):
        validate_config({"embedder": {"timeout_s": float(value)}})
