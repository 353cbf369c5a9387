"""Each option's default is stated in one place: a component the stage builder builds takes the
defaults of its config section (``config.stages.<stage>``), so a component built with no
arguments behaves as the default ``ask`` does. Fails on any constructor default that differs
from its section's field of the same name (a section's ``None`` that means "the component's
own" is allowed only where the section hands the component nothing for it)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from ragsieve.config import (
    ConflictConfig,
    EmbedderConfig,
    FilterConfig,
    GenerationConfig,
    InjectionConfig,
    JudgeConfig,
    LLMConfig,
    NeedConfig,
    PoisonConfig,
    RetrievalConfig,
    RetrieveStageConfig,
    RouteStageConfig,
    SelectConfig,
    VerifyConfig,
)
from ragsieve.conflict import ConflictDetector
from ragsieve.embed.local import SentenceTransformerEmbedder
from ragsieve.embed.openai_http import OpenAIEmbedder
from ragsieve.filtering.filters import DirectFilter, EnsembleFilter, ICLFilter, NoFilter
from ragsieve.filtering.injection import InjectionScorer
from ragsieve.llm.llama_cpp import LlamaCppLLM
from ragsieve.llm.openai_http import OpenAICompatibleLLM
from ragsieve.select import TopKSelector
from ragsieve.sieve.conflict import ConflictStage
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
from ragsieve.verify.responsive import ResponsivenessChecker

# component, its config section, {constructor parameter: the section's field} where the names
# differ, and the parameters that share a field's name but not its meaning
CASES: list[tuple[type, type[BaseModel], dict[str, str], set[str]]] = [
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
    # the models the pipeline loads from the llm and embedder sections
    (LlamaCppLLM, LLMConfig, {"model_path": "model"}, set()),
    (OpenAICompatibleLLM, LLMConfig, {}, set()),
    (SentenceTransformerEmbedder, EmbedderConfig, {}, set()),
    (OpenAIEmbedder, EmbedderConfig, {}, set()),
]

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


def _defaults(cls: type) -> dict[str, Any]:
    params = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    return {n: p.default for n, p in params.items() if p.default is not inspect.Parameter.empty}


def _settings(component: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(component).items() if not callable(v) and k not in ("embedder", "llm", "inner")}


def _name(case: Any) -> str:
    return getattr(case, "__name__", "")


@pytest.mark.parametrize(("component", "section", "renamed", "unrelated"), CASES, ids=_name)
def test_a_components_defaults_are_its_config_sections(
    component: type, section: type[BaseModel], renamed: dict[str, str], unrelated: set[str]
) -> None:
    fields = section.model_fields
    mismatched = {}
    for name, default in _defaults(component).items():
        field = renamed.get(name, name)
        if name in unrelated or field not in fields:
            continue
        declared = fields[field].get_default(call_default_factory=True)
        if declared == default:
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


def test_the_check_catches_a_mismatch() -> None:
    class Stray:
        def __init__(self, duplicate_jaccard: float = 0.5) -> None:
            self.duplicate_jaccard = duplicate_jaccard

    with pytest.raises(AssertionError, match=r"duplicate_jaccard.*PoisonConfig\.duplicate_jaccard = 0\.95"):
        test_a_components_defaults_are_its_config_sections(Stray, PoisonConfig, {}, set())
