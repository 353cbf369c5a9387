"""``benchmarks/trust_sieve.py``'s answer keys and folders per answering model: SmolLM2's keys
stay what they were before the model could be chosen, Gemma's answers get keys of their own, and
both models face the same attack (one corpus folder)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import ModuleType

import pytest
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "trust_sieve.py", "_trust_sieve_under_test")


def _key_without_model(bench: ModuleType, n: int) -> str:
    # the settings hash as it was before the answering model could be chosen
    payload = {
        "v": bench.VERSION, "n": n, "common": bench.COMMON, "pipelines": bench.PIPELINES, "fit": bench.FIT,
        "passages": bench.N_PASSAGES,
    }  # fmt: skip
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


@pytest.mark.parametrize("n", [2, 15, 30])
def test_smollm2_keys_are_unchanged_and_gemma_keys_differ(bench: ModuleType, n: int) -> None:
    smollm2 = bench.settings_key(n)
    assert smollm2 == bench.settings_key(n, "smollm2") == _key_without_model(bench, n)
    gemma = bench.settings_key(n, "gemma")
    assert gemma != smollm2
    assert bench.cache_key("gpt4", "sieve", "t1", gemma) != bench.cache_key("gpt4", "sieve", "t1", smollm2)


def test_every_model_uses_the_smollm2_corpus_folder(bench: ModuleType) -> None:
    assert bench.corpus_dir(15) == bench.RUNS / f"n15-{bench.settings_key(15)}"


def test_gemma_sections_are_suffixed_and_name_the_model(bench: ModuleType) -> None:
    smollm2 = bench.sections("smollm2")
    assert [sid for sid, _ in smollm2] == ["trust-sieve-poisonedrag", "trust-sieve-learned-trust"]
    gemma = bench.sections("gemma")
    assert [sid for sid, _ in gemma] == [f"{sid}-gemma" for sid, _ in smollm2]
    assert all("Gemma-3-270M" in title for _, title in gemma)


def test_plain_rag_abstaining_as_often_keeps_its_most_confident_answers(bench: ModuleType) -> None:
    # attacked answers are the confident ones here: abstaining on the two least confident keeps both
    success = [True, True, False, False]
    scores = [0.9, 0.8, 0.2, 0.1]
    assert bench.expected_kept(success, scores, 2) == pytest.approx(2.0)
    assert bench.expected_kept(success, [0.1, 0.2, 0.8, 0.9], 2) == pytest.approx(0.0)
    # ties split at random: half of the tied pair is expected among the kept
    assert bench.expected_kept([True, False, False], [0.5, 0.5, 0.9], 1) == pytest.approx(0.5)
    # a missing score ranks last, and abstaining on none keeps everything
    assert bench.expected_kept([True, False], [None, 0.3], 1) == pytest.approx(0.0)
    assert bench.expected_kept([True, False], [None, 0.3], 0) == pytest.approx(1.0)
    assert bench.expected_pct(5.5, 15) == "37% (5.5/15)"
