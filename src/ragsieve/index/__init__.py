"""Dense (faiss), sparse (bm25s) and hybrid retrieval over an on-disk index."""

from ragsieve.index.filters import parse_where, where_mask
from ragsieve.index.fusion import reciprocal_rank_fusion, weighted_score_fusion
from ragsieve.index.store import FORMAT_VERSION, BuildReport, Index, validate_k

__all__ = [
    "FORMAT_VERSION",
    "BuildReport",
    "Index",
    "parse_where",
    "reciprocal_rank_fusion",
    "weighted_score_fusion",
    "validate_k",
    "where_mask",
]
