"""ragsieve's checks inside the frameworks people already run.

Each adapter is its own extra and imports its framework when its module is imported (without
the extra, the import names the extra to install):

* :mod:`ragsieve.adapters.langchain` (``pip install 'ragsieve[langchain]'``):
  :class:`~ragsieve.adapters.langchain.SieveRetriever`, a LangChain retriever that wraps any
  retriever (or a ragsieve index) and keeps only the candidates the sieve's checks keep;
* :mod:`ragsieve.adapters.llamaindex` (``pip install 'ragsieve[llamaindex]'``):
  :class:`~ragsieve.adapters.llamaindex.SievePostprocessor`, a LlamaIndex node postprocessor;
* :mod:`ragsieve.adapters.haystack` (``pip install 'ragsieve[haystack]'``):
  :class:`~ragsieve.adapters.haystack.SieveDocumentChecker`, a Haystack component.

All three run :class:`ragsieve.sieve.checks.SieveChecks` (judge with entity coverage, poison,
filter when configured, select) and write the verdict into each document's metadata
(``ragsieve_verdict``, ``ragsieve_relevance``, ``ragsieve_label``, ``ragsieve_reasons``,
``ragsieve_dropped_by``).
"""

from __future__ import annotations

# The metadata keys the adapters add to a document (CheckedCandidate.metadata()).
VERDICT_KEYS: tuple[str, ...] = (
    "ragsieve_verdict", "ragsieve_relevance", "ragsieve_label", "ragsieve_reasons", "ragsieve_dropped_by",
)

__all__ = ["VERDICT_KEYS"]
