"""One question-answering pipeline: a list of stages composed from a typed config.

A stage (:class:`Stage`) takes the question, the current candidates, the trace and a small
shared :class:`PipelineState`; it returns the candidates for the next stage (or an
:class:`~ragsieve.types.Answer`, which ends the run: an abstention) and records its decisions
in the trace (``trace.record`` per stage, ``trace.decide`` per candidate a check keeps, drops
or flags).

The presets are stage lists of the same :class:`Pipeline` (``config.pipeline``):

* ``plain`` (alias ``direct``): route → retrieve → select → generate (hybrid top-k RAG);
* ``task-adaptive``: the task router, HyDE retrieval, the CRAG-style evaluator and its actions,
  generation with reflection (``ragsieve.tasks.pipeline``);
* ``sieve`` (the default): route → need → retrieve → judge → poison → filter → select →
  generate → verify, then accept, regenerate once with only the supported evidence, or abstain.

``config.ablate`` removes stages by name (:data:`ragsieve.config.SIEVE_STAGES`); every
remaining list still answers (without ``verify`` the answer is unverified, without ``need``
the pipeline always retrieves, without ``judge`` every candidate is kept, without ``select``
the top-k are used).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ragsieve.config import SIEVE_STAGES, PipelineConfig
from ragsieve.errors import ConfigError, InputError, RagsieveError
from ragsieve.generate.answer import build_answer_messages, cite_evidence, trim_repetition
from ragsieve.generate.polar import is_polar_question, polar_label, with_polar_label
from ragsieve.index import Index
from ragsieve.llm.base import LLM, ChatMessage
from ragsieve.select import Selector, TopKSelector
from ragsieve.store.protocol import Store
from ragsieve.types import Answer, ClaimVerdict, SearchHit, Trace, Verdict

logger = logging.getLogger(__name__)

PRESETS: dict[str, tuple[str, ...]] = {
    "plain": ("route", "retrieve", "select", "generate"),
    "task-adaptive": ("need", "retrieve", "judge", "generate"),
    "sieve": SIEVE_STAGES,
}


def preset_name(pipeline: str) -> str:
    return "plain" if pipeline == "direct" else pipeline


def preset_stages(config: PipelineConfig) -> list[str]:
    """The stage names ``config`` runs: its preset's list minus ``config.ablate``."""
    return [s for s in PRESETS[preset_name(config.pipeline)] if s not in config.ablate]


# ---------------------------------------------------------------------------- contract
@dataclass
class PipelineState:
    """What stages tell each other beyond the candidates (one per ``ask``)."""

    question: str
    k: int | None = None
    route: str | None = None
    where: dict[str, Any] | None = None
    task: str | None = None  # a task forced by the caller (task-adaptive), else the router's
    retrieve: bool = True  # False: answer without retrieval (need stage or --no-retrieval)
    forced_no_retrieval: bool = False
    domains: list[str] | None = None
    probe: list[SearchHit] | None = None  # hits the need stage already retrieved
    relevance: dict[str, float] = field(default_factory=dict)  # judge score per chunk id
    relevance_labels: dict[str, str] = field(default_factory=dict)
    evidence: list[SearchHit] = field(default_factory=list)  # what the generator was shown
    text: str = ""
    cited: list[str] = field(default_factory=list)
    claims: list[ClaimVerdict] = field(default_factory=list)
    abstained: bool = False
    abstain_reason: str | None = None
    confidence: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Stage(Protocol):
    """One step of :class:`Pipeline`. ``name`` is its entry in ``SIEVE_STAGES`` (what
    ``config.ablate`` removes) and its key in ``trace.timings_ms``."""

    name: str

    def warm_up(self) -> None: ...

    def run(
        self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState
    ) -> list[SearchHit] | Answer: ...


@runtime_checkable
class Judge(Protocol):
    """Scores each passage's relevance to the question in [0, 1] (the sieve's ``judge`` stage).

    ``upper``/``lower`` split scores into relevant (kept), ambiguous (kept, flagged) and
    irrelevant (dropped). :class:`EvaluatorJudge` wraps the bundled CRAG-style evaluator;
    :class:`CrossEncoderJudge` any sentence-transformers cross-encoder; a user's reranker fits
    by providing the same members and is passed as ``Pipeline(config, judge=...)``.
    """

    name: str
    upper: float
    lower: float

    def warm_up(self) -> None: ...

    def score(self, question: str, passages: Sequence[str]) -> list[float]: ...


