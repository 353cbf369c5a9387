"""Small deterministic stand-ins for the LLM, label scorer, embedder and retriever."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from ragsieve.llm.base import ContinuationScore, Generation, Prompt, as_messages
from ragsieve.types import Chunk, SearchHit


class FakeLLM:
    """Filter prompts: answers "A" (harmful) when the knowledge mentions "bad", "B" otherwise,
    with a bias towards "A" on every prompt (so calibration has something to fix)."""

    model_name = "fake"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def warm_up(self) -> None:
        pass

    def _last(self, prompt: Prompt) -> str:
        return as_messages(prompt)[-1]["content"]

    def next_token_logprobs(self, prompt: Prompt, candidates: Sequence[str]) -> list[float]:
        text = self._last(prompt)
        self.calls.append(text)
        knowledge = text.split("Knowledge: ", 1)[1].split("\n", 1)[0] if "Knowledge: " in text else ""
        p_a = 0.9 if "bad" in knowledge else 0.6  # leans to A
        out = []
        for c in candidates:
            out.append(float(np.log(p_a if c == "A" else (1 - p_a) if c == "B" else 1e-6)))
        return out

    def perplexity(self, prompt: Prompt, answer: str) -> float:
        text = self._last(prompt)
        return 2.0 if "Knowledge:" in text and "bad" in text else 1.5

    def continuation_logprobs(self, prompt: Prompt, continuations: Sequence[str]) -> list[ContinuationScore]:
        return [ContinuationScore(-1.0, 1) for _ in continuations]

    def generate(self, prompt: Prompt, **kwargs: object) -> Generation:
        return Generation("", 0, 0, "stop")

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def to_dict(self) -> dict[str, str]:
        return {"backend": "fake"}


class FakeScorer:
    """p(positive) = 0.6 without knowledge; knowledge with "good" raises it, "bad" lowers it."""

    labels = ["negative", "positive"]

    def __init__(self) -> None:
        self.calls: list[list[str] | None] = []

    def predict_proba(self, llm: object, text: str, knowledge: list[str] | None = None) -> dict[str, float]:
        self.calls.append(knowledge)
        p = 0.6
        for k in knowledge or []:
            if "good" in k:
                p += 0.3
            if "bad" in k:
                p -= 0.4
        p = min(max(p, 0.05), 0.95)
        return {"negative": 1 - p, "positive": p}


class FakeEmbedder:
    dim = 16
    model_name = "fake-embedder"

    def warm_up(self) -> None:
        pass

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                h = int(hashlib.md5(w.encode()).hexdigest(), 16)
                out[i, h % self.dim] += 1.0
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        return out


class FakeRetriever:
    def __init__(self, texts: Sequence[str]) -> None:
        self.chunks = [Chunk(id=f"c{i}", text=t, doc_id=f"d{i}", source="fixture") for i, t in enumerate(texts)]

    def search(self, query: str, k: int = 10, mode: str = "hybrid") -> list[SearchHit]:
        return [SearchHit(c, 1.0 / (i + 1), i + 1, {"dense": 1.0 / (i + 1)}) for i, c in enumerate(self.chunks[:k])]
