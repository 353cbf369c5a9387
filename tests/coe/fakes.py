"""Fakes for the chain-of-evidence tests."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ragsieve.errors import LLMOutputError
from ragsieve.llm.base import Generation, as_messages


class FakeLLM:
    """Scripted LLM: ``generate_json`` pops the next scripted output (an exception instance
    is raised); ``next_token_logprobs`` gives p(yes) from ``p_yes(prompt_text)``."""

    def __init__(
        self,
        json_outputs: Sequence[Any] = (),
        p_yes: Callable[[str], float] | None = None,
        text: str = "",
    ) -> None:
        self.json_outputs = list(json_outputs)
        self.p_yes = p_yes or (lambda _p: 0.5)
        self.text = text
        self.json_calls = 0
        self.prompts: list[str] = []

    @property
    def model_name(self) -> str:
        return "fake-llm"

    def warm_up(self) -> None:
        pass

    def generate(self, prompt: Any, *, max_tokens: int = 256, temperature: float = 0.0,
                 stop: Any = None, seed: Any = None) -> Generation:
        return Generation(self.text, 1, 1, "stop")

    def generate_json(self, prompt: Any, schema: dict[str, Any], *, max_tokens: int = 256) -> dict[str, Any]:
        self.json_calls += 1
        if not self.json_outputs:
            raise LLMOutputError("fake: no scripted output left")
        out = self.json_outputs.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    def next_token_logprobs(self, prompt: Any, candidates: Sequence[str]) -> list[float]:
        text = " ".join(m["content"] for m in as_messages(prompt))
        self.prompts.append(text)
        p = min(max(self.p_yes(text), 1e-9), 1 - 1e-9)
        out = []
        for c in candidates:
            c = c.strip().lower()
            out.append(math.log(p / 4) if c == "yes" else math.log((1 - p) / 4) if c == "no" else -30.0)
        return out

    def continuation_logprobs(self, prompt: Any, continuations: Sequence[str]) -> list[Any]:
        raise NotImplementedError

    def perplexity(self, prompt: Any, answer: str) -> float:
        return 1.0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "fake"}


class BagEmbedder:
    """Deterministic bag-of-words embedder (hashing trick), L2-normalised."""

    model_name = "test/bag"
    dim = 64

    def warm_up(self) -> None:
        pass

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                h = int(hashlib.md5(word.strip(".,?!:").encode()).hexdigest(), 16)
                out[i, h % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "test", "model": self.model_name}
