"""The one declared signal set (``ragsieve.signals``): every signal a stage leaves is declared
with its stage, kind and meaning; each stage lists what it emits (``emits``) and the build, the
state and the runner hold it to that; the decision model's features are declared signals; and
no declared signal is left that no stage emits. Also the runner's check of what a stage
writes (``writes``)."""

from __future__ import annotations

from typing import Any, get_args

import numpy as np
import pytest
from tests.helpers import HashEmbedder, copy_demo_corpus
from tests.sieve.test_extract_on_paste import MOON_PASSAGE, _moon_judge
from tests.test_pipeline import MOON_Q, KeywordJudge, QueueLLM, sieve
from tests.test_pipeline_traces import EchoLLM

from ragsieve import Pipeline
from ragsieve.config import SIEVE_STAGES, PipelineConfig, validate_config
from ragsieve.decision import SIGNALS, DecisionModel
from ragsieve.demo import demo_questions
from ragsieve.errors import ConfigError, StageContractError
from ragsieve.index import Index
from ragsieve.options import UnresponsiveReason
from ragsieve.sieve.build import StageResources, build_stages
from ragsieve.sieve.state import PipelineState, Ref, check_wiring, preset_stages
from ragsieve.signals import DECLARED, SIGNAL_SET, SignalKind, emitted_by
from ragsieve.text.readings import shared_reader
from ragsieve.types import SearchHit, Trace


def _built(preset: str = "sieve") -> list[Any]:
    # every stage of the preset, the injection check (off by default) included
    cfg = validate_config({"pipeline": preset, "stages": {"injection": {"action": "record"}}})
    resources = StageResources(cfg, Ref(), Ref(), sieve=preset == "sieve", judge=None, selector=None,
                               claim_judge=None)  # fmt: skip
    return build_stages(cfg, preset_stages(cfg), resources)


# ------------------------------------------------------------------------ the declared set
def test_every_declared_signal_has_a_stage_a_kind_and_a_one_line_meaning():
    names = [s.name for s in SIGNAL_SET]
    assert len(names) == len(set(names)), "a signal is declared twice"
    for s in SIGNAL_SET:
        assert s.stage in SIEVE_STAGES, s
        assert s.kind in get_args(SignalKind), s
        assert s.meaning.strip() and "\n" not in s.meaning, s
        assert s.name.count(".") == 1, s
    # one flag per way a reply fails to answer, as the verify stage records them
    assert {f"verify.{r}" for r in get_args(UnresponsiveReason)} <= set(DECLARED)


def test_the_decision_models_features_are_the_declared_signals():
    # one set: every declared signal is a feature a decision model is trained on, none is left out
    assert tuple(s.name for s in SIGNAL_SET) == SIGNALS
    assert DecisionModel().signals == SIGNALS
    # the shipped model keeps the features it was trained on, each a declared signal, and names
    # the declared ones it does not weigh (trained before they were declared)
    model = DecisionModel.default()
    assert set(model.signals) <= set(DECLARED)
    assert model.coef_.shape == (2 * len(model.signals),)
    assert set(model.unweighed()) == set(DECLARED) - set(model.signals)


def test_each_stage_emits_what_the_declared_set_says_it_does_and_nothing_is_unused():
    stages = _built("sieve")
    assert [s.name for s in stages] == list(SIEVE_STAGES)
    for stage in stages:
        assert set(stage.emits) == set(emitted_by(stage.name)), stage.name
        assert len(stage.emits) == len(set(stage.emits)), stage.name
    emitted = {name for stage in stages for name in stage.emits}
    unused = sorted(set(DECLARED) - emitted)
    assert not unused, f"declared signals no stage emits: {unused}"
    # plain RAG's stages emit their subset; the task-adaptive preset emits none
    for stage in _built("plain"):
        assert set(stage.emits) == set(emitted_by(stage.name)), stage.name


# ---------------------------------------------------------------------- what refuses what
def test_state_signal_refuses_an_undeclared_name():
    state = PipelineState(question="q")
    state.signal("judge.best", 0.7)
    assert state.signals == {"judge.best": 0.7}
    with pytest.raises(StageContractError, match=r"'poison\.everything' is not declared.*ragsieve\.signals"):
        state.signal("poison.everything", 1.0)
    with pytest.raises(StageContractError, match="not declared"):
        state.signal("judge.bets", None)  # a typo fails even when there is nothing to record


class _Stage:
    name = "mine"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    writes: tuple[str, ...] = ("signals",)
    emits: tuple[str, ...] = ()

    def warm_up(self) -> None:
        pass

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        return candidates


def test_the_build_refuses_a_stage_that_emits_an_undeclared_signal():
    class Undeclared(_Stage):
        emits = ("mine.score",)

    with pytest.raises(ConfigError, match=r"'mine' emits mine\.score, which is not a declared signal.*SIGNAL_SET"):
        check_wiring([Undeclared()])  # type: ignore[list-item]

    class NoSignalsField(_Stage):
        writes = ()
        emits = ("judge.best",)

    with pytest.raises(ConfigError, match="emits signals but does not write 'signals'"):
        check_wiring([NoSignalsField()])  # type: ignore[list-item]


