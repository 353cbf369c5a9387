"""Stage ``generate``: the answer from the selected evidence, with ``[n]`` citations mapped
to chunk ids (markers, else similarity attribution), and a yes or no read from the model's
log-probabilities for polar questions when ``generation.polar_answers = "label"``.

Every reply is cleaned (:func:`ragsieve.generate.cleanup.clean_answer`: "The answer is:",
echoed prompt sections, numbered fragments, citation debris) before it is cited, verified or
shown; the ``generate`` record says what was removed."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from ragsieve.config import GenerationConfig
from ragsieve.errors import RagsieveError
from ragsieve.generate.answer import build_answer_messages, cite_evidence
from ragsieve.generate.cleanup import clean_answer, opened_with_label
from ragsieve.generate.polar import is_polar_question, polar_label, with_polar_label
from ragsieve.llm.base import LLM, ChatMessage, Generation, generate_streaming
from ragsieve.sieve.state import PipelineState, TokenSink
from ragsieve.text import trim_repetition
from ragsieve.types import SearchHit, Trace
from ragsieve.voices import one_per_voice

logger = logging.getLogger(__name__)


class Generator:
    """Answers from evidence with the LLM; shared by the ``generate`` stage and the ``verify``
    stage's one regeneration."""

    def __init__(self, llm: Callable[[], LLM], generation: GenerationConfig, embedder: Callable[[], Any]) -> None:
        self.llm = llm
        self.generation = generation
        self.embedder = embedder

    def __call__(
        self,
        question: str,
        evidence: list[SearchHit],
        trace: Trace,
        record_as: str = "generate",
        *,
        instruction: str = "",
        state: PipelineState | None = None,
        sink: TokenSink | None = None,
    ) -> tuple[str, list[str]]:
        """Answer from ``evidence`` and return the cleaned text with the cited chunk ids.

        ``instruction`` is added to the answer prompt (the responsiveness retry says what the
        first reply got wrong). ``state``, when given, learns whether the raw reply opened with
        an evidence label (``state.opened_with_label``), which cleanup removes but the
        responsiveness check needs to recognise a pasted passage. ``sink`` gets the raw text
        pieces as the LLM generates them (before trimming, cleanup and citation mapping)."""
        llm = self.llm()
        gc = self.generation
        messages = build_answer_messages(question, evidence, gc.max_evidence_chars)
        if instruction:
            from ragsieve.verify.responsive import add_instruction

            messages = add_instruction(messages, instruction)
        out = self._generate(llm, messages, record_as, sink)
        trace.count_llm(out.prompt_tokens, out.completion_tokens)
        raw = out.text.strip()
        trimmed = trim_repetition(raw, gc.repetition_ngram) if gc.trim_repetition else raw
        cleaned = clean_answer(trimmed, question)
        text = cleaned.text
        if state is not None:
            state.opened_with_label = opened_with_label(raw)
        polar: dict[str, Any] = {}
        if gc.polar_answers == "label" and is_polar_question(question):
            text, polar = self._label_polar(llm, messages, text)
        cited, method, similarities = cite_evidence(text, evidence, self.embedder())
        trace.record(
            record_as,
            **polar,
            trimmed_repetition=len(raw) - len(trimmed),
            cleanup=cleaned.changes,
            removed=cleaned.removed,
            **({"instruction": instruction} if instruction else {}),
            prompt_tokens=out.prompt_tokens,
            completion_tokens=out.completion_tokens,
            finish_reason=out.finish_reason,
            draft=text,  # what this generation said, so a renderer can show a withdrawn draft
            citation_method=method,
            attribution=[{"id": cid, "similarity": round(s, 4)} for cid, s in similarities],
            cited=cited,
        )
        return text, cited

    def _generate(self, llm: LLM, messages: list[ChatMessage], record_as: str, sink: TokenSink | None) -> Generation:
        """One generation; streamed piece by piece into ``sink`` when there is one."""
        gc = self.generation
        if sink is None:
            return llm.generate(messages, max_tokens=gc.max_tokens, temperature=gc.temperature)
        return generate_streaming(
            llm, messages, lambda piece: sink(piece, record_as), max_tokens=gc.max_tokens, temperature=gc.temperature
        )

    @staticmethod
    def _label_polar(llm: LLM, messages: list[ChatMessage], text: str) -> tuple[str, dict[str, Any]]:
        """``text`` opening with the model's log-probability choice of yes or no, and the trace
        fields that say so; a backend that cannot score prompts leaves the reply as sampled."""
        try:
            label = polar_label(llm, messages)
        except RagsieveError as exc:  # a server without prompt log-probabilities
            logger.info("no yes/no label for a polar question: %s", exc)
            return text, {"polar": {"label": None, "reason": str(exc)[:200]}}
        labelled, added = with_polar_label(text, label.label)
        return labelled, {"polar": {"label": label.label, "margin": round(label.margin, 4), "added": added}}

    def answer_likelihood(self, question: str, text: str, evidence: Sequence[SearchHit] = ()) -> float | None:
        """exp(mean token log-prob) of an answer under the model, given the answer prompt built
        from ``evidence`` (none: the closed-book prompt); one scoring pass."""
        if not text.strip():
            return None
        llm = self.llm()
        scorer = getattr(llm, "continuation_logprobs", None)
        if not callable(scorer):  # a backend (or test double) that cannot score text
            return None
        messages = build_answer_messages(question, list(evidence), self.generation.max_evidence_chars)
        try:
            score = scorer(messages, [text])[0]
        except RagsieveError as exc:  # a server without prompt log-probabilities
            logger.info("no answer likelihood for the answer: %s", exc)
            return None
        return round(math.exp(score.mean_logprob), 6)


class GenerateStage:
    """Answer from the evidence with ``[n]`` citations (closed book when there is none).

    Reads the candidates (the selected evidence), ``state.retrieve`` and ``state.same_source``
    (the generator is given at most one passage per voice: the best-ranked member, see
    :func:`ragsieve.voices.one_per_voice`); writes ``state.evidence``,
    ``state.text``, ``state.cited`` and a ``generate`` record (tokens, citations, attribution).
    Set by ``generation`` and ``llm``."""

    name = "generate"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ("conflict_report", "same_source")
    writes: tuple[str, ...] = ("evidence", "text", "cited", "opened_with_label", "conflict_message")
    emits: tuple[str, ...] = ()

    def __init__(self, generator: Generator, *, announce_conflict: bool = False) -> None:
        self.generator = generator
        # without a verify stage the generate stage opens the answer with the conflict
        # stage's disagreement statement (verify does it after its checks otherwise)
        self.announce_conflict = announce_conflict

    def warm_up(self) -> None:
        pass

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        evidence = candidates if state.retrieve else []
        if state.same_source:
            # whatever chose the evidence (a custom stage list may have no select stage), one
            # voice speaks once to the generator
            evidence, stands_for = one_per_voice(evidence, state.same_source)
            for cid, voice in stands_for.items():
                trace.decide("generate", cid, "dropped", f"one voice with {voice}, which the generator is given")
        text, cited = self.generator(question, evidence, trace, state=state, sink=state.token_sink)
        state.evidence, state.text, state.cited = list(evidence), text, cited
        if self.announce_conflict:
            from ragsieve.sieve.conflict import announce_conflict

            announce_conflict(state)
        return candidates
