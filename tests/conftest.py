"""Shared fixtures. The real bundled models load once per test session."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def llm():
    """The bundled SmolLM2-135M-Instruct through llama.cpp."""
    from ragsieve.config import LLMConfig
    from ragsieve.llm import load_llm

    model = load_llm(LLMConfig(n_threads=1))
    model.warm_up()
    return model


@pytest.fixture(scope="session")
def embedder():
    """The bundled all-MiniLM-L6-v2 sentence embedder."""
    from ragsieve.config import EmbedderConfig
    from ragsieve.embed import load_embedder

    model = load_embedder(EmbedderConfig())
    model.warm_up()
    return model


@pytest.fixture()
def fault_server():
    """A fault-injecting HTTP server on 127.0.0.1 (see ``tests/fault_server.py``)."""
    from tests.fault_server import serve_faults

    with serve_faults() as server:
        yield server
