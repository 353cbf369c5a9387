"""Small fakes for the tasks and expand tests: a scripted LLM and a bag-of-words embedder."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ragsieve.errors import LLMOutputError
from ragsieve.llm.base import ContinuationScore, Generation, Prompt, as_messages


class HashEmbedder:
    """Deterministic bag-of-words embedder (hashing trick), L2-normalised."""

    model_name = "hash-bow"
    dim = 256

    def warm_up(self) -> None:
        pass

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                h = int(hashlib.md5(w.encode()).hexdigest()[:8], 16)
                out[i, h % self.dim] += 1.0
            n = np.linalg.norm(out[i])
            if n > 0:
                out[i] /= n
        return out


class ScriptedLLM:
    """Returns scripted generations / JSON objects in order; records prompts."""

    model_name = "scripted"

    def __init__(
        self,
        texts: Sequence[str] = (),
        json_objects: Sequence[Any] = (),
        logprobs: Callable[[str, str], float] | None = None,
        delay_s: float = 0.0,
    ) -> None:
        self.texts = list(texts)
        self.json_objects = list(json_objects)
        self.logprobs = logprobs
        self.delay_s = delay_s
        self.prompts: list[str] = []
        self.calls = 0

    def warm_up(self) -> None:
        pass

    def _text(self, prompt: Prompt) -> str:
        return "\n".join(m["content"] for m in as_messages(prompt))

    def generate(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> Generation:
        self.calls += 1
        self.prompts.append(self._text(prompt))
        text = self.texts.pop(0) if self.texts else "An answer."
        return Generation(text, 10, 5, "stop")

    def generate_json(
        self, prompt: Prompt, schema: dict[str, Any], *, max_tokens: int = 256
    ) -> dict[str, Any]:
        self.calls += 1
        self.prompts.append(self._text(prompt))
        if self.delay_s:
            time.sleep(self.delay_s)
        obj = self.json_objects.pop(0) if self.json_objects else {}
        if isinstance(obj, Exception):
            raise obj
        return obj

    def continuation_logprobs(self, prompt: Prompt, continuations: Sequence[str]) -> list[ContinuationScore]:
        text = self._text(prompt)
        fn = self.logprobs or (lambda _p, _c: -1.0)
        return [ContinuationScore(fn(text, c), 3) for c in continuations]

    def next_token_logprobs(self, prompt: Prompt, candidates: Sequence[str]) -> list[float]:
        return [-1.0 for _ in candidates]

    def perplexity(self, prompt: Prompt, answer: str) -> float:
        return 1.0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def to_dict(self) -> dict[str, Any]:
        return {"type": "scripted"}


MALFORMED = LLMOutputError("not JSON")
