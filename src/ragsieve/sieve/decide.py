"""Stage ``decide`` (last): one calibrated confidence from every check's signals, then answer,
answer with a caveat, or abstain.

The checks before it leave graded signals in ``state.signals`` whatever they decided (the
relevance judge's best score, the poisoning check's dropped share, each answer sentence's
support, value grounding, responsiveness, ...); this stage adds plain RAG's own two (the top
retrieval score, left by ``retrieve``, and the answer's mean token probability under the
prompt it was generated from, one scoring pass of the model) and the conflict check's (from
its typed record, :class:`ragsieve.records.ConflictRecord`), and asks
:class:`ragsieve.decision.DecisionModel` for the probability that the draft is right. The model
is the one trained for the generator that wrote the draft (chosen by the loaded model's name,
:func:`ragsieve.decision.choose_decision_model`; ``decide.model`` or a model given to the
pipeline overrides it), and the record names it (``model``), with a note when the generator's
own model does not ship and another decides instead.

* below the threshold (``decide.threshold``, else ``calibration.abstain_below`` as ``ragsieve
  calibrate`` certified it, else the model's default): abstain, with the verify stage's
  explanation when it asked to withdraw the draft;
* otherwise answer; when a check asked to withdraw the draft, the answer is stated only inside
  a coordinated voice (below), or the confidence is within ``decide.caveat_margin`` of the
  threshold, the ``decide`` record's ``caveat`` says the answer is not fully confirmed and why
  (the answer's text is left as the model wrote it).

With ``stages.poison.coordination`` on, a draft whose value is stated, among its evidence, only by
members of coordinated voices (:func:`ragsieve.voices.answer_coordination`: ``cluster_only``) is
"asserted only by a coordinated voice": a signal the model weighs, a caveat, and a veto (abstain
whatever the confidence) only when ``decide.vetoes`` lists ``"coordinated"`` (its measured
precision is in docs/results/knowledge-poisoning.md; off by default).

A withdrawal the verify stage asks for is weighed here unless ``decide.vetoes`` lists it, in
which case the verify stage ends the run itself: by default (``ragsieve.options.DEFAULT_VETOES``)
the contradictions whose measured precision licensed a veto; a contradiction left here makes the
caveat name both values ("the cited passage [1] says 1999, not 2014, ...").

The draft is never replaced by another answer here: it is kept or withdrawn. The stage's
output is a :class:`ragsieve.records.DecideRecord` in ``state.decide_record``, recorded as the
``decide`` trace record: every signal, the confidence, the threshold, the decision, the signals
that moved the confidence most and the decision model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ragsieve.config import CalibrationConfig, DecideConfig
from ragsieve.decision import DecisionModel, choose_decision_model, generator_family
from ragsieve.records import DecideRecord, DecisionModelChoice
from ragsieve.sieve.generate import Generator
from ragsieve.sieve.state import Abstain, PipelineState, StageResult, compare
from ragsieve.types import SearchHit, Trace


def generator_name(llm: object) -> str:
    """The name a decision model is chosen by: the LLM's ``model_name``, else its class's name."""
    name = getattr(llm, "model_name", None)
    return str(name) if name else type(llm).__name__


class DecideStage:
    """Combine the signals into one confidence and answer, caveat or abstain.

    Reads ``state.text`` (the draft); uses ``state.signals``, ``state.evidence``,
    ``state.withdrawal`` (a check's withdrawal without a veto), ``state.poison_record`` (the
    coordinated voices) and ``state.conflict_record``; writes ``state.confidence``,
    ``state.signals`` (``answer.token_prob``, ``conflict.*``, ``poison.answer_*``) and
    ``state.decide_record`` (also the ``decide`` trace record); returns an :class:`Abstain` below
    the threshold. Set by ``decide`` and ``calibration.abstain_below``; ``model``: the decision
    model given to the pipeline (else ``decide.model``'s, else the one chosen for the generator)."""

    name = "decide"
    reads: tuple[str, ...] = ("text",)
    uses: tuple[str, ...] = ("signals", "evidence", "withdrawal", "poison_record", "conflict_record")
    writes: tuple[str, ...] = ("confidence", "signals", "decide_record")
    emits: tuple[str, ...] = (
        "answer.token_prob", "conflict.found", "conflict.groups", "poison.answer_coordinated_share",
        "poison.answer_cluster_only",
    )

    def __init__(
        self,
        config: DecideConfig,
        calibration: CalibrationConfig,
        generator: Generator,
        model: Callable[[], DecisionModel] | None = None,
    ) -> None:
        self.config = config
        self.calibration = calibration
        self.generator = generator
        self._given = model
        # generator name -> the model that judges its drafts and how it was chosen
        self._chosen: dict[str, tuple[DecisionModel, DecisionModelChoice]] = {}

    def warm_up(self) -> None:
        # a model named by the configuration or given loads now (a damaged file fails here); the
        # one chosen for the generator waits for the generator's name
        if self.config.mode == "decide" and (self._given is not None or self.config.model):
            self.choose("")

    def choose(self, generator: str) -> tuple[DecisionModel, DecisionModelChoice]:
        """The decision model for the generator named ``generator`` and how it was chosen."""
        chosen = self._chosen.get(generator)
        if chosen is None:
            family = generator_family(generator)
            if self._given is not None:
                model = self._given()
                chosen = model, DecisionModelChoice(generator, family, "given", model.trained_on, None,
                                                    model.unweighed())
            elif self.config.model:
                model = DecisionModel.load(self.config.model)
                chosen = model, DecisionModelChoice(generator, family, self.config.model, model.trained_on, None,
                                                    model.unweighed())
            else:
                chosen = choose_decision_model(generator)
            self._chosen[generator] = chosen
        return chosen

    def model(self) -> DecisionModel:
        """The decision model for the pipeline's generator (waits for the LLM to load)."""
        return self.choose(generator_name(self.generator.llm()))[0]

    def threshold(self, model: DecisionModel) -> float:
        if self.config.threshold is not None:
            return self.config.threshold
        if self.calibration.abstain_below is not None:
            return self.calibration.abstain_below
        return model.threshold_

    def _signals(self, question: str, trace: Trace, state: PipelineState) -> None:
        """The signals no earlier stage left in the state: the answer's token probability, the
        conflict check's (from its record: it has no veto to report) and, when the poison check
        grouped voices, how much of the answer's support is a coordinated voice
        (:func:`ragsieve.voices.answer_coordination`)."""
        if state.text.strip() and "answer.token_prob" not in state.signals:
            state.signal("answer.token_prob", self.generator.answer_likelihood(question, state.text, state.evidence))
        conflict = state.conflict_record
        if conflict is not None:
            state.signal("conflict.found", conflict.found)
            state.signal("conflict.groups", min(conflict.extra_groups, 3) / 3)
        poison = state.poison_record
        if poison is not None and poison.voices is not None and state.text.strip():
            # the poison check grouped voices: how much of the answer's support is a coordinated one
            from ragsieve.voices import answer_coordination

            members = poison.coordinated_members()
            for name, value in answer_coordination(question, state.text, state.evidence, members).items():
                state.signal(f"poison.answer_{name}", value)

    @staticmethod
    def _coordinated_only(state: PipelineState) -> str | None:
        """Why the draft is asserted only by a coordinated voice (its value stated, among the
        evidence, only by members of coordinated voices), or ``None``."""
        poison = state.poison_record
        if state.signals.get("poison.answer_cluster_only") != 1.0 or poison is None:
            return None
        evidence = {h.chunk.id for h in state.evidence}
        voices = [v for v in poison.voices or () if evidence & set(v.cluster)]
        if not voices:
            return None
        said = "; ".join(v.describe() for v in voices)
        return f"the answer is stated only by a coordinated voice, no independent source: {said}"

    def _conclude(self, trace: Trace, state: PipelineState, record: DecideRecord) -> None:
        state.decide_record = record
        trace.record("decide", **record.to_event())

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> StageResult:
        self._signals(question, trace, state)
        signals = dict(sorted(state.signals.items()))
        withdrawal = state.withdrawal
        coordinated = self._coordinated_only(state)
        drafted = DecideRecord(
            signals=signals, draft=state.text, withdrawal=withdrawal.reason if withdrawal else None,
            coordinated=coordinated,
        )  # fmt: skip
        if self.config.mode == "observe":
            self._conclude(trace, state, replace(drafted, mode="observe"))
            return candidates
        model, choice = self.choose(generator_name(self.generator.llm()))
        confidence = model.confidence(state.signals)
        threshold = self.threshold(model)
        moved_by = dict(list(model.contributions(state.signals).items())[:5])
        record = replace(drafted, confidence=confidence, threshold=threshold, moved_by=moved_by, model=choice)
        state.confidence = confidence
        if coordinated is not None and "coordinated" in self.config.vetoes:
            # listed in decide.vetoes: it ends the run whatever the confidence
            self._conclude(trace, state, replace(record, decision="abstain", vetoed="coordinated"))
            text = (
                f"I can't answer this with confidence: {coordinated}. Passages written together to "
                "look like several sources are how knowledge poisoning works."
            )
            return Abstain("decide", f"decide: vetoed: {coordinated}", text, confidence)
        if confidence < threshold:
            self._conclude(trace, state, replace(record, decision="abstain"))
            reason = f"decide: confidence {compare(confidence, threshold)}"
            if withdrawal is not None:
                return Abstain("decide", f"{reason} ({withdrawal.reason})", withdrawal.text, confidence)
            text = (
                "I can't answer this with enough confidence: the checks give the draft answer a confidence "
                f"of {confidence:.2f}, below the threshold {threshold:.2f}."
            )
            return Abstain("decide", reason, text, confidence)
        caveat = None
        if withdrawal is not None or coordinated is not None or confidence < threshold + self.config.caveat_margin:
            # the answer stands; the caveat travels in the record (the presenter shows it)
            reasons = [r for r in (withdrawal.reason if withdrawal else None, coordinated) if r is not None]
            why = "; ".join(reasons) or f"confidence {compare(confidence, threshold, '>=')}"
            caveat = f"not fully confirmed by the checks: {why}"
        decision = "caveat" if caveat is not None else "answer"
        self._conclude(trace, state, replace(record, decision=decision, caveat=caveat))
        return candidates
