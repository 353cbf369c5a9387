"""Yes/no answers from log-probabilities: the question test, the label, and the pipeline step."""

from __future__ import annotations

import pytest
from tests.helpers import HashEmbedder, copy_corpus

from ragsieve.config import NEUTRAL_DEFAULTS, PipelineConfig, validate_config
from ragsieve.errors import ModelError
from ragsieve.generate.polar import is_polar_question, polar_label, starts_with_polarity, with_polar_label
from ragsieve.index import Index
from ragsieve.llm.base import Generation
from ragsieve.sieve.pipeline import Pipeline


class LabelLLM:
    """Fixed reply; "Yes" and "No" scored with the given log-probabilities (None: cannot score)."""

    model_name = "label"

    def __init__(self, reply: str, yes: float | None = -1.0, no: float = -2.0) -> None:
        self.reply, self.yes, self.no = reply, yes, no
        self.scored: list[list[str]] = []

    def warm_up(self) -> None:
        pass

    def generate(self, prompt, *, max_tokens=256, temperature=0.0, stop=None, seed=None) -> Generation:
        return Generation(self.reply, 50, 10, "stop")

    def next_token_logprobs(self, prompt, candidates):
        self.scored.append(list(candidates))
        if self.yes is None:
            raise ModelError("this server returns no log-probabilities")
        table = {"Yes": self.yes, "No": self.no}
        return [table[c] for c in candidates]

    def count_tokens(self, text):
        return len(text.split())

    def to_dict(self):
        return {"backend": "label"}


@pytest.mark.parametrize(
    ("question", "polar"),
    [
        ("Are Broughtonia and Laeliocattleya both orchids?", True),
        ("Were Halldór Laxness and Timothy Leary from the same country?", True),
        ("does aspirin thin the blood", True),
        ("Is it true that Pluto is a planet?", True),
        ("Is Shanghai or Hanggin Rear Banner larger?", False),  # a choice, not yes/no
        ("Who is older, Annie Morton or Terry Richardson?", False),
        ("What is a polar molecule?", False),
        ("Island nations of the Pacific?", False),  # "island" is not the auxiliary "is"
        ("", False),
    ],
)
def test_polar_questions(question, polar):
    assert is_polar_question(question) is polar


@pytest.mark.parametrize(
    ("reply", "label", "expected", "added"),
    [
        ("Both are genera of orchids.", "Yes", "Yes, both are genera of orchids.", True),
        ("Distortion Mirrors is a rock band.", "No", "No, Distortion Mirrors is a rock band.", True),
        ("No, they are not.", "Yes", "No, they are not.", False),  # the reply's own yes/no stands
        ("yes indeed", "No", "yes indeed", False),
        ("Nobody knows.", "No", "No, Nobody knows.", True),  # "Nobody" is not the word no
        ("   ", "Yes", "Yes.", True),
    ],
)
def test_with_polar_label(reply, label, expected, added):
    assert with_polar_label(reply, label) == (expected, added)
    assert starts_with_polarity(expected)


def test_polar_label_compares_the_two_log_probabilities():
    assert polar_label(LabelLLM("", yes=-0.5, no=-1.5), "q") == ("Yes", 1.0)
    assert polar_label(LabelLLM("", yes=-3.0, no=-1.0), "q") == ("No", -2.0)
    assert polar_label(LabelLLM("", yes=-1.0, no=-1.0), "q").label == "Yes"  # ties go to yes


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("polar")
    return Index.build(copy_corpus(root), root / "idx", embedder=HashEmbedder())


def plain(index, llm, polar: str) -> Pipeline:
    cfg = validate_config({"pipeline": "plain", "generation": {"polar_answers": polar}})
    return Pipeline(cfg, index=index, llm=llm)


def test_label_mode_writes_the_models_yes_or_no_and_traces_it(index):
    llm = LabelLLM("Apollo 11 landed on the Moon in 1969.", yes=-0.2, no=-2.0)
    answer = plain(index, llm, "label").ask("Did Apollo 11 land on the Moon?")
    assert answer.text == "Yes, Apollo 11 landed on the Moon in 1969."
    assert llm.scored == [["Yes", "No"]]
    polar = answer.trace.stage("generate")[0]["polar"]
    assert polar == {"label": "Yes", "margin": 1.8, "added": True}


def test_label_mode_leaves_other_questions_and_free_mode_alone(index):
    llm = LabelLLM("In 1969.")
    assert plain(index, llm, "label").ask("When did Apollo 11 land on the Moon?").text == "In 1969."
    assert plain(index, llm, "free").ask("Did Apollo 11 land on the Moon?").text == "In 1969."
    assert llm.scored == []  # neither asked for a label


def test_a_backend_without_log_probabilities_keeps_the_free_answer(index):
    llm = LabelLLM("In 1969.", yes=None)
    answer = plain(index, llm, "label").ask("Did Apollo 11 land on the Moon?")
    assert answer.text == "In 1969."
    polar = answer.trace.stage("generate")[0]["polar"]
    assert polar["label"] is None and "log-probabilities" in polar["reason"]


def test_answer_identity_leaves_out_options_that_change_no_answer():
    """Caches of answers key on answer_identity: an option at its neutral value, or a sieve
    option in another pipeline, leaves the key as it was before the option existed."""
    default = PipelineConfig()
    identity = default.answer_identity()
    assert NEUTRAL_DEFAULTS[("generation", "polar_answers")] == "free"
    assert "polar_answers" not in identity["generation"]
    # without a calibrated threshold the calibration section changes no answer either
    assert "calibration" not in identity
    assert {k: v for k, v in default.legacy_layout().items() if k not in ("generation", "calibration")} == {
        k: v for k, v in identity.items() if k != "generation"
    }
    labelled = validate_config({"generation": {"polar_answers": "label"}})
    assert labelled.answer_identity()["generation"]["polar_answers"] == "label"
    # the sieve's entity coverage is on by default (not neutral): the sieve's key has it ...
    assert identity["sieve"]["cover_entities"] is True
    # ... and plain RAG's key has it at no value, so plain RAG's cached answers stay valid
    for value in (True, False):
        plain = validate_config({"pipeline": "plain", "sieve": {"cover_entities": value}})
        assert "cover_entities" not in plain.answer_identity()["sieve"]
