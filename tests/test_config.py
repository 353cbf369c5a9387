from __future__ import annotations

import pytest

from ragsieve.config import PipelineConfig, apply_overrides, load_config
from ragsieve.errors import ConfigError


def test_toml_and_yaml_load_the_same_config(tmp_path):
    (tmp_path / "c.toml").write_text('[stages.route]\ndomain = "auto"\n[retrieval]\nk = 7\nmode = "dense"\n')
    (tmp_path / "c.yaml").write_text("stages:\n  route:\n    domain: auto\nretrieval:\n  k: 7\n  mode: dense\n")
    a, b = load_config(tmp_path / "c.toml"), load_config(tmp_path / "c.yaml")
    assert a == b and a.retrieval.k == 7 and a.stages.route.domain == "auto"


def test_overrides_apply_dotted_keys_and_ignore_none():
    cfg = apply_overrides(
        PipelineConfig(), {"retrieval.k": 9, "llm.n_threads": None, "ingest.chunking.unit": "sentence"}
    )
    assert cfg.retrieval.k == 9 and cfg.llm.n_threads is None and cfg.ingest.chunking.unit == "sentence"


def test_round_trip_through_dict():
    cfg = apply_overrides(PipelineConfig(), {"stages.select.method": "scope-coe", "retrieval.fusion": "weighted"})
    assert PipelineConfig.model_validate(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    "content, suffix, message",
    [
        ("[retrieval]\nk = 0\n", ".toml", "retrieval.k"),
        ("[retrieval]\nmode = 'fuzzy'\n", ".toml", "retrieval.mode"),
        ("nonsense = 1\n", ".toml", "nonsense"),
        ("retrieval: [1, 2", ".yaml", "could not be parsed"),
        ("k = ", ".toml", "not valid TOML"),
        ("{}", ".ini", "use .toml"),
    ],
)
def test_bad_config_files_name_the_problem(tmp_path, content, suffix, message):
    path = tmp_path / f"c{suffix}"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_config(path)
