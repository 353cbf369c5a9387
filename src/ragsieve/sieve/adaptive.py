"""The task-adaptive preset's stages (Task-Classifying RAG on top of CRAG): ``need`` (the task
router), ``retrieve`` (HyDE), ``judge`` (the CRAG-style evaluator and its actions) and
``generate`` (with reflection), and the components they share (:class:`TaskAdaptiveParts`).

* general_qa: answer directly (no retrieval, no reflection);
* information_retrieval: retrieve (HyDE when on) → evaluate evidence → act (refine / corrective
  retrieval / both) → answer with citations;
* text_generation: as information_retrieval, then generate a longer text and run the
  coverage/distinct-2 reflection loop.

Every decision is recorded in the answer's :class:`~ragsieve.types.Trace`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from ragsieve.config import PipelineConfig
from ragsieve.errors import ConfigError
from ragsieve.expand.hyde import HyDEExpander, merge_hits
from ragsieve.generate.answer import build_answer_messages, cite_evidence
from ragsieve.llm.base import LLM, ChatMessage
from ragsieve.sieve.state import PipelineState, Stage
from ragsieve.tasks.classifier import LLMTaskClassifier, TaskClassifier, TaskPrediction, TfidfTaskClassifier
from ragsieve.tasks.config import TaskAdaptiveConfig
from ragsieve.tasks.evaluator import (
    EvaluatorVerdict,
    LLMRetrievalEvaluator,
    SerializedLLM,
    TrainedRetrievalEvaluator,
    _split_sentences,
)
from ragsieve.tasks.labels import TASK_LABELS, TaskLabel, load_task_requests
from ragsieve.tasks.reflection import GenerationReflector
from ragsieve.types import SearchHit, Trace

logger = logging.getLogger(__name__)


class Retriever(Protocol):
    """What the pipeline needs from an index (``ragsieve.index.Index`` fits)."""

    @property
    def domains(self) -> list[str]: ...

    def search(self, query: str, k: int = 10, *, domains: Sequence[str] | None = None) -> list[SearchHit]: ...


class FixedTaskClassifier:
    """Routes every request to one task (for ablations and forced paths)."""

    def __init__(self, task: TaskLabel) -> None:
        self.task = task

    def classify(self, text: str) -> TaskPrediction:
        return TaskPrediction(self.task, {lb: float(lb == self.task) for lb in TASK_LABELS}, "fixed", False, "", 0.0)


def build_classifier(cfg: TaskAdaptiveConfig, llm: LLM) -> TaskClassifier:
    if cfg.classifier == "fixed":
        if cfg.fixed_task is None:
            raise ConfigError("stages.tasks.classifier='fixed' needs stages.tasks.fixed_task")
        return FixedTaskClassifier(cfg.fixed_task)
    if cfg.classifier == "tfidf":
        if cfg.classifier_path:
            return TfidfTaskClassifier.load(cfg.classifier_path)
        train = load_task_requests("train")
        return TfidfTaskClassifier().fit([r.text for r in train], [r.label for r in train])
    clf = LLMTaskClassifier(mode="json" if cfg.classifier == "llm-json" else "logprob", default_label=cfg.default_task)
    clf.warm_up(llm)
    return clf


def refine_hits(
    query: str, hits: Sequence[SearchHit], score_fn: Any, top_sentences: int, min_score: float
) -> list[SearchHit]:
    """CRAG knowledge refinement: split evidence into sentences, keep the best-scoring ones
    (score >= ``min_score``, at most ``top_sentences`` overall, at least the best one), in order."""
    sents: list[tuple[int, int, str]] = []
    for hi, h in enumerate(hits):
        for si, s in enumerate(_split_sentences(h.chunk.text) or [h.chunk.text]):
            sents.append((hi, si, s))
    if not sents:
        return []
    scores = np.asarray(score_fn(query, [s for _, _, s in sents]), dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    keep = [int(i) for i in order[:top_sentences] if scores[i] >= min_score] or [int(order[0])]
    kept = sorted(keep)
    out: list[SearchHit] = []
    for hi, h in enumerate(hits):
        mine = [sents[i][2] for i in kept if sents[i][0] == hi]
        if not mine:
            continue
        chunk = dataclasses.replace(
            h.chunk,
            text=" ".join(mine),
            metadata={**h.chunk.metadata, "refined_from_chars": len(h.chunk.text)},
        )
        out.append(SearchHit(chunk, h.score, len(out), dict(h.scores)))
    return out


WRITING_SYSTEM = (
    "You write the requested text using the numbered evidence. Cover the key points of the evidence, "
    "cite evidence numbers in square brackets like [1], and avoid repeating yourself."
)


class TaskAdaptiveParts:
    """What the task-adaptive stages share: task router, HyDE, CRAG-style evaluator and its
    actions, generation reflection (built once per pipeline).

    Example::

        parts = TaskAdaptiveParts.from_config(PipelineConfig(index_dir="my-index"))
        parts.evaluate("Who wrote Dune?", parts.retrieve("Who wrote Dune?", Trace("q"), hyde=False,
                       k=5, domains=None, label="retrieval"), Trace("q")).verdict
    """

    def __init__(
        self,
        llm: LLM,
        embedder: Any,
        retriever: Retriever | None,
        config: TaskAdaptiveConfig | None = None,
        k: int = 5,
        max_tokens: int = 128,
        max_evidence_chars: int = 600,
        classifier: TaskClassifier | None = None,
    ) -> None:
        self.config = config or TaskAdaptiveConfig()
        self.llm: LLM = SerializedLLM(llm)
        self.embedder = embedder
        self.retriever = retriever
        self.k = self.config.k or k
        self.max_tokens = max_tokens
        self.max_evidence_chars = max_evidence_chars
        self.classifier = classifier or build_classifier(self.config, self.llm)
        c = self.config
        self.hyde = HyDEExpander(
            enabled=True, max_tokens=c.hyde_max_tokens, max_sentences=c.hyde_max_sentences, rerank=c.hyde_rerank
        )
        self.trained_evaluator: TrainedRetrievalEvaluator | None
        self.llm_evaluator: LLMRetrievalEvaluator | None = None
        # The trained scorer is always loaded: it also scores sentences for knowledge refinement.
        te = (
            TrainedRetrievalEvaluator.load(c.evaluator_path)
            if c.evaluator_path
            else TrainedRetrievalEvaluator.bundled()
        )
        if c.upper is not None:
            te.upper = c.upper
        if c.lower is not None:
            te.lower = c.lower
        self.trained_evaluator = te
        if c.evaluator == "llm":
            self.llm_evaluator = LLMRetrievalEvaluator(
                timeout_s=c.evaluator_timeout_s, max_tokens=c.evaluator_max_tokens, default="partial"
            )
        self.reflector = GenerationReflector(
            theta_sim=c.theta_sim,
            min_coverage=c.min_coverage,
            min_distinct2=c.min_distinct2,
            max_rounds=c.max_rounds,
        )

    @classmethod
    def from_config(
        cls,
        config: PipelineConfig,
        retriever: Retriever | None = None,
        llm: LLM | None = None,
        embedder: Any = None,
    ) -> TaskAdaptiveParts:
        """The components for ``config`` (loads the embedder and LLM when none are given)."""
        from ragsieve.embed import load_embedder
        from ragsieve.llm import load_llm

        stage = config.stages.tasks
        if embedder is None:
            embedder = load_embedder(config.embedder)
            embedder.warm_up()
        if retriever is None and config.index_dir is not None:
            from ragsieve.index import Index

            index = Index.open(config.index_dir, embedder=embedder)
            retriever = IndexRetriever(index, config)
        route = config.stages.route.domain_for(config.pipeline)
        if retriever is not None and stage.domains is None and route not in ("all", "auto"):
            stage = stage.model_copy(update={"domains": [route]})
        if llm is None:
            llm = load_llm(config.llm)
        llm.warm_up()
        return cls(
            llm,
            embedder,
            retriever,
            stage,
            k=config.retrieval.k,
            max_tokens=config.generation.max_tokens,
            max_evidence_chars=config.generation.max_evidence_chars,
        )

    # ------------------------------------------------------------------ stages
    def _search(self, query: str, k: int, domains: Sequence[str] | None) -> list[SearchHit]:
        if self.retriever is None:
            return []
        return self.retriever.search(query, k=k, domains=domains)

    def retrieve(
        self, query: str, trace: Trace, *, hyde: bool, k: int, domains: Sequence[str] | None, label: str
    ) -> list[SearchHit]:
        def search(q: str, kk: int) -> list[SearchHit]:
            return self._search(q, kk, domains)

        with trace.timed(label):
            if hyde:
                res = self.hyde.retrieve(query, self.llm, self.embedder, search, k=k)
                trace.count_llm()
                trace.record("hyde", stage_of=label, **res.trace_record())
                hits = res.hits
            else:
                hits = search(query, k)
        trace.record(
            label,
            query=query,
            k=k,
            domains=list(domains) if domains else None,
            hyde=hyde,
            ids=[h.chunk.id for h in hits],
            n=len(hits),
        )
        return hits

    def evaluate(self, query: str, hits: Sequence[SearchHit], trace: Trace) -> EvaluatorVerdict:
        passages = [h.chunk.text for h in hits]
        with trace.timed("retrieval_evaluation"):
            if self.config.evaluator == "llm" and self.llm_evaluator is not None:
                v = self.llm_evaluator.evaluate(query, passages, self.llm)
                trace.count_llm()
            elif self.trained_evaluator is not None:
                v = self.trained_evaluator.evaluate(query, passages, self.embedder)
            else:  # pragma: no cover - trained evaluator is always built
                raise ConfigError("no retrieval evaluator configured")
        return v

    def _score_sentences(self, query: str, sentences: list[str]) -> list[float]:
        if self.trained_evaluator is not None:
            return self.trained_evaluator.score_passages(query, sentences, self.embedder)
        vecs = np.asarray(self.embedder.embed([query, *sentences]), dtype=np.float32)
        return (vecs[1:] @ vecs[0]).tolist()

    def refine(self, query: str, hits: Sequence[SearchHit], trace: Trace) -> list[SearchHit]:
        with trace.timed("refine"):
            out = refine_hits(
                query,
                hits,
                self._score_sentences,
                self.config.refine_top_sentences,
                self.config.refine_min_score,
            )
        trace.record(
            "refine",
            kept_ids=[h.chunk.id for h in out],
            chars_before=sum(len(h.chunk.text) for h in hits),
            chars_after=sum(len(h.chunk.text) for h in out),
        )
        return out

    def rewrite(self, query: str, trace: Trace) -> str:
        if not self.config.rewrite_query:
            return query
        msgs = [
            ChatMessage(
                role="system",
                content="Rewrite the question as a short search-engine query made of "
                "its key words. Reply with the query only.",
            ),
            ChatMessage(role="user", content=query),
        ]
        gen = self.llm.generate(msgs, max_tokens=24, temperature=0.0)
        trace.count_llm(gen.prompt_tokens, gen.completion_tokens)
        rewritten = gen.text.strip().splitlines()[0].strip().strip('"') if gen.text.strip() else ""
        return rewritten if len(rewritten) >= 3 else query

    def corrective_retrieval(self, query: str, trace: Trace, used_hyde: bool) -> list[SearchHit]:
        c = self.config
        q2 = self.rewrite(query, trace)
        k2 = self.k * c.corrective_k_factor
        widened: list[str] | None = None
        if c.domains and self.retriever is not None:
            others = [d for d in self.retriever.domains if d not in c.domains]
            widened = others or None
        hits = self.retrieve(
            q2, trace, hyde=c.corrective_hyde and not used_hyde, k=k2, domains=widened, label="corrective_retrieval"
        )
        if q2 != query:
            trace.record("query_rewrite", original=query, rewritten=q2)
        return hits

    def act(
        self, query: str, hits: list[SearchHit], verdict: EvaluatorVerdict, trace: Trace, used_hyde: bool
    ) -> list[SearchHit]:
        """CRAG actions: sufficient → refine; insufficient → corrective retrieval; partial → both."""
        if verdict.verdict == "sufficient":
            action = "refine"
            out = self.refine(query, hits, trace)
        elif verdict.verdict == "insufficient":
            action = "corrective_retrieval"
            extra = self.corrective_retrieval(query, trace, used_hyde)
            out = self.refine(query, extra, trace) if extra else []
        else:
            action = "refine+corrective_retrieval"
            extra = self.corrective_retrieval(query, trace, used_hyde)
            out = self.refine(query, merge_hits([hits, extra]), trace)
        trace.record("retrieval_action", verdict=verdict.verdict, action=action, n_evidence=len(out))
        return out[: max(self.k, 1) * 2]

    def generate(self, msgs: list[ChatMessage], max_tokens: int, trace: Trace) -> str:
        """One greedy generation of at most ``max_tokens``, counted in ``trace``."""
        gen = self.llm.generate(msgs, max_tokens=max_tokens, temperature=0.0)
        trace.count_llm(gen.prompt_tokens, gen.completion_tokens)
        return gen.text.strip()

    def writing_messages(
        self, question: str, evidence: Sequence[SearchHit], missing: Sequence[str]
    ) -> list[ChatMessage]:
        lines = [f"[{i}] {h.chunk.text[: self.max_evidence_chars]}" for i, h in enumerate(evidence, 1)]
        user = ("Evidence:\n" + "\n".join(lines) + "\n\n" if lines else "") + f"Request: {question}"
        if missing:
            user += "\n\nYour previous draft missed these points; include them:\n" + "\n".join(
                f"- {m}" for m in missing
            )
        return [ChatMessage(role="system", content=WRITING_SYSTEM), ChatMessage(role="user", content=user)]

    def cite(self, text: str, evidence: Sequence[SearchHit], trace: Trace) -> list[str]:
        """Cited evidence ids (markers, else similarity attribution), as in plain RAG."""
        with trace.timed("attribute"):
            cited, method, similarities = cite_evidence(text, evidence, self.embedder)
        trace.record(
            "citations",
            method=method,
            cited=cited,
            attribution=[{"id": cid, "similarity": round(s, 4)} for cid, s in similarities],
        )
        return cited


# ---------------------------------------------------------------------------- stages
# The task-adaptive preset: need (task router) → retrieve (HyDE) → judge (CRAG-style evaluator
# and its actions) → generate (with reflection). Each stage gets the shared components through
# ``parts`` (built on first use: they load models). Set by ``stages.tasks``
# (:class:`ragsieve.tasks.config.TaskAdaptiveConfig`).


class _TaskStage:
    """A task-adaptive stage: the shared components come through ``parts`` (built on first use)."""

    name = "stage"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    emits: tuple[str, ...] = ()

    def __init__(self, parts: Callable[[], TaskAdaptiveParts]) -> None:
        self._parts = parts

    @property
    def parts(self) -> TaskAdaptiveParts:
        return self._parts()

    def warm_up(self) -> None:
        self._parts()


class TaskRouteStage(_TaskStage):
    """need: the task router picks general_qa (answer directly), information_retrieval or
    text_generation; ``ask(task=...)`` forces a path."""

    name = "need"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    writes: tuple[str, ...] = ("task_label", "retrieve")
    emits: tuple[str, ...] = ()

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        parts = self.parts
        task: TaskLabel | None = "general_qa" if state.forced_no_retrieval else state.task
        if not state.forced_no_retrieval and parts.retriever is None:
            trace.record("retrieval", note="no index configured; retrieval returns nothing")
        with trace.timed("task"):
            pred = parts.classifier.classify(question) if task is None else FixedTaskClassifier(task).classify(question)
        if pred.method.startswith("llm"):
            trace.count_llm()
        trace.record("task", **pred.to_dict())
        state.task_label = pred.label
        state.retrieve = pred.label != "general_qa"
        return candidates


class TaskRetrieveStage(_TaskStage):
    """retrieve: the first pass, with HyDE when ``stages.tasks.hyde`` is on."""

    name = "retrieve"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    emits: tuple[str, ...] = ()

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        if not state.retrieve:
            return []
        c = self.parts.config
        return self.parts.retrieve(
            question, trace, hyde=c.hyde, k=state.k or self.parts.k, domains=c.domains, label="retrieval"
        )


class CragStage(_TaskStage):
    """judge: the retrieval evaluator's verdict and CRAG's action (refine, corrective
    retrieval, or both)."""

    name = "judge"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    writes: tuple[str, ...] = ("evaluator_verdict",)
    emits: tuple[str, ...] = ()

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        if not state.retrieve:
            return []
        parts = self.parts
        if parts.config.evaluator == "off":
            trace.record("retrieval_action", verdict=None, action="none (evaluator off)", n_evidence=len(candidates))
            return candidates
        verdict = parts.evaluate(question, candidates, trace)
        trace.record("retrieval_evaluation", **verdict.to_dict())
        for h, s in zip(candidates, verdict.scores, strict=False):
            trace.decide("judge", h.chunk.id, "kept", f"scored by the {verdict.method} evaluator", s)
        evidence = parts.act(question, candidates, verdict, trace, used_hyde=parts.config.hyde)
        state.evaluator_verdict = verdict.verdict
        return evidence


def _cleaned(text: str, question: str, trace: Trace) -> str:
    """A question's answer without the model's formatting habits (``clean_answer``); writing
    tasks keep their lists and headings."""
    from ragsieve.generate.cleanup import clean_answer

    cleaned = clean_answer(text, question)
    if cleaned.changes:
        trace.record("cleanup", changes=cleaned.changes, removed=cleaned.removed)
    return cleaned.text


class TaskGenerateStage(_TaskStage):
    """generate: direct (general_qa), a cited answer (information_retrieval) or a longer text
    with the coverage/distinct-2 reflection loop (text_generation)."""

    name = "generate"
    reads: tuple[str, ...] = ()
    uses: tuple[str, ...] = ("task_label",)
    writes: tuple[str, ...] = ("text", "evidence", "cited")
    emits: tuple[str, ...] = ()

    def run(self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState) -> list[SearchHit]:
        parts = self.parts
        c = parts.config
        label = state.task_label or "information_retrieval"
        if not state.retrieve:
            state.text = _cleaned(
                parts.generate(build_answer_messages(question, []), parts.max_tokens, trace), question, trace
            )
            trace.record("generation", path="direct", evidence=0)
            return candidates
        evidence = candidates
        if not evidence:
            trace.record(
                "generation",
                path="no-evidence",
                note="retrieval found no usable evidence; answered without evidence",
            )
        if label == "information_retrieval" or not evidence:
            msgs = build_answer_messages(question, evidence, parts.max_evidence_chars)
            max_tokens = parts.max_tokens if label == "information_retrieval" else c.text_max_tokens
            text = _cleaned(parts.generate(msgs, max_tokens, trace), question, trace)
            if evidence:
                trace.record("generation", path=label, evidence=len(evidence))
        else:

            def gen(missing: list[str]) -> str:
                return parts.generate(parts.writing_messages(question, evidence, missing), c.text_max_tokens, trace)

            with trace.timed("generation"):
                if c.generation_reflection:
                    res = parts.reflector.run([h.chunk.text for h in evidence], gen, parts.embedder, trace)
                    text = res.text
                    trace.record("generation", path=label, evidence=len(evidence), rounds=len(res.rounds))
                else:
                    text = gen([])
                    trace.record("generation", path=label, evidence=len(evidence), rounds=1)
        state.text, state.evidence = text, list(evidence)
        state.cited = parts.cite(text, evidence, trace)
        return candidates


def task_adaptive_stages(parts: Callable[[], TaskAdaptiveParts], names: Sequence[str]) -> list[Stage]:
    """The task-adaptive preset's stages among ``names`` (ablation removes the others)."""
    factories: dict[str, Callable[[Callable[[], TaskAdaptiveParts]], Stage]] = {
        "need": TaskRouteStage,
        "retrieve": TaskRetrieveStage,
        "judge": CragStage,
        "generate": TaskGenerateStage,
    }
    return [factories[n](parts) for n in names if n in factories]


