"""Where chunks live: the store protocol, the folder index behind it, and Milvus."""

from ragsieve.store.folder import FolderStore
from ragsieve.store.milvus import MilvusStore, where_expression
from ragsieve.store.protocol import SearchMode, Store

__all__ = ["FolderStore", "MilvusStore", "SearchMode", "Store", "where_expression"]