def test_the_runner_refuses_a_signal_its_stage_does_not_list(hash_index):
    class Unlisted(_Stage):
        def run(self, question, candidates, trace, state):
            state.signal("judge.best", 0.5)  # declared, but not this stage's
            return candidates

    class Listed(Unlisted):
        emits = ("judge.best",)

    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=hash_index, llm=QueueLLM("x"), stages=[Unlisted()])
    with pytest.raises(StageContractError, match=r"stage 'mine' emitted judge\.best.*add 'judge\.best' to its `emits`"):
        pipe.ask("hi there")
    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=hash_index, llm=QueueLLM("x"), stages=[Listed()])
    pipe.ask("hi there")

    class Overwrites(Unlisted):
        name = "later"

    # setting again a signal an earlier stage left is emitting it too
    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=hash_index, llm=QueueLLM("x"),
                    stages=[Listed(), Overwrites()])  # fmt: skip
    with pytest.raises(StageContractError, match=r"stage 'later' emitted judge\.best"):
        pipe.ask("hi there")


# ------------------------------------------------------------------ the real stages, run
@pytest.fixture(scope="module")
def demo_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("signals")
    return Index.build(copy_demo_corpus(root), root / "idx", embedder=HashEmbedder())


@pytest.fixture(scope="module")
def hash_index(tmp_path_factory):
    from tests.helpers import copy_corpus

    root = tmp_path_factory.mktemp("signals-moon")
    return Index.build(copy_corpus(root), root / "idx", embedder=HashEmbedder())


def test_the_real_stages_emit_only_declared_signals_and_reach_every_one(demo_index, hash_index, monkeypatch):
    """Every stage of the sieve run on the demo questions (with the fakes the trace pin uses,
    coordination on and off), a pasted passage and a knowledge filter: every signal emitted is
    declared and listed by the stage that left it (the runner checks that), and together the
    runs reach every declared signal."""
    seen: set[str] = set()
    signal = PipelineState.signal

    def recording(self: PipelineState, name: str, value: Any) -> None:
        seen.add(name)
        signal(self, name, value)

    monkeypatch.setattr(PipelineState, "signal", recording)
    questions = [q["question"] for q in demo_questions(include_unanswerable=True)]
    for overrides in ({}, {"stages": {"poison": {"coordination": True}}, "decide": {"mode": "observe"}}):
        cfg = PipelineConfig(index_dir=str(demo_index.dir), **overrides)  # type: ignore[arg-type]
        pipe = Pipeline(cfg, index=demo_index, llm=EchoLLM())
        for question in questions:
            pipe.ask(question)
    # the injection check, off by default, on for one question (it embeds every candidate sentence)
    cfg = PipelineConfig(index_dir=str(demo_index.dir), stages={"injection": {"action": "record"}})  # type: ignore[arg-type]
    Pipeline(cfg, index=demo_index, llm=EchoLLM()).ask(questions[0])
    # a model that pastes the passage: the verify stage answers with the sentence stating the value
    sieve(hash_index, QueueLLM(MOON_PASSAGE), _moon_judge()).ask(MOON_Q)

    # the knowledge filter (a stand-in for a trained one)
    class MoonOnly:
        name, threshold = "moon-only", 0.5

        def score_many(self, query, candidates, *, query_embedding=None):
            return np.asarray([0.9 if "moon" in c.text.lower() else 0.2 for c in candidates])

        def to_dict(self):
            return {"name": self.name}

    judge = KeywordJudge(relevant=("apollo",), ambiguous=("sun", "mars"))
    pipe = sieve(hash_index, QueueLLM("Apollo 11 landed on the Moon in July 1969 [1]."), judge)
    pipe.config = validate_config({**pipe.config.to_dict(), "stages": {"filter": {"filter": "direct"}}})
    next(s for s in pipe.stages if s.name == "filter").filter = MoonOnly()
    # the extractive reader ([reading] reader = "minilm"): its scores ride along as reader.* signals
    next(s for s in pipe.stages if s.name == "verify").reader = shared_reader()
    pipe.ask(MOON_Q)

    assert seen <= set(DECLARED)
    assert not sorted(set(DECLARED) - seen), f"declared signals no run emitted: {sorted(set(DECLARED) - seen)}"


# --------------------------------------------------------------------- what a stage writes
def test_the_runner_refuses_a_stage_that_writes_a_field_it_does_not_declare(hash_index):
    class Writes(_Stage):
        writes = ("text",)

        def run(self, question, candidates, trace, state):
            state.text = question.upper()
            return candidates

    class Sneaks(Writes):
        def run(self, question, candidates, trace, state):
            state.text = question.upper()
            state.confidence = 1.0  # not declared
            return candidates

    class AppendsInPlace(Writes):
        def run(self, question, candidates, trace, state):
            state.text = question.upper()
            state.cited.append("x")  # a change in place is a write too
            return candidates

    def ask(stage: Any) -> Any:
        return Pipeline(PipelineConfig(pipeline="plain"), index=hash_index, llm=QueueLLM("x"), stages=[stage]).ask("hi")

    assert ask(Writes()).text == "HI"
    with pytest.raises(StageContractError, match=r"stage 'mine' wrote confidence, which it does not declare; add "
                                                 r"'confidence' to its `writes` \(it declares: text\)"):
        ask(Sneaks())
    with pytest.raises(StageContractError, match="stage 'mine' wrote cited"):
        ask(AppendsInPlace())


def test_every_built_in_stage_writes_only_what_it_declares(demo_index):
    """The checks run on every stage of every preset (the trace pin runs them all): a pass here
    is every preset's questions answered without a StageContractError."""
    questions = [q["question"] for q in demo_questions(include_unanswerable=True)][:12]
    for preset in ("plain", "task-adaptive", "sieve"):
        cfg = PipelineConfig(pipeline=preset, index_dir=str(demo_index.dir))  # type: ignore[arg-type]
        pipe = Pipeline(cfg, index=demo_index, llm=EchoLLM())
        for question in questions:
            pipe.ask(question)