class EvaluatorJudge:
    """The trained retrieval evaluator (``ragsieve.tasks.evaluator``) as a per-passage judge."""

    name = "evaluator"

    def __init__(self, embedder: Any = None, path: str | None = None) -> None:
        self.embedder = embedder
        self.path = path
        self.evaluator: Any = None
        self.upper = 0.62
        self.lower = 0.41

    def warm_up(self) -> None:
        if self.evaluator is None:
            from ragsieve.tasks.evaluator import TrainedRetrievalEvaluator

            ev = TrainedRetrievalEvaluator.load(self.path) if self.path else TrainedRetrievalEvaluator.bundled()
            self.evaluator, self.upper, self.lower = ev, float(ev.upper), float(ev.lower)
        if self.embedder is None:
            from ragsieve.config import EmbedderConfig
            from ragsieve.embed import load_embedder

            self.embedder = load_embedder(EmbedderConfig())
            self.embedder.warm_up()

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        self.warm_up()
        return [float(s) for s in self.evaluator.score_passages(question, list(passages), self.embedder)]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.name, "path": self.path}


class CrossEncoderJudge:
    """Any sentence-transformers ``CrossEncoder`` (a reranker) as the judge; logits go through a
    sigmoid so thresholds are probabilities.

    Example::

        cfg.sieve.judge, cfg.sieve.judge_model = "cross-encoder", "cross-encoder/ms-marco-MiniLM-L-6-v2"
    """

    name = "cross-encoder"

    def __init__(self, model: str, upper: float = 0.5, lower: float = 0.1) -> None:
        self.model = model
        self.upper = upper
        self.lower = lower
        self._encoder: Any = None

    def warm_up(self) -> None:
        if self._encoder is None:
            try:
                from sentence_transformers import CrossEncoder
            except ImportError as exc:  # pragma: no cover - optional dependency
                raise ConfigError(
                    "sieve.judge='cross-encoder' needs sentence-transformers; pip install sentence-transformers"
                ) from exc
            self._encoder = CrossEncoder(self.model)

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        self.warm_up()
        raw = self._encoder.predict([(question, p) for p in passages])
        return [float(x) if 0.0 <= float(x) <= 1.0 else 1.0 / (1.0 + math.exp(-float(x))) for x in raw]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.name, "model": self.model, "upper": self.upper, "lower": self.lower}


# ---------------------------------------------------------------------------- helpers
def _first_sentence(text: str, limit: int = 160) -> str:
    from ragsieve.ingest import split_sentences

    first = (split_sentences(text) or [text])[0].strip()
    return first if len(first) <= limit else first[: limit - 1].rsplit(" ", 1)[0] + "…"


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


# ---------------------------------------------------------------------------- stages
class _StageBase:
    name = "stage"

    def __init__(self, pipe: Pipeline) -> None:
        self.pipe = pipe

    def warm_up(self) -> None:
        pass


class RouteStage(_StageBase):
    """Which partitions to search (the domain router, or ``--route``); with ``close_margin``
    the runner-up domain is searched too when the router cannot tell the two apart."""

    name = "route"

    def __init__(self, pipe: Pipeline, default_route: str, close_margin: float | None = None) -> None:
        super().__init__(pipe)
        self.default_route = default_route
        self.close_margin = close_margin

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        if not state.retrieve:
            return candidates
        state.domains = self.pipe.resolve_domains(
            question, trace, state.route or self.default_route, close_margin=self.close_margin
        )
        return candidates


class NeedStage(_StageBase):
    """Is retrieval needed? The task router first; when it says "answer directly", the judge's
    best score over a probe retrieval decides instead, so questions about long-tail entities
    (which read like general questions) still retrieve when the index knows them.

    Why the retrieval signal rather than the model's own answer confidence: the probe reuses the
    retrieval the question needs anyway (its hits and judge scores go on to the judge stage), so
    it costs no LLM call, while a confidence signal needs a closed-book draft first. Which of
    the two separates "needs retrieval" from "does not" better has not been measured yet on
    held-out questions; the closed-book path records the model's answer likelihood as its
    confidence, so both signals are in the trace for that comparison.
    """

    name = "need"

    def __init__(self, pipe: Pipeline) -> None:
        super().__init__(pipe)
        self.classifier: Any = None

    def warm_up(self) -> None:
        if self.classifier is None and self.pipe.config.sieve.need == "auto":
            from ragsieve.tasks.classifier import TfidfTaskClassifier
            from ragsieve.tasks.labels import load_task_requests

            train = load_task_requests("train")
            self.classifier = TfidfTaskClassifier().fit([r.text for r in train], [r.label for r in train])

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        sc = self.pipe.config.sieve
        if state.forced_no_retrieval:
            trace.record("need", retrieve=False, reason="--no-retrieval")
            return candidates
        if sc.need == "always":
            trace.record("need", retrieve=True, reason="sieve.need=always")
            return candidates
        self.warm_up()
        pred = self.classifier.classify(question)
        if pred.label != "general_qa":
            trace.record("need", retrieve=True, task=pred.label, reason=f"task router: {pred.label}")
            return candidates
        probe = self.pipe.retrieve(question, trace, k=sc.candidates, domains=state.domains, where=state.where)
        scores = self.pipe.judge_scores(question, probe, state) if probe else []
        best = max(scores, default=0.0)
        state.probe = probe
        if best >= sc.need_threshold:
            trace.record(
                "need",
                retrieve=True,
                task=pred.label,
                signal="retrieval",
                best_relevance=round(best, 4),
                reason=f"task router says answer directly, but the index has a relevant passage "
                f"({best:.2f} >= {sc.need_threshold})",
            )
            return candidates
        if sc.closed_book == "never":
            trace.record(
                "need",
                retrieve=True,
                task=pred.label,
                signal="retrieval",
                best_relevance=round(best, 4),
                reason=f"task router says answer directly and no passage is relevant ({best:.2f} < "
                f"{sc.need_threshold}), but the sieve answers from evidence only (sieve.closed_book=never): "
                "the judge decides",
            )
            return candidates
        state.retrieve = False
        state.probe = None
        trace.record(
            "need",
            retrieve=False,
            task=pred.label,
            signal="retrieval",
            best_relevance=round(best, 4),
            reason=f"task router says answer directly and no passage is relevant ({best:.2f} < {sc.need_threshold})",
        )
        return []


