"""A Milvus collection behind the store protocol.

The same :mod:`pymilvus` client opens Milvus Lite (the embedded engine, a local ``*.db`` file:
what CI and a laptop use) and a Milvus cluster (``http://host:19530``), so a corpus that
outgrows one machine keeps the sieve above unchanged. Dense search uses an inner-product index
on the embedder's normalised vectors; sparse search is Milvus's own BM25 full-text search over
the chunk text; hybrid search fuses the two lists with ragsieve's fusion, as the folder index
does. Domains are a filtered scalar field, metadata filters become Milvus filter expressions.

A second collection, ``<name>_meta``, records the embedder, the per-domain counts, the metadata
fields and a generation counter, so every query server sees the same state. Writes assume one
writer at a time (the ingest process), as the folder index enforces with its lock.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ragsieve.config import RetrievalConfig
from ragsieve.embed import Embedder
from ragsieve.errors import ConfigError, IndexStoreError, InputError
from ragsieve.index.filters import check_where, known_fields
from ragsieve.index.fusion import reciprocal_rank_fusion, top_k, weighted_score_fusion
from ragsieve.index.store import (
    _check_embedder,
    _check_query,
    _follow_index_precision,
    read_source_weights,
    validate_k,
)
from ragsieve.store.folder import _vectors_for
from ragsieve.store.protocol import SearchMode
from ragsieve.types import LOCATION_FIELDS, Chunk, SearchHit

logger = logging.getLogger(__name__)

_ATTRIBUTES = ("domain", "source", "title", "doc_id")
_OUTPUT = ["id", "text", "doc_id", "source", "domain", "title", "position", "metadata"]
# Key inside the metadata JSON field that holds a chunk's source location (see _with_location).
_LOCATION_KEY = "_ragsieve_location"
# VARCHAR limits are in bytes; Milvus refuses longer values.
_MAX_TEXT_BYTES = 65535
_MAX_NAME_BYTES = 4096
_META_KEY = "state"
# Milvus's built-in analyzers for the BM25 text field.
ANALYZERS = ("standard", "english")


def _import_pymilvus() -> Any:
    from ragsieve.extras import require

    return require("pymilvus", "milvus", "the Milvus store")


def _literal(value: Any) -> str:
    """A Milvus filter literal; JSON string syntax is what the expression parser accepts."""
    return json.dumps(value, ensure_ascii=False)


def _values(wanted: Any) -> list[Any]:
    """The literals a filter value matches: the folder index compares as text, so ``3`` matches ``"3"``."""
    out: list[Any] = []
    for v in wanted if isinstance(wanted, list | tuple | set) else [wanted]:
        out.append(str(v))
        if isinstance(v, int | float) and not isinstance(v, bool):
            out.append(v)
        elif isinstance(v, str):
            try:
                number = float(v)
            except ValueError:
                continue
            out.append(int(number) if number.is_integer() else number)
    return list(dict.fromkeys(out))


def where_expression(where: dict[str, Any]) -> str:
    """A Milvus filter expression equivalent to :func:`ragsieve.index.filters.where_mask`."""
    parts = []
    for key, wanted in where.items():
        values = _values(wanted)
        if key == "id" or key in _ATTRIBUTES:
            texts = [v for v in values if isinstance(v, str)]
            parts.append(f"{key} in {_literal(texts)}")
            continue
        path = "metadata" + "".join(f"[{_literal(p)}]" for p in key.removeprefix("metadata.").split("."))
        # Milvus compares JSON values within one type, so texts and numbers go in separate clauses.
        texts = [v for v in values if isinstance(v, str)]
        numbers = [v for v in values if not isinstance(v, str)]
        alternatives = [
            clause
            for group in (texts, numbers)
            if group
            for clause in (f"{path} in {_literal(group)}", f"json_contains_any({path}, {_literal(group)})")
        ]
        parts.append("(" + " or ".join(alternatives) + ")")
    return " and ".join(parts)


class MilvusStore:
    """:class:`ragsieve.store.Store` on Milvus (Lite or a cluster).

    ``uri`` is a local file (Milvus Lite) or a server URL; ``directory`` is the local folder for
    ``source_weights.json`` and ``router/`` (default: ``<file>.ragsieve`` beside a local file).
    ``analyzer`` is the BM25 text analyzer of a collection this creates (an existing collection
    keeps its own): ``standard`` (lower-cased word tokens) or ``english`` (also stopwords removed
    and stemmed, as the folder index's bm25s tokenisation; see docs/results.md on BEIR).

    Example:
        >>> store = MilvusStore("/tmp/ragsieve-doc.db", embedder)  # doctest: +SKIP
        >>> store.add([Chunk(id="a", text="Graphene is one layer of carbon.", doc_id="a", source="a.md")])
        >>> store.search("carbon sheet", k=1)[0].chunk.id
        'a'
    """

    def __init__(
        self,
        uri: str | Path,
        embedder: Embedder,
        collection: str = "ragsieve",
        directory: str | Path | None = None,
        token: str = "",
        analyzer: str = "standard",
    ) -> None:
        if analyzer not in ANALYZERS:
            raise ConfigError(f"unknown Milvus text analyzer {analyzer!r}; use one of {', '.join(ANALYZERS)}")
        self.uri = str(uri)
        self.analyzer = analyzer
        self.embedder = embedder
        self.collection = collection
        self.token = token
        local = "://" not in self.uri
        if directory is None and not local:
            raise ConfigError(
                f"a Milvus server URI ({self.uri}) needs a local directory for source weights and the router; "
                "pass directory=..."
            )
        self.dir = Path(directory) if directory is not None else Path(self.uri + ".ragsieve")
        self._client: Any = None
        self._state: dict[str, Any] | None = None
        self.source_weights: dict[str, float] | None = read_source_weights(self.dir)

    # ------------------------------------------------------------------ connection and state
    @property
    def client(self) -> Any:
        if self._client is None:
            pymilvus = _import_pymilvus()
            if "://" not in self.uri:
                Path(self.uri).parent.mkdir(parents=True, exist_ok=True)
            self.dir.mkdir(parents=True, exist_ok=True)
            try:
                self._client = pymilvus.MilvusClient(uri=self.uri, token=self.token)
            except Exception as exc:
                raise IndexStoreError(
                    f"could not open Milvus at {self.uri} ({exc}); check the URI, or for Milvus Lite that the file "
                    "is not open in another process and milvus-lite is installed (pip install 'ragsieve[milvus]')"
                ) from exc
            self._ensure_collections()
        return self._client

    @property
    def _meta(self) -> str:
        return f"{self.collection}_meta"

    def _ensure_collections(self) -> None:
        from pymilvus import DataType, Function, FunctionType

        c = self._client
        if not c.has_collection(self._meta):
            schema = c.create_schema(auto_id=False)
            schema.add_field("key", DataType.VARCHAR, is_primary=True, max_length=64)
            schema.add_field("value", DataType.JSON)
            # Milvus requires a vector field in every collection; this one is never searched.
            schema.add_field("unused", DataType.FLOAT_VECTOR, dim=2)
            params = c.prepare_index_params()
            params.add_index("unused", index_type="FLAT", metric_type="L2")
            c.create_collection(self._meta, schema=schema, index_params=params, consistency_level="Strong")
        rows = c.query(self._meta, ids=[_META_KEY], output_fields=["value"])
        if rows:
            state = rows[0]["value"]
            # an fp32 collection is searched with fp32 when the precision was left at its default
            self.embedder = _follow_index_precision(self.embedder, state["embedder"])
            _check_embedder(self.embedder, state["embedder"], int(state["dim"]), Path(self.uri))
        else:
            state = {
                "embedder": self.embedder.model_name,
                "dim": self.embedder.dim,
                "domains": {},
                "fields": [],
                "generation": 0,
            }
        self._state = state
        if c.has_collection(self.collection):
            return
        schema = c.create_schema(auto_id=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=_MAX_NAME_BYTES)
        # The standard analyzer is Milvus's default, so collections made before the option are unchanged.
        analyzer = {} if self.analyzer == "standard" else {"analyzer_params": {"type": self.analyzer}}
        schema.add_field("text", DataType.VARCHAR, max_length=_MAX_TEXT_BYTES, enable_analyzer=True, **analyzer)
        schema.add_field("dense", DataType.FLOAT_VECTOR, dim=self.embedder.dim)
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        for name in _ATTRIBUTES:
            schema.add_field(name, DataType.VARCHAR, max_length=_MAX_NAME_BYTES)
        schema.add_field("position", DataType.INT64)
        schema.add_field("metadata", DataType.JSON)
        schema.add_function(
            Function(
                name="bm25", function_type=FunctionType.BM25, input_field_names=["text"], output_field_names=["sparse"]
            )
        )
        params = c.prepare_index_params()
        params.add_index("dense", index_type="FLAT", metric_type="IP")
        params.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        c.create_collection(self.collection, schema=schema, index_params=params, consistency_level="Strong")

    @property
    def state(self) -> dict[str, Any]:
        if self._state is None:
            _ = self.client  # connecting reads the state
        return cast(dict[str, Any], self._state)

    def _save_state(self) -> None:
        self.state["generation"] = int(self.state["generation"]) + 1
        self.client.upsert(self._meta, [{"key": _META_KEY, "value": self.state, "unused": [0.0, 0.0]}])

    def refresh(self) -> None:
        """Re-read the shared state (domains, counts, generation) that another writer may have changed."""
        rows = self.client.query(self._meta, ids=[_META_KEY], output_fields=["value"])
        if rows:
            self._state = rows[0]["value"]

    @property
    def generation(self) -> str:
        """The state as of opening, this store's last write or :meth:`refresh`."""
        return f"milvus-{self.state['generation']}"

    @property
    def domains(self) -> list[str]:
        return sorted(d for d, n in self.state["domains"].items() if n > 0)

    def __len__(self) -> int:
        return int(sum(self.state["domains"].values()))

    def warm_up(self) -> None:
        self.embedder.warm_up()
        _ = self.client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> MilvusStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fields(self) -> set[str]:
        return {"id", *_ATTRIBUTES, *self.state["fields"]}

    # ------------------------------------------------------------------ reads
    def _rows(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        if not ids:
            return []
        return list(self.client.query(self.collection, ids=list(ids), output_fields=_OUTPUT))

    def get(self, chunk_id: str) -> Chunk:
        rows = self._rows([chunk_id])
        if not rows:
            raise InputError(f"no chunk with id {chunk_id!r} in the Milvus collection {self.collection} at {self.uri}")
        return _chunk(rows[0])

    def _scan(self, fields: Sequence[str], batch_size: int) -> Iterator[list[dict[str, Any]]]:
        """Every row's ``fields``, ``batch_size`` rows at a time (the iterator is closed however the scan ends)."""
        it = self.client.query_iterator(self.collection, batch_size=batch_size, filter="", output_fields=list(fields))
        try:
            while batch := it.next():
                yield batch
        finally:
            it.close()

    @property
    def chunks(self) -> list[Chunk]:
        """Every chunk, in id order (the router trains on them); reads the whole collection."""
        out = [_chunk(r) for batch in self._scan(_OUTPUT, 1000) for r in batch]
        return sorted(out, key=lambda c: c.id)

    def stats(self) -> dict[str, Any]:
        """What ``ragsieve info`` shows: the folder index's fields, plus where the collection lives.

        ``sources`` reads the source field of every chunk in batches. The URI is shown without
        user, password or query string, and the token never.
        """
        sources = {str(r["source"]) for batch in self._scan(["source"], 5000) for r in batch} if len(self) else set()
        local = "://" not in self.uri
        return {
            "dir": str(self.dir),
            "backend": "milvus",
            "uri": self.uri if local else redact_uri(self.uri),
            "collection": self.collection,
            "chunks": len(self),
            "domains": dict(sorted(self.state["domains"].items())),
            "sources": len(sources),
            "embedder": self.state["embedder"],
            "dim": int(self.state["dim"]),
            "fields": sorted(self.fields()),
            "bytes": _size(Path(self.uri)) if local else None,
            "generation": self.generation,
        }

    def iter_ids(self, batch_size: int = 10_000) -> Iterator[list[str]]:
        """Every chunk id, ``batch_size`` at a time, without reading texts or vectors."""
        for batch in self._scan(["id"], batch_size):
            yield [str(r["id"]) for r in batch]

    # ------------------------------------------------------------------ writes
    def add(self, chunks: Sequence[Chunk], embeddings: np.ndarray | None = None) -> None:
        existing = self._rows([c.id for c in chunks])
        if existing:
            raise InputError(f"chunk id {existing[0]['id']!r} is already in the store; use upsert to replace it")
        self._write(list(chunks), embeddings, replaced=[])

    def upsert(self, chunks: Sequence[Chunk], embeddings: np.ndarray | None = None) -> None:
        self._write(list(chunks), embeddings, replaced=self._rows([c.id for c in chunks]))

    def delete(self, ids: Sequence[str]) -> int:
        present = self._rows(list(dict.fromkeys(ids)))
        if present:
            self.client.delete(self.collection, ids=[r["id"] for r in present])
            self._count(present, -1)
            self._save_state()
        return len(present)

    def _write(self, chunks: list[Chunk], embeddings: np.ndarray | None, replaced: list[dict[str, Any]]) -> None:
        if not chunks:
            return
        ids = [c.id for c in chunks]
        if len(set(ids)) != len(ids):
            raise InputError("chunk ids must be unique; found duplicates")
        vectors = _vectors_for(chunks, embeddings, self.embedder)
        rows = [_row(c, v) for c, v in zip(chunks, vectors, strict=True)]
        if replaced:
            self.client.upsert(self.collection, rows)
        else:
            self.client.insert(self.collection, rows)
        self._count(replaced, -1)
        self._count([{"domain": c.domain} for c in chunks], +1)
        self.state["fields"] = sorted(set(self.state["fields"]) | (known_fields(chunks) - {"id", *_ATTRIBUTES}))
        self._save_state()

    def _count(self, rows: list[dict[str, Any]], sign: int) -> None:
        counts = self.state["domains"]
        for r in rows:
            counts[r["domain"]] = counts.get(r["domain"], 0) + sign
        self.state["domains"] = {d: n for d, n in counts.items() if n > 0}

    # ------------------------------------------------------------------ search
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
        """Top-``k`` chunks for ``query``, with the folder index's arguments and semantics."""
        retrieval = retrieval or RetrievalConfig()
        query = _check_query(query, retrieval.max_query_chars)
        k = validate_k(k)
        if mode not in ("dense", "sparse", "hybrid"):
            raise InputError(f"unknown search mode {mode!r}; use dense, sparse or hybrid")
        if domains is not None and (isinstance(domains, str) or not all(isinstance(d, str) for d in domains)):
            raise InputError(f"domains must be a list of domain names, got {domains!r}")
        candidates = max(retrieval.candidates, k) if mode == "hybrid" else k
        expr = self._filter(where, domains, prune_threshold)

        found: dict[str, Chunk] = {}
        dense_list: list[tuple[str, float]] = []
        sparse_list: list[tuple[str, float]] = []
        if mode != "sparse":
            qvec = query_vector if query_vector is not None else self.embedder.embed([query])[0]
            dense_list = self._ann(
                [np.asarray(qvec, dtype=np.float32).tolist()], "dense", "IP", candidates, expr, found
            )
        if mode != "dense":
            sparse_list = self._ann([query], "sparse", "BM25", candidates, expr, found)

        # Fusion works on integer ids; number chunks in first-seen order.
        number = {cid: i for i, cid in enumerate(found)}
        dense_rows = [(number[c], s) for c, s in dense_list]
        sparse_rows = [(number[c], s) for c, s in sparse_list]
        if mode == "dense":
            ranked = dense_rows[:k]
        elif mode == "sparse":
            ranked = sparse_rows[:k]
        elif retrieval.fusion == "rrf":
            ranked = top_k(reciprocal_rank_fusion([dense_rows, sparse_rows], k=retrieval.rrf_k), k)
        else:
            w = retrieval.dense_weight
            ranked = top_k(weighted_score_fusion([dense_rows, sparse_rows], [w, 1.0 - w]), k)

        by_number = list(found)
        dense_scores, sparse_scores = dict(dense_rows), dict(sparse_rows)
        hits = []
        for rank, (row, score) in enumerate(ranked, 1):
            per_retriever: dict[str, float] = {}
            if row in dense_scores:
                per_retriever["dense"] = float(dense_scores[row])
            if row in sparse_scores:
                per_retriever["sparse"] = float(sparse_scores[row])
            if mode == "hybrid":
                per_retriever["fused"] = float(score)
            hits.append(SearchHit(found[by_number[row]], float(score), rank, per_retriever))
        return hits

    def _ann(
        self, data: list[Any], field: str, metric: str, limit: int, expr: str, found: dict[str, Chunk]
    ) -> list[tuple[str, float]]:
        if len(self) == 0:
            return []
        result = self.client.search(
            self.collection,
            data=data,
            anns_field=field,
            limit=limit,
            filter=expr,
            output_fields=_OUTPUT,
            search_params={"metric_type": metric},
        )
        out = []
        for hit in result[0]:
            entity = hit["entity"]
            entity.setdefault("id", hit["id"])
            found.setdefault(str(hit["id"]), _chunk(entity))
            out.append((str(hit["id"]), float(hit["distance"])))
        return out

    def _filter(self, where: dict[str, Any] | None, domains: Sequence[str] | None, prune: float | None) -> str:
        parts = []
        if domains:
            unknown = [d for d in domains if d not in self.domains]
            if unknown:
                raise InputError(f"unknown domain {unknown[0]!r}; this index has {', '.join(self.domains)}")
            parts.append(f"domain in {_literal(list(dict.fromkeys(domains)))}")
        if where is not None:
            check_where(where, self.fields())
            if where:
                if "domain" in where:
                    wanted = where["domain"] if isinstance(where["domain"], list) else [where["domain"]]
                    unknown = [d for d in wanted if d not in self.domains]
                    if unknown:
                        raise InputError(f"unknown domain {unknown[0]!r}; this index has {', '.join(self.domains)}")
                parts.append(where_expression(where))
        if prune is not None and self.source_weights:
            weights = self.source_weights
            if prune > 1.0:
                # A source without a weight counts as 1.0, so only listed sources can pass.
                parts.append(f"source in {_literal(sorted(s for s, w in weights.items() if w >= prune))}")
            else:
                parts.append(f"source not in {_literal(sorted(s for s, w in weights.items() if w < prune))}")
        return " and ".join(f"({p})" for p in parts)


def redact_uri(uri: str) -> str:
    """``uri`` without the user, password, query string or fragment a server URL may carry."""
    parts = urlsplit(uri)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def _row(chunk: Chunk, vector: np.ndarray) -> dict[str, Any]:
    if len(chunk.text.encode("utf-8")) > _MAX_TEXT_BYTES:
        raise InputError(
            f"chunk {chunk.id!r} has {len(chunk.text.encode('utf-8'))} bytes of text, over Milvus's "
            f"{_MAX_TEXT_BYTES}-byte limit; ingest with a smaller chunk size"
        )
    for name in ("id", *_ATTRIBUTES):
        if len(str(getattr(chunk, name)).encode("utf-8")) > _MAX_NAME_BYTES:
            raise InputError(f"chunk {chunk.id[:80]!r} has a {name} over {_MAX_NAME_BYTES} bytes; shorten it")
    return {
        "id": chunk.id,
        "text": chunk.text,
        "dense": vector.tolist(),
        "domain": chunk.domain,
        "source": chunk.source,
        "title": chunk.title,
        "doc_id": chunk.doc_id,
        "position": int(chunk.position),
        "metadata": _with_location(chunk),
    }


def _with_location(chunk: Chunk) -> dict[str, Any]:
    """The chunk's metadata plus its source location (path, page, heading...) under a reserved key.

    The location travels inside the JSON field so collections made before chunks had one keep
    their schema; :func:`_chunk` takes it out again, so filters and ``fields()`` never see it.
    """
    location = {k: v for k, v in chunk.location().items() if v is not None}
    return {**chunk.metadata, _LOCATION_KEY: location} if location else dict(chunk.metadata or {})


def _chunk(entity: dict[str, Any]) -> Chunk:
    metadata = dict(entity.get("metadata") or {})
    location = metadata.pop(_LOCATION_KEY, None)
    location = location if isinstance(location, dict) else {}
    return Chunk(
        id=str(entity["id"]),
        text=entity["text"],
        doc_id=entity["doc_id"],
        source=entity["source"],
        domain=entity["domain"],
        title=entity["title"],
        position=int(entity["position"]),
        metadata=metadata,
        **{name: location.get(name) for name in LOCATION_FIELDS},
    )
