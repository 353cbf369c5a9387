"""Each stage's output is a typed record in the state, read by attribute; every stage reads only
the state fields it declares (``reads``, ``uses``, ``writes``, or those every stage may read) and
reads every one it declares; the closing stages (confidence, calibration, citation settling) are
stages of the run, checked as the others are."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from tests.helpers import HashEmbedder, copy_demo_corpus
from tests.test_pipeline_traces import EchoLLM

import ragsieve.sieve.pipeline as pipeline_module
from ragsieve import Pipeline
from ragsieve.config import PipelineConfig, validate_config
from ragsieve.decision import DecisionModel
from ragsieve.demo import demo_questions
from ragsieve.errors import ConfigError, StageContractError
from ragsieve.index import Index
from ragsieve.records import ConflictRecord, DecideRecord, DecisionModelChoice, PoisonRecord, VoiceRecord
from ragsieve.sieve.closing import CalibrationStage, ConfidenceStage, SettleStage
from ragsieve.sieve.decide import DecideStage
from ragsieve.sieve.state import (
    CLOSING_STAGES,
    SHARED_FIELDS,
    STATE_FIELDS,
    Abstain,
    PipelineState,
    check_wiring,
)
from ragsieve.types import Chunk, SearchHit, Trace


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("records")
    return Index.build(copy_demo_corpus(root), root / "idx", embedder=HashEmbedder())


# --------------------------------------------------------------- what a stage reads
class ReadRecorder:
    """Records, per stage, the :class:`PipelineState` fields each stage's ``run`` reads: the
    pipeline's state is made of a subclass that notes every field read while a stage runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.current: str | None = None
        self.read: dict[str, set[str]] = {}
        self.declared: dict[str, set[str]] = {}
        recorder = self

        class RecordingState(PipelineState):
            def __getattribute__(self, name: str) -> Any:
                if name in STATE_FIELDS and recorder.current is not None:
                    recorder.read.setdefault(recorder.current, set()).add(name)
                return object.__getattribute__(self, name)

        monkeypatch.setattr(pipeline_module, "PipelineState", RecordingState)

    def watch(self, pipe: Pipeline) -> Pipeline:
        for stage in [*pipe.stages, *pipe.closing]:
            reads = {*getattr(stage, "reads", ()), *getattr(stage, "uses", ())}
            self.declared.setdefault(stage.name, set()).update(reads | set(getattr(stage, "writes", ())))
            self.declared.setdefault(f"{stage.name} reads", set()).update(reads)
            run = stage.run

            def watched(question: str, candidates: Any, trace: Trace, state: PipelineState, *,
                        _run: Any = run, _name: str = stage.name) -> Any:  # fmt: skip
                self.current = _name
                try:
                    return _run(question, candidates, trace, state)
                finally:
                    self.current = None

            stage.run = watched  # type: ignore[method-assign]
        return pipe

    def undeclared(self) -> dict[str, list[str]]:
        """Fields a stage read without declaring them (beyond those every stage may read)."""
        out = {name: sorted(got - self.declared[name] - SHARED_FIELDS) for name, got in self.read.items()}
        return {k: v for k, v in out.items() if v}

    def unused(self) -> dict[str, list[str]]:
        """Fields a stage declares it reads (``reads``, ``uses``) but never read in these runs."""
        out = {name.removesuffix(" reads"): sorted(declared - self.read.get(name.removesuffix(" reads"), set()))
               for name, declared in self.declared.items() if name.endswith(" reads")}  # fmt: skip
        return {k: v for k, v in out.items() if v}


CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("plain", {}),
    ("task-adaptive", {}),
    ("sieve", {}),
    ("sieve", {"stages": {"poison": {"coordination": True}, "injection": {"action": "record"}}}),
    # the calibrated threshold, and the confidence stage's own case: no verify, no decide
    ("sieve", {"ablate": ["verify"], "calibration": {"abstain_below": 0.3}}),
    ("sieve", {"ablate": ["verify", "decide"]}),
]