class RetrieveStage(_StageBase):
    """Hybrid search (source weights applied when the index has them and the config asks)."""

    name = "retrieve"

    def __init__(self, pipe: Pipeline, n: int | None = None) -> None:
        super().__init__(pipe)
        self.n = n

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        if not state.retrieve:
            trace.record("retrieve", skipped=True, reason="--no-retrieval" if state.forced_no_retrieval else "need")
            return []
        if state.probe is not None:
            trace.record("retrieve", reused="need probe", ids=[h.chunk.id for h in state.probe])
            return state.probe
        return self.pipe.retrieve(question, trace, k=self.n or state.k, domains=state.domains, where=state.where)


def names_entity(entity: str, hit: SearchHit) -> bool:
    """True when the candidate's text contains ``entity`` or its title is part of it (a
    question's capitalised span can run on: "Neil Jordan American" names "Neil Jordan")."""
    low = entity.casefold()
    title = (hit.chunk.title or "").casefold().strip()
    return low in hit.chunk.text.casefold() or (len(title) >= 3 and title in low)


def entity_rescues(
    question: str, candidates: Sequence[SearchHit], kept: Sequence[SearchHit], scores: dict[str, float]
) -> list[tuple[SearchHit, str]]:
    """For a question naming two or more entities (quoted or capitalised spans), the judge's
    best dropped candidate for each entity that no kept candidate names, with that entity."""
    from ragsieve.coe.features import fallback_keywords

    entities = fallback_keywords(question, content_words=False)
    if len(entities) < 2:
        return []
    chosen: list[SearchHit] = list(kept)
    out: list[tuple[SearchHit, str]] = []
    for entity in entities:
        if any(names_entity(entity, h) for h in chosen):
            continue
        naming = [h for h in candidates if h not in chosen and names_entity(entity, h)]
        if naming:
            best = max(naming, key=lambda h: scores[h.chunk.id])
            chosen.append(best)
            out.append((best, entity))
    return out


class JudgeStage(_StageBase):
    """Relevant / ambiguous / irrelevant per candidate; irrelevant ones are dropped and when
    nothing survives the sieve abstains rather than answer from off-topic text."""

    name = "judge"

    def warm_up(self) -> None:
        self.pipe.ready_judge().warm_up()

    def run(
        self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState
    ) -> list[SearchHit] | Answer:
        if not candidates:
            return candidates
        judge = self.pipe.ready_judge()
        upper, lower = self.pipe.judge_thresholds()
        scores = self.pipe.judge_scores(question, candidates, state)
        kept: list[SearchHit] = []
        for h, s in zip(candidates, scores, strict=True):
            verdict: Verdict
            if s >= upper:
                label, verdict, reason = "relevant", "kept", f"relevant {s:.2f}"
            elif s >= lower:
                label, verdict, reason = "ambiguous", "flagged", f"ambiguous {s:.2f}"
            else:
                label, verdict, reason = "irrelevant", "dropped", f"irrelevant {s:.2f}"
            state.relevance_labels[h.chunk.id] = label
            trace.decide("judge", h.chunk.id, verdict, reason, s, judge=judge.name)
            if verdict != "dropped":
                kept.append(h)
        if self.pipe.config.sieve.cover_entities:
            for h, entity in entity_rescues(question, candidates, kept, state.relevance):
                state.relevance_labels[h.chunk.id] = "ambiguous"
                trace.decide(
                    "judge",
                    h.chunk.id,
                    "flagged",
                    f"kept as the best candidate naming {entity!r} ({state.relevance[h.chunk.id]:.2f})",
                    state.relevance[h.chunk.id],
                    judge=judge.name,
                )
                kept.append(h)
        # Relevant before ambiguous, best first, so top-k fallbacks take the judge's choice.
        kept.sort(key=lambda h: -state.relevance[h.chunk.id])
        trace.record(
            "judge",
            judge=judge.name,
            upper=upper,
            lower=lower,
            kept=[h.chunk.id for h in kept],
            dropped=[h.chunk.id for h in candidates if h not in kept],
        )
        if not kept and self.pipe.config.sieve.abstain_when_all_irrelevant:
            best = max(candidates, key=lambda h: state.relevance[h.chunk.id])
            s = state.relevance[best.chunk.id]
            text = (
                "I can't answer this from the indexed documents: none of the "
                f"{len(candidates)} retrieved passages is relevant to the question (best {s:.2f} < {lower:.2f}). "
                f'The closest passage ({best.chunk.id}) says: "{_first_sentence(best.chunk.text)}"'
            )
            trace.record("abstain", check="judge", reason="every candidate judged irrelevant")
            return Answer(
                question,
                text,
                [],
                [],
                trace,
                abstained=True,
                abstain_reason=f"judge: all {len(candidates)} candidates irrelevant (best {s:.2f} < {lower:.2f})",
                confidence=round(s, 6),
            )
        return kept


