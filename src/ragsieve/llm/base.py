"""The LLM interface every stage programs against.

Two backends implement it: :class:`ragsieve.llm.llama_cpp.LlamaCppLLM` (a local GGUF
model, by default the bundled SmolLM2-135M-Instruct) and
:class:`ragsieve.llm.openai_http.OpenAICompatibleLLM` (any OpenAI-compatible server:
vLLM, llama.cpp server, Ollama).

Label scoring never parses sampled text: it reads log-probabilities of given
continuations (:meth:`LLM.continuation_logprobs`) or of the next token
(:meth:`LLM.next_token_logprobs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Generator as PyGenerator
from typing import Any, NamedTuple, Protocol, TypedDict, runtime_checkable


class ChatMessage(TypedDict):
    role: str  # "system" | "user" | "assistant"
    content: str


# A bare string is sent as one user message; the backend applies the model's chat template.
Prompt = str | Sequence[ChatMessage]


class Generation(NamedTuple):
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" | "length"


class ContinuationScore(NamedTuple):
    """Log-probability of a continuation after the rendered prompt (assistant turn)."""

    logprob: float  # sum over the continuation's tokens (natural log)
    n_tokens: int

    @property
    def mean_logprob(self) -> float:
        return self.logprob / max(self.n_tokens, 1)


def as_messages(prompt: Prompt) -> list[ChatMessage]:
    if isinstance(prompt, str):
        return [ChatMessage(role="user", content=prompt)]
    return [ChatMessage(role=m["role"], content=m["content"]) for m in prompt]


@runtime_checkable
class LLM(Protocol):
    """What ragsieve needs from a language model."""

    @property
    def model_name(self) -> str: ...

    def warm_up(self) -> None:
        """Load weights or open the connection; idempotent."""

    def generate(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> Generation: ...

    def generate_json(
        self, prompt: Prompt, schema: dict[str, Any], *, max_tokens: int = 256
    ) -> dict[str, Any]:
        """Generate an object that validates against ``schema`` (constrained decoding
        where the backend allows it). Raises :class:`ragsieve.errors.LLMOutputError` when
        the output still does not parse."""
        ...

    def continuation_logprobs(
        self, prompt: Prompt, continuations: Sequence[str]
    ) -> list[ContinuationScore]:
        """Score each continuation as the start of the assistant's reply to ``prompt``."""
        ...

    def next_token_logprobs(self, prompt: Prompt, candidates: Sequence[str]) -> list[float]:
        """Log-probability (full-vocabulary softmax) of each candidate's first token as the
        next token of the assistant's reply. Cheaper than :meth:`continuation_logprobs`:
        one forward pass for all candidates."""
        ...

    def perplexity(self, prompt: Prompt, answer: str) -> float:
        """exp(-mean log p(answer tokens | prompt))."""
        ...

    def count_tokens(self, text: str) -> int: ...

    def to_dict(self) -> dict[str, Any]: ...


# A streamed generation: the text pieces as the model produces them; the generator's return value
# (``StopIteration.value``) is the whole :class:`Generation` with its token counts, or ``None``
# where the backend cannot count them.
TokenStream = PyGenerator[str, None, "Generation | None"]


@runtime_checkable
class SupportsStreaming(Protocol):
    """Optional capability: the reply's text as it is generated.

    ``"".join`` of the pieces equals ``generate(...).text`` for the same arguments (greedy
    decoding is deterministic), so a streamed answer is the answer ``generate`` gives. A
    cancelled job (:mod:`ragsieve.cancel`) stops the stream between pieces with
    :class:`~ragsieve.cancel.GenerationCancelledError`."""

    def generate_stream(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> TokenStream: ...


def generate_streaming(
    llm: LLM,
    prompt: Prompt,
    on_piece: Callable[[str], None],
    *,
    max_tokens: int = 256,
    temperature: float = 0.0,
    stop: Sequence[str] | None = None,
    seed: int | None = None,
) -> Generation:
    """Generate with ``llm``, handing each text piece to ``on_piece`` as it arrives, and return the
    whole :class:`Generation`. A backend without :meth:`SupportsStreaming.generate_stream` generates
    in one call and hands the text over in one piece.

    Example:
        >>> pieces: list[str] = []
        >>> generate_streaming(llm, "Say hi.", pieces.append).text == "".join(pieces)  # doctest: +SKIP
        True
    """
    stream = getattr(llm, "generate_stream", None)
    if not callable(stream):
        out = llm.generate(prompt, max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed)
        if out.text:
            on_piece(out.text)
        return out
    pieces: list[str] = []
    iterator = stream(prompt, max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed)
    try:
        while True:
            try:
                piece = next(iterator)
            except StopIteration as done:
                result: Generation | None = done.value
                break
            if piece:
                pieces.append(piece)
                on_piece(piece)
    finally:
        close = getattr(iterator, "close", None)
        if callable(close):
            close()  # a consumer that failed mid-stream frees the backend (its lock, its connection)
    if result is None:
        text = "".join(pieces)
        return Generation(text, 0, len(pieces), "stop")
    return result


@runtime_checkable
class SupportsTokenIds(Protocol):
    """Optional capability of backends with a local tokenizer (llama.cpp): the token ids of a
    text as it follows the assistant prefix. Used to check that label words start with
    distinct tokens, so one next-token pass can score them."""

    def tokenize_continuation(self, text: str) -> list[int]: ...