def _ask_all(index: Index, recorder: ReadRecorder, questions: Iterable[str]) -> None:
    questions = list(questions)
    for preset, overrides in CONFIGS:
        cfg = validate_config({"pipeline": preset, "index_dir": str(index.dir), **overrides})
        pipe = recorder.watch(Pipeline(cfg, index=index, llm=EchoLLM()))
        for question in questions:
            pipe.ask(question)


def test_every_stage_reads_only_what_it_declares_and_all_it_declares(demo_index, monkeypatch):
    recorder = ReadRecorder(monkeypatch)
    _ask_all(demo_index, recorder, [q["question"] for q in demo_questions(include_unanswerable=True)][:14])
    assert set(CLOSING_STAGES) <= set(recorder.read)  # the closing stages ran, and were watched
    assert not recorder.undeclared(), f"stages read fields they do not declare: {recorder.undeclared()}"
    assert not recorder.unused(), f"stages declare reads no run made: {recorder.unused()}"


def test_the_read_check_catches_an_undeclared_and_an_unused_read(demo_index, monkeypatch):
    class Sneaks:
        name = "sneaks"
        reads: tuple[str, ...] = ()
        uses: tuple[str, ...] = ("must_keep",)  # declared, never read
        writes: tuple[str, ...] = ()
        emits: tuple[str, ...] = ()

        def warm_up(self) -> None:
            pass

        def run(self, question, candidates, trace, state):
            _ = state.evidence  # read, not declared
            return candidates

    recorder = ReadRecorder(monkeypatch)
    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=demo_index, llm=EchoLLM(), stages=[Sneaks()])
    recorder.watch(pipe).ask("What is graphene?")
    assert recorder.undeclared() == {"sneaks": ["evidence"]}
    assert recorder.unused()["sneaks"] == ["must_keep"]


# ------------------------------------------------------------------- typed records
def test_each_record_is_its_trace_record(demo_index, monkeypatch):
    states: list[PipelineState] = []
    make = pipeline_module.PipelineState

    def keep(*args: Any, **kwargs: Any) -> PipelineState:
        state = make(*args, **kwargs)
        states.append(state)
        return state

    monkeypatch.setattr(pipeline_module, "PipelineState", keep)
    cfg = PipelineConfig(index_dir=str(demo_index.dir), stages={"poison": {"coordination": True}})  # type: ignore[arg-type]
    pipe = Pipeline(cfg, index=demo_index, llm=EchoLLM())
    for q in demo_questions(include_unanswerable=True)[:12]:
        ans = pipe.ask(q["question"])
        state = states[-1]
        poison = ans.trace.stage("poison")
        if poison:
            assert state.poison_record is not None
            assert {"stage": "poison", **state.poison_record.to_event()} == poison[-1]
            assert PoisonRecord.from_event(poison[-1]) == state.poison_record
            assert state.poison_record.voices is not None  # coordination on: voices listed, maybe none
        decided = ans.trace.stage("decide")
        if decided:
            assert state.decide_record is not None
            assert {"stage": "decide", **state.decide_record.to_event()} == decided[-1]
            assert DecideRecord.from_event(decided[-1]) == state.decide_record
            assert state.decide_record.confidence == ans.confidence or ans.abstained
    assert states and all(isinstance(s.poison_record, PoisonRecord | None) for s in states)


