"""Query expansion: HyDE (hypothetical-document) retrieval."""

from ragsieve.expand.hyde import HyDEExpander, HyDEResult, merge_hits, rerank_by_cosine, rerank_fused

__all__ = ["HyDEExpander", "HyDEResult", "merge_hits", "rerank_by_cosine", "rerank_fused"]
