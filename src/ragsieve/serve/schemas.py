"""Typed request and response bodies of the HTTP service (the OpenAPI spec is generated from them).

Request models forbid unknown fields where a typo would silently change the answer (``/v1/*``);
the chat endpoint accepts and ignores OpenAI parameters it does not use, so stock clients work.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragsieve.config import PipelineName as ConfigPipelineName

# Bounds keep one request's cost predictable; the pipeline's own limit (retrieval.max_query_chars)
# still applies and answers 400 with its own message.
MAX_TEXT_CHARS = 20_000
MAX_K = 100

# Names a request may use for a pipeline: "ragsieve" is the server's default.
PipelineName = Literal["ragsieve", ConfigPipelineName]
WhereValue = str | int | float | bool | list[str | int | float | bool]


class _Strict(BaseModel):
    # strict: 0 is not false and "3" is not 3, so the spec and the validation agree.
    model_config = ConfigDict(extra="forbid", strict=True)


class ErrorDetail(BaseModel):
    message: str = Field(description="What is wrong and how to fix it.")
    type: str = Field(description="invalid_request_error, authentication_error, rate_limit_error, ...")
    code: str | None = None
    param: str | None = Field(None, description="The request field at fault, when there is one.")


class ErrorResponse(BaseModel):
    """Every 4xx/5xx body (the OpenAI error shape, so OpenAI clients show the message)."""

    error: ErrorDetail


# ---------------------------------------------------------------------- shared pieces
class Hit(BaseModel):
    """One retrieved chunk with each retriever's score (``dense``, ``sparse``, ``fused``...)."""

    model_config = ConfigDict(extra="allow")
    id: str
    rank: int
    score: float
    scores: dict[str, float] = Field(default_factory=dict)
    source: str = ""
    domain: str = ""
    title: str = ""
    text: str = ""


class TraceBody(BaseModel):
    """A request's trace: per-stage ``events``, per-check ``decisions``, ``timings_ms``.

    Open to fields later stages add, so clients should ignore what they do not know."""

    model_config = ConfigDict(extra="allow")
    query: str = ""
    events: list[dict[str, Any]] = Field(default_factory=list)
    decisions: list[dict[str, Any]] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Claim(BaseModel):
    model_config = ConfigDict(extra="allow")
    sentence: str
    cited_ids: list[str] = Field(default_factory=list)
    supported: bool
    score: float
    judge: str


# ---------------------------------------------------------------------- /v1/ask
class AskRequest(_Strict):
    question: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, examples=["What is graphene made of?"])
    pipeline: PipelineName | None = Field(None, description="Default: the server's pipeline.")
    k: int | None = Field(None, ge=1, le=MAX_K, description="Evidence pieces to use.")
    route: str | None = Field(None, max_length=200, description="all, auto or a domain name.")
    no_retrieval: bool = Field(False, description="Answer from the model alone.")


class AskResponse(BaseModel):
    """The same JSON as ``ragsieve ask --json``, plus the index generation that answered."""

    model_config = ConfigDict(extra="allow")
    question: str
    answer: str
    abstained: bool = False
    abstain_reason: str | None = None
    confidence: float | None = None
    cited_ids: list[str] = Field(default_factory=list)
    claims: list[Claim] = Field(default_factory=list)
    evidence: list[Hit] = Field(default_factory=list)
    trace: TraceBody
    pipeline: str
    index_generation: str | None = None


# ---------------------------------------------------------------------- /v1/search
class SearchRequest(_Strict):
    query: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, examples=["how do quantum dots emit light"])
    k: int = Field(10, ge=1, le=MAX_K)
    mode: Literal["dense", "sparse", "hybrid"] | None = None
    route: str | None = Field(None, max_length=200, description="all, auto or a domain name.")
    where: dict[str, WhereValue] | None = Field(None, description="Metadata filter, e.g. {\"domain\": \"physics\"}.")


class SearchResponse(BaseModel):
    query: str
    hits: list[Hit]
    trace: TraceBody
    index_generation: str | None = None
    note: str | None = Field(
        None, description="Why there are no hits, when the query cannot match (e.g. only stopwords)."
    )


# ---------------------------------------------------------------------- /v1/classify
class ClassifyRequest(_Strict):
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, examples=["a gripping, beautiful film"])
    labels: list[str] = Field(min_length=2, max_length=50, examples=[["positive", "negative"]])
    template: str | None = Field(
        None, max_length=4000, description="Preset name (sentiment, ...) or a str.format template."
    )
    knowledge: list[str] = Field(default_factory=list, max_length=20)
    calibrate: bool = True

    @field_validator("labels")
    @classmethod
    def _distinct_labels(cls, value: list[str]) -> list[str]:
        cleaned = [v.strip() for v in value]
        if any(not v for v in cleaned):
            raise ValueError("labels must be non-empty strings")
        if len(set(cleaned)) != len(cleaned):
            raise ValueError("labels must be distinct")
        return cleaned


class ClassifyResponse(BaseModel):
    text: str
    labels: dict[str, float]
    prediction: str
    calibrated: bool
    ms: float


# ---------------------------------------------------------------------- /v1/health
class HealthResponse(BaseModel):
    status: Literal["ok", "starting", "degraded"]
    index_generation: str | None = None
    model_loaded: bool
    model: str | None = None
    pipeline: str
    queue_depth: int
    queue_capacity: int
    problem: str | None = Field(None, description="Why the service is degraded, when it is.")
    connections: dict[str, Any] | None = Field(
        None, description="Connections open now, and those refused (by cap) or timed out (headers, body) so far."
    )


# ---------------------------------------------------------------------- /v1/chat/completions
class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    type: str
    text: str | None = None


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat completion request. The last user message is the question; sampling
    parameters are accepted for compatibility and ignored (the pipeline's config decides)."""

    model_config = ConfigDict(extra="allow", strict=True)
    model: str = Field(examples=["ragsieve"], description="\"ragsieve\" (the server's pipeline) or a pipeline name.")
    messages: list[ChatMessageIn] = Field(min_length=1, max_length=200)
    stream: bool = False
    n: int | None = Field(None, ge=1, le=1, description="Only one choice is produced.")
    temperature: float | None = None
    max_tokens: int | None = None
    user: str | None = None


class ChatMessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatChoice(BaseModel):
    index: int = 0
    message: ChatMessageOut
    finish_reason: Literal["stop", "length"] = "stop"


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    ragsieve_trace: AskResponse = Field(description="The full answer and trace (ignored by OpenAI clients).")
