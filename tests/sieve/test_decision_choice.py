"""A decision model per generator: the decide stage picks the model trained for the loaded
generator by its name (SmolLM2, Gemma, or the model-agnostic default for a served model), falls
back to the shipped model when that generator's own does not ship, and says so in the trace; and
the decide stage's regression cases, through ``Pipeline`` with the model it picks."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.sieve.test_decide import MOON, MOON_Q
from tests.sieve.test_trust_acceptance import FakeLLM, KeywordJudge, build_index

from ragsieve.config import validate_config
from ragsieve.decision import (
    DEFAULT_MODEL,
    FAMILY_MODELS,
    SERVED,
    DecisionModel,
    choose_decision_model,
    generator_family,
    shipped_model_path,
)
from ragsieve.index import Index
from ragsieve.llm.bundled import BUNDLED_MODEL_NAME
from ragsieve.llm.llama_cpp import LlamaCppLLM
from ragsieve.llm.openai_http import OpenAICompatibleLLM
from ragsieve.records import DecideRecord
from ragsieve.sieve.decide import generator_name
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.verify import LexicalEmbeddingJudge

SMOLLM2 = generator_name(LlamaCppLLM())  # the bundled model, named without loading it
GEMMA = generator_name(LlamaCppLLM("runs/eval/models/gemma3-270m-q4_k_m.gguf", chat_format="gemma"))
SERVED_NAME = generator_name(OpenAICompatibleLLM("gpt-4o-mini", "http://127.0.0.1:9"))


def test_the_generators_are_named_as_loaded_and_fall_in_their_families() -> None:
    assert (SMOLLM2, GEMMA, SERVED_NAME) == (BUNDLED_MODEL_NAME, "gemma3-270m-q4_k_m", "gpt-4o-mini")
    assert [generator_family(n) for n in (SMOLLM2, GEMMA, SERVED_NAME)] == ["smollm2", "gemma", SERVED]
    # the name decides, not the transport: SmolLM2 served over HTTP writes as the bundled one does
    assert generator_family(generator_name(OpenAICompatibleLLM("smollm2-135m-instruct", "http://x"))) == "smollm2"
    assert generator_family("Gemma-3-270M-IT") == "gemma" and generator_family("") == SERVED
    assert set(FAMILY_MODELS) == {"smollm2", "gemma", SERVED}


def test_a_model_is_selected_for_smollm2_gemma_and_a_served_model() -> None:
    shipped = DecisionModel.default()
    model, choice = choose_decision_model(SMOLLM2)
    # the shipped model was trained on SmolLM2 drafts: it is SmolLM2's own, with no fallback
    assert shipped.trained_on == "smollm2" and FAMILY_MODELS["smollm2"] == DEFAULT_MODEL
    assert (choice.family, choice.file, choice.trained_on, choice.fallback) == ("smollm2", DEFAULT_MODEL, "smollm2",
                                                                              None)  # fmt: skip
    assert model.signals == shipped.signals and (model.coef_ == shipped.coef_).all()
    for name, family, whose in ((GEMMA, "gemma", "gemma"), (SERVED_NAME, SERVED, "model-agnostic")):
        model, choice = choose_decision_model(name)
        assert choice.family == family and choice.generator == name
        if shipped_model_path(FAMILY_MODELS[family]).is_file():  # once its own model ships, it is chosen
            assert choice.file == FAMILY_MODELS[family] and choice.fallback is None
            assert model.trained_on == family
        else:  # until then the shipped one decides, and the choice says so
            assert choice.file == DEFAULT_MODEL and choice.trained_on == "smollm2"
            assert choice.fallback == (
                f"no {whose} decision model ships ({FAMILY_MODELS[family]}); the shipped {DEFAULT_MODEL}, "
                "trained on smollm2's drafts, decides"
            )


def test_a_generators_own_model_is_chosen_when_its_file_ships(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a stand-in for a trained Gemma model (synthetic rows: this checks the choice, not the model)
    rows = [{"verify.support_mean": v} for v in (0.9, 0.8, 0.7, 0.3, 0.2, 0.1)]
    own = DecisionModel(signals=("verify.support_mean",), threshold=0.5).fit(rows, [True] * 3 + [False] * 3)
    own.save(tmp_path / FAMILY_MODELS["gemma"], llm="gemma")
    real = shipped_model_path
    monkeypatch.setattr("ragsieve.decision.shipped_model_path",
                        lambda name: tmp_path / name if name == FAMILY_MODELS["gemma"] else real(name))  # fmt: skip
    model, choice = choose_decision_model(GEMMA)
    assert (choice.file, choice.trained_on, choice.fallback) == (FAMILY_MODELS["gemma"], "gemma", None)
    assert model.signals == ("verify.support_mean",)
    assert choose_decision_model(SMOLLM2)[1].file == DEFAULT_MODEL  # the others keep theirs


# ------------------------------------------------------------------ through the pipeline
@pytest.fixture(scope="module")
def moon_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    return build_index(tmp_path_factory.mktemp("choice"), {"moon.md": MOON, "other.md": "Bread rises with yeast."})


class NamedLLM(FakeLLM):
    """The test's fake generator under a real model's name."""

    def __init__(self, name: str, reply: str) -> None:
        super().__init__(lambda q, passages: reply)
        self.model_name = name


def ask(index: Index, name: str, reply: str, **config: object) -> tuple[object, DecideRecord]:
    cfg = validate_config({"stages": {"need": {"mode": "always"}, "route": {"domain": "all"},
                                      "select": {"method": "top-k"}}, **config})  # fmt: skip
    pipe = Pipeline(cfg, index=index, llm=NamedLLM(name, reply), judge=KeywordJudge(relevant=("apollo",)),
                    claim_judge=LexicalEmbeddingJudge(embedding_weight=0.0))  # fmt: skip
    ans = pipe.ask(MOON_Q)
    return ans, DecideRecord.from_event(ans.trace.stage("decide")[-1])


def test_the_decide_record_names_the_model_chosen_for_the_loaded_generator(moon_index: Index) -> None:
    reply = "Apollo 11 landed on the Moon on 20 July 1969 [1]."
    for name in (SMOLLM2, GEMMA, SERVED_NAME):
        ans, record = ask(moon_index, name, reply)
        _, expected = choose_decision_model(name)
        assert record.model == expected, name
        assert ans.trace.stage("decide")[-1]["model"] == expected.to_dict()
    _, smol = ask(moon_index, SMOLLM2, reply)
    _, gemma = ask(moon_index, GEMMA, reply)
    assert smol.model is not None and smol.model.fallback is None
    assert gemma.model is not None and (gemma.model.fallback is None) == shipped_model_path(
        FAMILY_MODELS["gemma"]).is_file()  # fmt: skip


def test_a_configured_model_overrides_the_choice_and_is_named(moon_index: Index, tmp_path: Path) -> None:
    path = DecisionModel.default().save(tmp_path / "mine.npz", llm="smollm2")
    _, record = ask(moon_index, GEMMA, "Apollo 11 landed on the Moon on 20 July 1969 [1].",
                    decide={"model": str(path)})  # fmt: skip
    assert record.model is not None
    assert (record.model.file, record.model.family, record.model.fallback) == (str(path), "gemma", None)


# ------------------------------------------------- the decide stage's regression cases
NON_ANSWER = "The passages state it [1]."  # the question asks for a date; the reply gives none


@pytest.mark.parametrize("name", [SMOLLM2, GEMMA, SERVED_NAME])
def test_a_non_answer_is_never_kept_without_a_caveat(moon_index: Index, name: str) -> None:
    ans, record = ask(moon_index, name, NON_ANSWER)
    assert ans.abstained or record.decision == "caveat", record
    assert record.withdrawal is not None and "wrong_kind" in record.withdrawal


@pytest.mark.xfail(
    strict=True,
    reason="the shipped decision model (362 SmolLM2 drafts) keeps this non-answer with a caveat at 0.26 when "
    "the generator's token probability is 1.0; the per-generator models trained on the draft builder's rows "
    "are to withdraw it (a pass here then fails this mark: remove it)",
)
@pytest.mark.parametrize("name", [SMOLLM2, GEMMA, SERVED_NAME])
def test_a_non_answer_is_never_kept(moon_index: Index, name: str) -> None:
    ans, _ = ask(moon_index, name, NON_ANSWER)
    assert ans.abstained
