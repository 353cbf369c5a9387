from __future__ import annotations

import json

import pytest
from tests.attack.fakes import QUESTIONS, EchoLLM, build_index

from ragsieve.attack.evaluate import (
    DEFENCES,
    CachedLLM,
    append_log,
    config_key,
    defence_config,
    evaluate_defence,
    fit_source_weights,
    make_pipeline,
    read_log,
)
from ragsieve.attack.metrics import summarize
from ragsieve.attack.poison import TemplateWriter, choose_targets, poison_index
from ragsieve.config import SIEVE_STAGES, PipelineConfig, validate_config
from ragsieve.errors import InputError


@pytest.fixture()
def attacked(tmp_path):
    clean = build_index(tmp_path / "idx")
    targets = choose_targets(QUESTIONS, seed=0)
    pois = poison_index(clean, targets, 3, tmp_path / "pois", TemplateWriter(seed=0))
    ids = {c.id for c in pois.chunks if c.metadata.get("poisoned")}
    return clean, pois, targets, ids


def test_defence_configs_are_valid_pipeline_configs():
    base = PipelineConfig(retrieval={"k": 3})
    for name in DEFENCES:
        cfg = defence_config(name, base)
        assert cfg.retrieval.k == 3
    alone = defence_config("sieve:verify")
    assert "sieve:filter" not in DEFENCES
    assert alone.pipeline == "sieve" and set(SIEVE_STAGES) - set(alone.ablate) == {"retrieve", "generate", "verify"}
    assert defence_config("source-prune").retrieval.use_source_weights == "prune"
    with pytest.raises(InputError, match="unknown defence"):
        defence_config("firewall")


def test_plain_rag_falls_for_the_attack_and_the_judge_stops_it(attacked):
    clean, pois, targets, ids = attacked
    llm = EchoLLM()
    plain, log = evaluate_defence(defence_config("plain", PipelineConfig(retrieval={"k": 3})), clean, pois,
                                  targets, ids, llm)
    s = summarize(plain)
    assert s["retrieval_success"] == 1.0 and s["asr"] >= 0.5
    assert s["clean_accuracy"] >= 0.8  # the echo reader repeats the clean top passage
    assert all(row["poisoned_in_evidence"] for row in log)
    # only the question's own passages count
    assert all(pid.startswith(f"poison:{row['target']}:") for row in log for pid in row["poisoned_in_evidence"])
    judged, jlog = evaluate_defence(defence_config("poison-judge", PipelineConfig(retrieval={"k": 3})), clean,
                                    pois, targets, ids, llm)
    js = summarize(judged, baseline=plain)
    assert js["asr"] == 0.0 and js["retrieval_success"] == 0.0
    assert js["clean_cost"][0] == 0.0
    assert all(d["verdict"] == "dropped" for row in jlog for d in row["decisions_on_poison"])


def test_clean_answers_are_reused(attacked):
    clean, pois, targets, ids = attacked
    llm = EchoLLM()
    cache: dict = {}
    cfg = defence_config("plain")
    evaluate_defence(cfg, clean, pois, targets, ids, llm, clean_answers=cache)
    calls = llm.calls
    assert set(cache) == {t.id for t in targets}
    evaluate_defence(cfg, clean, pois, targets, ids, llm, clean_answers=cache)
    assert llm.calls - calls == len(targets)  # only the poisoned runs


def test_cached_llm_resumes_from_file(tmp_path):
    inner = EchoLLM()
    path = tmp_path / "cache.jsonl"
    a = CachedLLM(inner, path).generate("Evidence:\n[1] hello\n\nQuestion: q", max_tokens=8)
    b = CachedLLM(inner, path).generate("Evidence:\n[1] hello\n\nQuestion: q", max_tokens=8)
    assert a == b and inner.calls == 1
    CachedLLM(inner, path).generate("Evidence:\n[1] hello\n\nQuestion: q", max_tokens=9)
    assert inner.calls == 2
    assert len(path.read_text().splitlines()) == 2
    with open(path, "a") as fh:
        fh.write('{"key": "cut')  # a line cut by a killed run is skipped
    assert CachedLLM(inner, path).next_token_logprobs("x", ["a"]) == [-1.0]


def test_source_weights_learned_on_validation(tmp_path):
    clean = build_index(tmp_path / "idx")
    weights, thr, summary = fit_source_weights(clean, QUESTIONS, k=2, candidates=4, epochs=5)
    assert summary["validation_questions"] == len(QUESTIONS)
    assert all(0.0 <= w <= 1.0 for w in weights.values()) and weights["art.org"] >= 0.5
    assert isinstance(thr, float)
    with pytest.raises(InputError, match="validation set is empty"):
        fit_source_weights(clean, [])


def test_make_pipeline_refuses_a_missing_preset(attacked, monkeypatch):
    clean, *_ = attacked
    import ragsieve.sieve.state as state_module

    monkeypatch.setattr(state_module, "PRESETS", {"plain": ()})
    from ragsieve.errors import ConfigError

    with pytest.raises(ConfigError, match="not available"):
        make_pipeline(PipelineConfig(pipeline="sieve"), clean, EchoLLM())
    assert json.dumps(make_pipeline(defence_config("poison-judge"), clean, EchoLLM()).selector.to_dict())


def test_poison_judge_runs_as_a_sieve_stage(attacked):
    clean, pois, targets, ids = attacked
    cfg = defence_config("sieve+poison-judge", PipelineConfig(retrieval={"k": 3}))
    pipe = make_pipeline(cfg, pois, EchoLLM())
    names = [s.name for s in pipe.stages]
    assert names.index("poison") == names.index("judge") + 1
    outcomes, log = evaluate_defence(cfg, clean, pois, targets, ids, EchoLLM())
    assert not any(o.retrieved for o in outcomes)
    assert any(d["check"] == "poison" for row in log for d in row["decisions_on_poison"])