def test_records_read_back_from_json_and_from_older_traces():
    voice = VoiceRecord("v1", ("a", "b"), ("x.example", "y.example"), 2, 0.93, 0.9, ("cosine",), True, ("a", "b"),
                        0.75, ("1931",), ("1931",), (), "exclusive claim")  # fmt: skip
    record = PoisonRecord(("c",), 5, (voice,))
    assert PoisonRecord.from_event({"stage": "poison", **record.to_event()}) == record
    assert "voices" not in PoisonRecord(("c",), 5).to_event()  # coordination off: no key, as before
    assert record.coordinated_members() == ["a", "b"]
    assert voice.describe() == ("2 passages from 2 documents on 2 hosts (x.example, y.example) in one tight "
                                "cluster (cosine mean 0.93)")  # fmt: skip
    decided = DecideRecord("caveat", 0.3, 0.08, "Paris [1].", "verify: x", {"judge.best": 0.9}, {"judge.best": 0.4},
                           "not fully confirmed by the checks: verify: x", None, None, "decide",
                           DecisionModelChoice("echo", "served", "decision_model.npz", "smollm2", "note"))  # fmt: skip
    assert DecideRecord.from_event(decided.to_event()) == decided
    observed = DecideRecord(signals={"judge.best": 0.9}, draft="d", mode="observe")
    assert observed.to_event() == {"mode": "observe", "signals": {"judge.best": 0.9}, "draft": "d",
                                   "withdrawal": None, "coordinated": None}  # fmt: skip
    # a conflict record of an older trace, without the verdict, is still shown; "the sources agree" is not
    older = ConflictRecord.from_event({"stage": "conflict", "groups": [{"answer": "1931"}, {"answer": "1947"}]})
    assert older.shown and older.conflict is None and older.extra_groups == 1 and not older.found
    agree = ConflictRecord.from_event({"stage": "conflict", "groups": [{"answer": "1931"}], "conflict": False,
                                       "decision": "consistent", "message": ""})  # fmt: skip
    assert not agree.shown and agree.view() == {"message": "", "decision": "consistent",
                                                "groups": [{"answer": "1931"}], "conflict": False}  # fmt: skip


def _hit(cid: str, text: str) -> SearchHit:
    return SearchHit(Chunk(id=cid, text=text, doc_id=cid, source=cid), 1.0, 1, {})


class _Generator:
    """The decide stage's generator: a token probability, and a named LLM."""

    def __init__(self) -> None:
        self.llm = lambda: type("L", (), {"model_name": "echo"})()

    def answer_likelihood(self, question: str, text: str, evidence: Any = None) -> float:
        return 0.5


def test_the_decide_stage_reads_the_conflict_and_poison_records_by_attribute():
    from ragsieve.config import CalibrationConfig, DecideConfig

    stage = DecideStage(DecideConfig(mode="observe"), CalibrationConfig(), _Generator())  # type: ignore[arg-type]
    state = PipelineState(question="When?", text="In 1931 [1].", evidence=[_hit("a", "It opened in 1931.")])
    # the conflict stage's typed record is what is read, not its trace record
    state.conflict_record = ConflictRecord(conflict=True, decision="both", groups=({}, {}, {}))
    trace = Trace("When?")
    trace.record("conflict", conflict=False, groups=[])
    stage.run("When?", [], trace, state)
    assert state.signals["conflict.found"] == 1.0 and state.signals["conflict.groups"] == pytest.approx(2 / 3)
    # without one (the check did not run), a trace record alone sets no conflict signal
    state = PipelineState(question="When?", text="In 1931 [1].", evidence=[_hit("a", "It opened in 1931.")])
    stage.run("When?", [], trace, state)
    assert "conflict.found" not in state.signals and "conflict.groups" not in state.signals
    # the coordinated voices come from the poison record, not from the trace
    voice = VoiceRecord("v", ("a",), ("x.example",), 1, 0.95, 0.95, cluster=("a",), coordination=0.75)
    state = PipelineState(question="When?", text="In 1931 [1].", evidence=[_hit("a", "It opened in 1931.")],
                          poison_record=PoisonRecord((), 1, (voice,)))  # fmt: skip
    stage.run("When?", [], Trace("When?"), state)
    assert "poison.answer_cluster_only" in state.signals
    assert state.decide_record is not None and state.decide_record.observed


