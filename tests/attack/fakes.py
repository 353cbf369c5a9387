"""Fakes and a tiny corpus for the attack tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.helpers import HashEmbedder

from ragsieve.llm.base import ContinuationScore, Generation, as_messages
from ragsieve.types import Chunk

FACTS = [
    ("hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600.", "globe-theatre.org"),
    ("everest", "Mount Everest is the highest mountain on Earth, on the border of Nepal and China.", "peaks.org"),
    ("curie", "Marie Curie was born in Warsaw and later worked in Paris on radioactivity.", "science.org"),
    ("nile", "The Nile flows north through Egypt into the Mediterranean Sea.", "rivers.org"),
    ("python", "The Python programming language was created by Guido van Rossum.", "code.org"),
    ("moon", "Neil Armstrong was the first person to walk on the Moon in 1969.", "space.org"),
    ("tokyo", "Tokyo is the capital city of Japan and its largest metropolis.", "cities.org"),
    ("mona", "The Mona Lisa was painted by Leonardo da Vinci and hangs in the Louvre.", "art.org"),
]
QUESTIONS = [
    {"id": "q-hamlet", "question": "Who wrote the tragedy Hamlet?", "answers": ["William Shakespeare"]},
    {"id": "q-curie", "question": "In which city was Marie Curie born?", "answers": ["Warsaw"]},
    {"id": "q-python", "question": "Who created the Python programming language?", "answers": ["Guido van Rossum"]},
    {"id": "q-moon", "question": "Who was the first person to walk on the Moon?", "answers": ["Neil Armstrong"]},
    {"id": "q-tokyo", "question": "What is the capital city of Japan?", "answers": ["Tokyo"]},
    {"id": "q-mona", "question": "Who painted the Mona Lisa?", "answers": ["Leonardo da Vinci"]},
]


def fact_chunks() -> list[Chunk]:
    return [Chunk(id=f"{k}:0", text=t, doc_id=k, source=s, domain="facts", title=k) for k, t, s in FACTS]


def build_index(folder: Path) -> Any:
    from ragsieve.index import Index

    return Index.from_chunks(fact_chunks(), folder, embedder=HashEmbedder())


class EchoLLM:
    """Answers with the first numbered evidence line (a reader that trusts rank 1); the
    attack tests need an answer that follows whatever evidence ranks first."""

    model_name = "echo"

    def __init__(self) -> None:
        self.calls = 0

    def warm_up(self) -> None:
        pass

    def generate(self, prompt: Any, *, max_tokens: int = 256, temperature: float = 0.0,
                 stop: Sequence[str] | None = None, seed: int | None = None) -> Generation:
        self.calls += 1
        text = as_messages(prompt)[-1]["content"]
        for line in text.splitlines():
            if line.startswith("[1] "):
                return Generation(line[4:], 10, 10, "stop")
        return Generation("I don't know.", 10, 3, "stop")

    def generate_json(self, prompt: Any, schema: dict[str, Any], *, max_tokens: int = 256) -> dict[str, Any]:
        return {}

    def continuation_logprobs(self, prompt: Any, continuations: Sequence[str]) -> list[ContinuationScore]:
        return [ContinuationScore(-1.0, 1) for _ in continuations]

    def next_token_logprobs(self, prompt: Any, candidates: Sequence[str]) -> list[float]:
        return [-1.0 for _ in candidates]

    def perplexity(self, prompt: Any, answer: str) -> float:
        return 1.0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "echo"}


class SamplingLLM(EchoLLM):
    """Writer fake: the 'sample' depends only on the prompt and the seed."""

    model_name = "sampling"

    def generate(self, prompt: Any, *, max_tokens: int = 256, temperature: float = 0.0,
                 stop: Sequence[str] | None = None, seed: int | None = None) -> Generation:
        self.calls += 1
        text = as_messages(prompt)[-1]["content"]
        answer = text.split("Answer: ", 1)[1].split("\n", 1)[0]
        return Generation(f"Records from {seed % 97} confirm it was {answer}.", 10, 10, "stop")
