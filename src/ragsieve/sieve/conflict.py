"""Stage ``conflict``: compare what the kept passages answer on their own, before selection.

Selection that keeps one passage of a contradicting pair throws away the signal a reader
needs, and an attacker whose copies outnumber the gold page wins a minimal cover. This stage
runs :class:`ragsieve.conflict.ConflictDetector` on the candidates the judge, the poisoning
check and the filter kept: each passage's own short answer, passages grouped by normalised
answer, independent sources counted per group (one site, one document or near-duplicate
texts count once, so N mirror copies of one changed page are one source), each source
weighed by the index's learned ``source_weights.json`` (``ragsieve importance fit``).

One answer, or answers none of which contradicts another (:func:`ragsieve.conflict.contradicts`:
values of different kinds, ``"different-kinds"``, or values that differ only inside one
document, ``"one-document"``): nothing changes. Contradicting answers (``stages.conflict.policy``):

* ``"both"`` (default): the best-ranked passage of every answer group goes into
  ``state.must_keep`` so the ``select`` stage keeps every side, and the answer opens with
  :func:`conflict_statement` (each value with its sources and ``[n]`` citations);
* ``"abstain"``: the sieve abstains with the detector's message;
* ``"trusted"``: when one group's sources weigh at least ``trusted_margin`` times the
  runner-up's, the other groups' passages are dropped; otherwise as ``"both"``.

Passages the judge scored below its lower threshold (an entity rescue) are not compared: an
off-topic passage does not create a conflict. Every passage's answer, every group with its
sources and weight, and the decision are in the ``conflict`` record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ragsieve.config import ConflictConfig
from ragsieve.conflict import ConflictDetector, ConflictReport
from ragsieve.index import Index
from ragsieve.llm.base import LLM
from ragsieve.records import ConflictRecord
from ragsieve.sieve.state import Abstain, PipelineState, Ref, StageResult, compare
from ragsieve.store.protocol import Store
from ragsieve.text.passage import CONFLICT_MEANING_BAR, MIN_TERM_COVER, MeaningBar
from ragsieve.types import SearchHit, Trace

if TYPE_CHECKING:
    from ragsieve.text.reader import ExtractiveReader

# What a config may set under ``stages.conflict`` (:class:`ragsieve.config.ConflictConfig`; the
# source weights come from the index).
CONFLICT_STAGE_OPTIONS = tuple(ConflictConfig.model_fields)


def conflict_statement(report: ConflictReport, evidence: list[SearchHit]) -> str:
    """The disagreement in one sentence, cited by position in ``evidence`` (the numbering the
    answer uses): ``The sources disagree: 1931 (site-a.example [1]) vs 1947 (site-b.example [2]).``
    A group none of whose passages is in the evidence is named with its sources alone."""
    positions = {h.chunk.id: i for i, h in enumerate(evidence, 1)}
    parts = []
    for group in sorted(report.groups, key=lambda g: g.passages[0].position):
        sites = ", ".join(s.label for s in group.sources)
        marks = "".join(f"[{positions[p.chunk_id]}]" for p in group.passages if p.chunk_id in positions)
        parts.append(f"{group.answer} ({sites}{' ' + marks if marks else ''})")
    return "The sources disagree: " + " vs ".join(parts) + "."


def announce_conflict(state: PipelineState) -> None:
    """Open the answer with the disagreement statement (once, never on an abstention)."""
    report = state.conflict_report
    if state.abstained or report is None or state.conflict_message is not None:
        return
    state.conflict_message = conflict_statement(report, state.evidence)
    state.text = f"{state.conflict_message} {state.text}".strip()


class ConflictStage:
    """Detect disagreeing sources among the kept candidates and apply ``stages.conflict.policy``.

    Reads the candidates, ``state.relevance`` and ``state.same_source`` (the poisoning
    check's near-duplicate clusters, each one source); writes a ``conflict`` record (every passage's
    answer, every group with its independent sources and weight, the decision), one
    ``conflict`` decision per passage that belongs to a group, ``state.must_keep`` and
    ``state.conflict_report`` (read by :func:`announce_conflict`), ``state.conflict_record`` (the
    typed verdict the decide stage reads), or an ``abstain``
    record and the abstention. Set by ``stages.conflict`` (:class:`ragsieve.config.ConflictConfig`);
    source weights from the index. With the extractive reader (``[reading] reader = "minilm"``)
    each passage's answer is the reader's (:class:`ragsieve.conflict.ConflictDetector`)."""

    name = "conflict"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ("relevance", "same_source", "readings")
    writes: tuple[str, ...] = ("must_keep", "conflict_report", "conflict_record")
    emits: tuple[str, ...] = ()

    def __init__(
        self,
        config: ConflictConfig,
        index: Ref[Index | Store],
        llm: Callable[[], LLM | None],
        lower_threshold: Callable[[], float | None],
        embedder: Callable[[], Any] | None = None,
        reader: ExtractiveReader | None = None,
    ) -> None:
        self.config = config
        # the extractive reader ([reading] reader = "minilm"): each passage's answer is the
        # reader's; None reads by the rules
        self.reader = reader
        # the shared embedder (the index's, behind the pipeline's memo): read by the meaning bar
        self.embedder = embedder
        self.policy = config.policy
        self.index = index
        self.llm = llm
        self.lower_threshold = lower_threshold
        # fail on a bad option when the pipeline is built, not on the first question
        self.detector(weights={})

    def warm_up(self) -> None:
        if self.reader is not None:
            self.reader.warm_up()

    def detector(self, weights: Mapping[str, float] | None = None) -> ConflictDetector:
        """A detector with the index's current source weights (read per request: ``importance
        fit`` may rewrite them while a server runs). Given ``weights`` (the check at build time),
        no index is read and no embedder asked for."""
        meaning = self.meaning()
        embedder = None
        if weights is None:
            opened = self.index.value
            weights = (getattr(opened, "source_weights", None) if opened is not None else None) or {}
            # the literal bar embeds nothing: the embedder is asked for only when the bar is on
            embedder = self.embedder() if meaning is not None and self.embedder is not None else None
        return ConflictDetector(
            policy=self.policy,
            source_weights=weights,
            llm=self.llm() if self.config.llm else None,
            embedder=embedder,
            meaning=meaning,
            reader=self.reader,
            **self.config.detector_options(),
        )

    def meaning(self) -> MeaningBar | None:
        """The meaning bar: ``stages.conflict.meaning_cosine`` (with ``meaning_floor``, else the
        default bar's floor, else :data:`ragsieve.text.passage.MIN_TERM_COVER`) when set, else the
        library's default :data:`ragsieve.text.passage.CONFLICT_MEANING_BAR` (off)."""
        cosine, floor = self.config.meaning_cosine, self.config.meaning_floor
        if cosine is None:
            return CONFLICT_MEANING_BAR
        if floor is None:
            floor = CONFLICT_MEANING_BAR.floor if CONFLICT_MEANING_BAR is not None else MIN_TERM_COVER
        return MeaningBar(cosine, floor)

    def _min_relevance(self) -> float | None:
        given = self.config.min_relevance
        return float(given) if given is not None else self.lower_threshold()

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> StageResult:
        if not candidates:
            return candidates
        # the judge's threshold only when the judge ran (asking for it builds the judge)
        floor = self._min_relevance() if any(h.chunk.id in state.relevance for h in candidates) else None
        compared, ignored = [], []
        for h in candidates:
            score = state.relevance.get(h.chunk.id)
            if floor is not None and score is not None and score < floor:
                ignored.append({"id": h.chunk.id, "reason": f"off-topic: relevance {compare(score, floor)}"})
            else:
                compared.append(h)
        report = self.detector().detect(question, compared, state.same_source or None, state.readings)
        verdict = report.to_dict()
        trace.record("conflict", compared=[h.chunk.id for h in compared], ignored=ignored, **verdict)
        # the typed verdict later stages read (decide), the same fields as the trace record's
        state.conflict_record = ConflictRecord.from_event(verdict)
        if not report.conflict:
            return candidates
        for group in report.groups:
            for p in group.passages:
                trace.decide(
                    "conflict", p.chunk_id, "flagged", f"answers {group.answer!r} ({group.count} independent source(s))"
                )
        if report.decision == "abstain":
            reason = f"conflict: the sources give {len(report.groups)} different answers"
            return Abstain("conflict", reason, report.message, 0.0)
        if report.decision == "trusted":
            winner = report.groups[0]
            losing = {p.chunk_id for g in report.groups[1:] for p in g.passages}
            for cid in losing:
                trace.decide("conflict", cid, "dropped", f"answers against the trusted sources of {winner.answer!r}")
            kept = [h for h in candidates if h.chunk.id not in losing]
            state.must_keep = [winner.passages[0].chunk_id]
            return kept
        # "both": one passage of every answer group goes to the generator, and the answer says
        # the sources disagree
        state.must_keep = [group.passages[0].chunk_id for group in report.groups]
        state.conflict_report = report
        return candidates
