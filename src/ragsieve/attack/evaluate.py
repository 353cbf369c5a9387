"""Run defended pipelines on a clean and a poisoned copy of an index and count the damage.

Each defence is a :class:`ragsieve.config.PipelineConfig` (:data:`DEFENCES` names the
built-in ones): plain RAG, source weights learned by data importance (prune / reweight),
the CRAG-style retrieval evaluator, ScopeCoE, the poisoning-aware judge
(:class:`ragsieve.sieve.poison.PoisonJudge`), and the sieve preset with each of its checks
alone or all together. :func:`evaluate_defence` asks every target question on both indexes
and returns one :class:`ragsieve.attack.metrics.Outcome` per question, plus a log row that
says which check saw each poisoned passage and with what score.

LLM outputs can be kept in a resumable cache (:class:`CachedLLM`): identical prompts (plain
and a defence that changed nothing, reruns, an interrupted run) cost no new model call.

Example::

    from ragsieve.attack.evaluate import defence_config, evaluate_defence
    cfg = defence_config("poison-judge")
    outcomes, log = evaluate_defence(cfg, clean_index, poisoned_index, targets, poisoned_ids, llm)
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragsieve.answers import contains_answer
from ragsieve.attack.metrics import Outcome, attack_succeeded
from ragsieve.attack.poison import Target
from ragsieve.config import SIEVE_STAGES, PipelineConfig, validate_config
from ragsieve.errors import ConfigError, InputError
from ragsieve.llm.base import ContinuationScore, Generation

__all__ = [
    "DEFENCES",
    "CachedLLM",
    "append_log",
    "config_key",
    "defence_config",
    "evaluate_defence",
    "fit_source_weights",
    "make_pipeline",
    "read_log",
    "sieve_available",
]

logger = logging.getLogger(__name__)


def _sieve_alone(stage: str) -> dict[str, Any]:
    keep = {"retrieve", "generate", stage}
    return {"pipeline": "sieve", "ablate": [s for s in SIEVE_STAGES if s not in keep]}


# Each defence as overrides of a base PipelineConfig. ``stages.attack.judge`` puts the
# poisoning-aware judge (read by make_pipeline) in front of plain RAG's selector; the sieve has
# it as its own ``poison`` stage (``stages.poison``).
DEFENCES: dict[str, dict[str, Any]] = {
    "plain": {"pipeline": "plain"},
    "source-prune": {"pipeline": "plain", "retrieval": {"use_source_weights": "prune"}},
    "source-reweight": {"pipeline": "plain", "retrieval": {"use_source_weights": "reweight"}},
    "evaluator": {
        "pipeline": "task-adaptive",
        "stages": {"tasks": {"classifier": "fixed", "fixed_task": "information_retrieval", "hyde": False,
                             "evaluator": "trained", "generation_reflection": False}},
    },
    "poison-judge": {"pipeline": "plain", "stages": {"attack": {"judge": True}}},
    "sieve:judge": _sieve_alone("judge"),
    # the knowledge filters score (input, knowledge) pairs for classification labels; on QA the
    # sieve's filter stage passes candidates through, so it has no row of its own here
    "sieve:select": _sieve_alone("select"),
    "sieve:verify": _sieve_alone("verify"),
    "sieve:poison": _sieve_alone("poison"),
    # the default sieve (its poison stage dedupes near-duplicate copies) and the sieve without
    # its poison stage, which shows what the other checks stop on their own
    "sieve": {"pipeline": "sieve"},
    "sieve-no-poison": {"pipeline": "sieve", "ablate": ["poison"]},
    "sieve+poison-judge": {"pipeline": "sieve", "stages": {"poison": {"duplicates": "drop"}}},
    # the paraphrase signal on top: near-paraphrases from different documents (embedding cosine
    # >= 0.9) join a near-duplicate cluster, and clusters are dropped whole, so an attacker who
    # words the question as a statement (``lead="statement"``) still loses every copy
    "sieve+paraphrase": {"pipeline": "sieve", "stages": {"poison": {"duplicates": "drop", "semantic_duplicate": 0.9}}},
    # the voices signal (ragsieve.voices): a tight cluster of passages by meaning is one
    # coordinated voice, counted once by the conflict stage; a signal, nothing dropped
    "sieve+voices": {"pipeline": "sieve", "stages": {"poison": {"coordination": True}}},
    # yes/no answers read from log-probabilities (generation.polar_answers = "label") on both
    # sides, so a small model's habit of opening every yes/no answer with one word does not
    # decide the clean-accuracy comparison
    "plain+polar": {"pipeline": "plain", "generation": {"polar_answers": "label"}},
    "sieve+polar": {"pipeline": "sieve", "generation": {"polar_answers": "label"}},
    # the sieve before it kept a passage per entity of a multi-entity question (stages.judge.cover_entities)
    "sieve-no-cover": {"pipeline": "sieve", "stages": {"judge": {"cover_entities": False}}},
}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def defence_config(name: str, base: PipelineConfig | None = None) -> PipelineConfig:
    """The config of defence ``name`` on top of ``base`` (retrieval, models, k kept)."""
    if name not in DEFENCES:
        raise InputError(f"unknown defence {name!r}; choose from {', '.join(DEFENCES)}")
    data = (base or PipelineConfig()).to_dict()
    return validate_config(_merge(data, DEFENCES[name]), origin=f"defence {name}")


def config_key(config: PipelineConfig) -> str:
    """A short hash of every setting of ``config``: a logged answer is reusable only while the
    pipeline that gave it is unchanged (a new stage or post-processing step in a preset changes
    the hash even where the defence's name stays the same). The ``store`` section is left out:
    the evaluated indexes are handed to the pipeline and named by the log's cell, so where a
    config would have opened its index from changes no answer."""
    data = config.answer_identity()
    data.pop("store", None)
    if data.get("pipeline") != "sieve":
        # the sieve's settings change no other pipeline: a new sieve default keeps plain RAG's rows
        data.pop("sieve", None)
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def read_log(
    path: str | Path, keys: dict[str, str]
) -> tuple[dict[tuple[str, ...], list[dict[str, Any]]], dict[str, int]]:
    """Per-question log rows (JSONL, one ``{"cell": [...], "defence", "config", ...}`` per line)
    grouped by cell, keeping only rows whose ``config`` is the current hash of their defence in
    ``keys`` (``{defence name: config_key(...)}``; a defence label may carry a parenthesised
    note, ``"source-prune (val. poisoned: trust)"``). Rows without a hash, of a defence not in
    ``keys``, or written by a pipeline that has changed since are stale; their counts by
    defence come back second, so a resumed run asks those questions again."""
    done: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    stale: dict[str, int] = {}
    if Path(path).is_file():
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a killed run
                name = str(row.get("defence", "")).split(" (")[0]
                if row.get("config") is None or row.get("config") != keys.get(name):
                    stale[str(row.get("defence"))] = stale.get(str(row.get("defence")), 0) + 1
                    continue
                done.setdefault(tuple(row["cell"]), []).append(row)
    return done, stale


def append_log(path: str | Path, rows: Sequence[dict[str, Any]]) -> None:
    """Append rows to a JSONL log (see :func:`read_log`), one line each."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


def sieve_available() -> bool:
    """Whether this build's pipeline has the sieve preset."""
    import ragsieve.sieve.state as state_module

    return "sieve" in getattr(state_module, "PRESETS", {})


# ---------------------------------------------------------------- LLM cache
class CachedLLM:
    """Wrap an LLM and keep its outputs in a JSONL file keyed by (method, model, prompt,
    arguments); the file is appended after each new call, so a killed run resumes.

    Example::

        llm = CachedLLM(load_llm(LLMConfig()), "runs/attack/llm-cache.jsonl")
    """

    def __init__(self, llm: Any, path: str | Path | None = None) -> None:
        self.llm = llm
        self.path = str(path) if path else None
        self.hits = 0
        self.misses = 0
        self._mem: dict[str, Any] | None = None
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return str(self.llm.model_name)

    def warm_up(self) -> None:
        self.llm.warm_up()

    def _identity(self) -> Any:
        # decoding settings held by the backend (repeat penalty, context) change its outputs too
        try:
            return self.llm.to_dict()
        except Exception:  # noqa: BLE001 - a backend without to_dict is keyed by its name only
            return None

    def _store(self) -> dict[str, Any]:
        if self._mem is None:
            self._mem = {}
            if self.path and Path(self.path).is_file():
                with open(self.path, encoding="utf-8") as fh:
                    for line in fh:
                        try:
                            row = json.loads(line)
                        except json.JSONDecodeError:
                            continue  # a line cut by a killed run
                        self._mem[row["key"]] = row["value"]
        return self._mem

    def _call(self, method: str, payload: list[Any], compute: Callable[[], Any], encode: Callable[[Any], Any],
              decode: Callable[[Any], Any]) -> Any:
        key = hashlib.sha256(json.dumps([method, self.model_name, self._identity(), payload], sort_keys=True,
                                        default=str).encode("utf-8")).hexdigest()
        with self._lock:
            store = self._store()
            if key in store:
                self.hits += 1
                return decode(store[key])
        value = compute()
        with self._lock:
            self.misses += 1
            store[key] = encode(value)
            if self.path:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"key": key, "value": store[key]}, ensure_ascii=False) + "\n")
        return value

    def generate(self, prompt: Any, *, max_tokens: int = 256, temperature: float = 0.0,
                 stop: Sequence[str] | None = None, seed: int | None = None) -> Generation:
        def run() -> Generation:
            return self.llm.generate(prompt, max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed)

        return self._call("generate", [prompt, max_tokens, temperature, list(stop or []), seed], run,
                          lambda g: list(g), lambda v: Generation(*v))

    def generate_json(self, prompt: Any, schema: dict[str, Any], *, max_tokens: int = 256) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            return dict(self.llm.generate_json(prompt, schema, max_tokens=max_tokens))

        return dict(self._call("generate_json", [prompt, schema, max_tokens], run, lambda v: v, lambda v: v))

    def continuation_logprobs(self, prompt: Any, continuations: Sequence[str]) -> list[ContinuationScore]:
        def run() -> list[ContinuationScore]:
            return list(self.llm.continuation_logprobs(prompt, continuations))

        return list(self._call("continuation_logprobs", [prompt, list(continuations)], run,
                               lambda v: [list(s) for s in v], lambda v: [ContinuationScore(*s) for s in v]))

    def next_token_logprobs(self, prompt: Any, candidates: Sequence[str]) -> list[float]:
        def run() -> list[float]:
            return [float(x) for x in self.llm.next_token_logprobs(prompt, candidates)]

        return list(self._call("next_token_logprobs", [prompt, list(candidates)], run, lambda v: v, lambda v: v))

    def perplexity(self, prompt: Any, answer: str) -> float:
        return float(self._call("perplexity", [prompt, answer], lambda: float(self.llm.perplexity(prompt, answer)),
                                lambda v: v, lambda v: v))

    def count_tokens(self, text: str) -> int:
        return int(self.llm.count_tokens(text))

    def __getattr__(self, name: str) -> Any:
        # backend extras (tokenize_continuation, ...) pass through uncached
        if name in ("llm", "_mem", "_lock", "path"):
            raise AttributeError(name)
        return getattr(self.llm, name)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "cached", "path": self.path, "llm": self.llm.to_dict()}