# PoisonJudge options a config may set under ``stages.poison`` (the rest are ``sieve.poison_*``)
POISON_STAGE_OPTIONS = ("min_restate_tokens", "min_cluster", "semantic_duplicate")


class PoisonStage(_StageBase):
    """The poisoning-aware check (:class:`ragsieve.attack.judge.PoisonJudge`): drop candidates
    shaped like black-box poisoning passages and near-duplicate copies; when it drops every
    candidate the sieve abstains rather than answer closed-book.

    ``sieve.poison_*`` set the check's main thresholds; ``stages.poison`` takes the judge's other
    options (:data:`POISON_STAGE_OPTIONS`), e.g. ``{"semantic_duplicate": 0.9}`` to cluster
    near-paraphrases by embedding (an attacker who does not restate the question)."""

    name = "poison"

    def __init__(self, pipe: Pipeline) -> None:
        super().__init__(pipe)
        from ragsieve.attack.judge import PoisonJudge

        sc = pipe.config.sieve
        extra = dict(pipe.config.stages.get("poison", {}))
        unknown = sorted(set(extra) - set(POISON_STAGE_OPTIONS))
        if unknown:
            raise ConfigError(
                f"stages.poison does not take {', '.join(unknown)}; it takes {', '.join(POISON_STAGE_OPTIONS)} "
                "(the restatement share, Jaccard and duplicate action are sieve.poison_restate_share, "
                "sieve.poison_duplicate_jaccard and sieve.poison_duplicates)"
            )
        self.judge = PoisonJudge(
            restate_share=sc.poison_restate_share,
            duplicate_jaccard=sc.poison_duplicate_jaccard,
            duplicates=sc.poison_duplicates,
            **extra,
        )

    def warm_up(self) -> None:
        if self.judge.semantic_duplicate is not None and self.judge.embedder is None:
            self.judge.embedder = self.pipe.embedder()

    def run(
        self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState
    ) -> list[SearchHit] | Answer:
        if not candidates:
            return candidates
        self.warm_up()
        # judge() and the trace only: select() would cut at the judge's k, and the stage is
        # shared by concurrent requests under `ragsieve serve`, so nothing per-request is stored
        verdicts = self.judge.judge(question, candidates)
        self.judge.record(trace, candidates, verdicts)
        kept = [h for h, v in zip(candidates, verdicts, strict=True) if not v.dropped]
        if kept:
            return kept
        reason = f"poison: all {len(candidates)} candidates look like poisoning (restated question or copies)"
        trace.record("abstain", check="poison", reason=reason)
        return Answer(
            question,
            f"I can't answer this from the indexed documents: every relevant passage ({len(candidates)}) "
            "restates the question or copies another passage, the pattern of planted text, so none is trusted.",
            [],
            [],
            trace,
            abstained=True,
            abstain_reason=reason,
            confidence=0.0,
        )


class FilterStage(_StageBase):
    """The knowledge filter (``stages.filtering``) over the kept candidates. The filters are
    trained for classification tasks; with ``filter = "none"`` (the default) the stage records
    that it does not apply and passes candidates through."""

    name = "filter"

    def __init__(self, pipe: Pipeline) -> None:
        super().__init__(pipe)
        self.filter: Any = None

    def _config(self) -> Any:
        from ragsieve.filtering.factory import FilteringConfig

        return FilteringConfig.model_validate(self.pipe.config.stages.get("filtering", {}))

    def warm_up(self) -> None:
        cfg = self._config()
        if self.filter is None and cfg.filter != "none":
            from ragsieve.filtering.factory import make_filter

            self.filter = make_filter(cfg, self.pipe.ready_llm(), self.pipe.embedder())

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        cfg = self._config()
        if cfg.filter == "none" or not candidates:
            trace.record("filter", applied=False, reason="no knowledge filter configured (stages.filtering.filter)")
            return candidates
        self.warm_up()
        from ragsieve.filtering.filters import Candidate, decide

        cands = [Candidate(h.chunk.text, h.rank, score=h.score, id=h.chunk.id) for h in candidates]
        decisions = decide(self.filter, question, cands)
        kept = []
        for h, d in zip(candidates, decisions, strict=True):
            verdict: Verdict = "kept" if d.keep else "dropped"
            reason = f"P(harmless) {d.p_harmless:.2f} {'>=' if d.keep else '<'} {self.filter.threshold:.2f}"
            trace.decide("filter", h.chunk.id, verdict, reason, d.p_harmless, filter=d.source)
            if d.keep:
                kept.append(h)
        trace.record("filter", applied=True, filter=cfg.filter, kept=[h.chunk.id for h in kept])
        return kept


