"""The folder index behind the store protocol.

:class:`ragsieve.index.Index` is read-only by design (a generation never changes once
published), so writes here build and publish a new generation from the current chunks plus the
change, reusing the stored vectors of unchanged chunks so only new text is embedded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.config import PipelineConfig, RetrievalConfig
from ragsieve.embed import Embedder
from ragsieve.errors import InputError
from ragsieve.index import Index
from ragsieve.store.protocol import SearchMode
from ragsieve.types import Chunk, SearchHit


class FolderStore:
    """:class:`ragsieve.store.Store` over an index folder; reads go straight to the open ``Index``."""

    def __init__(self, index: Index, config: PipelineConfig | None = None) -> None:
        self.index = index
        self.config = config or PipelineConfig()

    @classmethod
    def open(cls, index_dir: str | Path, embedder: Embedder, config: PipelineConfig | None = None) -> FolderStore:
        return cls(Index.open(index_dir, embedder=embedder), config)

    @classmethod
    def create(
        cls,
        chunks: Sequence[Chunk],
        index_dir: str | Path,
        embedder: Embedder,
        config: PipelineConfig | None = None,
    ) -> FolderStore:
        return cls(Index.from_chunks(chunks, index_dir, embedder=embedder, config=config), config)

    # Read side: exactly the attributes Pipeline and the router take from an Index.
    @property
    def dir(self) -> Path:
        return self.index.dir

    @property
    def embedder(self) -> Embedder:
        return self.index.embedder

    @property
    def source_weights(self) -> dict[str, float] | None:
        return self.index.source_weights

    @property
    def generation(self) -> str:
        return self.index.generation

    @property
    def domains(self) -> list[str]:
        return self.index.domains

    @property
    def chunks(self) -> list[Chunk]:
        return self.index.chunks

    def __len__(self) -> int:
        return len(self.index)

    def warm_up(self) -> None:
        self.index.warm_up()

    def close(self) -> None:
        self.index.close()

    def get(self, chunk_id: str) -> Chunk:
        return self.index.get(chunk_id)

    def fields(self) -> set[str]:
        return self.index.fields()

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
    ) -> list[SearchHit]:
        return self.index.search(query, k, mode, where, domains, retrieval, query_vector, prune_threshold)

    # Write side: each call publishes one new generation.
    def add(self, chunks: Sequence[Chunk], embeddings: np.ndarray | None = None) -> None:
        taken = [c.id for c in chunks if c.id in self.index._by_id]
        if taken:
            raise InputError(f"chunk id {taken[0]!r} is already in the store; use upsert to replace it")
        self._publish(list(chunks), embeddings, drop=set())

    def upsert(self, chunks: Sequence[Chunk], embeddings: np.ndarray | None = None) -> None:
        self._publish(list(chunks), embeddings, drop={c.id for c in chunks})

    def delete(self, ids: Sequence[str]) -> int:
        present = {i for i in ids if i in self.index._by_id}
        if present:
            self._publish([], None, drop=present)
        return len(present)

    def _publish(self, new: list[Chunk], embeddings: np.ndarray | None, drop: set[str]) -> None:
        new_vectors = _vectors_for(new, embeddings, self.embedder)
        keep = [i for i, c in enumerate(self.index.chunks) if c.id not in drop]
        chunks = [self.index.chunks[i] for i in keep] + new
        vectors = np.concatenate([np.asarray(self.index.embeddings[keep], dtype=np.float32), new_vectors])
        old = self.index
        self.index = Index.from_chunks(
            chunks, old.dir, embedder=old.embedder, config=self.config, embeddings=vectors, corpus=old.corpus_root
        )
        old.close()


def _vectors_for(chunks: Sequence[Chunk], embeddings: np.ndarray | None, embedder: Embedder) -> np.ndarray:
    """The vectors of ``chunks``: the given ones (checked) or the embedder's."""
    if embeddings is None:
        if not chunks:
            return np.zeros((0, embedder.dim), dtype=np.float32)
        return np.asarray(embedder.embed([c.text for c in chunks]), dtype=np.float32)
    vectors = np.asarray(embeddings, dtype=np.float32)
    if vectors.shape != (len(chunks), embedder.dim):
        raise InputError(
            f"embeddings have shape {vectors.shape} but {len(chunks)} chunks of the embedder's "
            f"dimension {embedder.dim} need ({len(chunks)}, {embedder.dim}); pass one row per chunk or none"
        )
    return vectors
