"""Stage ``verify``: check each answer sentence against the evidence it cites, then accept,
regenerate once with only the supported evidence, or abstain; the answer's confidence."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from ragsieve.config import SieveConfig
from ragsieve.sieve.generate import Generator
from ragsieve.sieve.state import PipelineState, first_sentence
from ragsieve.types import ClaimVerdict, SearchHit, Trace

_DECLINE_RE = re.compile(
    r"\b(i don'?t know|i do not know|(?:does|do) not (?:contain|mention|provide|say|specify|include)|"
    r"no information|not enough information|cannot (?:answer|determine|be determined)|"
    r"can'?t (?:answer|determine)|unable to (?:answer|determine))\b",
    re.IGNORECASE,
)


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
    """Check each answer sentence against its cited evidence, then accept, regenerate once
    with only the supported evidence, or abstain with what the evidence does and does not say.

    Reads ``state.text``, ``state.evidence``, ``state.cited``, ``state.relevance`` and
    ``state.relevance_labels``; writes ``state.claims``, ``state.confidence`` (and on
    abstention ``state.text``, ``state.abstained``, ``state.abstain_reason``), ``verify``
    records per sentence, ``regenerate`` and ``abstain`` records. Set by ``sieve.claim_judge``,
    ``sieve.support_threshold``, ``sieve.regenerate`` and ``sieve.min_confidence``."""

    name = "verify"

    def __init__(self, claim_judge: Callable[[], Any], generator: Generator, sieve: SieveConfig) -> None:
        self.claim_judge = claim_judge
        self.generator = generator
        self.sieve = sieve

    def warm_up(self) -> None:
        self.claim_judge().warm_up()

    def _verify(self, state: PipelineState) -> list[ClaimVerdict]:
        from ragsieve.verify import verify_answer

        return verify_answer(state.text, state.evidence, self.claim_judge(), self.sieve.support_threshold)

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
            )

    def _abstain(self, state: PipelineState, trace: Trace, reason: str, claims: Sequence[ClaimVerdict]) -> None:
        unsupported = [c.sentence for c in claims if not c.supported]
        supported = [c.sentence for c in claims if c.supported]
        ev = state.evidence[0] if state.evidence else None
        says = (
            f'The evidence ({ev.chunk.id}) says: "{first_sentence(ev.chunk.text)}"' if ev else "There was no evidence."
        )
        if supported:
            says += " It supports: " + " ".join(supported)
        missing = f' It does not support: "{unsupported[0]}"' if unsupported else ""
        state.text = f"I can't give an answer the evidence supports. {says}{missing}"
        state.abstained, state.abstain_reason = True, reason
        trace.record("abstain", check="verify", reason=reason)

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        sc = self.sieve
        relevance = self._relevance(state)
        if not state.evidence:
            # Closed book (need stage): nothing to check against; the model's own likelihood of
            # its answer stands in for support so confidence still orders answers.
            state.claims = self._verify(state)
            state.confidence = self.generator.answer_likelihood(question, state.text)
            trace.record("verify", attempt=0, skipped=True, reason="answered without evidence: nothing to verify")
            return candidates
        if declines(state.text):
            state.claims = []
            state.confidence = 0.0
            self._abstain(state, trace, "generate: the model found no answer in the evidence", [])
            return candidates
        claims = self._verify(state)
        self._record(trace, claims, 0)
        if claims and not all(c.supported for c in claims) and sc.regenerate:
            supported_ids = [cid for c in claims if c.supported for cid in (c.cited_ids or state.cited)]
            if not supported_ids:
                supported_ids = [
                    h.chunk.id for h in state.evidence if state.relevance_labels.get(h.chunk.id) == "relevant"
                ]
            keep = [h for h in state.evidence if h.chunk.id in set(supported_ids)]
            if keep and [h.chunk.id for h in keep] != [h.chunk.id for h in state.evidence]:
                trace.record(
                    "regenerate",
                    reason=f"{sum(not c.supported for c in claims)} of {len(claims)} sentences unsupported",
                    evidence=[h.chunk.id for h in keep],
                )
                text, cited = self.generator(
                    question, keep, trace, record_as="regenerate_generate", sink=state.token_sink
                )
                state.evidence, state.text, state.cited = keep, text, cited
                relevance = self._relevance(state)
                if declines(text):
                    self._abstain(
                        state, trace, "regenerate: the model found no answer in the supported evidence", claims
                    )
                    state.claims, state.confidence = claims, answer_confidence(claims, relevance)
                    return candidates
                claims = self._verify(state)
                self._record(trace, claims, 1)
            else:
                trace.record("regenerate", skipped=True, reason="no smaller supported evidence set to answer from")
        state.claims = claims
        state.confidence = answer_confidence(claims, relevance)
        supported = [c for c in claims if c.supported]
        if not claims:
            self._abstain(state, trace, "verify: the answer is empty", claims)
        elif not supported:
            self._abstain(state, trace, f"verify: none of {len(claims)} answer sentences is supported", claims)
        elif state.confidence is not None and state.confidence < sc.min_confidence:
            self._abstain(state, trace, f"verify: confidence {state.confidence:.2f} < {sc.min_confidence}", claims)
        elif len(supported) < len(claims):
            state.text = " ".join(c.sentence for c in supported)
            trace.record(
                "verify",
                removed=[c.sentence for c in claims if not c.supported],
                reason="unsupported sentences removed from the answer",
            )
        return candidates
