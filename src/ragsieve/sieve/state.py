"""What every stage shares: the per-request :class:`PipelineState`, the :class:`Stage`
protocol, the presets (stage lists), and :class:`Ref`, the box through which a stage reaches a
resource the pipeline opens or loads later (the index, the LLM, a judge).

A stage gets its resources and its config section when it is built and never sees the
pipeline: ``ragsieve.sieve.pipeline`` is the one module that knows every stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from ragsieve.config import SIEVE_STAGES, PipelineConfig
from ragsieve.errors import ConfigError
from ragsieve.types import Answer, ClaimVerdict, SearchHit, Trace

T = TypeVar("T")

# Receives the answer's text as the LLM generates it: ``sink(piece, attempt)``, where ``attempt``
# names the generation (``"generate"``, or ``"regenerate_generate"`` for the verify stage's
# second answer). Streamed text is provisional: checks after generation may replace it.
TokenSink = Callable[[str, str], None]

PRESETS: dict[str, tuple[str, ...]] = {
    "plain": ("route", "retrieve", "select", "generate"),
    "task-adaptive": ("need", "retrieve", "judge", "generate"),
    "sieve": SIEVE_STAGES,
}


def preset_name(pipeline: str) -> str:
    """The preset a ``config.pipeline`` value names ("direct" is an alias of "plain")."""
    return "plain" if pipeline == "direct" else pipeline


def preset_stages(config: PipelineConfig) -> list[str]:
    """The stage names ``config`` runs: its preset's list minus ``config.ablate``."""
    return [s for s in PRESETS[preset_name(config.pipeline)] if s not in config.ablate]


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
    # chunk ids selection must keep (the conflict stage: one passage of every answer group, so
    # a minimal cover cannot drop one side of a disagreement)
    must_keep: list[str] = field(default_factory=list)
    # the conflict stage's disagreement statement, put before the verified answer
    conflict_message: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Set by Pipeline.stream (and the service's streams); None: generate in one call.
    token_sink: TokenSink | None = None


@runtime_checkable
class Stage(Protocol):
    """One step of a pipeline. ``name`` is its entry in ``SIEVE_STAGES`` (what
    ``config.ablate`` removes) and its key in ``trace.timings_ms``."""

    name: str

    def warm_up(self) -> None: ...

    def run(
        self, question: str, candidates: list[SearchHit], trace: Trace, state: PipelineState
    ) -> list[SearchHit] | Answer: ...


class Ref(Generic[T]):
    """A resource a stage uses but the pipeline provides (possibly later): ``ref()`` returns it,
    built by ``make`` on first use when there is one, else it raises ``ConfigError(missing)``.
    ``ref.value`` is what it holds now (``None`` before it is set or built)."""

    def __init__(
        self, value: T | None = None, make: Callable[[], T] | None = None, missing: str = "not available"
    ) -> None:
        self.value = value
        self.make = make
        self.missing = missing

    def __call__(self) -> T:
        if self.value is None:
            if self.make is None:
                raise ConfigError(self.missing)
            self.value = self.make()
        return self.value


def first_sentence(text: str, limit: int = 160) -> str:
    """The first sentence of ``text`` (clipped to ``limit`` characters), quoted by abstentions."""
    from ragsieve.ingest import split_sentences

    first = (split_sentences(text) or [text])[0].strip()
    return first if len(first) <= limit else first[: limit - 1].rsplit(" ", 1)[0] + "…"


def compare(score: float, threshold: float, op: str = "<", digits: int = 2) -> str:
    """``"score op threshold"`` printed with enough decimals that the two numbers differ, so a
    comparison never reads ``best 0.41 < 0.41``.

    >>> compare(0.4061, 0.41), compare(0.25, 0.41), compare(0.41, 0.41, ">=")
    ('0.406 < 0.410', '0.25 < 0.41', '0.41 >= 0.41')
    """
    for d in range(digits, 7):
        a, b = f"{score:.{d}f}", f"{threshold:.{d}f}"
        if a != b:
            return f"{a} {op} {b}"
    return f"{score:.{digits}f} {op} {threshold:.{digits}f}"