# ---------------------------------------------------------------- pipelines
def make_pipeline(config: PipelineConfig, index: Any, llm: Any) -> Any:
    """A pipeline for ``config`` that uses the given (already open) index and LLM."""
    from ragsieve.sieve.pipeline import Pipeline
    from ragsieve.sieve.select import build_selector

    if config.pipeline == "sieve" and not sieve_available():
        raise ConfigError("pipeline 'sieve' is not available in this build; install a ragsieve with the "
                          "sieve pipeline or drop the sieve rows")
    attack = config.stages.attack
    judge = None
    if attack.judge:
        from ragsieve.sieve.poison import PoisonJudge

        judge = PoisonJudge(k=config.retrieval.k, embedder=getattr(index, "embedder", None), **attack.judge_options())
    if config.pipeline in ("plain", "direct"):
        selector = build_selector(config, llm, index)
        if judge is not None:
            judge.inner = selector
            selector = judge
        return Pipeline(config, index=index, llm=llm, selector=selector)
    if judge is not None:
        raise ConfigError("stages.attack.judge applies to plain RAG; the sieve has its own poison stage "
                          "(set stages.poison.duplicates / stages.poison.restate_share instead)")
    return Pipeline(config, index=index, llm=llm)


def _target_of(chunk: Any, default: str) -> str:
    return str(chunk.metadata.get("target_id", default)) if isinstance(chunk.metadata, dict) else default


