"""LLM backends behind one protocol.

``load_llm(LLMConfig())`` returns the bundled SmolLM2-135M-Instruct through llama.cpp;
``LLMConfig(backend="openai", model=..., base_url=...)`` talks to any OpenAI-compatible server.

Example:
    >>> from ragsieve.config import LLMConfig
    >>> llm = load_llm(LLMConfig(n_threads=1))  # doctest: +SKIP
    >>> llm.warm_up()  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ragsieve.config import LLMConfig
from ragsieve.errors import ConfigError
from ragsieve.llm.base import (
    LLM,
    ChatMessage,
    ContinuationScore,
    Generation,
    Prompt,
    SupportsTokenIds,
    as_messages,
)
from ragsieve.llm.bundled import bundled_gguf_path
from ragsieve.options import LLMBackendName

if TYPE_CHECKING:  # pragma: no cover
    from ragsieve.llm.llama_cpp import LlamaCppLLM
    from ragsieve.llm.openai_http import OpenAICompatibleLLM

# the backends llm.backend names (declared once, in ragsieve.options)
Backend = LLMBackendName


def _build_llama_cpp(config: LLMConfig) -> LlamaCppLLM:
    from ragsieve.llm.llama_cpp import LlamaCppLLM

    return LlamaCppLLM(
        model_path=config.model,
        n_ctx=config.n_ctx,
        n_threads=config.n_threads,
        n_batch=config.n_batch,
        chat_format=config.chat_format,
        seed=config.seed,
        prefix_states=config.prefix_states,
        repeat_penalty=config.repeat_penalty,
    )


def _build_openai(config: LLMConfig) -> OpenAICompatibleLLM:
    from ragsieve.llm.openai_http import OpenAICompatibleLLM

    if not config.model or not config.base_url:
        raise ConfigError(
            "llm.backend='openai' needs llm.model (the served model name) and llm.base_url "
            "(e.g. http://127.0.0.1:8000)"
        )
    return OpenAICompatibleLLM(
        model=config.model,
        base_url=config.base_url,
        api_key_env=config.api_key_env,
        timeout_s=config.timeout_s,
        max_retries=config.max_retries,
        seed=config.seed,
    )


_BACKENDS: dict[Backend, Callable[[LLMConfig], LLM]] = {
    "llama-cpp": _build_llama_cpp,
    "openai": _build_openai,
}


def load_llm(config: LLMConfig | None = None) -> LLM:
    """Build (not yet load: call ``warm_up``) the LLM described by ``config``."""
    config = config if config is not None else LLMConfig.model_validate({})
    return _BACKENDS[config.backend](config)


__all__ = [
    "LLM",
    "Backend",
    "ChatMessage",
    "ContinuationScore",
    "Generation",
    "Prompt",
    "SupportsTokenIds",
    "as_messages",
    "bundled_gguf_path",
    "load_llm",
]