class SelectStage(_StageBase):
    """The evidence the generator sees: ScopeCoE's minimal cover, or the top k."""

    name = "select"

    def __init__(self, pipe: Pipeline, method: str) -> None:
        super().__init__(pipe)
        self.method = method

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        if not state.retrieve:
            return []
        k = state.k or self.pipe.config.retrieval.k
        selector: Selector = self.pipe.ready_selector(self.method)
        if state.k is not None and isinstance(selector, TopKSelector):
            selector = TopKSelector(state.k)
        chosen = selector.select(question, candidates, trace)
        if self.pipe.is_sieve:
            kept_ids = {h.chunk.id for h in chosen}
            for h in candidates:
                if h.chunk.id in kept_ids:
                    trace.decide("select", h.chunk.id, "kept", f"in the {self.method} selection")
                else:
                    why = "not needed for the minimal cover" if self.method == "scope-coe" else f"beyond the top {k}"
                    trace.decide("select", h.chunk.id, "dropped", why)
        return chosen


class GenerateStage(_StageBase):
    """Answer from the evidence with ``[n]`` citations (closed book when there is none)."""

    name = "generate"

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        evidence = candidates if state.retrieve else []
        text, cited = self.pipe.generate(question, evidence, trace)
        state.evidence, state.text, state.cited = list(evidence), text, cited
        return candidates


class VerifyStage(_StageBase):
    """Check each answer sentence against its cited evidence, then accept, regenerate once
    with only the supported evidence, or abstain with what the evidence does and does not say."""

    name = "verify"

    def warm_up(self) -> None:
        self.pipe.ready_claim_judge().warm_up()

    def _verify(self, state: PipelineState) -> list[ClaimVerdict]:
        from ragsieve.verify import verify_answer

        return verify_answer(
            state.text, state.evidence, self.pipe.ready_claim_judge(), self.pipe.config.sieve.support_threshold
        )

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
            f'The evidence ({ev.chunk.id}) says: "{_first_sentence(ev.chunk.text)}"' if ev else "There was no evidence."
        )
        if supported:
            says += " It supports: " + " ".join(supported)
        missing = f' It does not support: "{unsupported[0]}"' if unsupported else ""
        state.text = f"I can't give an answer the evidence supports. {says}{missing}"
        state.abstained, state.abstain_reason = True, reason
        trace.record("abstain", check="verify", reason=reason)

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        sc = self.pipe.config.sieve
        relevance = self._relevance(state)
        if not state.evidence:
            # Closed book (need stage): nothing to check against; the model's own likelihood of
            # its answer stands in for support so confidence still orders answers.
            state.claims = self._verify(state)
            state.confidence = self.pipe.answer_likelihood(question, state.text)
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
                text, cited = self.pipe.generate(question, keep, trace, record_as="regenerate_generate")
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


