"""The demo index (bundled corpus, real ONNX MiniLM embedder) and the sieve's checks (bundled
evaluator as judge, bundled LLM for ScopeCoE), shared by the adapters' tests."""

from __future__ import annotations

import os

import pytest

from ragsieve.config import PipelineConfig
from ragsieve.demo import demo_corpus_dir
from ragsieve.index import Index
from ragsieve.sieve.checks import SieveChecks

# Haystack reports pipeline runs to its telemetry service unless told not to.
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")


@pytest.fixture(scope="package")
def demo_index(tmp_path_factory, embedder):
    return Index.build(demo_corpus_dir(), tmp_path_factory.mktemp("adapters") / "idx", embedder=embedder)


@pytest.fixture(scope="package")
def sieve_checks(embedder, llm):
    """The sieve's default candidate checks: judge, poison, filter (off by default), ScopeCoE."""
    checks = SieveChecks(PipelineConfig(), embedder=embedder, llm=llm)
    checks.warm_up()
    return checks
