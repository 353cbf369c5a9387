"""Stage ``judge``: how relevant each candidate is to the question. The judge protocol, the
bundled trained evaluator and any cross-encoder as judges, the shared per-request scores
(:class:`RelevanceScores`, which the ``need`` probe fills first), and entity coverage (a
question naming several entities keeps the best candidate naming each)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ragsieve.config import JudgeConfig
from ragsieve.errors import ConfigError
from ragsieve.sieve.state import Abstain, PipelineState, StageResult, compare
from ragsieve.types import SearchHit, Trace, Verdict


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

        cfg.stages.judge.kind, cfg.stages.judge.model = "cross-encoder", "cross-encoder/ms-marco-MiniLM-L-6-v2"
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
                    "stages.judge.kind='cross-encoder' needs sentence-transformers; pip install sentence-transformers"
                ) from exc
            self._encoder = CrossEncoder(self.model)

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        self.warm_up()
        raw = self._encoder.predict([(question, p) for p in passages])
        return [float(x) if 0.0 <= float(x) <= 1.0 else 1.0 / (1.0 + math.exp(-float(x))) for x in raw]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.name, "model": self.model, "upper": self.upper, "lower": self.lower}


def build_judge(config: JudgeConfig, embedder: Any = None) -> Judge:
    """The judge ``stages.judge.kind`` names (``embedder`` feeds the trained evaluator)."""
    if config.kind == "cross-encoder":
        if not config.model:
            raise ConfigError(
                "stages.judge.kind='cross-encoder' needs stages.judge.model (sieve.judge_model in earlier "
                "configs): a CrossEncoder name or path"
            )
        return CrossEncoderJudge(config.model)
    return EvaluatorJudge(embedder)


class RelevanceScores:
    """The judge's scores for one request, each candidate scored once (kept in
    ``state.relevance``), and the thresholds: ``stages.judge.upper``/``lower`` or the judge's own."""

    def __init__(
        self,
        judge: Callable[[], Judge],
        config: JudgeConfig,
        remember: Callable[[Sequence[SearchHit]], None] | None = None,
    ) -> None:
        self.judge = judge
        self.config = config
        # called with the candidates about to be scored, before the judge embeds their text (the
        # pipeline hands their stored index vectors to the embedder the judge shares)
        self.remember = remember

    def thresholds(self) -> tuple[float, float]:
        judge = self.judge()
        upper = self.config.upper if self.config.upper is not None else judge.upper
        lower = self.config.lower if self.config.lower is not None else judge.lower
        return float(upper), float(min(lower, upper))

    def scores(self, question: str, hits: Sequence[SearchHit], state: PipelineState) -> list[float]:
        """Judge scores of ``hits``, scoring only those not judged earlier in this request."""
        todo = [h for h in hits if h.chunk.id not in state.relevance]
        if todo:
            judge = self.judge()
            if self.remember is not None:
                self.remember(todo)
            for h, s in zip(todo, judge.score(question, [h.chunk.text for h in todo]), strict=True):
                state.relevance[h.chunk.id] = float(s)
        return [state.relevance[h.chunk.id] for h in hits]


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


def trust_weighted(candidates: Sequence[SearchHit], scores: Sequence[float], state: PipelineState) -> list[float]:
    """The judge's scores scaled by each candidate's learned source weight, relative to the most
    trusted source among the candidates (retrieval put it in ``hit.scores["source_weight"]`` when
    the index has learned weights), and written back to ``state.relevance`` so every later stage
    sees the same trust-weighted relevance. Unchanged when no candidate carries a weight.

    Why here: reweighting retrieval scores only re-ranks the candidates, and the judge's own
    relevance would pick a distrusted source's passage again; relative to the best source, so
    weights learned on another scale, or a corpus of one source, change nothing."""
    weights = [h.scores.get("source_weight") for h in candidates]
    known = [float(w) for w in weights if w is not None]
    if not known or max(known) <= 0:
        return list(scores)
    top = max(known)
    # a later judging of the same passage in this request reads the weighted score back from
    # state.relevance: weigh each passage once
    weighted = state.trust_weighted
    out: list[float] = []
    for h, s, w in zip(candidates, scores, weights, strict=True):
        if w is not None and h.chunk.id not in weighted:
            s = float(s) * min(float(w), top) / top
            weighted.add(h.chunk.id)
        state.relevance[h.chunk.id] = float(s)
        out.append(float(s))
    return out


