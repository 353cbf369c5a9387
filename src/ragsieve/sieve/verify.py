"""Stage ``verify``: check that the answer answers the question (responsiveness: regenerate
once with an instruction; a reply that still pastes a passage is replaced by the passage's
sentence that states the value asked for, else abstain), check each answer sentence against the
evidence it cites (support judge and value grounding), withdraw a draft that contradicts its
evidence (the cited passage answers with another value of the asked kind: "the cited passage [1]
says 1999, not 2014"), then accept, regenerate once with only the supported evidence, or abstain
saying what the evidence covers; the answer's confidence."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, get_args

from ragsieve.config import VerifyConfig
from ragsieve.options import UnresponsiveReason, is_veto
from ragsieve.sieve.conflict import announce_conflict, conflict_statement
from ragsieve.sieve.generate import Generator
from ragsieve.sieve.state import Abstain, PipelineState, StageResult, compare
from ragsieve.text.readings import reader_signals
from ragsieve.types import ClaimVerdict, SearchHit, Trace

if TYPE_CHECKING:
    from ragsieve.text.reader import ExtractiveReader
    from ragsieve.values import Value

_DECLINE_RE = re.compile(
    r"\b(i don'?t know|i do not know|(?:does|do) not (?:contain|mention|provide|say|specify|include)|"
    r"no information|not enough information|cannot (?:answer|determine|be determined)|"
    r"can'?t (?:answer|determine)|unable to (?:answer|determine))\b",
    re.IGNORECASE,
)


# The ``responsive`` record's ``attempt`` for an answer extracted from a pasted passage, and the
# streamed generation name (``Token.attempt``) under which that answer replaces the paste.
EXTRACTED = "extracted"
UNRESPONSIVE_REASONS: tuple[str, ...] = get_args(UnresponsiveReason)
EXTRACTED_ATTEMPT = "responsive_extract"


def declines(text: str) -> bool:
    """Whether the generator itself said the evidence has no answer."""
    return bool(_DECLINE_RE.search(text))


def answer_confidence(claims: Sequence[ClaimVerdict], relevance: float | None) -> float | None:
    """Geometric mean of the claims' mean support and the best evidence relevance: low when
    either the answer is unsupported or the evidence is off-topic, so it orders answers for
    risk-coverage curves. Either part alone when the other check did not run."""
    support = sum(c.score for c in claims) / len(claims) if claims else None
    if support is None:
        return None if relevance is None else round(relevance, 6)
    if relevance is None:
        return round(support, 6)
    return round(math.sqrt(max(support, 0.0) * max(relevance, 0.0)), 6)


class VerifyStage:
    """Check that the answer answers the question, then each answer sentence against its cited
    evidence; accept, regenerate once with only the supported evidence, or abstain saying what
    the evidence covers.

    Reads ``state.text``, ``state.evidence``, ``state.cited``, ``state.relevance``,
    ``state.relevance_labels``, ``state.opened_with_label``,
    ``state.conflict_report`` (named in an abstention) and
    ``state.conflict_message``; writes ``state.claims``, ``state.confidence``, the ``verify.*``
    signals (support, value grounding, responsiveness) and, on abstention, returns an
    :class:`~ragsieve.sieve.state.Abstain`; ``responsive``
    records per attempt (``attempt = "extracted"`` for an answer extracted from a pasted
    passage, with its ``position``, ``chunk_id`` and ``sentence``), ``verify`` records per
    sentence (score, value failures, evidence values), a ``verify`` record with
    ``contradiction`` (and ``replaced`` when a contradicted name was answered with the cited
    passage's sentence), ``regenerate`` and ``abstain`` records.
    Set by ``stages.verify`` (:class:`ragsieve.config.VerifyConfig`: the claim judge, support
    threshold, value grounding, responsiveness and its checker's thresholds, extraction from a
    paste, regeneration and the confidence floor)."""

    name = "verify"
    reads: tuple[str, ...] = ("text", "evidence", "cited")
    uses: tuple[str, ...] = ("relevance", "relevance_labels", "opened_with_label", "conflict_report", "must_keep",
                              "readings")
    writes: tuple[str, ...] = (
        "claims", "confidence", "text", "cited", "evidence", "conflict_message", "signals", "withdrawal",
        "opened_with_label",  # a regeneration's reply, as the generate stage's
    )
    # the graded signals it leaves (declared in ragsieve.signals), one flag per way of not answering
    emits: tuple[str, ...] = (
        "verify.responsive", *(f"verify.{reason}" for reason in UNRESPONSIVE_REASONS), "verify.responsive_retries",
        "verify.extracted", "verify.declined", "verify.support_mean", "verify.support_min", "verify.supported_share",
        "verify.values_grounded", "verify.value_failure", "verify.value_other_fact", "verify.contradiction",
        "verify.regenerated", "verify.withdraw",
        "reader.answer_score", "reader.no_answer_top", "reader.draft_matches_reader",
    )

    def __init__(
        self,
        claim_judge: Callable[[], Any],
        generator: Generator,
        config: VerifyConfig,
        vetoes: Collection[str] | None = None,
        reader: ExtractiveReader | None = None,
    ) -> None:
        from ragsieve.verify.responsive import ResponsivenessChecker, typed_values

        self.claim_judge = claim_judge
        self.generator = generator
        self.config = config
        # which withdrawals end the run on their own (None: every one, as without a decide
        # stage); any other is left to the decide stage as ``state.withdrawal``
        self.vetoes = None if vetoes is None else frozenset(vetoes)
        self.checker = ResponsivenessChecker(extract=typed_values, **config.checker_options())
        # the extractive reader ([reading] reader = "minilm"): the contradiction check reads the
        # cited passages' answers with it, and its readings of the evidence become the reader.*
        # signals; None reads by the rules alone
        self.reader = reader

    def warm_up(self) -> None:
        self.claim_judge().warm_up()
        if self.reader is not None:
            self.reader.warm_up()

    def _verify(self, state: PipelineState) -> list[ClaimVerdict]:
        from ragsieve.verify import verify_answer

        return verify_answer(
            state.text,
            state.evidence,
            self.claim_judge(),
            self.config.support_threshold,
            value_grounding=self.config.value_grounding,
            question=state.question,
            tie_values=self.config.tie_values == "fail",
        )

    def _responsive(self, question: str, trace: Trace, state: PipelineState) -> Abstain | None:
        """``None`` when the answer answers the question, after up to ``stages.verify.responsive_retries``
        regenerations with an instruction naming what was wrong; when none does, the abstention
        saying what the evidence covers."""
        from ragsieve.verify.responsive import retry_instruction

        for attempt in range(self.config.responsive_retries + 1):
            labelled = bool(state.opened_with_label) or None
            verdict = self.checker.check(
                question, state.text, state.evidence, opened_with_label=labelled, readings=state.readings
            )
            trace.record("responsive", attempt=attempt, **verdict.to_dict())
            state.signal("verify.responsive", verdict.ok)
            for reason in UNRESPONSIVE_REASONS:
                # which way the reply fails to answer: the decision weighs each on its own
                state.signal(f"verify.{reason}", verdict.reason == reason)
            state.signal("verify.responsive_retries", attempt / max(self.config.responsive_retries, 1))
            if verdict.ok or verdict.reason == "abstention":
                # a reply that says it cannot answer is the decline check's, not a retry's
                return None
            if attempt < self.config.responsive_retries:
                instruction = retry_instruction(verdict)
                text, cited = self.generator(
                    question,
                    state.evidence,
                    trace,
                    record_as="responsive_generate",
                    instruction=instruction,
                    state=state,
                )
                state.text, state.cited = text, cited
        extract = self.config.extract_on_paste
        if verdict.reason == "pasted_passage" and extract and self._extract(question, trace, state):
            state.signal("verify.extracted", True)
            return None
        state.claims, state.confidence = [], 0.0
        abstain = self._abstain(state, f"responsive: {verdict.reason}", [])
        return self._withdraw("responsive", state, trace, abstain, reason=verdict.reason)

    def _extract(self, question: str, trace: Trace, state: PipelineState, stating: Value | None = None) -> bool:
        """After every attempt pasted a passage: answer with the evidence sentence that states
        the value asked for (:func:`ragsieve.verify.responsive.extract_from_paste`), cited as a
        generated answer cites, when it passes the responsiveness check; the support and value
        checks then verify it like any answer. Replaces text already streamed with it. Returns
        whether it answers (``False`` leaves the state as it was, for the abstention). With
        ``stating`` (a contradicted draft's evidence value), only a sentence stating it answers."""
        from ragsieve.generate.answer import parse_citations
        from ragsieve.values import find_in
        from ragsieve.verify.responsive import EXTRACTABLE_KINDS, checked_extraction

        kind = state.readings.question(question).kind
        if kind not in EXTRACTABLE_KINDS:
            return False  # a yes/no question needs a stance, which a copied sentence does not give
        checked = checked_extraction(question, state.evidence, state.text, self.checker, state.readings)
        if checked is None:
            trace.record(
                "responsive",
                attempt=EXTRACTED,
                ok=False,
                reason="nothing_extracted",
                detail=(
                    "no evidence passage is about the question's entities and "
                    + (f"states a {kind} near its terms" if kind != "description" else "has a sentence on its terms")
                ),
            )
            return False
        found, text, verdict = checked
        trace.record(
            "responsive",
            attempt=EXTRACTED,
            **verdict.to_dict(),
            position=found.position,
            chunk_id=found.hit.chunk.id if isinstance(found.hit, SearchHit) else "",
            sentence=found.sentence,
        )
        if not verdict.ok or (stating is not None and find_in(stating, found.sentence) is None):
            return False
        state.text, state.cited = text, parse_citations(text, state.evidence)
        state.opened_with_label = False
        if state.token_sink is not None:
            # the streamed paste is withdrawn and the extracted answer streamed in its place
            state.token_sink(text, EXTRACTED_ATTEMPT)
        return True

    def _relevance(self, state: PipelineState) -> float | None:
        scores = [state.relevance[h.chunk.id] for h in state.evidence if h.chunk.id in state.relevance]
        return max(scores) if scores else None

    def _record(self, trace: Trace, claims: Sequence[ClaimVerdict], attempt: int) -> None:
        for c in claims:
            trace.record(
                "verify",
                attempt=attempt,
                sentence=c.sentence,
                supported=c.supported,
                score=round(c.score, 4),
                cited=c.cited_ids,
                against=c.against,
                judge=c.judge,
                values_checked=c.values_checked,
                value_failures=c.value_failures,
                evidence_values=c.evidence_values,
            )

    def _abstain(self, state: PipelineState, reason: str, claims: Sequence[ClaimVerdict]) -> Abstain:
        """Abstain in plain sentences: that no supported answer was found and what the evidence
        covers (its titles or sources, never a quoted passage), with the sentences it does
        support when there are any. When the conflict stage found sources that disagree
        (``stages.conflict.policy = "both"``), the abstention names each side's answer and sources
        instead: the evidence does state answers, only the model's reply was not one of them."""
        from ragsieve.verify.responsive import abstention_message

        supported = [c.sentence for c in claims if c.supported]
        report = state.conflict_report
        if report is not None:
            # sources only, no [n] marks: an abstention cites nothing
            covers = conflict_statement(report, [])
        else:
            covers = abstention_message(state.question, state.evidence)
        text = "I can't give an answer the evidence supports. " + covers
        if supported:
            text += " It does support: " + " ".join(supported)
        return Abstain("verify", reason, text, state.confidence)

    def _withdraw(
        self, kind: str, state: PipelineState, trace: Trace, abstain: Abstain, reason: str | None = None
    ) -> Abstain | None:
        """``abstain`` when ``kind`` (or ``kind.reason``, e.g. ``responsive.wrong_kind``) is a
        veto; otherwise record it for the decide stage (the draft stays) and return ``None``."""
        state.signal("verify.withdraw", True)
        if self.vetoes is None or is_veto(kind, reason, self.vetoes):
            return abstain
        state.withdrawal = abstain
        fired = f"{kind}.{reason}" if reason else kind
        trace.record("verify", withdraw=fired, reason=abstain.reason, vetoed=False)
        return None

    def _contradiction(
        self, question: str, trace: Trace, state: PipelineState, claims: list[ClaimVerdict]
    ) -> tuple[Abstain | None, list[ClaimVerdict]]:
        """``stages.verify.contradiction``: where a cited passage answers the question with another
        value of the asked kind than the answer states
        (:func:`ragsieve.verify.grounding.find_contradiction`). Leaves the signal
        ``verify.contradiction``. A veto (its family listed in ``decide.vetoes``, or no decide stage):
        a name is replaced by the passage's sentence that states the passage's name, cited, when it
        answers the question (the extraction a pasted passage gets), and verified again; otherwise the
        draft is withdrawn naming both values. Not a veto: a withdrawal left to the decide stage,
        whose caveat names both values. Returns the abstention (or ``None``) and the claims."""
        from ragsieve.verify.grounding import find_contradiction

        if not self.config.contradiction or not self.config.value_grounding:
            return None, claims
        cited_ids = set(state.cited)
        cited = [(i, h) for i, h in enumerate(state.evidence, 1) if h.chunk.id in cited_ids]
        cited = cited or list(enumerate(state.evidence, 1))  # an answer citing nothing is held to all of it
        found = find_contradiction(
            question, state.text, [h.chunk.text for _, h in cited], positions=[i for i, _ in cited],
            readings=state.readings, reader=self.reader,
        )
        state.signal("verify.contradiction", found is not None)
        if found is None:
            return None, claims
        said = found.explain()
        veto = self.vetoes is None or is_veto("contradiction", found.family, self.vetoes)
        trace.record("verify", contradiction=found.to_dict(), reason=said, vetoed=veto)
        if veto and found.kind == "name":
            draft = state.text
            if self._extract(question, trace, state, stating=found.evidence_value):
                claims = self._verify(state)
                self._record(trace, claims, 2)
                self._signals(state, claims)
                trace.record("verify", replaced=draft, by=state.text, reason=f"the draft was withdrawn: {said}")
                return None, claims
        reason = f"verify: {said}, so the answer contradicts its own evidence"
        text = (
            f"I can't give the draft answer {found.draft}: {said}. "
            "An answer that contradicts the evidence it cites is withdrawn."
        )
        abstain = Abstain("verify", reason, text, state.confidence)
        return self._withdraw("contradiction", state, trace, abstain, reason=found.family), claims

    def _tie(self, state: PipelineState, trace: Trace, claims: Sequence[ClaimVerdict]) -> Abstain | None:
        """``stages.verify.tie_values = "caveat"``: the answer's values that the evidence states
        only about another fact than the question asks. Leaves the signal
        ``verify.value_other_fact`` (the share of the answer's sentences with such a value) and,
        when there is one, asks to withdraw the draft naming both values: what the cited passage
        says for the asked fact, and what it gives the draft's value about ("the cited passage [1]
        says 1999 for this, and gives 1931 only about ..."). The decide stage answers with that
        caveat or abstains below its threshold (a veto only when ``decide.vetoes`` lists
        "value_tie": its precision as a veto, measured on outside sets, is below 0.9; without a
        decide stage it is recorded only)."""
        if self.config.tie_values != "caveat" or not self.config.value_grounding or not claims:
            return None
        elsewhere = [(c, f) for c in claims for f in c.other_facts]
        state.signal("verify.value_other_fact", len({id(c) for c, _ in elsewhere}) / len(claims))
        if not elsewhere:
            return None
        stated = "; ".join(self._tie_statement(state, c, f) for c, f in elsewhere)
        reason = f"value tie: {stated}, not about what the question asks"
        named = all(f.get("evidence_answer") for _, f in elsewhere)
        abstain = self._abstain_tie(state, reason, [str(f["text"]) for _, f in elsewhere], named)
        if self.vetoes is not None and "value_tie" not in self.vetoes:
            return self._withdraw("value_tie", state, trace, abstain)
        if self.vetoes is not None:
            return abstain  # listed in ``decide.vetoes``: it ends the run
        trace.record("verify", value_tie=reason, vetoed=False)
        return None

    @staticmethod
    def _tie_statement(state: PipelineState, claim: ClaimVerdict, tie: dict[str, Any]) -> str:
        """One value stated about another fact, in words: "the cited passage [1] says 1999 for this,
        and gives 1931 only about "Samuel Kistler made the first aerogels around 1931 ..."" (the
        passage's number is that of the evidence text :func:`ragsieve.verify.grounding.ground_values`
        found the asked fact's value in, among those the sentence cites)."""
        value, other = tie["text"], tie["other_fact"]
        answer, index = tie.get("evidence_answer"), tie.get("evidence_index")
        if not answer:
            return f'the evidence states {value} about "{other}"'
        ids = claim.cited_ids or [h.chunk.id for h in state.evidence]
        numbers = {h.chunk.id: i for i, h in enumerate(state.evidence, 1)}
        position = numbers.get(ids[index]) if isinstance(index, int) and 0 <= index < len(ids) else None
        where = f"the cited passage [{position}]" if position is not None else "the cited evidence"
        return f'{where} says {answer} for this, and gives {value} only about "{other}"'

    def _abstain_tie(self, state: PipelineState, reason: str, drafted: Sequence[str], named: bool) -> Abstain:
        """The abstention for a value stated about another fact: the draft's value, what the
        evidence states for the asked fact and what it gives the value about; then, unless that
        named what the evidence states for the asked fact (``named``), what the evidence covers."""
        from ragsieve.verify.grounding import and_list
        from ragsieve.verify.responsive import abstention_message

        stated = reason.removeprefix("value tie: ")
        text = f"I can't give the draft answer {and_list(drafted)}: {stated}. " + (
            "An answer with a value its evidence gives only about another fact is withdrawn."
            if named
            else abstention_message(state.question, state.evidence)
        )
        return Abstain("verify", f"verify: {reason}", text, state.confidence)

    def _signals(self, state: PipelineState, claims: Sequence[ClaimVerdict]) -> None:
        """The support and value-grounding signals of the answer's sentences."""
        if not claims:
            return
        scores = [c.score for c in claims]
        state.signal("verify.support_mean", sum(scores) / len(scores))
        state.signal("verify.support_min", min(scores))
        state.signal("verify.supported_share", sum(c.supported for c in claims) / len(claims))
        checked = [c for c in claims if c.values_checked]
        if checked:
            state.signal("verify.values_grounded", sum(not c.value_failures for c in checked) / len(checked))
        state.signal("verify.value_failure", any(c.value_failures for c in claims))

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> StageResult:
        sc = self.config
        relevance = self._relevance(state)
        if not state.evidence:
            # Closed book (need stage): nothing to check against; the model's own likelihood of
            # its answer stands in for support so confidence still orders answers.
            state.claims = self._verify(state)
            state.confidence = self.generator.answer_likelihood(question, state.text)
            trace.record("verify", attempt=0, skipped=True, reason="answered without evidence: nothing to verify")
            return candidates
        declined = declines(state.text)
        state.signal("verify.declined", declined)
        if declined:
            state.claims = []
            state.confidence = 0.0
            return self._abstain(state, "generate: the model found no answer in the evidence", [])
        if sc.responsive:
            unresponsive = self._responsive(question, trace, state)
            if unresponsive is not None:
                return unresponsive
        claims = self._verify(state)
        self._record(trace, claims, 0)
        self._signals(state, claims)
        if claims and not all(c.supported for c in claims) and sc.regenerate:
            supported_ids = [cid for c in claims if c.supported for cid in (c.cited_ids or state.cited)]
            if not supported_ids:
                supported_ids = [
                    h.chunk.id for h in state.evidence if state.relevance_labels.get(h.chunk.id) == "relevant"
                ]
            # every side of a disagreement stays (the conflict stage's must-keep passages)
            keep = [h for h in state.evidence if h.chunk.id in set(supported_ids) | set(state.must_keep)]
            if keep and [h.chunk.id for h in keep] != [h.chunk.id for h in state.evidence]:
                trace.record(
                    "regenerate",
                    reason=f"{sum(not c.supported for c in claims)} of {len(claims)} sentences unsupported",
                    evidence=[h.chunk.id for h in keep],
                )
                state.signal("verify.regenerated", True)
                text, cited = self.generator(
                    question, keep, trace, record_as="regenerate_generate", sink=state.token_sink
                )
                state.evidence, state.text, state.cited = keep, text, cited
                relevance = self._relevance(state)
                if declines(text):
                    state.claims, state.confidence = claims, answer_confidence(claims, relevance)
                    reason = "regenerate: the model found no answer in the supported evidence"
                    return self._abstain(state, reason, claims)
                claims = self._verify(state)
                self._record(trace, claims, 1)
                self._signals(state, claims)
            else:
                trace.record("regenerate", skipped=True, reason="no smaller supported evidence set to answer from")
        state.claims = claims
        state.confidence = answer_confidence(claims, relevance)
        if not claims:
            return self._abstain(state, "verify: the answer is empty", claims)
        if self.reader is not None:
            # the reader's scores ride along as signals (the contradiction check reads its answers)
            read = state.readings.passages(question, state.evidence, self.reader)
            for name, value in reader_signals(read, state.text, state.cited).items():
                state.signal(name, value)
        contradicted, claims = self._contradiction(question, trace, state, claims)
        if contradicted is not None:
            return contradicted
        state.claims = claims
        state.confidence = answer_confidence(claims, self._relevance(state))
        supported = [c for c in claims if c.supported]
        withdrawn: Abstain | None = None
        if not supported and state.withdrawal is not None:
            # the contradiction's withdrawal says more than "unsupported": it stays, unless
            # "unsupported" is a veto
            reason = f"verify: none of {len(claims)} answer sentences is supported"
            if self.vetoes is None or is_veto("unsupported", None, self.vetoes):
                withdrawn = self._abstain(state, reason, claims)
        elif not supported:
            reason = f"verify: none of {len(claims)} answer sentences is supported"
            withdrawn = self._withdraw("unsupported", state, trace, self._abstain(state, reason, claims))
        elif state.confidence is not None and state.confidence < sc.min_confidence:
            reason = f"verify: confidence {compare(state.confidence, sc.min_confidence)}"
            withdrawn = self._withdraw("min_confidence", state, trace, self._abstain(state, reason, claims))
        if withdrawn is None and state.withdrawal is None:
            withdrawn = self._tie(state, trace, supported)
        if withdrawn is not None:
            return withdrawn
        if supported and len(supported) < len(claims):
            state.text = " ".join(c.sentence for c in supported)
            trace.record(
                "verify",
                removed=[c.sentence for c in claims if not c.supported],
                reason="unsupported sentences removed from the answer",
            )
        # the sources disagree: the reader gets every value with its source, whatever the model
        # chose to say
        announce_conflict(state)
        return candidates