def _target_of_id(chunk_id: str, index: Any, default: str) -> str:
    try:
        return _target_of(index.get(chunk_id), default)
    except Exception:  # noqa: BLE001 - an id the index does not hold keeps the default
        return default


def _answer_fields(answer: Any) -> tuple[str, bool, list[Any], list[dict[str, Any]]]:
    return (str(answer.text), bool(getattr(answer, "abstained", False)), list(answer.evidence),
            list(getattr(answer.trace, "decisions", [])))


def evaluate_defence(
    config: PipelineConfig,
    clean_index: Any,
    poisoned_index: Any,
    targets: Sequence[Target],
    poisoned_ids: set[str],
    llm: Any,
    clean_answers: dict[str, tuple[str, bool]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[Outcome], list[dict[str, Any]]]:
    """Ask every target on the poisoned and the clean index under ``config``.

    ``clean_answers`` (``{target id: (text, abstained)}``) skips the clean runs already done
    for this defence (the clean corpus does not depend on N). The log has, per question, the
    answers, which poisoned passages reached the generator, and every check's decision on a
    poisoned passage (check, verdict, score, reason).
    """
    pois = make_pipeline(config, poisoned_index, llm)
    clean = make_pipeline(config, clean_index, llm) if clean_answers is None or any(
        t.id not in clean_answers for t in targets) else None
    outcomes: list[Outcome] = []
    log: list[dict[str, Any]] = []
    for i, t in enumerate(targets):
        answer = pois.ask(t.question)
        text, abstained, evidence, decisions = _answer_fields(answer)
        clean_reason = None  # known only where the clean question is asked here
        if clean_answers is not None and t.id in clean_answers:
            clean_text, clean_abst = clean_answers[t.id]
        else:
            if clean is None:  # pragma: no cover - built above whenever an answer is missing
                raise InputError("no clean pipeline")
            clean_answer = clean.ask(t.question)
            clean_text, clean_abst, _, _ = _answer_fields(clean_answer)
            clean_reason = str(getattr(clean_answer, "abstain_reason", "") or "")[:300]
            if clean_answers is not None:
                clean_answers[t.id] = (clean_text, clean_abst)
        # only this question's passages count: another target's passage in the evidence is noise
        mine = {h.chunk.id for h in evidence if h.chunk.id in poisoned_ids and _target_of(h.chunk, t.id) == t.id}
        reached = [h.chunk.id for h in evidence if h.chunk.id in mine]
        outcomes.append(Outcome(
            target_id=t.id,
            retrieved=bool(reached),
            attacked=attack_succeeded(text, t.wrong, t.answers, abstained),
            clean_correct=(not clean_abst) and contains_answer(clean_text, t.answers),
            abstained=abstained,
            clean_abstained=clean_abst,
        ))
        log.append({
            "target": t.id, "wrong": t.wrong, "answer": text[:300], "abstained": abstained,
            "attacked": outcomes[-1].attacked,
            "abstain_reason": str(getattr(answer, "abstain_reason", "") or "")[:300],
            "clean_answer": clean_text[:300], "clean_abstain_reason": clean_reason,
            "poisoned_in_evidence": reached,
            "decisions_on_poison": [d for d in decisions if d.get("id") in poisoned_ids
                                    and _target_of_id(str(d["id"]), poisoned_index, t.id) == t.id],
        })
        if progress is not None:
            progress(i + 1, len(targets))
    return outcomes, log


# ---------------------------------------------------------------- source weights
def fit_source_weights(
    index: Any,
    questions: Sequence[dict[str, Any]],
    k: int = 5,
    candidates: int = 20,
    epochs: int = 50,
    learning_rate: float = 500.0,
) -> tuple[dict[str, float], float, dict[str, Any]]:
    """Learn per-source weights by data importance on validation questions
    (``{"id", "question", "answers"}``): each question's top-``candidates`` hits are items
    with utility 1 when they contain a gold answer; the top-``k`` additive utility is
    maximised and the pruning threshold tuned on the same questions. Returns the weights of
    the sources seen, the threshold and a summary."""
    from ragsieve.importance import DataImportance, from_lists, tune_prune_threshold

    if not questions:
        raise InputError("the validation set is empty; give questions disjoint from the targets")
    lists = []
    for q in questions:
        hits = index.search(str(q["question"]), k=candidates)
        lists.append([{"id": h.chunk.id, "source": h.chunk.source,
                       "utility": float(contains_answer(h.chunk.text, [str(a) for a in q["answers"]]))}
                      for h in hits])
    data = from_lists(lists, tuple_ids=[str(q["id"]) for q in questions], on_duplicate="first")
    est = DataImportance(k=k, epochs=epochs, learning_rate=learning_rate, init_weight=0.5).fit(data)
    tuned = tune_prune_threshold(data, est.weights_, k=k, utility="additive", known=est.seen_)
    weights = est.source_weights()
    summary = {"validation_questions": len(questions), "sources": len(weights), "threshold": tuned.threshold,
               "removal_rate": tuned.removal_rate, "pruned_sources": tuned.pruned_sources,
               "validation_utility": tuned.validation_score}
    return weights, float(tuned.threshold), summary
