"""Each option's default is stated in one place: a component the stage builder builds takes the
defaults of its config section (``config.stages.<stage>``), so a component built with no
arguments behaves as the default ``ask`` does. Fails on any constructor default that differs
from its section's field of the same name (a section's ``None`` that means "the component's
own" is allowed only where the section hands the component nothing for it), and on any section
of the config that has no component compared with it and no stated reason."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from ragsieve.coe.judges import LexicalEmbeddingJudge, LLMYesNoJudge
from ragsieve.config import (
    AttackConfig,
    CalibrationConfig,
    ChunkingConfig,
    CoEConfig,
    ConflictConfig,
    CustomFilterTask,
    DecideConfig,
    DenseIndexConfig,
    EmbedderConfig,
    FilterConfig,
    GenerationConfig,
    IngestConfig,
    InjectionConfig,
    JudgeConfig,
    LLMConfig,
    NeedConfig,
    PipelineConfig,
    PoisonConfig,
    PresentConfig,
    ReadingConfig,
    RetrievalConfig,
    RetrieveStageConfig,
    RouterConfig,
    RouteStageConfig,
    SelectConfig,
    StageSections,
    StoreConfig,
    TaskAdaptiveConfig,
    VerifyConfig,
)
from ragsieve.conflict import ConflictDetector
from ragsieve.embed.local import SentenceTransformerEmbedder
from ragsieve.embed.onnx import OnnxEmbedder
from ragsieve.embed.openai_http import OpenAIEmbedder
from ragsieve.expand.hyde import HyDEExpander
from ragsieve.filtering.filters import DirectFilter, EnsembleFilter, ICLFilter, NoFilter
from ragsieve.filtering.injection import InjectionScorer
from ragsieve.ingest.chunking import chunk_text
from ragsieve.llm.llama_cpp import LlamaCppLLM
from ragsieve.llm.openai_http import OpenAICompatibleLLM
from ragsieve.present import present_answer
from ragsieve.route.decide import decide as route_decide
from ragsieve.select import TopKSelector
from ragsieve.sieve.adaptive import TaskAdaptiveParts
from ragsieve.sieve.conflict import ConflictStage
from ragsieve.sieve.decide import DecideStage
from ragsieve.sieve.filter import FilterStage
from ragsieve.sieve.generate import GenerateStage
from ragsieve.sieve.injection import InjectionStage
from ragsieve.sieve.judge import CrossEncoderJudge, JudgeStage, build_judge
from ragsieve.sieve.need import NeedStage
from ragsieve.sieve.poison import PoisonJudge, PoisonStage
from ragsieve.sieve.prior import AuditPrior
from ragsieve.sieve.retrieve import RetrieveStage
from ragsieve.sieve.route import RouteStage
from ragsieve.sieve.select import SelectStage
from ragsieve.sieve.verify import VerifyStage
from ragsieve.tasks.evaluator import LLMRetrievalEvaluator
from ragsieve.tasks.reflection import GenerationReflector
from ragsieve.verify.responsive import ResponsivenessChecker
from ragsieve.verify.verifier import verify_answer

# component (a class, or a function the pipeline calls with a section's options), its config
# section, {parameter: the section's field} where the names differ, and the parameters that share
# a field's name but not its meaning
CASES: list[tuple[Callable[..., Any], type[BaseModel], dict[str, str], set[str]]] = [
    # the stages build_stages builds, each with its section
    (RouteStage, RouteStageConfig, {}, set()),
    (NeedStage, NeedConfig, {}, set()),
    (RetrieveStage, RetrieveStageConfig, {"n": "candidates"}, set()),
    (AuditPrior, RetrieveStageConfig, {"trust": "audit_trust"}, set()),
    (JudgeStage, JudgeConfig, {}, set()),
    (PoisonStage, PoisonConfig, {}, set()),
    (InjectionStage, InjectionConfig, {}, set()),
    (FilterStage, FilterConfig, {}, set()),
    (ConflictStage, ConflictConfig, {}, {"llm"}),  # a callable giving the model, not "use the LLM"
    (SelectStage, SelectConfig, {}, set()),
    (GenerateStage, GenerationConfig, {}, set()),
    (VerifyStage, VerifyConfig, {}, set()),
    (DecideStage, DecideConfig, {}, set()),
    # the components they build from those sections
    (PoisonJudge, PoisonConfig, {}, set()),
    (InjectionScorer, InjectionConfig, {"model_path": "model"}, set()),
    (ResponsivenessChecker, VerifyConfig, {}, set()),
    (ConflictDetector, ConflictConfig, {}, {"llm"}),  # the model itself, not "use the LLM"
    (CrossEncoderJudge, JudgeConfig, {}, set()),
    (TopKSelector, RetrievalConfig, {}, set()),
    (NoFilter, FilterConfig, {}, set()),
    (DirectFilter, FilterConfig, {}, set()),
    (ICLFilter, FilterConfig, {}, set()),
    (EnsembleFilter, FilterConfig, {"theta": "ensemble_theta"}, set()),
    # tie_values: True is the section's "fail"
    (verify_answer, VerifyConfig, {"threshold": "support_threshold"}, {"tie_values"}),
    (route_decide, RouterConfig, {}, set()),
    # ScopeCoE's judges (stages.coe)
    (LLMYesNoJudge, CoEConfig, {"threshold": "llm_threshold", "calibrate": "llm_calibrate"}, set()),
    (
        LexicalEmbeddingJudge,
        CoEConfig,
        {"lexical_threshold": "keyword_lexical_threshold", "embedding_threshold": "keyword_embedding_threshold"},
        set(),
    ),
    # the task-adaptive preset's parts (stages.tasks; k and the generation limits from retrieval
    # and generation); its classifier is a built object, the section's a name
    (TaskAdaptiveParts, TaskAdaptiveConfig, {}, {"k", "classifier"}),
    (TaskAdaptiveParts, RetrievalConfig, {}, set()),
    (TaskAdaptiveParts, GenerationConfig, {}, set()),
    (
        HyDEExpander,
        TaskAdaptiveConfig,
        {"max_tokens": "hyde_max_tokens", "max_sentences": "hyde_max_sentences", "rerank": "hyde_rerank"},
        set(),
    ),
    (
        LLMRetrievalEvaluator,
        TaskAdaptiveConfig,
        {"timeout_s": "evaluator_timeout_s", "max_tokens": "evaluator_max_tokens"},
        set(),
    ),
    (GenerationReflector, TaskAdaptiveConfig, {}, set()),
    # ingest and presentation
    (chunk_text, ChunkingConfig, {}, set()),
    (present_answer, PresentConfig, {}, set()),
    # the models the pipeline loads from the llm and embedder sections
    (LlamaCppLLM, LLMConfig, {"model_path": "model"}, set()),
    (OpenAICompatibleLLM, LLMConfig, {}, set()),
    (SentenceTransformerEmbedder, EmbedderConfig, {}, set()),
    (OpenAIEmbedder, EmbedderConfig, {}, set()),
    # embedder.precision unset: the embedder's own, or that of the index it opens
    (OnnxEmbedder, EmbedderConfig, {}, {"precision"}),
]

# The sections no component's own defaults stand beside, and why: each other section of the config
# has a case above, so a new section fails test_every_section_is_checked until it has one.
NO_COMPONENT_DEFAULTS: dict[type[BaseModel], str] = {
    StageSections: "holds the stage sections",
    IngestConfig: "ingest reads the section itself (its chunking: chunk_text, above)",
    DenseIndexConfig: "the index is built from the section itself",
    StoreConfig: "the store is opened from the section itself",
    CalibrationConfig: "a record of the threshold ragsieve calibrate chose, read by the closing stages",
    ReadingConfig: "names the reader; the reader has no option of its own here",
    CustomFilterTask: "a user's task, no component default (resolve_task checks it)",
    # the red-team harness's section: two defaults of its own on purpose, the ones the harness
    # measured the defence with (its docstring and docs/stages/sieve.md say so)
    AttackConfig: "PoisonJudge's options with the harness's own duplicate_jaccard and duplicates",
}

# how the pipeline builds a component from its section, where a ``None`` in the section means
# "the component's own default": the section must then leave the option out
# (built from the section as the pipeline builds it, built with no options)
BUILT_FROM_SECTION: dict[type, tuple[Callable[[Any], Any], Callable[[], Any]]] = {
    PoisonJudge: (lambda s: PoisonJudge(**s.judge_options()), PoisonJudge),
    ResponsivenessChecker: (lambda s: ResponsivenessChecker(**s.checker_options()), ResponsivenessChecker),
    ConflictDetector: (lambda s: ConflictDetector(s.policy, **s.detector_options()), ConflictDetector),
    # stages.judge.upper/lower = None: the judge's own thresholds
    CrossEncoderJudge: (
        lambda s: build_judge(s.model_copy(update={"kind": "cross-encoder", "model": "m"})),
        lambda: CrossEncoderJudge("m"),
    ),
}


def _defaults(component: Callable[..., Any]) -> dict[str, Any]:
    params = inspect.signature(component.__init__ if isinstance(component, type) else component).parameters  # type: ignore[misc]
    return {n: p.default for n, p in params.items() if p.default is not inspect.Parameter.empty}


def _same(declared: Any, default: Any) -> bool:
    """Equal, a tuple default standing for a list field's (an immutable default)."""
    sequences = (list, tuple)
    if isinstance(declared, sequences) and isinstance(default, sequences):
        return list(declared) == list(default)
    return bool(declared == default)