# ---------------------------------------------------------------------------- pipeline
class Pipeline:
    """Run the stage list ``config.pipeline`` names (minus ``config.ablate``), recording every
    decision in a :class:`Trace`.

    Example:
        >>> from ragsieve.config import PipelineConfig
        >>> from ragsieve.pipeline import Pipeline
        >>> pipe = Pipeline.from_config(PipelineConfig(index_dir="demo-index"))  # doctest: +SKIP
        >>> answer = pipe.ask("What is graphene?")                                # doctest: +SKIP
        >>> answer.abstained, answer.confidence, [c.supported for c in answer.claims]  # doctest: +SKIP
    """

    def __init__(
        self,
        config: PipelineConfig,
        index: Index | Store | None = None,
        llm: LLM | None = None,
        selector: Selector | None = None,
        *,
        judge: Judge | None = None,
        claim_judge: Any = None,
        stages: Sequence[Stage] | None = None,
    ) -> None:
        self.config = config
        self.index = index
        self.llm = llm
        self.selector = selector
        self.judge = judge
        self.claim_judge = claim_judge
        self._selectors: dict[str, Selector] = {}
        self._task_parts: Any = None
        self._stages: list[Stage] | None = list(stages) if stages is not None else None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(cls, config: PipelineConfig) -> Pipeline:
        return cls(config)

    def to_dict(self) -> dict[str, Any]:
        return self.config.to_dict()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pipeline:
        from ragsieve.config import validate_config

        return cls(validate_config(data))

    @property
    def preset(self) -> str:
        return preset_name(self.config.pipeline)

    @property
    def is_sieve(self) -> bool:
        return self.preset == "sieve"

    @property
    def stages(self) -> list[Stage]:
        if self._stages is None:
            self._stages = self.build_stages()
        return self._stages

    def build_stages(self) -> list[Stage]:
        """The preset's stages, minus the ablated ones."""
        names = preset_stages(self.config)
        if self.preset == "task-adaptive":
            from ragsieve.tasks.pipeline import task_adaptive_stages

            return task_adaptive_stages(self, names)
        sc = self.config.sieve
        sieve = self.is_sieve
        factories: dict[str, Callable[[], Stage]] = {
            "route": lambda: RouteStage(
                self,
                (self.config.route if self.config.route != "all" else sc.route) if sieve else self.config.route,
                sc.route_close_margin if sieve else None,
            ),
            "need": lambda: NeedStage(self),
            "retrieve": lambda: RetrieveStage(self, sc.candidates if sieve else None),
            "judge": lambda: JudgeStage(self),
            "poison": lambda: PoisonStage(self),
            "filter": lambda: FilterStage(self),
            "select": lambda: SelectStage(self, sc.select if sieve else self.config.select),
            "generate": lambda: GenerateStage(self),
            "verify": lambda: VerifyStage(self),
        }
        stages = [factories[n]() for n in names]
        if "generate" not in names:
            raise ConfigError("ablate cannot remove 'generate': a pipeline must answer; remove it from ablate")
        if "select" not in names and "retrieve" in names:
            # Without a selection step the generator still gets only the top k.
            stages.insert(names.index("generate"), SelectStage(self, "top-k"))
        return stages

    def embedder(self) -> Any:
        return self.index.embedder if self.index is not None else None

    def warm_up_index(self) -> Index | Store:
        """Open the index and its embedder (idempotent); enough for search."""
        if self.index is None:
            from ragsieve.embed import load_embedder
            from ragsieve.store.open import open_index

            self.index = open_index(self.config, load_embedder(self.config.embedder))
        return self.index

    def warm_up(self, need_index: bool = True) -> None:
        """Open the index, load the models and every stage's own state (idempotent)."""
        if need_index or self.index is not None:
            self.warm_up_index()
        if self.llm is None:
            from ragsieve.llm import load_llm

            self.llm = load_llm(self.config.llm)
        self.llm.warm_up()
        if self.selector is None and not self.is_sieve:
            self.selector = build_selector(self.config, self.llm, self.index)
        for stage in self.stages:
            stage.warm_up()

    def ready_index(self) -> Index | Store:
        if self.index is None:
            raise ConfigError("the pipeline has no index; call warm_up() or pass --index DIR")
        return self.index

    _ready_index = ready_index

    def ready_llm(self) -> LLM:
        if self.llm is None:
            raise ConfigError("the pipeline has no LLM; call warm_up() first")
        return self.llm

    _ready_llm = ready_llm

    def ready_selector(self, method: str) -> Selector:
        """The selector for ``method``; a selector passed to the constructor wins in plain RAG."""
        if self.selector is not None and not self.is_sieve:
            return self.selector
        if method not in self._selectors:
            if method == "scope-coe":
                self._selectors[method] = scope_coe_selector(
                    self.config, self.llm, self.embedder(), self.config.sieve.coe_features
                )
            else:
                self._selectors[method] = TopKSelector(self.config.retrieval.k)
        return self._selectors[method]

    def ready_judge(self) -> Judge:
        if self.judge is None:
            sc = self.config.sieve
            if sc.judge == "cross-encoder":
                if not sc.judge_model:
                    raise ConfigError(
                        "sieve.judge='cross-encoder' needs sieve.judge_model (a CrossEncoder name or path)"
                    )
                self.judge = CrossEncoderJudge(sc.judge_model)
            else:
                self.judge = EvaluatorJudge(self.embedder())
        return self.judge

    def judge_thresholds(self) -> tuple[float, float]:
        judge = self.ready_judge()
        sc = self.config.sieve
        upper = sc.upper if sc.upper is not None else judge.upper
        lower = sc.lower if sc.lower is not None else judge.lower
        return float(upper), float(min(lower, upper))

    def judge_scores(self, question: str, hits: Sequence[SearchHit], state: PipelineState) -> list[float]:
        """Judge scores of ``hits``, scoring only those not judged earlier in this request."""
        todo = [h for h in hits if h.chunk.id not in state.relevance]
        if todo:
            judge = self.ready_judge()
            for h, s in zip(todo, judge.score(question, [h.chunk.text for h in todo]), strict=True):
                state.relevance[h.chunk.id] = float(s)
        return [state.relevance[h.chunk.id] for h in hits]

    def task_parts(self) -> Any:
        """The task-adaptive preset's components (``ragsieve.tasks.pipeline.TaskAdaptiveParts``)."""
        if self._task_parts is None:
            from ragsieve.tasks.pipeline import IndexRetriever, TaskAdaptiveParts

            index = self.warm_up_index() if (self.index is not None or self.config.index_dir) else None
            self._task_parts = TaskAdaptiveParts.from_config(
                self.config,
                retriever=IndexRetriever(index, self.config) if index is not None else None,
                llm=self.ready_llm(),
                embedder=self.embedder(),
            )
        return self._task_parts

    def ready_claim_judge(self) -> Any:
        if self.claim_judge is None:
            from ragsieve.verify import build_claim_judge

            self.claim_judge = build_claim_judge(self.config.sieve.claim_judge, llm=self.llm, embedder=self.embedder())
        return self.claim_judge

    # ------------------------------------------------------------------ building blocks
    def resolve_domains(
        self, question: str, trace: Trace, route: str | None = None, close_margin: float | None = None
    ) -> list[str] | None:
        """Which partitions to search: ``None`` means the global index."""
        index = self.ready_index()
        route = route or self.config.route
        if route == "all":
            trace.record("route", mode="all", searched=["<global>"])
            return None
        if route == "auto":
            from ragsieve.route import route_query

            decision = route_query(index, question, self.config.stages.get("route", {}))
            routed = None if decision.fallback else list(decision.domains or [])
            record = decision.to_dict()
            if routed is not None and len(routed) == 1 and close_margin is not None:
                ranked = sorted(decision.probabilities.items(), key=lambda kv: -kv[1])
                if len(ranked) > 1 and ranked[0][1] - ranked[1][1] <= close_margin:
                    routed.append(ranked[1][0])
                    record["reason"] = (
                        f"{ranked[0][0]} p={ranked[0][1]:.2f} and {ranked[1][0]} p={ranked[1][1]:.2f} are within "
                        f"{close_margin}: searched both"
                    )
            trace.record("route", mode="auto", searched=routed or ["<global>"], **record)
            return routed
        if route not in index.domains:
            raise InputError(f"unknown domain {route!r} for --route; this index has {', '.join(index.domains)}")
        trace.record("route", mode="fixed", searched=[route])
        return [route]

    def retrieve(
        self,
        question: str,
        trace: Trace,
        k: int | None = None,
        domains: list[str] | None = None,
        where: dict[str, Any] | None = None,
    ) -> list[SearchHit]:
        """Candidates for selection: ``retrieval.candidates`` hits (``k`` when larger) unless
        top-k selection needs only ``k``. The sieve reweights by source weights whenever the
        index has them."""
        index = self.ready_index()
        rc = self.config.retrieval
        n = max(k or rc.k, rc.k)
        use = rc.use_source_weights
        if self.is_sieve and use == "off" and index.source_weights is not None:
            use = "reweight"
        prune = None
        if use == "prune":
            if index.source_weights is None:
                raise ConfigError(
                    "retrieval.use_source_weights=prune but the index has no source_weights.json; "
                    "run `ragsieve importance apply` first"
                )
            prune = source_weight_threshold(index)
        wide = self.config.select != "top-k" and not self.is_sieve
        hits = index.search(
            question,
            k=max(n, rc.candidates) if wide else n,
            mode=rc.mode,
            where=where,
            domains=domains,
            retrieval=rc,
            prune_threshold=prune,
        )
        if use == "reweight":
            hits = reweight_hits(index, hits)
        trace.record(
            "retrieve",
            mode=rc.mode,
            fusion=rc.fusion,
            domains=domains,
            where=where,
            source_weights=use,
            candidates=[h.to_dict() for h in hits],
        )
        return hits

    def generate(
        self, question: str, evidence: list[SearchHit], trace: Trace, record_as: str = "generate"
    ) -> tuple[str, list[str]]:
        """Answer from ``evidence`` and return the text with the cited chunk ids."""
        llm = self.ready_llm()
        gc = self.config.generation
        messages = build_answer_messages(question, evidence, gc.max_evidence_chars)
        out = llm.generate(messages, max_tokens=gc.max_tokens, temperature=gc.temperature)
        trace.count_llm(out.prompt_tokens, out.completion_tokens)
        raw = out.text.strip()
        text = trim_repetition(raw, gc.repetition_ngram) if gc.trim_repetition else raw
        polar: dict[str, Any] = {}
        if gc.polar_answers == "label" and is_polar_question(question):
            text, polar = self._label_polar(llm, messages, text)
        cited, method, similarities = cite_evidence(text, evidence, self.embedder())
        trace.record(
            record_as,
            **polar,
            trimmed_repetition=len(raw) - len(text),
            prompt_tokens=out.prompt_tokens,
            completion_tokens=out.completion_tokens,
            finish_reason=out.finish_reason,
            citation_method=method,
            attribution=[{"id": cid, "similarity": round(s, 4)} for cid, s in similarities],
            cited=cited,
        )
        return text, cited

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

    def answer_likelihood(self, question: str, text: str) -> float | None:
        """exp(mean token log-prob) of a closed-book answer under the model (one scoring pass)."""
        if not text.strip():
            return None
        llm = self.ready_llm()
        try:
            score = llm.continuation_logprobs(build_answer_messages(question, []), [text])[0]
        except RagsieveError as exc:  # a server without prompt log-probabilities
            logger.info("no answer likelihood for the closed-book answer: %s", exc)
            return None
        return round(math.exp(score.mean_logprob), 6)

    # ------------------------------------------------------------------ entry point
    def ask(
        self,
        question: str,
        *,
        no_retrieval: bool = False,
        k: int | None = None,
        route: str | None = None,
        where: dict[str, Any] | None = None,
        task: str | None = None,
    ) -> Answer:
        """Run the stages on ``question``; ``task`` forces the task-adaptive path."""
        max_chars = self.config.retrieval.max_query_chars
        if not isinstance(question, str) or not question.strip():
            raise InputError("the question is empty; pass a question to ask")
        if len(question) > max_chars:
            raise InputError(
                f"the question has {len(question)} characters, over the limit of {max_chars}; "
                "shorten it or raise retrieval.max_query_chars"
            )
        question = question.strip()
        trace = Trace(query=question)
        with trace.timed("warm_up"):
            self.warm_up(need_index=not no_retrieval and self.preset != "task-adaptive")
        state = PipelineState(
            question=question,
            k=k,
            route=route,
            where=where,
            task=task,
            retrieve=not no_retrieval,
            forced_no_retrieval=no_retrieval,
        )
        trace.record("pipeline", preset=self.preset, stages=[s.name for s in self.stages], ablated=self.config.ablate)
        candidates: list[SearchHit] = []
        for stage in self.stages:
            with trace.timed(stage.name):
                out = stage.run(question, candidates, trace, state)
            if isinstance(out, Answer):
                return out
            candidates = out
        if state.confidence is None and self.is_sieve and state.relevance:
            # verify switched off: the evidence's relevance alone orders the answers.
            state.confidence = answer_confidence(
                [], max((state.relevance.get(h.chunk.id, 0.0) for h in state.evidence), default=None)
            )
        return Answer(
            question=question,
            text=state.text,
            evidence=state.evidence,
            cited_ids=state.cited,
            trace=trace,
            abstained=state.abstained,
            abstain_reason=state.abstain_reason,
            confidence=state.confidence,
            claims=state.claims,
        )


