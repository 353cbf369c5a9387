"""Stage ``decide`` (last): one calibrated confidence from every check's signals, then answer,
answer with a caveat, or abstain.

The checks before it leave graded signals in ``state.signals`` whatever they decided (the
relevance judge's best score, the poisoning check's dropped share, each answer sentence's
support, value grounding, responsiveness, ...); this stage adds plain RAG's own two (the top
retrieval score, left by ``retrieve``, and the answer's mean token probability under the
prompt it was generated from, one scoring pass of the model) and the conflict check's (from
its ``conflict`` record), and asks :class:`ragsieve.decision.DecisionModel` for the probability
that the draft is right.

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

The draft is never replaced by another answer here: it is kept or withdrawn. The ``decide``
record holds every signal, the confidence, the threshold, the decision and the signals that
moved the confidence most.
"""

from __future__ import annotations

from collections.abc import Callable

from ragsieve.config import CalibrationConfig, DecideConfig
from ragsieve.decision import DecisionModel
from ragsieve.sieve.generate import Generator
from ragsieve.sieve.state import Abstain, PipelineState, StageResult, compare
from ragsieve.types import SearchHit, Trace


def load_decision_model(config: DecideConfig) -> DecisionModel:
    """The model ``decide.model`` names, else the bundled one."""
    return DecisionModel.load(config.model) if config.model else DecisionModel.default()


class DecideStage:
    """Combine the signals into one confidence and answer, caveat or abstain.

    Reads ``state.text`` (the draft); uses ``state.signals``, ``state.evidence``,
    ``state.withdrawal`` (a check's withdrawal without a veto); writes ``state.confidence``,
    ``state.signals`` (``answer.token_prob``, ``conflict.*``) and a
    ``decide`` record; returns an :class:`Abstain` below the threshold. Set by ``decide`` and
    ``calibration.abstain_below``."""

    name = "decide"
    reads: tuple[str, ...] = ("text",)
    uses: tuple[str, ...] = ("signals", "evidence", "withdrawal", "confidence")
    writes: tuple[str, ...] = ("confidence", "signals")
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
        self._model: DecisionModel | None = None
        self._make = model or (lambda: load_decision_model(config))

    def warm_up(self) -> None:
        if self.config.mode == "decide":
            self.model()

    def model(self) -> DecisionModel:
        if self._model is None:
            self._model = self._make()
        return self._model

    def threshold(self) -> float:
        if self.config.threshold is not None:
            return self.config.threshold
        if self.calibration.abstain_below is not None:
            return self.calibration.abstain_below
        return self.model().threshold_

    def _signals(self, question: str, trace: Trace, state: PipelineState) -> None:
        """The signals no earlier stage left in the state: the answer's token probability, the
        conflict check's (from its record: it has no veto to report) and, when the poison check
        grouped voices, how much of the answer's support is a coordinated voice
        (:func:`ragsieve.voices.answer_coordination`)."""
        if state.text.strip() and "answer.token_prob" not in state.signals:
            state.signal("answer.token_prob", self.generator.answer_likelihood(question, state.text, state.evidence))
        records = trace.stage("conflict")
        if records:
            last = records[-1]
            groups = last.get("groups") or []
            state.signal("conflict.found", bool(last.get("conflict")))
            state.signal("conflict.groups", min(max(len(groups) - 1, 0), 3) / 3)
        poison = trace.stage("poison")
        if poison and "voices" in poison[-1] and state.text.strip():
            # the poison check grouped voices: how much of the answer's support is a coordinated one
            from ragsieve.voices import answer_coordination

            members = [cid for voice in poison[-1]["voices"] for cid in voice.get("cluster", ())]
            for name, value in answer_coordination(question, state.text, state.evidence, members).items():
                state.signal(f"poison.answer_{name}", value)

    @staticmethod
    def _coordinated_only(trace: Trace, state: PipelineState) -> str | None:
        """Why the draft is asserted only by a coordinated voice (its value stated, among the
        evidence, only by members of coordinated voices), or ``None``."""
        if state.signals.get("poison.answer_cluster_only") != 1.0:
            return None
        poison = trace.stage("poison")
        evidence = {h.chunk.id for h in state.evidence}
        voices = [v for v in (poison[-1].get("voices") or []) if evidence & set(v.get("cluster", ()))]
        if not voices:
            return None
        parts = []
        for v in voices:
            hosts = sorted(set(v["hosts"]))
            named = ", ".join(hosts[:3]) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")
            parts.append(
                f"{len(v['cluster'])} passages from {v['documents']} documents on {len(hosts)} hosts ({named}) "
                f"in one tight cluster (cosine mean {v['mean_cosine']:.2f})"
            )
        said = "; ".join(parts)
        return f"the answer is stated only by a coordinated voice, no independent source: {said}"

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> StageResult:
        self._signals(question, trace, state)
        signals = dict(sorted(state.signals.items()))
        withdrawal = state.withdrawal
        coordinated = self._coordinated_only(trace, state)
        if self.config.mode == "observe":
            trace.record("decide", mode="observe", signals=signals, draft=state.text,
                         withdrawal=withdrawal.reason if withdrawal else None,
                         coordinated=coordinated)  # fmt: skip
            return candidates
        model = self.model()
        confidence = model.confidence(state.signals)
        threshold = self.threshold()
        record = {
            "signals": signals,
            "confidence": confidence,
            "threshold": threshold,
            "draft": state.text,
            "withdrawal": withdrawal.reason if withdrawal else None,
            "moved_by": dict(list(model.contributions(state.signals).items())[:5]),
        }
        state.confidence = confidence
        if coordinated is not None:
            record["coordinated"] = coordinated
        if coordinated is not None and "coordinated" in self.config.vetoes:
            # listed in decide.vetoes: it ends the run whatever the confidence
            trace.record("decide", decision="abstain", vetoed="coordinated", **record)
            text = (
                f"I can't answer this with confidence: {coordinated}. Passages written together to "
                "look like several sources are how knowledge poisoning works."
            )
            return Abstain("decide", f"decide: vetoed: {coordinated}", text, confidence)
        if confidence < threshold:
            trace.record("decide", decision="abstain", **record)
            reason = f"decide: confidence {compare(confidence, threshold)}"
            if withdrawal is not None:
                return Abstain("decide", f"{reason} ({withdrawal.reason})", withdrawal.text, confidence)
            text = (
                "I can't answer this with enough confidence: the checks give the draft answer a confidence "
                f"of {confidence:.2f}, below the threshold {threshold:.2f}."
            )
            return Abstain("decide", reason, text, confidence)
        caveat = withdrawal is not None or coordinated is not None or confidence < threshold + self.config.caveat_margin
        if caveat:
            # the answer stands; the caveat travels in the record (the presenter shows it)
            reasons = [r for r in (withdrawal.reason if withdrawal else None, coordinated) if r is not None]
            why = "; ".join(reasons) or f"confidence {compare(confidence, threshold, '>=')}"
            record["caveat"] = f"not fully confirmed by the checks: {why}"
        trace.record("decide", decision="caveat" if caveat else "answer", **record)
        return candidates