def _settings(component: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(component).items() if not callable(v) and k not in ("embedder", "llm", "inner")}


def _name(case: Any) -> str:
    return getattr(case, "__name__", "")


@pytest.mark.parametrize(("component", "section", "renamed", "unrelated"), CASES, ids=_name)
def test_a_components_defaults_are_its_config_sections(
    component: Callable[..., Any], section: type[BaseModel], renamed: dict[str, str], unrelated: set[str]
) -> None:
    fields = section.model_fields
    mismatched = {}
    for name, default in _defaults(component).items():
        field = renamed.get(name, name)
        if name in unrelated or field not in fields:
            continue
        declared = fields[field].get_default(call_default_factory=True)
        if _same(declared, default):
            continue
        if declared is None and component in BUILT_FROM_SECTION:
            continue  # "the component's own": checked below, the section hands nothing over
        mismatched[name] = (default, f"{section.__name__}.{field} = {declared!r}")
    assert not mismatched, f"{component.__name__}'s defaults differ from its config section's: {mismatched}"


@pytest.mark.parametrize("component", list(BUILT_FROM_SECTION), ids=_name)
def test_a_component_built_from_its_default_section_is_the_default_component(component: type) -> None:
    section = next(s for c, s, _, _ in CASES if c is component)
    from_section, bare = BUILT_FROM_SECTION[component]
    assert _settings(from_section(section())) == _settings(bare())