def test_config_key_changes_with_the_pipeline_not_with_the_object():
    base = PipelineConfig(retrieval={"k": 3})
    assert config_key(defence_config("sieve", base)) == config_key(defence_config("sieve", base))
    keys = {d: config_key(defence_config(d, base)) for d in ("plain", "sieve", "sieve-no-poison", "sieve:poison")}
    assert len(set(keys.values())) == len(keys)
    # a changed post-processing step (here: repetition trimming) makes old rows stale
    untrimmed = PipelineConfig(retrieval={"k": 3}, generation={"trim_repetition": False})
    assert config_key(defence_config("plain", untrimmed)) != keys["plain"]
    # a new sieve default makes the sieve's rows stale, not plain RAG's
    resieved = PipelineConfig(retrieval={"k": 3}, sieve={"poison_duplicate_jaccard": 0.7})
    assert config_key(defence_config("plain", resieved)) == keys["plain"]
    assert config_key(defence_config("sieve", resieved)) != keys["sieve"]
    # where the index would be opened from changes no answer: the indexes are passed in
    restored = PipelineConfig(retrieval={"k": 3}, store={"backend": "milvus", "uri": "x.db"})
    assert config_key(defence_config("sieve", restored)) == keys["sieve"]


def test_read_log_reuses_only_rows_of_the_current_config(tmp_path):
    base = PipelineConfig(retrieval={"k": 3})
    keys = {d: config_key(defence_config(d, base)) for d in ("plain", "sieve", "source-prune")}
    path = tmp_path / "log.jsonl"
    cell = ["set", "template", "sources", "5"]
    append_log(path, [
        {"cell": [*cell, "plain"], "defence": "plain", "config": keys["plain"], "target": "a"},
        # written before the sieve got its poison stage: another hash
        {"cell": [*cell, "sieve"], "defence": "sieve", "config": "0" * 16, "target": "a"},
        {"cell": [*cell, "sieve"], "defence": "sieve", "target": "b"},  # no hash at all
        {"cell": [*cell, "sieve"], "defence": "sieve", "config": keys["sieve"], "target": "c"},
        {"cell": [*cell, "source-prune (val. poisoned: trust)"], "defence": "source-prune (val. poisoned: trust)",
         "config": keys["source-prune"], "target": "a"},
        {"cell": [*cell, "evaluator"], "defence": "evaluator", "config": "x", "target": "a"},
    ])
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"cell": ["cut by a kill')
    done, stale = read_log(path, keys)
    assert [r["target"] for r in done[(*cell, "sieve")]] == ["c"]
    assert [r["target"] for r in done[(*cell, "plain")]] == ["a"]
    assert (*cell, "source-prune (val. poisoned: trust)") in done
    assert (*cell, "evaluator") not in done
    assert stale == {"sieve": 2, "evaluator": 1}
    assert read_log(tmp_path / "missing.jsonl", keys) == ({}, {})


def test_the_sieve_poison_stage_takes_judge_options_from_stages_poison(attacked):
    from ragsieve.errors import ConfigError

    clean, pois, targets, ids = attacked
    cfg = defence_config("sieve+paraphrase", PipelineConfig(retrieval={"k": 3}))
    pipe = make_pipeline(cfg, pois, EchoLLM())
    stage = next(s for s in pipe.stages if s.name == "poison")
    assert stage.judge.semantic_duplicate == 0.9 and stage.judge.duplicates == "drop"
    outcomes, log = evaluate_defence(cfg, clean, pois, targets, ids, EchoLLM())
    assert not any(o.retrieved for o in outcomes)
    assert any("paraphrase" in d for row in log for d in row["decisions_on_poison"])
    # the stage's section takes every option of the check, and names them for a key it lacks
    shared = defence_config("sieve", PipelineConfig(stages={"poison": {"restate_share": 0.5}}))
    poison = next(s for s in make_pipeline(shared, pois, EchoLLM()).stages if s.name == "poison")
    assert poison.judge.restate_share == 0.5
    with pytest.raises(ConfigError, match="stages.poison.restate_fraction: unknown key.*restate_share"):
        validate_config({"stages": {"poison": {"restate_fraction": 0.5}}})


def test_plain_rags_poison_judge_takes_its_options_from_stages_attack(attacked):
    from ragsieve.errors import ConfigError
    from ragsieve.sieve.poison import PoisonJudge

    clean, *_ = attacked
    judge = make_pipeline(defence_config("poison-judge", PipelineConfig(retrieval={"k": 3})), clean, EchoLLM()).selector
    assert isinstance(judge, PoisonJudge) and judge.k == 3
    # the defence as measured (stages.attack's defaults), not the sieve stage's
    assert (judge.duplicate_jaccard, judge.duplicates) == (0.5, "drop")
    assert (PoisonJudge().duplicate_jaccard, PoisonJudge().duplicates) == (0.95, "dedupe")
    attack = {"judge": True, "duplicates": "keep", "min_cluster": 3}
    judge = make_pipeline(PipelineConfig(pipeline="plain", stages={"attack": attack}), clean, EchoLLM()).selector
    assert (judge.duplicates, judge.min_cluster) == ("keep", 3)
    with pytest.raises(ConfigError, match="stages.attack.judge applies to plain RAG"):
        make_pipeline(PipelineConfig(stages={"attack": attack}), clean, EchoLLM())
    # without judge = true plain RAG keeps its own selector
    assert not isinstance(make_pipeline(PipelineConfig(pipeline="plain"), clean, EchoLLM()).selector, PoisonJudge)
