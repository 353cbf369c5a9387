"""Run pipeline configurations over a question set and keep every output in a resumable cache.

A configuration (:class:`EvalSpec`) is a named :class:`~ragsieve.config.PipelineConfig` plus
how ``ask`` is called (``no_retrieval``). :func:`run_eval` answers each question with every
configuration in turn (item-major, so an interrupted run leaves every configuration with the
same items and paired comparisons stay paired), judges each answer's faithfulness with one
fixed claim judge, and appends one JSONL record per (configuration, question) to an
:class:`EvalCache`. Re-running skips what the cache already holds.

Example:
    >>> from ragsieve.config import PipelineConfig
    >>> from ragsieve.eval.harness import EvalSpec
    >>> EvalSpec("plain", PipelineConfig(pipeline="plain")).key("q1", "Who?")[:8]  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ragsieve.config import PipelineConfig
from ragsieve.errors import ConfigError, InputError, RagsieveError
from ragsieve.eval.data import QAItem
from ragsieve.eval.shared import SharedWork
from ragsieve.types import Answer

logger = logging.getLogger(__name__)

__all__ = [
    "EvalCache",
    "EvalSpec",
    "FaithfulnessJudge",
    "default_specs",
    "judge_faithfulness",
    "run_eval",
]

# A sentence is faithful when the fixed judge's support probability reaches this.
SUPPORT_THRESHOLD = 0.5


class FaithfulnessJudge(Protocol):
    """The part of ``ragsieve.verify.ClaimJudge`` the evaluator uses."""

    name: str

    def warm_up(self) -> None: ...

    def support(self, claim: str, evidence: Sequence[str]) -> float: ...


@dataclass
class EvalSpec:
    """One row of the evaluation table: a named pipeline configuration."""

    name: str
    config: PipelineConfig
    no_retrieval: bool = False
    ask_kwargs: dict[str, Any] = field(default_factory=dict)

    def config_hash(self) -> str:
        payload = {
            "config": self.config.answer_identity(),
            "no_retrieval": self.no_retrieval,
            "kwargs": self.ask_kwargs,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    def key(self, item_id: str, question: str, judge: str | None = None) -> str:
        """Cache key: the configuration, the question, and the faithfulness judge that scored it."""
        digest = hashlib.sha256(f"{self.config_hash()}\n{judge}\n{item_id}\n{question}".encode()).hexdigest()
        return digest[:24]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "config": self.config.to_dict(),
            "no_retrieval": self.no_retrieval,
            "ask_kwargs": dict(self.ask_kwargs),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalSpec:
        from ragsieve.config import validate_config

        return cls(
            name=data["name"],
            config=validate_config(data["config"]),
            no_retrieval=bool(data.get("no_retrieval", False)),
            ask_kwargs=dict(data.get("ask_kwargs", {})),
        )


def default_specs(base: PipelineConfig, ablations: Sequence[Sequence[str]] = ()) -> list[EvalSpec]:
    """The sieve, plain RAG, no retrieval, and one sieve row per ablation set."""
    sieve = base.model_copy(update={"pipeline": "sieve", "ablate": []})
    plain = base.model_copy(update={"pipeline": "plain", "ablate": []})
    specs = [
        EvalSpec("sieve", sieve),
        EvalSpec("plain", plain),
        EvalSpec("no-retrieval", plain, no_retrieval=True),
    ]
    for stages in ablations:
        cfg = PipelineConfig.model_validate({**sieve.to_dict(), "ablate": list(stages)})
        specs.append(EvalSpec("sieve -" + "-".join(stages), cfg))
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise InputError("the same --ablate set is given twice; pass each set of stages once")
    return specs


class EvalCache:
    """Append-only JSONL of per-question outputs, keyed by configuration hash and question.

    Each record is written as one ``write`` of a whole line, flushed and fsynced, so a killed
    run loses at most the line being written; a torn last line is ignored on reading.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.records: dict[str, dict[str, Any]] = {}

    def load(self) -> EvalCache:
        self.records = {}
        if not self.path.exists():
            return self
        with open(self.path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    logger.warning("eval cache %s:%d is a torn write; recomputing that output", self.path, lineno)
                    continue
                if isinstance(rec, dict) and "key" in rec:
                    self.records[rec["key"]] = rec
        return self

    def get(self, key: str) -> dict[str, Any] | None:
        return self.records.get(key)

    def put(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, ensure_ascii=False) + "\n"
        # A previous run killed mid-line leaves no trailing newline; start a fresh line after it.
        if self.path.exists() and self.path.stat().st_size > 0:
            with open(self.path, "rb") as fh:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    line = "\n" + line
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        self.records[record["key"]] = record


def _sentence_citations(answer: Answer) -> list[tuple[str, list[int]]]:
    """Answer sentences (markers stripped) with the evidence positions each one cites.

    A sentence without ``[n]`` markers inherits the answer-level attribution (``cited_ids``),
    which is how the pipeline attributes answers of models that omit markers.
    """
    from ragsieve.verify.claims import cited_indices, split_claim_markers, strip_markers

    ids = [h.chunk.id for h in answer.evidence]
    fallback = [ids.index(c) for c in answer.cited_ids if c in ids]
    return [
        (strip_markers(claim.text), cited_indices(claim.markers, len(ids)) if claim.markers else fallback)
        for claim in split_claim_markers(answer.text)
    ]


def judge_faithfulness(answer: Answer, judge: FaithfulnessJudge) -> list[dict[str, Any]]:
    """Each answer sentence with the fixed judge's support for it given the evidence it cites.

    A sentence citing nothing is unsupported (score 0) without calling the judge.
    """
    rows: list[dict[str, Any]] = []
    for sentence, cited in _sentence_citations(answer):
        score = float(judge.support(sentence, [answer.evidence[i].chunk.text for i in cited])) if cited else 0.0
        rows.append(
            {
                "sentence": sentence,
                "cited": [answer.evidence[i].chunk.id for i in cited],
                "score": round(score, 6),
                "supported": score >= SUPPORT_THRESHOLD,
            }
        )
    return rows


def rejudge_faithfulness(
    records: dict[str, list[dict[str, Any]]], judge: FaithfulnessJudge, text_of: Callable[[str], str]
) -> dict[str, list[dict[str, Any]]]:
    """Copies of ``records`` whose faithfulness rows are re-scored by another ``judge``: the same
    sentences against the same cited evidence (``text_of`` maps a chunk id to its text), so a
    cached evaluation is judged twice without answering anything again."""
    judge.warm_up()
    out: dict[str, list[dict[str, Any]]] = {}
    for name, recs in records.items():
        out[name] = []
        for rec in recs:
            rows = rec.get("faithfulness")
            if rows is not None:
                rescored = []
                for row in rows:
                    cited = list(row["cited"])
                    score = float(judge.support(row["sentence"], [text_of(c) for c in cited])) if cited else 0.0
                    rescored.append({**row, "score": round(score, 6), "supported": score >= SUPPORT_THRESHOLD})
                rows = rescored
            out[name].append({**rec, "faithfulness": rows, "judge": judge.name})
    return out


def _record(
    key: str, spec: EvalSpec, item: QAItem, answer: Answer, seconds: float, faith: list[dict[str, Any]] | None
) -> dict[str, Any]:
    from ragsieve.eval.checks import fired_checks

    by_id = {h.chunk.id: h.chunk for h in answer.evidence}
    fired, draft = fired_checks(answer.trace)
    return {
        "key": key,
        "config": spec.name,
        "config_hash": spec.config_hash(),
        "item_id": item.id,
        "question": item.question,
        "answer": answer.text,
        "abstained": bool(answer.abstained),
        "abstain_reason": answer.abstain_reason,
        "confidence": answer.confidence,
        "cited_ids": list(answer.cited_ids),
        "cited_doc_ids": [by_id[c].doc_id for c in answer.cited_ids if c in by_id],
        "evidence_ids": [h.chunk.id for h in answer.evidence],
        "llm_calls": answer.trace.llm_calls,
        "prompt_tokens": answer.trace.prompt_tokens,
        "completion_tokens": answer.trace.completion_tokens,
        "seconds": round(seconds, 4),
        # each stage's milliseconds and each check's verdict counts, for the cost and
        # "which check acted" breakdowns of a report
        "stage_ms": {k: round(v, 1) for k, v in answer.trace.timings_ms.items()},
        "decisions": dict(Counter(f"{d['check']}:{d['verdict']}" for d in answer.trace.decisions)),
        "faithfulness": faith,
        # the confidence signals the answer carries (judge score of the cited evidence, verifier
        # support, source agreement), so a confidence can be refitted from the cache
        "signals": _answer_signals(answer),
        # the checks that stopped the run or asked to withdraw the draft, and that draft (the
        # per-check table: how often each fires and how often withdrawing was right)
        "fired": fired,
        "draft": draft,
        "error": None,
    }


def _answer_signals(answer: Answer) -> dict[str, float]:
    from ragsieve.eval.confidence import answer_signals

    return {k: round(v, 6) for k, v in answer_signals(answer).items()}


def _error_record(key: str, spec: EvalSpec, item: QAItem, exc: Exception, seconds: float) -> dict[str, Any]:
    return {
        "key": key,
        "config": spec.name,
        "config_hash": spec.config_hash(),
        "item_id": item.id,
        "question": item.question,
        "answer": "",
        "abstained": False,
        "abstain_reason": None,
        "confidence": None,
        "cited_ids": [],
        "cited_doc_ids": [],
        "evidence_ids": [],
        "llm_calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "seconds": round(seconds, 4),
        "faithfulness": None,
        "error": f"{type(exc).__name__}: {exc}",
    }


def _build(spec: EvalSpec) -> Any:
    from ragsieve.sieve.pipeline import build_pipeline

    return build_pipeline(spec.config)


def _warmed(pipe: Any) -> Any:
    """Load the pipeline's models before the first timed question, so seconds per question exclude loading."""
    warm = getattr(pipe, "warm_up", None)
    if callable(warm):
        try:
            warm()
        except ConfigError as exc:  # e.g. no index for a no-retrieval row: ask() loads what it needs
            logger.info("warm-up skipped (%s); the first question includes loading", exc)
    return pipe


class _Answerer:
    """Answers (configuration, question) pairs, building each pipeline once and warming the judge once.

    Without a ``build`` function the pipelines are built over one :class:`SharedWork` (``shared``,
    else a new one; ``share=False``: each pipeline opens and loads everything itself)."""

    def __init__(
        self,
        build: Callable[[EvalSpec], Any] | None,
        judge: FaithfulnessJudge | None,
        baseline_signals: bool = False,
        *,
        shared: SharedWork | None = None,
        share: bool = True,
    ) -> None:
        if build is None:
            if share:
                pool = shared = shared if shared is not None else SharedWork()
                build = lambda spec: pool.pipeline(spec.config)  # noqa: E731
            else:
                build = _build
        self.build = build
        self.shared = shared
        self.judge = judge
        self.baseline_signals = baseline_signals
        self.built_pipelines: dict[str, Any] = {}
        self.judge_ready = False

    def record(self, spec: EvalSpec, item: QAItem, key: str) -> dict[str, Any]:
        if spec.name not in self.built_pipelines:
            self.built_pipelines[spec.name] = _warmed(self.build(spec))
        pipe = self.built_pipelines[spec.name]
        start = time.perf_counter()
        try:
            answer = (
                pipe.ask(item.question, no_retrieval=True)
                if spec.no_retrieval
                else pipe.ask(item.question, **spec.ask_kwargs)
            )
        except RagsieveError as exc:
            logger.warning("%s failed on %s: %s", spec.name, item.id, exc)
            return _error_record(key, spec, item, exc, time.perf_counter() - start)
        # Loading models is a one-off cost, not a per-question one.
        seconds = time.perf_counter() - start - answer.trace.timings_ms.get("warm_up", 0.0) / 1000.0
        faith = None
        if self.judge is not None and answer.evidence and not answer.abstained:
            if not self.judge_ready:
                self.judge.warm_up()
                self.judge_ready = True
            faith = judge_faithfulness(answer, self.judge)
        rec = _record(key, spec, item, answer, seconds, faith)
        rec["judge"] = self.judge.name if self.judge is not None else None
        if self.baseline_signals:
            rec["baseline_signals"] = _baseline_signals(spec, pipe, rec)
        return rec


def _baseline_signals(spec: EvalSpec, pipe: Any, rec: dict[str, Any]) -> dict[str, float | None] | None:
    """The fair baselines' signals of a fresh record, scored with the pipeline that answered it.

    Scored right after the answer, with the same model instance: its KV cache still holds the
    prompt the answer was generated from, so the scoring pass decodes only the answer's tokens
    (scored later, every prompt is read again). ``None`` when the pipeline has no model or index
    to score with; the fair report then scores the record itself.
    """
    from ragsieve.eval.baselines import BaselineScorer

    try:
        index = pipe.warm_up_index()
        llm = pipe.llm
    except (RagsieveError, AttributeError) as exc:
        logger.info("no baseline signals at answer time for %s: %s", spec.name, exc)
        return None
    try:
        return BaselineScorer(spec.config, index=index, llm=llm).signals(rec)
    except RagsieveError as exc:
        logger.warning("baseline signals of %s on %s failed: %s", spec.name, rec["item_id"], exc)
        return None


def run_eval(
    items: Sequence[QAItem],
    specs: Sequence[EvalSpec],
    cache: EvalCache,
    judge: FaithfulnessJudge | None,
    *,
    build: Callable[[EvalSpec], Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
    client: Any = None,
    partition_size: int | None = None,
    baseline_signals: bool = False,
    shared: SharedWork | None = None,
    share: bool = True,
) -> dict[str, list[dict[str, Any]]]:
    """Answer every item with every spec (cached outputs reused); records per spec name, item order.

    ``judge`` scores faithfulness of answers that used evidence; ``None`` skips it (the field is
    then ``None`` and faithfulness is reported as not measured). ``client``: a
    ``dask.distributed.Client``; the questions not in the cache are then answered in partitions of
    ``partition_size`` questions on its workers (each worker builds every pipeline once) and the
    records are the same as this process would write, bar the timings. ``baseline_signals``: each
    new record also gets ``baseline_signals``, the fair baselines' retrieval and log-probability
    signals (:class:`ragsieve.eval.baselines.BaselineScorer`) scored right after answering, while the
    model still holds the prompt (this process only; cluster workers leave it to the report).

    ``build`` makes a configuration's pipeline; by default every configuration's pipeline is built
    over one :class:`ragsieve.eval.shared.SharedWork` (``shared``, else a new one): one index, LLM
    and embedding memo, each question's searches and judge scores computed once for all the
    configurations, generation and decisions each configuration's own. ``share=False`` builds each
    configuration on its own (what separate runs do). On a cluster each worker shares its own.
    """
    if client is not None:
        return _run_eval_on_cluster(items, specs, cache, judge, build, progress, client, partition_size, share)
    answerer = _Answerer(build, judge, baseline_signals, shared=shared, share=share)
    judge_name = judge.name if judge is not None else None
    total = len(items) * len(specs)
    done = 0
    out: dict[str, list[dict[str, Any]]] = {s.name: [] for s in specs}
    for item in items:
        for spec in specs:
            key = spec.key(item.id, item.question, judge_name)
            rec = cache.get(key)
            if rec is None:
                rec = answerer.record(spec, item, key)
                cache.put(rec)
            out[spec.name].append(rec)
            done += 1
            if progress is not None:
                progress(done, total)
    return out


# Per worker process (and thread): the answerer of the evaluation running now, so a worker builds
# each pipeline once for all its partitions; an earlier evaluation's pipelines are let go.
_WORKER_ANSWERERS: dict[tuple[str, int], _Answerer] = {}
_WORKER_LOCK = threading.Lock()


def _answer_partition(
    run: str,
    items: Sequence[QAItem],
    specs: Sequence[EvalSpec],
    keys: set[str],
    judge_name: str | None,
    build: Callable[[EvalSpec], Any] | None,
    judge: FaithfulnessJudge | None,
    share: bool = True,
) -> list[dict[str, Any]]:
    """On a worker: the records of ``items`` x ``specs`` whose cache keys are in ``keys``."""
    # One answerer per thread: a pipeline's LLM (llama.cpp) must not run two questions at once.
    slot = (run, threading.get_ident())
    with _WORKER_LOCK:
        for stale in [s for s in _WORKER_ANSWERERS if s[0] != run]:
            del _WORKER_ANSWERERS[stale]
        answerer = _WORKER_ANSWERERS.get(slot)
        if answerer is None:
            answerer = _WORKER_ANSWERERS[slot] = _Answerer(build, judge, share=share)
    out = []
    for item in items:
        for spec in specs:
            key = spec.key(item.id, item.question, judge_name)
            if key in keys:
                out.append(answerer.record(spec, item, key))
    return out


def _run_eval_on_cluster(
    items: Sequence[QAItem],
    specs: Sequence[EvalSpec],
    cache: EvalCache,
    judge: FaithfulnessJudge | None,
    build: Callable[[EvalSpec], Any] | None,
    progress: Callable[[int, int], None] | None,
    client: Any,
    partition_size: int | None,
    share: bool = True,
) -> dict[str, list[dict[str, Any]]]:
    from dask.distributed import as_completed

    judge_name = judge.name if judge is not None else None
    total = len(items) * len(specs)
    todo = [
        (item, {k for s in specs if cache.get(k := s.key(item.id, item.question, judge_name)) is None})
        for item in items
    ]
    todo = [(item, keys) for item, keys in todo if keys]
    done = total - sum(len(keys) for _, keys in todo)
    if progress is not None:
        progress(done, total)
    if todo:
        if partition_size is None:
            # A few partitions per worker keep them all busy to the end without a task per question.
            workers = max(1, len(client.scheduler_info().get("workers", {})))
            partition_size = max(1, math.ceil(len(todo) / (4 * workers)))
        if partition_size < 1:
            raise InputError(f"questions per partition must be at least 1, got {partition_size}")
        run = uuid.uuid4().hex
        # Sent once to each worker and kept there, rather than once with every partition.
        shipped = client.scatter(judge, broadcast=True, hash=False) if judge is not None else None
        futures = []
        for start in range(0, len(todo), partition_size):
            part = todo[start : start + partition_size]
            keys = set().union(*(k for _, k in part))
            futures.append(
                client.submit(
                    _answer_partition,
                    run,
                    [i for i, _ in part],
                    list(specs),
                    keys,
                    judge_name,
                    build,
                    shipped,
                    share,
                    pure=False,
                )
            )
        for future in as_completed(futures):
            for rec in future.result():
                cache.put(rec)
                done += 1
            if progress is not None:
                progress(done, total)
    return {s.name: [cache.records[s.key(i.id, i.question, judge_name)] for i in items] for s in specs}


def pending_items(
    items: Iterable[QAItem], specs: Sequence[EvalSpec], cache: EvalCache, judge: str | None
) -> list[QAItem]:
    """Items some spec has no cached record for (the questions a run will answer)."""
    return [i for i in items if any(cache.get(s.key(i.id, i.question, judge)) is None for s in specs)]


def cached_records(
    items: Iterable[QAItem], specs: Sequence[EvalSpec], cache: EvalCache, judge: str | None
) -> tuple[list[QAItem], dict[str, list[dict[str, Any]]]]:
    """Items every spec has a cached record for, and those records (for partial-n reports)."""
    have = [i for i in items if all(cache.get(s.key(i.id, i.question, judge)) is not None for s in specs)]
    return have, {s.name: [cache.records[s.key(i.id, i.question, judge)] for i in have] for s in specs}


def default_cache_path(data: Path, index: Path | None) -> Path:
    import hashlib

    from ragsieve.io import user_cache_dir

    tag = hashlib.sha256(f"{data.resolve()}\n{index.resolve() if index else ''}".encode()).hexdigest()[:12]
    return user_cache_dir() / "eval" / f"{data.stem}-{tag}.jsonl"
