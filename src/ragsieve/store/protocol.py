"""The store protocol: what the sieve needs from wherever chunks and their vectors live.

Two implementations ship: :class:`ragsieve.store.FolderStore` (the on-disk
:class:`ragsieve.index.Index`, immutable generations) and :class:`ragsieve.store.MilvusStore`
(Milvus Lite in a local file, or a Milvus cluster by URI). ``Pipeline`` and the router only use
the read side (``search``, ``get``, ``domains``, ``embedder``, ``source_weights``, ``dir``,
``generation``), so either store can sit under the unchanged sieve.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from ragsieve.config import RetrievalConfig
from ragsieve.embed import Embedder
from ragsieve.types import Chunk, SearchHit

SearchMode = Literal["dense", "sparse", "hybrid"]


@runtime_checkable
class Store(Protocol):
    """A searchable, writable collection of chunks.

    Semantics every implementation keeps:

    - ids are unique; ``add`` refuses an id that exists, ``upsert`` replaces it, ``delete``
      ignores ids that are absent and returns how many it removed;
    - ``search(mode="dense")`` ranks by the embedder's vectors (inner product on normalised
      vectors), ``"sparse"`` by BM25 over the chunk text, ``"hybrid"`` fuses both with
      ragsieve's own fusion (RRF by default), so scores are comparable across stores;
    - ``domains`` restricts a search to those partitions (``None``: all chunks); ``where``
      filters on chunk attributes and metadata paths (:mod:`ragsieve.index.filters`);
      ``prune_threshold`` drops chunks whose source weight is below it;
    - ``generation`` changes after every write, so a caller can tell that what it read is stale;
    - ``dir`` is a local folder for the files later stages keep beside the store
      (``source_weights.json``, ``router/``).
    """

    @property
    def dir(self) -> Path: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def source_weights(self) -> dict[str, float] | None: ...

    @property
    def generation(self) -> str: ...

    @property
    def domains(self) -> list[str]: ...

    def __len__(self) -> int: ...

    def warm_up(self) -> None: ...

    def close(self) -> None: ...

    def get(self, chunk_id: str) -> Chunk: ...

    def add(self, chunks: Sequence[Chunk], embeddings: np.ndarray | None = None) -> None: ...

    def upsert(self, chunks: Sequence[Chunk], embeddings: np.ndarray | None = None) -> None: ...

    def delete(self, ids: Sequence[str]) -> int: ...

    def fields(self) -> set[str]: ...

    def search(
        self,
        query: str,
        k: int = 10,
        mode: SearchMode = "hybrid",
        where: dict[str, Any] | None = None,
        domains: Sequence[str] | None = None,
        retrieval: RetrievalConfig | None = None,
        query_vector: np.ndarray | None = None,
        prune_threshold: float | None = None,
    ) -> list[SearchHit]: ...