def _sections(model: type[BaseModel]) -> set[type[BaseModel]]:
    """Every section model under ``model`` (nested ones, and a union's table member, included)."""
    found: set[type[BaseModel]] = set()
    for field in model.model_fields.values():
        for annotation in (field.annotation, *typing.get_args(field.annotation)):
            for member in (annotation, *typing.get_args(annotation)):
                if isinstance(member, type) and issubclass(member, BaseModel) and member not in found:
                    found |= {member} | _sections(member)
    return found


def test_every_section_is_checked() -> None:
    sections = _sections(PipelineConfig)
    checked = {section for _, section, _, _ in CASES}
    # a section whose options a subclass takes (RouteStageConfig: RouterConfig's) counts as checked
    for section in list(checked):
        checked |= set(section.__mro__)
    unchecked = sections - checked - set(NO_COMPONENT_DEFAULTS)
    assert not unchecked, f"sections with no component defaults compared: {sorted(s.__name__ for s in unchecked)}"
    assert not set(NO_COMPONENT_DEFAULTS) - sections, "NO_COMPONENT_DEFAULTS names a section the config lacks"


def test_the_check_catches_a_mismatch() -> None:
    class Stray:
        def __init__(self, duplicate_jaccard: float = 0.5) -> None:
            self.duplicate_jaccard = duplicate_jaccard

    with pytest.raises(AssertionError, match=r"duplicate_jaccard.*PoisonConfig\.duplicate_jaccard = 0\.95"):
        test_a_components_defaults_are_its_config_sections(Stray, PoisonConfig, {}, set())