# ------------------------------------------------------------------ closing stages
def test_the_closing_stages_are_wired_and_checked_as_stages(demo_index):
    pipe = Pipeline(PipelineConfig(index_dir=str(demo_index.dir)), index=demo_index, llm=EchoLLM())  # type: ignore[call-arg]
    assert [s.name for s in pipe.closing] == list(CLOSING_STAGES)
    plain = Pipeline(PipelineConfig(pipeline="plain"), index=demo_index, llm=EchoLLM())
    assert [s.name for s in plain.closing] == ["calibration", "settle_citations"]  # confidence: the sieve's
    for stage in pipe.closing:
        assert set(stage.writes) <= STATE_FIELDS and set(stage.uses) <= STATE_FIELDS

    class Reads:
        name = "reads-text"
        reads: tuple[str, ...] = ("claims",)
        uses: tuple[str, ...] = ()
        writes: tuple[str, ...] = ()
        emits: tuple[str, ...] = ()

    with pytest.raises(ConfigError, match="'reads-text' reads claims, which no stage before it produces"):
        check_wiring([*plain.closing, Reads()])  # type: ignore[list-item]


def test_a_closing_stage_is_held_to_what_it_writes(demo_index, monkeypatch):
    def sneaky(self, question, candidates, trace, state):
        state.claims = []  # not the settling stage's to write
        return candidates

    monkeypatch.setattr(SettleStage, "run", sneaky)
    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=demo_index, llm=EchoLLM())
    with pytest.raises(StageContractError, match="stage 'settle_citations' wrote claims"):
        pipe.ask("What is graphene?")


def test_the_closing_stages_run_after_an_abstention_and_the_calibration_abstains():
    state = PipelineState(question="q", text="Paris [1] [7].", evidence=[_hit("a", "Paris is the capital.")],
                          cited=["a"], confidence=0.2)  # fmt: skip
    trace = Trace("q")
    out = CalibrationStage(validate_config({"calibration": {"abstain_below": 0.5}}).calibration).run("q", [], trace,
                                                                                                    state)  # fmt: skip
    assert isinstance(out, Abstain) and out.check == "calibration" and out.reason.startswith("calibration:")
    state.abstain = out
    SettleStage().run("q", [], trace, state)
    assert state.text == "Paris [1] [7]." and not trace.stage("settle_citations")  # an abstention is left as it is
    state.abstain = None
    SettleStage().run("q", [], trace, state)
    assert state.text == "Paris [1]." and trace.stage("settle_citations")[-1]["removed_markers"] == [7]
    # with no check's confidence, the sieve's evidence relevance stands in (not after an abstention)
    state = PipelineState(question="q", evidence=[_hit("a", "x")], relevance={"a": 0.64})
    ConfidenceStage().run("q", [], trace, state)
    assert state.confidence == 0.64
    state = PipelineState(question="q", evidence=[_hit("a", "x")], relevance={"a": 0.64},
                          abstain=Abstain("judge", "r", "t"))  # fmt: skip
    ConfidenceStage().run("q", [], trace, state)
    assert state.confidence is None


def test_the_calibrated_threshold_ends_a_run_through_the_closing_stage(demo_index):
    question = demo_questions()[0]["question"]
    cfg = validate_config({"index_dir": str(demo_index.dir), "calibration": {"abstain_below": 0.999}})
    ans = Pipeline(cfg, index=demo_index, llm=EchoLLM(), decision_model=DecisionModel.default()).ask(question)
    assert ans.abstained and ans.trace.stage("abstain")[-1]["check"] in {"calibration", "decide"}
    cfg = validate_config({"pipeline": "plain", "index_dir": str(demo_index.dir),
                           "calibration": {"abstain_below": 0.5}})  # fmt: skip
    ans = Pipeline(cfg, index=demo_index, llm=EchoLLM()).ask(question)  # plain RAG measures no confidence
    assert ans.abstained and ans.trace.stage("abstain")[-1]["check"] == "calibration"
    assert ans.abstain_reason.startswith("calibration: no confidence")
