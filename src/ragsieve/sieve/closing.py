"""The closing stages: what every run does after its stage list, as stages of the run.

The runner (:func:`ragsieve.sieve.runner.run_stages`) runs them after the preset's stages, in
the order of :data:`ragsieve.sieve.state.CLOSING_STAGES`, whether or not a stage abstained: each
declares what it reads and writes, is checked as the others are (when the stage list is built and
after it runs), and decides itself whether it has anything to do after an abstention.

* ``confidence`` (the sieve only): with ``verify`` switched off, the evidence's best relevance
  orders the answers (:func:`ragsieve.sieve.verify.answer_confidence` without claims);
* ``calibration``: the threshold ``ragsieve calibrate`` certified (``calibration.abstain_below``)
  is the last word on what is answered (:func:`calibrated_abstention`);
* ``settle_citations``: the answer's stray citation markers removed and every sentence given the
  evidence it cites (:func:`ragsieve.citations.settle_answer`); an abstention is left as it is.

They are not in a preset's stage list (``config.ablate`` cannot remove them, and the trace's
``pipeline`` record lists the preset's stages) and are not timed apart: what they do shows in the
trace as the records they leave (``abstain``, ``settle_citations``).
"""

from __future__ import annotations

from ragsieve.citations import settle_answer
from ragsieve.config import CalibrationConfig
from ragsieve.sieve.state import Abstain, PipelineState, Stage, StageResult
from ragsieve.sieve.verify import answer_confidence
from ragsieve.types import SearchHit, Trace


def calibrated_abstention(state: PipelineState, threshold: float | None) -> Abstain | None:
    """The abstention when the answer's confidence is missing or below the calibrated ``threshold``.

    ``calibration.abstain_below`` is the threshold ``ragsieve calibrate`` certified for a target
    error rate (rule: :func:`ragsieve.calibrate.abstains`). It applies to every preset and after
    every check, ``stages.verify.min_confidence`` included: that one is a fixed floor inside the verify
    stage (a sieve answer below it was already replaced by an abstention there), this one is the
    last word on what is answered, so the effective floor is the higher of the two. An answer a
    check already abstained on stays as it is. ``None``: no threshold, nothing changes.
    """
    if threshold is None or state.abstained:
        return None
    # imported only with a threshold to apply: ragsieve.calibrate loads scipy.stats (seconds, cold)
    from ragsieve.calibrate import abstains

    reason = abstains(state.confidence, threshold)
    if reason is None:
        return None
    text = (
        "I can't answer this with the confidence this configuration requires: the answer's confidence is "
        + ("unknown" if state.confidence is None else f"{state.confidence:.2f}")
        + f", below the calibrated threshold {threshold:.2f}."
    )
    return Abstain("calibration", reason, text, state.confidence)


class ConfidenceStage:
    """The answer's confidence when no check measured one (the sieve with ``verify`` switched
    off): the evidence's best judge relevance. Uses ``state.confidence``, ``state.relevance``,
    ``state.evidence`` and ``state.abstain`` (nothing to do after an abstention); writes
    ``state.confidence``."""

    name = "confidence"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ("confidence", "relevance", "evidence", "abstain")
    writes: tuple[str, ...] = ("confidence",)
    emits: tuple[str, ...] = ()

    def warm_up(self) -> None:
        pass

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> StageResult:
        if not state.abstained and state.confidence is None and state.relevance:
            best = max((state.relevance.get(h.chunk.id, 0.0) for h in state.evidence), default=None)
            state.confidence = answer_confidence([], best)
        return candidates


class CalibrationStage:
    """Abstain when the answer's confidence is missing or below ``calibration.abstain_below``
    (:func:`calibrated_abstention`). Uses ``state.confidence`` and ``state.abstain``; returns the
    abstention, else the candidates as they are."""

    name = "calibration"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ("confidence", "abstain")
    writes: tuple[str, ...] = ()
    emits: tuple[str, ...] = ()

    def __init__(self, config: CalibrationConfig) -> None:
        self.config = config

    def warm_up(self) -> None:
        pass

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> StageResult:
        abstain = calibrated_abstention(state, self.config.abstain_below)
        return candidates if abstain is None else abstain


class SettleStage:
    """Settle the answer's citations (:func:`ragsieve.citations.settle_answer`): stray markers
    removed, each sentence given the evidence it cites, a ``settle_citations`` record when there
    was anything to settle. Uses ``state.text``, ``state.evidence``, ``state.cited`` and
    ``state.abstain`` (an abstention cites nothing and is left as it is); writes ``state.text``
    and ``state.cited``."""

    name = "settle_citations"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ("text", "evidence", "cited", "abstain")
    writes: tuple[str, ...] = ("text", "cited")
    emits: tuple[str, ...] = ()

    def warm_up(self) -> None:
        pass

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> StageResult:
        text, cited = settle_answer(state.text, state.evidence, state.cited, trace, abstained=state.abstained)
        # only a change is a write: an unchanged answer keeps its objects
        if text != state.text:
            state.text = text
        if cited != state.cited:
            state.cited = cited
        return candidates


def closing_stages(calibration: CalibrationConfig, *, sieve: bool) -> list[Stage]:
    """The closing stages of a run (:data:`ragsieve.sieve.state.CLOSING_STAGES`, in that
    order): ``confidence`` only in the sieve."""
    out: list[Stage] = [ConfidenceStage()] if sieve else []
    return [*out, CalibrationStage(calibration), SettleStage()]