class JudgeStage:
    """Relevant / ambiguous / irrelevant per candidate; irrelevant ones are dropped and when
    nothing survives the sieve abstains rather than answer from off-topic text.

    Reads the candidates and ``state.relevance`` (scores the need probe already has); writes
    ``state.relevance`` and ``state.relevance_labels``, one ``judge`` decision per candidate and a
    ``judge`` record (thresholds, kept, dropped), or an ``abstain`` record and the abstention.
    A candidate from a source with a learned weight (``ragsieve importance``) is judged on its
    relevance times its weight relative to the most trusted candidate source (:func:`trust_weighted`).
    Set by ``stages.judge`` (``kind``, ``model``, ``upper``/``lower``, ``cover_entities`` and
    ``abstain_when_all_irrelevant``)."""

    name = "judge"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ("relevance",)
    writes: tuple[str, ...] = ("relevance", "relevance_labels", "trust_weighted", "signals")
    emits: tuple[str, ...] = ("judge.best", "judge.kept_share", "judge.relevant_share", "judge.all_irrelevant")

    def __init__(self, relevance: RelevanceScores, config: JudgeConfig) -> None:
        self.relevance = relevance
        self.config = config

    def warm_up(self) -> None:
        self.relevance.judge().warm_up()

    def run(
        self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState
    ) -> StageResult:
        if not candidates:
            return candidates
        judge = self.relevance.judge()
        upper, lower = self.relevance.thresholds()
        scores = trust_weighted(candidates, self.relevance.scores(question, candidates, state), state)
        kept: list[SearchHit] = []
        for h, s in zip(candidates, scores, strict=True):
            verdict: Verdict
            if s >= upper:
                label, verdict, reason = "relevant", "kept", f"relevant {s:.2f}"
            elif s >= lower:
                label, verdict, reason = "ambiguous", "flagged", f"ambiguous {s:.2f}"
            else:
                label, verdict, reason = "irrelevant", "dropped", f"irrelevant {s:.2f}"
            if "source_weight" in h.scores:
                reason += f" (source weight {float(h.scores['source_weight']):.2f})"
            state.relevance_labels[h.chunk.id] = label
            trace.decide("judge", h.chunk.id, verdict, reason, s, judge=judge.name)
            if verdict != "dropped":
                kept.append(h)
        if self.config.cover_entities:
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
        # the relevance check's graded signals, whatever it decided
        state.signal("judge.best", max(scores, default=None))
        state.signal("judge.kept_share", len(kept) / len(candidates))
        relevant = sum(state.relevance_labels.get(h.chunk.id) == "relevant" for h in candidates)
        state.signal("judge.relevant_share", relevant / len(candidates))
        state.signal("judge.all_irrelevant", not kept)
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
        if not kept and self.config.abstain_when_all_irrelevant:
            from ragsieve.present import reason_text
            from ragsieve.verify.responsive import abstention_message

            best = max(candidates, key=lambda h: state.relevance[h.chunk.id])
            s = state.relevance[best.chunk.id]
            best_vs_lower = compare(s, lower)
            # what the retrieved passages cover, in plain words; quoting the closest passage
            # would put unrelated text in front of the reader as if it answered
            words = reason_text("no_relevant_passage", n=len(candidates), best=float(s), lower=float(lower))
            text = (
                "I can't answer this from the indexed documents: "
                + words[0].lower() + words[1:] + " " + abstention_message(question, candidates)
            )
            return Abstain(
                "judge",
                f"judge: all {len(candidates)} candidates irrelevant (best {best_vs_lower})",
                text,
                round(s, 6),
            )
        return kept
