"""Every sieve stage's own config section (``stages.<stage>``): round trips, the keys from before
the sections (the flat ``[sieve]`` table, ``stages.filtering``, ``stages.responsive``) mapped
with a one-time warning, bad values and unknown keys named, and each stage built with its
section."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from ragsieve import config as config_module
from ragsieve.config import (
    LEGACY_SIEVE_KEYS,
    DeprecatedConfigKeyWarning,
    InvalidConfigError,
    PipelineConfig,
    PoisonConfig,
    StageSections,
    apply_overrides,
    load_config,
    validate_config,
)
from ragsieve.errors import ConfigError

# The flat [sieve] table's defaults before the stage sections existed (its declaration order):
# the stage sections must reproduce every one of them.
EARLIER_SIEVE_DEFAULTS = {
    "route": "auto", "route_close_margin": 0.2, "need": "auto", "need_threshold": 0.5, "closed_book": "never",
    "candidates": 10, "judge": "evaluator", "judge_model": None, "upper": None, "lower": None,
    "abstain_when_all_irrelevant": True, "cover_entities": True, "poison_restate_share": 0.6,
    "poison_duplicate_jaccard": 0.95, "poison_duplicates": "dedupe", "conflict": "both", "select": "scope-coe",
    "coe_features": "rules", "claim_judge": "lexical-embedding", "support_threshold": 0.5, "value_grounding": True,
    "responsive": True, "responsive_retries": 1, "extract_on_paste": True, "regenerate": True, "min_confidence": 0.0,
}  # fmt: skip


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    # each old key warns once per process: every test starts with none warned yet
    monkeypatch.setattr(config_module, "_warned_keys", set())


def test_defaults_are_the_earlier_sieve_defaults():
    default = PipelineConfig()
    assert default.legacy_layout()["sieve"] == EARLIER_SIEVE_DEFAULTS
    assert list(LEGACY_SIEVE_KEYS) == list(EARLIER_SIEVE_DEFAULTS)
    # nothing set away from its default: the earlier layout's stages table stays empty, so
    # answers cached under it keep their keys
    assert default.legacy_layout()["stages"] == {}
    poison = default.stages.poison
    assert (poison.restate_share, poison.duplicate_jaccard, poison.duplicates) == (0.6, 0.95, "dedupe")


def test_round_trip_through_dict_toml_and_the_earlier_layout(tmp_path: Path):
    cfg = validate_config({
        "stages": {
            "need": {"mode": "always", "threshold": 0.3},
            "poison": {"duplicates": "drop", "semantic_duplicate": 0.9, "coordination": True},
            "conflict": {"policy": "trusted", "trusted_margin": 2.0},
            "verify": {"paste_share": 0.7, "min_confidence": 0.2},
            "route": {"domain": "physics", "unsure_threshold": 0.3},
            "filter": {"filter": "direct", "task": "sst-2"},
            "coe": {"cover": "exact"},
        }
    })
    assert PipelineConfig.model_validate(cfg.to_dict()) == cfg
    assert PipelineConfig.from_dict(cfg.to_dict()) == cfg
    assert PipelineConfig.from_dict(PipelineConfig().to_dict()) == PipelineConfig()
    # the earlier layout (what caches key on) reads back to the same config
    with pytest.warns(DeprecatedConfigKeyWarning):
        assert validate_config(cfg.legacy_layout()) == cfg
    path = tmp_path / "ragsieve.toml"
    path.write_text(
        '[stages.need]\nmode = "always"\nthreshold = 0.3\n'
        '[stages.poison]\nduplicates = "drop"\nsemantic_duplicate = 0.9\ncoordination = true\n'
        '[stages.conflict]\npolicy = "trusted"\ntrusted_margin = 2.0\n'
        "[stages.verify]\npaste_share = 0.7\nmin_confidence = 0.2\n"
        '[stages.route]\ndomain = "physics"\nunsure_threshold = 0.3\n'
        '[stages.filter]\nfilter = "direct"\ntask = "sst-2"\n'
        '[stages.coe]\ncover = "exact"\n',
        encoding="utf-8",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new keys warn about nothing
        assert load_config(path) == cfg


def test_an_earlier_config_file_still_works_and_names_each_new_key_once(tmp_path: Path):
    path = tmp_path / "ragsieve.toml"
    path.write_text(
        "[sieve]\nneed_threshold = 0.7\npoison_duplicates = \"drop\"\nconflict = \"abstain\"\nselect = \"top-k\"\n"
        "[stages.poison]\nsemantic_duplicate = 0.9\n"
        "[stages.responsive]\npaste_share = 0.7\n"
        '[stages.filtering]\nfilter = "direct"\n'
        "[stages.route]\nunsure_threshold = 0.3\n",
        encoding="utf-8",
    )
    with pytest.warns(DeprecatedConfigKeyWarning) as caught:
        cfg = load_config(path)
    messages = [str(w.message) for w in caught]
    # each warning points at the user's file, not at a line of ragsieve
    assert {w.filename for w in caught} == {str(path)}
    for old, new in [
        ("sieve.need_threshold", "stages.need.threshold"),
        ("sieve.poison_duplicates", "stages.poison.duplicates"),
        ("sieve.conflict", "stages.conflict.policy"),
        ("sieve.select", "stages.select.method"),
        ("stages.responsive", "stages.verify"),
        ("stages.filtering", "stages.filter"),
    ]:
        assert sum(old in m and new in m for m in messages) == 1, (old, messages)
    st = cfg.stages
    assert st.need.threshold == 0.7 and st.poison.duplicates == "drop" and st.poison.semantic_duplicate == 0.9
    assert st.conflict.policy == "abstain" and st.select.method == "top-k"
    assert st.verify.paste_share == 0.7 and st.filter.filter == "direct" and st.route.unsure_threshold == 0.3
    # one warning per key and process: loading it again says nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_config(path) == cfg


def test_an_earlier_key_wins_over_the_new_one_as_an_override_would():
    with pytest.warns(DeprecatedConfigKeyWarning, match="stages.need.threshold"):
        cfg = validate_config({"sieve": {"need_threshold": 0.7}, "stages": {"need": {"threshold": 0.2}}})
    assert cfg.stages.need.threshold == 0.7
    # dotted overrides with either key, on top of a full dump (what every command does)
    assert apply_overrides(PipelineConfig(), {"stages.need.mode": "always"}).stages.need.mode == "always"
    with pytest.warns(DeprecatedConfigKeyWarning, match="stages.need.mode"):
        assert apply_overrides(PipelineConfig(), {"sieve.need": "always"}).stages.need.mode == "always"


@pytest.mark.parametrize(
    "data, named",
    [
        ({"stages": {"poison": {"duplicates": "shred"}}},
         ["stages.poison.duplicates", "'shred'", "'dedupe'", "'drop'", "'keep'"]),
        ({"stages": {"need": {"mode": "sometimes"}}}, ["stages.need.mode", "'sometimes'", "'auto'", "'always'"]),
        ({"stages": {"judge": {"upper": 1.5}}}, ["stages.judge.upper", "1.5", "less than or equal to 1"]),
        ({"stages": {"verify": {"claim_judge": "nli"}}}, ["stages.verify.claim_judge", "'nli'", "'llm-logprob'"]),
        ({"stages": {"conflict": {"trusted_margin": 0.5}}}, ["stages.conflict.trusted_margin", "0.5"]),
        # through the earlier key, the error names where the value goes now
        ({"sieve": {"poison_duplicates": "shred"}}, ["stages.poison.duplicates", "'shred'", "'keep'"]),
        # the sections of the components outside the stage list are checked as the file is read
        ({"stages": {"coe": {"keyword_judge": "regex"}}},
         ["stages.coe.keyword_judge", "'regex'", "'lexical'", "'lexical+embedding'", "'llm'"]),
        ({"stages": {"coe": {"cover": "random"}}}, ["stages.coe.cover", "'random'", "'greedy'", "'exact'", "'auto'"]),
        ({"stages": {"coe": {"max_exact": 65}}}, ["stages.coe.max_exact", "65", "less than or equal to 64"]),
        ({"stages": {"tasks": {"classifier": "bert"}}},
         ["stages.tasks.classifier", "'bert'", "'tfidf'", "'llm-json'", "'llm-logprob'", "'fixed'"]),
        ({"stages": {"tasks": {"fixed_task": "chit_chat"}}},
         ["stages.tasks.fixed_task", "'chit_chat'", "'information_retrieval'", "'general_qa'"]),
        ({"stages": {"tasks": {"evaluator": "nli"}}}, ["stages.tasks.evaluator", "'nli'", "'trained'", "'off'"]),
        ({"stages": {"attack": {"duplicates": "shred"}}}, ["stages.attack.duplicates", "'shred'", "'drop'"]),
        ({"stages": {"attack": {"judge": "perhaps"}}}, ["stages.attack.judge", "'perhaps'", "boolean"]),
        ({"stages": {"filter": {"mode": "fuzzy"}}}, ["stages.filter.mode", "'fuzzy'", "'dense'", "'hybrid'"]),
        ({"stages": {"filter": {"task": "sst2"}}}, ["stages.filter.task:", "'sst2'", "'sst-2'", "'cola'"]),
        ({"stages": {"filter": {"task": 3}}}, ["stages.filter.task:", "built-in task (sst-2, sst-5", "table", "got 3"]),
        ({"stages": {"filter": {"task": {"labels": ["a", "b"], "kind": "poem"}}}},
         ["stages.filter.task.kind", "'poem'", "'sentiment'", "'grammar'"]),
    ],
)  # fmt: skip
def test_a_bad_value_names_the_key_the_value_and_what_is_allowed(data, named):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecatedConfigKeyWarning)
        with pytest.raises(InvalidConfigError) as caught:
            validate_config(data)
    assert isinstance(caught.value, ConfigError)
    for part in named:
        assert part in str(caught.value), (part, str(caught.value))


@pytest.mark.parametrize(
    "data, named",
    [
        ({"stages": {"poison": {"restate_fraction": 0.5}}}, ["stages.poison.restate_fraction", "unknown key",
                                                              "stages.poison takes", "restate_share", "coordination"]),
        ({"stages": {"verify": {"support": 0.5}}}, ["stages.verify.support", "support_threshold"]),
        ({"stages": {"polish": {}}}, ["stages.polish", "unknown key", "route", "verify", "coe"]),
        ({"stages": {"coe": {"keyword": "lexical"}}},
         ["stages.coe.keyword", "unknown key", "stages.coe takes", "keyword_judge", "cover"]),
        ({"stages": {"tasks": {"reflection": False}}},
         ["stages.tasks.reflection", "unknown key", "stages.tasks takes", "generation_reflection", "hyde"]),
        ({"stages": {"attack": {"poison_judge": True}}},
         ["stages.attack.poison_judge", "unknown key", "stages.attack takes", "judge", "duplicates"]),
        ({"stages": {"filter": {"task": {"labels": ["a", "b"], "prompt": "x"}}}},
         ["stages.filter.task.prompt", "unknown key", "stages.filter.task takes", "instruction", "template"]),
        ({"sieve": {"need_treshold": 0.5}}, ["sieve.need_treshold", "need_threshold", "stages.<stage>"]),
        ({"nonsense": 1}, ["nonsense", "unknown key", "the config takes", "stages"]),
    ],
)  # fmt: skip
def test_an_unknown_key_names_the_key_and_what_its_section_takes(data, named):
    with pytest.raises(InvalidConfigError) as caught:
        validate_config(data)
    for part in named:
        assert part in str(caught.value), (part, str(caught.value))


def test_the_calibration_table_calibrate_writes_still_loads(tmp_path: Path):
    from ragsieve.eval.calibrate_cli import write_calibration

    path = tmp_path / "ragsieve.toml"
    path.write_text('[stages.poison]\nduplicates = "drop"\n', encoding="utf-8")
    write_calibration(path, {"abstain_below": 0.42, "risk": 0.1, "delta": 0.1, "n": 50, "method": "ltt"})
    cfg = load_config(path)
    assert cfg.calibration.abstain_below == 0.42 and cfg.stages.poison.duplicates == "drop"


def test_code_reading_the_flat_sieve_options_still_reads_and_sets_them():
    cfg = PipelineConfig()
    with pytest.warns(DeprecationWarning, match="stages.need.threshold"):
        assert cfg.sieve.need_threshold == 0.5
    with pytest.warns(DeprecationWarning, match="stages.judge.upper"):
        cfg.sieve.upper = 0.7
    assert cfg.stages.judge.upper == 0.7
    with pytest.raises(AttributeError, match="config.stages"):
        _ = cfg.sieve.no_such_option
    # a component that validates a section with its own model gets it as a plain dict
    from ragsieve.route import RouteConfig

    assert RouteConfig.parse(cfg.stages.get("route")) == RouteConfig()
    assert cfg.stages.get("filtering") == cfg.stages.get("filter") == cfg.stages.filter.model_dump(mode="json")
    assert cfg.stages.get("tasks") == cfg.stages.tasks.model_dump(mode="json")
    assert cfg.stages.get("nothing", "x") == "x"


def test_each_stage_is_built_with_its_own_section():
    from ragsieve.sieve.build import StageResources, build_stages
    from ragsieve.sieve.state import Ref, preset_stages

    cfg = validate_config({
        "stages": {"need": {"threshold": 0.3}, "poison": {"min_cluster": 3, "duplicates": "keep"},
                   "conflict": {"min_relevance": 0.2}, "verify": {"paste_min_tokens": 12, "responsive_retries": 2},
                   "route": {"close_margin": 0.05}, "retrieve": {"candidates": 7}}
    })  # fmt: skip
    resources = StageResources(
        cfg, Ref(missing="no index"), Ref(missing="no llm"), sieve=True, judge=None, selector=None, claim_judge=None
    )
    stages: dict[str, Any] = {s.name: s for s in build_stages(cfg, preset_stages(cfg), resources)}
    assert stages["need"].config is cfg.stages.need and stages["need"].candidates == 7
    assert stages["judge"].config is cfg.stages.judge
    assert stages["filter"].config is cfg.stages.filter
    assert stages["conflict"].config is cfg.stages.conflict and stages["conflict"]._min_relevance() == 0.2
    assert stages["verify"].config is cfg.stages.verify and stages["verify"].checker.paste_min_tokens == 12
    assert stages["route"].close_margin == 0.05 and stages["route"].router_options is cfg.stages.route
    judge = stages["poison"].judge
    assert (judge.min_cluster, judge.duplicates, judge.restate_share) == (3, "keep", 0.6)
    # an unset voice option leaves the grouper's own default
    from ragsieve.voices import MIN_MEMBERS, TIGHTNESS

    assert (judge.voice_tightness, judge.voice_members) == (TIGHTNESS, MIN_MEMBERS)
    assert PoisonConfig(voice_members=3).judge_options()["voice_members"] == 3


def test_every_section_declares_its_allowed_values_once():
    import typing

    from ragsieve import options

    # each choice field is typed by the one Literal in ragsieve.options
    typed = {
        ("need", "mode"): options.NeedMode, ("need", "closed_book"): options.ClosedBookPolicy,
        ("judge", "kind"): options.JudgeKind, ("poison", "duplicates"): options.DuplicateAction,
        ("conflict", "policy"): options.ConflictPolicy, ("select", "method"): options.SelectName,
        ("select", "coe_features"): options.CoEFeatures, ("verify", "claim_judge"): options.ClaimJudgeName,
        ("filter", "filter"): options.FilterName,
        ("coe", "intent_judge"): options.IntentJudgeKind, ("coe", "keyword_judge"): options.KeywordJudgeKind,
        ("coe", "relation_judge"): options.RelationJudgeKind, ("coe", "cover"): options.CoverSearch,
        ("tasks", "classifier"): options.TaskClassifierKind, ("tasks", "evaluator"): options.TaskEvaluatorKind,
        ("tasks", "default_task"): options.TaskLabel, ("tasks", "hyde_rerank"): options.HydeRerank,
        ("attack", "duplicates"): options.DuplicateAction,
    }  # fmt: skip
    for (section, field), literal in typed.items():
        model = type(getattr(StageSections(), section))
        # a choice left unset may take the preset's own (stages.select.method)
        assert model.model_fields[field].annotation in (literal, literal | None), (section, field)
        assert typing.get_origin(literal) is typing.Literal
    from ragsieve.coe import config as coe_config
    from ragsieve.sieve.poison import DUPLICATE_ACTIONS
    from ragsieve.tasks import config as tasks_config
    from ragsieve.tasks import labels

    # the packages use the same Literals (re-exported, not declared again)
    assert labels.TaskLabel is options.TaskLabel and coe_config.KeywordJudgeKind is options.KeywordJudgeKind
    assert tasks_config.ClassifierKind is options.TaskClassifierKind
    from ragsieve import llm
    from ragsieve.config import EmbedderConfig, GenerationConfig, LLMConfig

    # and the other sections' choices
    assert LLMConfig.model_fields["backend"].annotation == options.LLMBackendName == llm.Backend
    assert EmbedderConfig.model_fields["backend"].annotation == options.EmbedderBackendName
    assert GenerationConfig.model_fields["polar_answers"].annotation == options.PolarAnswers
    assert set(DUPLICATE_ACTIONS) == set(typing.get_args(options.DuplicateAction))


def test_the_docs_list_every_stage_key_and_their_example_loads():
    import re

    page = (Path(__file__).resolve().parent.parent / "docs" / "stages" / "sieve.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `stages\.(\w+)` \| `(\w+)` \|", page, flags=re.MULTILINE))
    sections = StageSections()
    wanted = {
        (name, key)
        for name in type(sections).model_fields
        if hasattr(getattr(sections, name), "model_fields")
        for key in type(getattr(sections, name)).model_fields
    }
    assert rows == wanted
    example = re.search(r"```toml\n(.*?)```", page.split("## Configuration", 1)[1], flags=re.DOTALL)
    assert example is not None
    import tomllib

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = validate_config(tomllib.loads(example.group(1)))
    assert cfg.stages.poison.semantic_duplicate == 0.9 and cfg.stages.need.mode == "always"


def test_the_component_sections_round_trip_typed(tmp_path: Path):
    from ragsieve.config import AttackConfig, CoEConfig, TaskAdaptiveConfig

    data = {
        "coe": {"keyword_judge": "lexical", "cover": "exact", "intent_threshold": -1.0},
        "tasks": {"classifier": "fixed", "fixed_task": "information_retrieval", "hyde": False, "domains": ["a"]},
        "attack": {"judge": True, "min_cluster": 3},
    }
    cfg = validate_config({"stages": data})
    assert isinstance(cfg.stages.coe, CoEConfig) and cfg.stages.coe.cover == "exact"
    assert isinstance(cfg.stages.tasks, TaskAdaptiveConfig) and cfg.stages.tasks.domains == ["a"]
    assert isinstance(cfg.stages.attack, AttackConfig) and cfg.stages.attack.min_cluster == 3
    assert PipelineConfig.from_dict(cfg.to_dict()) == cfg
    path = tmp_path / "ragsieve.toml"
    path.write_text(
        '[stages.coe]\nkeyword_judge = "lexical"\ncover = "exact"\nintent_threshold = -1.0\n'
        '[stages.tasks]\nclassifier = "fixed"\nfixed_task = "information_retrieval"\nhyde = false\ndomains = ["a"]\n'
        "[stages.attack]\njudge = true\nmin_cluster = 3\n",
        encoding="utf-8",
    )
    assert load_config(path) == cfg
    path.write_text('[stages.coe]\ncover = "random"\n', encoding="utf-8")
    with pytest.raises(InvalidConfigError, match=rf"{path} is invalid: stages\.coe\.cover: .*'greedy'"):
        load_config(path)
    # the earlier layout lists only what is set away from the defaults, and reads back the same
    layout = cfg.legacy_layout()["stages"]
    assert layout["coe"] == {"keyword_judge": "lexical", "cover": "exact", "intent_threshold": -1.0}
    assert layout["attack"] == {"judge": True, "min_cluster": 3}
    with pytest.warns(DeprecatedConfigKeyWarning):
        assert validate_config(cfg.legacy_layout()) == cfg
    # a config at its defaults keeps an empty stages table there (answers cached under it stay valid)
    assert validate_config({"stages": {"coe": {"cover": "auto"}, "tasks": {}}}).legacy_layout()["stages"] == {}


def test_dict_style_input_to_the_components_still_works():
    from ragsieve.coe.config import CoEConfig, load_coe_config
    from ragsieve.tasks.config import TaskAdaptiveConfig

    # the packages' own names are the sections
    assert CoEConfig is config_module.CoEConfig and TaskAdaptiveConfig is config_module.TaskAdaptiveConfig
    assert load_coe_config({"keyword_judge": "lexical"}).keyword_judge == "lexical"
    assert load_coe_config(None) == CoEConfig()
    section = CoEConfig(cover="greedy")
    assert load_coe_config(section) is section
    assert TaskAdaptiveConfig.from_stage({"hyde": False}).hyde is False
    assert TaskAdaptiveConfig.from_stage(None) == TaskAdaptiveConfig()
    with pytest.raises(InvalidConfigError, match=r"stages\.coe\.keyword_judge: .*'regex'"):
        load_coe_config({"keyword_judge": "regex"})
    with pytest.raises(InvalidConfigError, match=r"stages\.tasks\.hyde_rerank: .*'query'"):
        TaskAdaptiveConfig.from_stage({"hyde_rerank": "both"})
    # a whole config given as Python dicts, as the package docs show it
    cfg = PipelineConfig(stages={"tasks": {"classifier": "tfidf", "hyde": True}, "coe": {"cover": "exact"}})
    assert cfg.stages.tasks.classifier == "tfidf" and cfg.stages.coe.cover == "exact"
    from ragsieve.coe.selector import ScopeCoESelector

    assert ScopeCoESelector({"cover": "exact"}).config == CoEConfig(cover="exact")
    assert ScopeCoESelector.from_config(cfg).config is cfg.stages.coe


def test_the_attack_section_builds_the_judge_the_harness_measured():
    from ragsieve.config import AttackConfig, PoisonConfig
    from ragsieve.sieve.poison import PoisonJudge

    def settings(judge: PoisonJudge) -> dict[str, Any]:
        return {k: v for k, v in vars(judge).items() if k not in ("inner", "embedder")}

    # at its defaults the section is the defence as the harness measured it (Jaccard 0.5, "drop"),
    # not the sieve stage's (PoisonJudge's own defaults are stages.poison's)
    measured = PoisonJudge(k=3, duplicate_jaccard=0.5, duplicates="drop")
    assert settings(PoisonJudge(k=3, **AttackConfig().judge_options())) == settings(measured)
    assert settings(PoisonJudge(k=3, **PoisonConfig().judge_options())) == settings(PoisonJudge(k=3))
    assert "judge" not in AttackConfig(judge=True).judge_options()
    options = AttackConfig(duplicates="keep", voice_members=4).judge_options()
    assert (options["duplicates"], options["voice_members"]) == ("keep", 4)


def test_a_custom_filter_task_is_a_typed_table_the_filters_take(tmp_path: Path):
    from ragsieve.config import CustomFilterTask, FilterConfig
    from ragsieve.filtering.tasks import resolve_task

    path = tmp_path / "ragsieve.toml"
    path.write_text(
        '[stages.filter]\nfilter = "direct"\nmode = "hybrid"\n'
        '[stages.filter.task]\nlabels = ["spam", "ham"]\ninstruction = "Spam or ham?"\nverbalizers = {spam = "junk"}\n',
        encoding="utf-8",
    )
    cfg = load_config(path)
    section = cfg.stages.filter
    assert isinstance(section.task, CustomFilterTask) and section.mode == "hybrid"
    assert PipelineConfig.from_dict(cfg.to_dict()) == cfg
    # the filters get the fields that are set, as a custom task's mapping
    spec = section.task_spec()
    assert spec == {"labels": ["spam", "ham"], "verbalizers": {"spam": "junk"}, "kind": "sentiment",
                    "instruction": "Spam or ham?", "name": "custom"}  # fmt: skip
    template = resolve_task(spec)
    assert template.labels == ["spam", "ham"] and template.verbalizers == {"spam": "junk", "ham": "ham"}
    # a built-in task stays its name
    assert FilterConfig().task_spec() == "sst-2" and resolve_task(FilterConfig(task="trec").task_spec()).name == "trec"
