"""Embedders: the bundled local MiniLM and OpenAI-compatible endpoints."""

from __future__ import annotations

from ragsieve.config import EmbedderConfig
from ragsieve.embed.base import Embedder, EmbeddingCache, MemoEmbedder, content_key, l2_normalize
from ragsieve.embed.local import BUNDLED_MODEL_NAME, SentenceTransformerEmbedder, bundled_model_dir
from ragsieve.embed.onnx import OnnxEmbedder
from ragsieve.embed.openai_http import OpenAIEmbedder
from ragsieve.errors import ConfigError


def load_embedder(config: EmbedderConfig | None = None) -> Embedder:
    """Build (not warm up) the embedder a config describes."""
    config = config or EmbedderConfig()
    if config.precision not in (None, "fp32") and config.backend != "onnx":
        raise ConfigError(
            f"embedder.precision = {config.precision!r} is an option of the onnx backend only; set "
            "embedder.backend = 'onnx' or embedder.precision = 'fp32'"
        )
    if config.backend == "openai":
        if not config.model or not config.base_url:
            raise ConfigError("the openai embedding backend needs embedder.model and embedder.base_url")
        return OpenAIEmbedder(
            model=config.model,
            base_url=config.base_url,
            api_key_env=config.api_key_env,
            batch_size=config.batch_size,
            timeout_s=config.timeout_s,
            normalize=config.normalize,
            cache_dir=config.cache_dir,
        )
    if config.backend == "onnx":
        if config.device != "cpu":
            raise ConfigError(
                f"the onnx embedding backend runs on the CPU only; for device {config.device!r} set "
                "embedder.backend = 'sentence-transformers'"
            )
        return OnnxEmbedder(
            model=config.model,
            batch_size=config.batch_size,
            threads=config.threads,
            normalize=config.normalize,
            cache_dir=config.cache_dir,
            onnx_dir=config.onnx_dir,
            # left unset: the embedder's own precision, or that of the index it opens
            **({"precision": config.precision} if config.precision else {"follow_index_precision": True}),
        )
    return SentenceTransformerEmbedder(
        model=config.model,
        batch_size=config.batch_size,
        device=config.device,
        normalize=config.normalize,
        cache_dir=config.cache_dir,
    )


__all__ = [
    "BUNDLED_MODEL_NAME",
    "Embedder",
    "EmbeddingCache",
    "MemoEmbedder",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "bundled_model_dir",
    "content_key",
    "l2_normalize",
    "load_embedder",
]