class IndexRetriever:
    """Adapts :class:`ragsieve.index.Index` to :class:`Retriever` with the pipeline's retrieval config."""

    def __init__(self, index: Any, config: PipelineConfig) -> None:
        self.index = index
        self.config = config

    @property
    def domains(self) -> list[str]:
        return list(self.index.domains)

    def search(self, query: str, k: int = 10, *, domains: Sequence[str] | None = None) -> list[SearchHit]:
        r = self.config.retrieval
        hits: list[SearchHit] = self.index.search(query, k=k, mode=r.mode, domains=domains, retrieval=r)
        return hits


class ListRetriever:
    """Dense cosine retrieval over an in-memory list of chunks (tests, per-question pools).

    Example::

        r = ListRetriever(chunks, embedder)
        r.search("who wrote Dune?", k=3, domains=["wiki"])
    """

    def __init__(self, chunks: Sequence[Any], embedder: Any, vectors: np.ndarray | None = None) -> None:
        self.chunks = list(chunks)
        self.embedder = embedder
        if vectors is None:
            vectors = (
                np.asarray(embedder.embed([c.text for c in self.chunks]), dtype=np.float32)
                if self.chunks
                else np.zeros((0, 1), dtype=np.float32)
            )
        self.vectors = vectors

    @property
    def domains(self) -> list[str]:
        return sorted({c.domain for c in self.chunks})

    def search(self, query: str, k: int = 10, *, domains: Sequence[str] | None = None) -> list[SearchHit]:
        idx = [i for i, c in enumerate(self.chunks) if domains is None or c.domain in domains]
        if not idx:
            return []
        qv = np.asarray(self.embedder.embed([query]), dtype=np.float32)[0]
        sims = self.vectors[idx] @ qv
        order = np.argsort(-sims, kind="stable")[:k]
        return [
            SearchHit(self.chunks[idx[int(j)]], float(sims[j]), r, {"dense": float(sims[j])})
            for r, j in enumerate(order)
        ]
