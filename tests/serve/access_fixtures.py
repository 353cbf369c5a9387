"""Two readers over one real index, for the access tests of the service and the MCP server.

Documents of two owners interleave: each document has a unique marker word in its text, a
unique title and a unique path, so a response that holds, cites or counts a document is found
by looking for its marker, title, path or id. The LLM echoes its prompt (the evidence it was
given included), the strongest leak test: a passage the reader may not read that reached the
prompt would reach the answer."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers import HashEmbedder

from ragsieve.config import PipelineConfig
from ragsieve.index import Index
from ragsieve.llm.base import ContinuationScore, Generation, Prompt, as_messages
from ragsieve.serve.engine import Engine
from ragsieve.serve.keys import key_digest
from ragsieve.types import Chunk

KEY_A = "reader-a-key-0123456789abcdef"
KEY_B = "reader-b-key-0123456789abcdef"
ADMIN = "admin-key-0123456789abcdef-xyz"
# Words every document shares, so any query finds documents of both owners.
TOPICS = ("carbon", "laser", "policy", "budget", "orbit")


@dataclass(frozen=True)
class Doc:
    owner: str  # "a" or "b"
    n: int

    @property
    def marker(self) -> str:
        return f"zq{self.owner}{self.n:03d}mark"

    @property
    def secret(self) -> str:
        """A second unique word, never sent in a request: its presence in a response is a leak."""
        return f"zs{self.owner}{self.n:03d}secret"

    @property
    def title(self) -> str:
        return f"Title{self.owner.upper()}{self.n:03d}x"

    @property
    def path(self) -> str:
        return f"{'alpha' if self.owner == 'a' else 'beta'}/f{self.owner}{self.n:03d}.md"

    @property
    def doc_id(self) -> str:
        return f"doc{self.owner}{self.n:03d}"

    def chunk(self, position: int = 0) -> Chunk:
        topic = TOPICS[self.n % len(TOPICS)]
        text = (
            f"The {topic} note {self.marker} says the {topic} value is {self.n} units. "
            f"It also covers {TOPICS[(self.n + 1) % len(TOPICS)]} and {self.secret} again."
        )
        # Reader a reads by tag, reader b by partition and path: both grant kinds are exercised.
        tags = ["team-a"] if self.owner == "a" else ["team-b"]
        return Chunk(
            id=f"{self.doc_id}:{position}", text=text, doc_id=self.doc_id, source=self.path,
            domain="shared" if self.n % 2 else ("dom" + self.owner), title=self.title, position=position,
            metadata={"tags": tags}, path=self.path,
        )


def documents(per_owner: int = 12) -> list[Doc]:
    docs = []
    for n in range(per_owner):
        docs.extend([Doc("a", n), Doc("b", n)])  # interleaved
    return docs


DOCS = documents()
OWNED = {"a": [d for d in DOCS if d.owner == "a"], "b": [d for d in DOCS if d.owner == "b"]}
KEYS = {"a": KEY_A, "b": KEY_B}


def write_keys_file(folder: Path) -> Path:
    """The keys file of the two readers and the admin, written in ``folder``."""
    keys = folder / "keys.toml"
    keys.write_text(keys_file_text(), encoding="utf-8")
    return keys


def keys_file_text() -> str:
    return (
        '[[key]]\nname = "reader-a"\nsha256 = "' + key_digest(KEY_A) + '"\ntags = ["team-a"]\n\n'
        '[[key]]\nname = "reader-b"\nkey = "' + KEY_B + '"\npaths = ["beta/"]\n\n'
        '[[key]]\nname = "admin"\nsha256 = "' + key_digest(ADMIN) + '"\nall = true\n'
    )


def identifiers(doc: Doc) -> list[str]:
    """What in a response would show ``doc``: its marker, title, path and id."""
    return [doc.marker, doc.secret, doc.title, doc.path, doc.doc_id]


def leaks(text: str, forbidden: Sequence[Doc], sent: str = "") -> list[str]:
    """The identifiers of ``forbidden`` documents in ``text``, except those the request itself
    carried (``sent``: an echo of the caller's own words is no leak)."""
    low, own = text.lower(), sent.lower()
    return [
        ident for doc in forbidden for ident in identifiers(doc) if ident.lower() in low and ident.lower() not in own
    ]


class EchoLLM:
    """Answers with its whole prompt, so whatever evidence reached the prompt reaches the answer."""

    model_name = "echo-llm"

    def warm_up(self) -> None:
        return None

    def _text(self, prompt: Prompt) -> str:
        return " ".join(" ".join(m["content"].split()) for m in as_messages(prompt))

    def generate(
        self, prompt: Prompt, *, max_tokens: int = 256, temperature: float = 0.0,
        stop: Sequence[str] | None = None, seed: int | None = None,
    ) -> Generation:
        text = self._text(prompt)
        return Generation(text, len(text.split()), len(text.split()), "stop")

    def generate_stream(
        self, prompt: Prompt, *, max_tokens: int = 256, temperature: float = 0.0,
        stop: Sequence[str] | None = None, seed: int | None = None,
    ) -> Iterator[str]:
        text = self._text(prompt)
        words = re.findall(r"\s*\S+", text)
        for start in range(0, len(words), 16):  # a piece per 16 words: streams stay fast
            yield "".join(words[start : start + 16])
        return Generation(text, len(text.split()), len(text.split()), "stop")  # type: ignore[misc]

    def generate_json(self, prompt: Prompt, schema: dict[str, Any], *, max_tokens: int = 256) -> dict[str, Any]:
        return {}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def next_token_logprobs(self, prompt: Prompt, candidates: Sequence[str]) -> list[float]:
        text = self._text(prompt).lower()
        return [-0.5 if c.strip().lower() in text else -2.0 for c in candidates]

    def continuation_logprobs(self, prompt: Prompt, continuations: Sequence[str]) -> list[ContinuationScore]:
        return [ContinuationScore(v, 1) for v in self.next_token_logprobs(prompt, continuations)]

    def perplexity(self, prompt: Prompt, answer: str) -> float:
        return 10.0

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "echo"}


def build_index(folder: Path, docs: Sequence[Doc]) -> tuple[Path, HashEmbedder]:
    emb = HashEmbedder()
    Index.from_chunks([d.chunk() for d in docs], folder, embedder=emb).close()
    return folder, emb


def echo_engine(index_dir: Path, emb: HashEmbedder, pipeline: str = "plain") -> Engine:
    cfg = PipelineConfig(index_dir=str(index_dir), pipeline=pipeline)  # type: ignore[arg-type]
    return Engine(cfg, index_opener=lambda d: Index.open(d, embedder=emb), llm=EchoLLM())