def build_selector(config: PipelineConfig, llm: LLM | None, index: Index | Store | None) -> Selector:
    """The selector ``config.select`` names."""
    if config.select == "scope-coe":
        from ragsieve.coe import ScopeCoESelector

        return ScopeCoESelector.from_config(config, llm=llm, embedder=index.embedder if index else None)
    return TopKSelector(config.retrieval.k)


def scope_coe_selector(config: PipelineConfig, llm: LLM | None, embedder: Any, features: str) -> Selector:
    """ScopeCoE over the judged candidates; ``features="rules"`` extracts the question's intent
    and keywords without the LLM (ScopeCoE's own rule fallback), keeping the cover step cheap."""
    from ragsieve.coe import ScopeCoESelector

    if features == "llm":
        return ScopeCoESelector.from_config(config, llm=llm, embedder=embedder)
    from ragsieve.coe.features import EvidenceFeatures, fallback_features

    class RuleFeatureScopeCoE(ScopeCoESelector):
        def extract(self, query: str) -> EvidenceFeatures:
            return fallback_features(" ".join(query.split()))

    return RuleFeatureScopeCoE.from_config(config, llm=llm, embedder=embedder)


def source_weight_threshold(index: Index | Store) -> float:
    import json

    data = json.loads((index.dir / "source_weights.json").read_text(encoding="utf-8"))
    return float(data.get("threshold", 0.5)) if isinstance(data, dict) else 0.5


def reweight_hits(index: Index | Store, hits: list[SearchHit]) -> list[SearchHit]:
    """Scale each hit's score by its source's learned weight and re-rank."""
    weights = index.source_weights
    if weights is None:
        raise ConfigError(
            "retrieval.use_source_weights=reweight but the index has no source_weights.json; "
            "run `ragsieve importance apply` first"
        )
    scored = [
        SearchHit(
            h.chunk,
            h.score * weights.get(h.chunk.source, 1.0),
            0,
            {**h.scores, "source_weight": weights.get(h.chunk.source, 1.0)},
        )
        for h in hits
    ]
    scored.sort(key=lambda h: -h.score)
    return [SearchHit(h.chunk, h.score, r, h.scores) for r, h in enumerate(scored, 1)]


def build_pipeline(config: PipelineConfig) -> Pipeline:
    """The pipeline ``config.pipeline`` names (one class; the preset picks its stage list)."""
    return Pipeline.from_config(config)
