"""Open the store a config names, so every command runs the same way on the folder index or Milvus.

An index folder whose chunks live in Milvus holds ``store.json`` (backend, collection and, for
Milvus Lite, the database file's name inside the folder). It lets ``--index DIR`` alone reopen a
local Milvus Lite file, but a server URI is only used when the user's config or flags give it:
a folder someone downloaded cannot make ragsieve connect anywhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ragsieve.config import PipelineConfig, StoreConfig
from ragsieve.embed import Embedder
from ragsieve.errors import ConfigError, IndexStoreError
from ragsieve.index import Index
from ragsieve.io import atomic_write_json
from ragsieve.store.protocol import Store

STORE_FILE = "store.json"
# Milvus Lite's database inside the index folder when no uri is configured.
LITE_FILE = "milvus.db"


def is_remote(uri: str) -> bool:
    return "://" in uri


def milvus_uri(store: StoreConfig, index_dir: Path) -> str:
    """The configured URI, or the Milvus Lite file inside the index folder."""
    return store.uri if store.uri else str(index_dir / LITE_FILE)


def read_store_file(index_dir: Path) -> dict[str, Any] | None:
    path = index_dir / STORE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexStoreError(f"{path} is unreadable ({exc}); re-run `ragsieve ingest` with --store milvus") from exc
    if not isinstance(data, dict) or data.get("backend") != "milvus":
        raise IndexStoreError(f"{path} does not describe a Milvus store; re-run `ragsieve ingest` with --store milvus")
    return data


def write_store_file(index_dir: Path, store: StoreConfig, uri: str) -> None:
    """Record where this folder's chunks live; a local file is recorded by its name in the folder."""
    inside = not is_remote(uri) and Path(uri).resolve().parent == index_dir.resolve()
    atomic_write_json(
        index_dir / STORE_FILE,
        {
            "backend": "milvus",
            "collection": store.collection,
            "lite_file": Path(uri).name if inside else None,
            "uri": None if inside else uri,
        },
    )


def effective_store_config(config: PipelineConfig, index_dir: Path) -> StoreConfig:
    """``config.store``, or the local Milvus Lite store that ``store.json`` in the folder names."""
    recorded = read_store_file(index_dir)
    if config.store.backend == "milvus" or recorded is None:
        return config.store
    if recorded.get("lite_file"):
        name = Path(str(recorded["lite_file"])).name
        return StoreConfig(backend="milvus", uri=str(index_dir / name), collection=recorded["collection"])
    raise ConfigError(
        f"the chunks of {index_dir} live in Milvus at {recorded.get('uri')} (collection {recorded.get('collection')}); "
        f"pass --store milvus --store-uri URI (or set store.backend and store.uri in the config) to connect"
    )


def open_store(config: PipelineConfig, index_dir: str | Path, embedder: Embedder) -> Store:
    """The store ``config.store`` names over ``index_dir``, opened for reading and writing."""
    from ragsieve.store.folder import FolderStore
    from ragsieve.store.milvus import MilvusStore

    folder = Path(index_dir)
    store = effective_store_config(config, folder)
    if store.backend == "folder":
        return FolderStore.open(folder, embedder, config)
    token = ""
    if store.token_env:
        token = os.environ.get(store.token_env, "")
        if not token:
            raise ConfigError(f"store.token_env names ${store.token_env}, which is not set; export the Milvus token")
    return MilvusStore(milvus_uri(store, folder), embedder, collection=store.collection, directory=folder, token=token)


def open_index(config: PipelineConfig, embedder: Embedder, *, wait_for_embedder: bool = True) -> Index | Store:
    """What a pipeline searches: the folder ``Index`` itself, or the Milvus store the config (or the
    folder's ``store.json``, for a local Milvus Lite file) names. Warmed up (a folder index's
    embedder still loading when ``wait_for_embedder`` is false: :meth:`Index.warm_up`)."""
    if not config.index_dir:
        raise ConfigError("no index configured; pass --index DIR or set index_dir in the config")
    folder = Path(config.index_dir)
    opened: Index | Store
    if effective_store_config(config, folder).backend == "folder":
        opened = Index.open(folder, embedder=embedder)
        opened.warm_up(wait_for_embedder=wait_for_embedder)
        return opened
    opened = open_store(config, folder, embedder)
    opened.warm_up()
    return opened
