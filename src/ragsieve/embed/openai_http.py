"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, NonNegativeInt

from ragsieve.embed.base import EmbeddingCache, embed_with_cache, l2_normalize
from ragsieve.errors import ConfigError, ModelError
from ragsieve.http import HTTPStatusError, make_client, parse_reply, post_json

logger = logging.getLogger(__name__)


class _Embedding(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    index: NonNegativeInt
    embedding: list[float]


class EmbeddingsReply(BaseModel):
    """``/v1/embeddings``: ``data[].embedding`` (finite floats) and its ``index``."""

    model_config = ConfigDict(extra="ignore")

    data: list[_Embedding]


class OpenAIEmbedder:
    """Embeddings from any OpenAI-compatible server (vLLM, llama.cpp server, Ollama).

    Example:
        >>> emb = OpenAIEmbedder(model="nomic-embed-text", base_url="http://127.0.0.1:11434/v1")
        >>> emb.embed(["hello"])  # doctest: +SKIP
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key_env: str = "OPENAI_API_KEY",
        batch_size: int = 64,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        normalize: bool = True,
        cache_dir: str | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.normalize = normalize
        self.cache_dir = cache_dir
        self._dim: int | None = None
        self._client: Any = None
        self._cache = EmbeddingCache(Path(cache_dir) / "embeddings.sqlite") if cache_dir else None

    @property
    def model_name(self) -> str:
        return self.model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self._request(["dimension probe"]).shape[1])
        return self._dim

    def warm_up(self) -> None:
        if self._client is None:
            self._client = make_client(self.base_url, self.api_key_env, self.timeout_s)

    def _request(self, texts: list[str]) -> np.ndarray:
        self.warm_up()
        payload = {"model": self.model, "input": texts}
        try:
            answer = post_json(
                self._client,
                "/embeddings",
                payload,
                service="the embedding server",
                max_retries=self.max_retries,
                backoff_s=self.backoff_s,
                timeout_s=self.timeout_s,
            )
        except HTTPStatusError as exc:
            raise ModelError(
                f"the embedding server at {self.base_url} rejected the request ({exc}); "
                f"check that model {self.model!r} is served"
            ) from exc
        reply = parse_reply(EmbeddingsReply, answer, service=f"the embedding server at {self.base_url}/embeddings")
        data = sorted(reply.data, key=lambda d: d.index)
        if [d.index for d in data] != list(range(len(texts))):
            raise ModelError(
                f"the embedding server at {self.base_url} returned {len(data)} vectors (indexes "
                f"{[d.index for d in data][:10]}) for {len(texts)} texts; check that it accepts a list input"
            )
        lengths = {len(d.embedding) for d in data}
        if len(lengths) != 1 or 0 in lengths:
            raise ModelError(
                f"the embedding server at {self.base_url} returned vectors of lengths {sorted(lengths)}; "
                f"check that model {self.model!r} is an embedding model"
            )
        vectors = np.asarray([d.embedding for d in data], dtype=np.float32)
        return l2_normalize(vectors) if self.normalize else vectors

    def _encode(self, texts: list[str]) -> np.ndarray:
        parts = [self._request(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        return np.concatenate(parts) if parts else np.zeros((0, self.dim), dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not self.base_url:
            raise ConfigError("embedder.base_url is required for the openai embedding backend")
        return embed_with_cache(texts, self.model_name, self._encode, self._cache, self.dim)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": "openai",
            "model": self.model,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "batch_size": self.batch_size,
            "timeout_s": self.timeout_s,
            "normalize": self.normalize,
            "cache_dir": self.cache_dir,
        }
