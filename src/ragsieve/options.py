"""The option sets, each declared once as a ``Literal``, and the sieve's stage names.

The config fields (:mod:`ragsieve.config`) are typed by these, the command line builds its
choices from them (``typing.get_args``) and the docs read them here. They live apart from the
config so that the command line can list its choices (``ragsieve --help``) without importing
pydantic and building every config model.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

# The stage list every pipeline preset is drawn from, in execution order.
SIEVE_STAGES: tuple[str, ...] = (
    "route", "need", "retrieve", "judge", "poison", "injection", "filter", "conflict", "select", "generate",
    "verify", "decide",
)

PipelineName = Literal["plain", "direct", "task-adaptive", "sieve"]
SelectName = Literal["top-k", "scope-coe"]


def preset_name(pipeline: str) -> str:
    """The preset a ``config.pipeline`` value names ("direct" is an alias of "plain")."""
    return "plain" if pipeline == "direct" else pipeline


# What each preset searches and selects where the config leaves ``stages.route.domain`` and
# ``stages.select.method`` unset: plain RAG stays plain (every partition, the top k: no routing
# and no selection check), the sieve routes (the domain router) and covers (ScopeCoE); the
# task-adaptive preset searches as plain RAG does and has no select stage. The one place these
# defaults are stated: one key sets each for every preset.
PRESET_ROUTE: dict[str, str] = {"plain": "all", "task-adaptive": "all", "sieve": "auto"}
PRESET_SELECT: dict[str, SelectName] = {"plain": "top-k", "task-adaptive": "top-k", "sieve": "scope-coe"}
# how passages are read ([reading] reader): the shipped extractive reader beside the rules, or the rules alone
ReaderName = Literal["minilm", "rules"]
RetrievalModeName = Literal["dense", "sparse", "hybrid"]
FusionName = Literal["rrf", "weighted"]
ChunkUnit = Literal["sentence", "window"]
# What the sieve does when its kept passages answer the question differently
# (ragsieve.conflict.ConflictDetector, the sieve's ``conflict`` stage).
ConflictPolicy = Literal["both", "abstain", "trusted"]
DenseKind = Literal["flat", "ivf", "hnsw"]
# embedder.backend and llm.backend: where the vectors and the generations come from.
EmbedderBackendName = Literal["onnx", "sentence-transformers", "openai"]
# embedder.precision (onnx backend): the exported fp32 graph, or its weights quantized to int8 on
# first use (onnxruntime's dynamic quantization; other vectors, so it names the embedder apart).
EmbedderPrecision = Literal["fp32", "int8"]
LLMBackendName = Literal["llama-cpp", "openai"]
# ingest.sentence_vectors: how the checks' stored sentence vectors are made. "one-pass": pooled from
# each chunk's own forward pass (the mean of the sentence's token vectors; the onnx backend only,
# others embed separately); "separate": each sentence embedded on its own, a second pass.
SentenceVectorMethod = Literal["one-pass", "separate"]
# generation.polar_answers: a yes/no question's reply as sampled, or its yes/no read off the
# label log-probabilities (ragsieve.generate.polar).
PolarAnswers = Literal["free", "label"]
StoreBackendName = Literal["folder", "milvus"]
# stages.injection.action: what the injection check does with a passage's sentences that instruct
# the reader: "remove" them from the text the generator sees (the passage kept otherwise), or
# "record" them in the trace and the signals only (the default: docs/results/injection.md).
InjectionAction = Literal["off", "record", "remove"]
FilterName = Literal["none", "direct", "icl", "proxy", "ensemble"]  # stages.filter.filter
# stages.filter.task: the built-in classification tasks (ragsieve.filtering.tasks), and the kind
# a custom task borrows its default wording from.
FilterTaskName = Literal["sst-2", "sst-5", "mr", "trec", "cola"]
FilterTaskKind = Literal["sentiment", "question", "grammar"]
# What the ``decide`` stage does with the combined confidence: "decide" answers, answers with a
# caveat or abstains; "observe" records the signals and the draft and always answers (to collect
# training rows for a decision model).
DecideMode = Literal["decide", "observe"]
# The verify stage's withdrawals that may still end a run on their own when the ``decide`` stage
# runs (``decide.vetoes``); any other withdrawal is a signal the decision weighs. "responsive":
# the reply does not answer the question; "unsupported": no answer sentence is supported;
# "min_confidence": below ``stages.verify.min_confidence``; "value_tie": the answer's date, number,
# quantity or name is stated by the evidence only about another fact (``stages.verify.tie_values``).
# "responsive.<reason>" vetoes one way of not answering only (ragsieve.verify.responsive): "empty",
# "pasted_passage" (a passage pasted whole), "restated_question", "wrong_kind" (no value of the kind
# asked for), "ungrounded" (values of that kind, none in the cited evidence). "coordinated" (the
# decide stage's own, with ``stages.poison.coordination`` on): the answer is stated, among its
# evidence, only by members of coordinated voices (ragsieve.voices.answer_coordination).
# "contradiction": the cited evidence answers the asked fact with another value than the answer's
# (``stages.verify.contradiction``; ragsieve.verify.grounding.find_contradiction); "contradiction.numeric"
# (a date, number or quantity) and "contradiction.name" one family only.
VetoName = Literal[
    "responsive", "unsupported", "min_confidence", "value_tie", "coordinated",
    "responsive.empty", "responsive.pasted_passage", "responsive.restated_question",
    "responsive.wrong_kind", "responsive.ungrounded",
    "contradiction", "contradiction.numeric", "contradiction.name",
]  # fmt: skip
# The vetoes ``decide.vetoes`` holds by default: the one place the default is stated. A withdrawal
# is a default veto only where its measured precision as a veto is at least 0.9 on at least 100
# outside cases it was not tuned on (docs/results/verification.md, "Verification: an answer that
# contradicts its evidence"; benchmarks/grounding_contradiction.py). "contradiction.numeric":
# 653 of 671 fired drafts wrong, 97.3 % [95.8, 98.3], on 2,234 outside pairs; names (180 of 217,
# 82.9 % [77.4, 87.4]) stay a signal and a caveat. "value_tie", measured on the same pairs, is not
# one: dates, numbers and quantities 519 of 605, 85.8 % [82.8, 88.3]; names 529 of 666, 79.4 %
# [76.2, 82.3].
DEFAULT_VETOES: tuple[VetoName, ...] = ("contradiction.numeric",)


def is_veto(kind: str, reason: str | None, vetoes: Collection[str]) -> bool:
    """Whether a withdrawal of ``kind`` (``responsive``, ``value_tie``, ...) for ``reason`` (a way
    of not answering, or ``None``) is one of ``vetoes`` (``decide.vetoes``): ``responsive`` vetoes
    every reason, ``responsive.wrong_kind`` that one only. The verify stage asks it at run time and
    ``ragsieve.eval.checks.vetoed`` when a report replays a run made in observe mode."""
    return kind in vetoes or (reason is not None and f"{kind}.{reason}" in vetoes)


# The responsiveness check's reasons for a reply that does not answer (each a ``verify.<reason>``
# signal for the decide stage); a reply that says it cannot answer is the decline check's.
UnresponsiveReason = Literal["empty", "pasted_passage", "restated_question", "wrong_kind", "ungrounded"]
# verify.tie_values: what the verify stage does with a date, number, quantity or name of the asked kind
# that the evidence states only about another fact than the question asks
# (ragsieve.verify.grounding): "off" ignores it (a value anywhere in the evidence counts),
# "caveat" records a signal and asks the decide stage to withdraw the draft, which it answers
# with a caveat naming where the evidence states the value (a veto only when ``decide.vetoes``
# lists "value_tie"; its measured precision as a veto is below 0.9: DEFAULT_VETOES), "fail" makes
# the value fail value grounding (the sentence is unsupported).
ValueTie = Literal["off", "caveat", "fail"]
# The stage sections' option sets (``stages.<stage>`` of the config; docs/stages/sieve.md).
# need.mode: "auto" asks the task router (then a probe's best judge score), "always" retrieves.
NeedMode = Literal["auto", "always"]
# need.closed_book: "never" answers from evidence only, "allow" answers from the model alone
# when no passage is relevant to a request the task router would answer directly.
ClosedBookPolicy = Literal["never", "allow"]
# judge.kind: the bundled CRAG-style evaluator or a sentence-transformers cross-encoder.
JudgeKind = Literal["evaluator", "cross-encoder"]
# poison.duplicates: what the poisoning check does with a near-duplicate cluster.
DuplicateAction = Literal["dedupe", "drop", "keep"]
# select.coe_features: how ScopeCoE reads the question (rules, or two LLM generations).
CoEFeatures = Literal["rules", "llm"]
# verify.claim_judge: the judge of each answer sentence's support.
ClaimJudgeName = Literal["lexical-embedding", "llm-logprob"]
# route.classifier: the domain router's estimator (ragsieve.route.router).
RouterClassifierName = Literal["logreg", "multinomial-nb", "gaussian-nb", "linear-svc", "embedding-logreg"]
# retrieval.use_source_weights: the learned source weights at query time.
SourceWeightUse = Literal["off", "prune", "reweight"]
# The sections of the components outside the sieve's stage list. ScopeCoE (``stages.coe``): the
# judge of each question feature, and how the minimal cover is searched ("auto": exact up to
# ``max_exact`` candidates, greedy beyond).
IntentJudgeKind = Literal["embedding", "llm"]
KeywordJudgeKind = Literal["lexical", "embedding", "lexical+embedding", "llm"]
RelationJudgeKind = Literal["embedding", "llm"]
CoverSearch = Literal["greedy", "exact", "auto"]
# The task-adaptive preset (``stages.tasks``): the three request tasks, the task router, the
# retrieval evaluator and what HyDE's rerank scores against.
TaskLabel = Literal["information_retrieval", "text_generation", "general_qa"]
TaskClassifierKind = Literal["tfidf", "llm-json", "llm-logprob", "fixed"]
TaskEvaluatorKind = Literal["trained", "llm", "off"]
HydeRerank = Literal["query", "fused"]

__all__ = [
    "SIEVE_STAGES",
    "ChunkUnit",
    "ClaimJudgeName",
    "ClosedBookPolicy",
    "CoEFeatures",
    "ConflictPolicy",
    "CoverSearch",
    "DecideMode",
    "DenseKind",
    "DuplicateAction",
    "EmbedderBackendName",
    "EmbedderPrecision",
    "FilterName",
    "FilterTaskKind",
    "FilterTaskName",
    "FusionName",
    "HydeRerank",
    "IntentJudgeKind",
    "JudgeKind",
    "KeywordJudgeKind",
    "LLMBackendName",
    "PRESET_ROUTE",
    "PRESET_SELECT",
    "NeedMode",
    "PipelineName",
    "PolarAnswers",
    "RelationJudgeKind",
    "RetrievalModeName",
    "RouterClassifierName",
    "ReaderName",
    "SelectName",
    "SentenceVectorMethod",
    "SourceWeightUse",
    "StoreBackendName",
    "TaskClassifierKind",
    "TaskEvaluatorKind",
    "TaskLabel",
    "ValueTie",
    "preset_name",
    "DEFAULT_VETOES",
    "VetoName",
    "is_veto",
]
