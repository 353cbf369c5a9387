"""Fixtures for the router tests: a tiny three-domain corpus and a hashing embedder."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

DOMAINS: dict[str, list[str]] = {
    "code": [
        "How to reverse a list in Python with slicing.",
        "Read a JSON file in Python and parse it into a dictionary.",
        "Sort a dictionary by value using sorted and a lambda key function.",
        "Convert a string to an integer in Python with int().",
        "Python list comprehension filters items from an iterable.",
        "Open a file with a context manager so the handle is closed.",
        "Split a string on whitespace and join the words with commas.",
        "Catch an exception in Python with try and except blocks.",
    ],
    "health": [
        "Vitamin D deficiency is linked to weaker bones and fractures.",
        "Green tea contains antioxidants called catechins.",
        "A diet rich in fibre lowers the risk of heart disease.",
        "Regular exercise improves insulin sensitivity in diabetes.",
        "High sodium intake raises blood pressure in many adults.",
        "Coffee consumption and its effect on cardiovascular health.",
        "Processed meat intake is associated with colorectal cancer.",
        "Omega-3 fatty acids from fish may reduce inflammation.",
    ],
    "debate": [
        "Schools should ban homework because it harms family time.",
        "The death penalty should be abolished as it is irreversible.",
        "Governments should subsidise renewable energy over fossil fuels.",
        "Voting should be compulsory to increase democratic participation.",
        "Animal testing should be banned for cosmetics products.",
        "Social media companies should be regulated like publishers.",
        "University tuition should be free for all students.",
        "Nuclear power is a necessary part of a low carbon future.",
    ],
}

QUESTIONS = [
    ("how do I parse json in python", "code"),
    ("python sort list of strings", "code"),
    ("read a file line by line python", "code"),
    ("convert int to string python", "code"),
    ("does vitamin d help bones", "health"),
    ("is coffee bad for the heart", "health"),
    ("fish oil and inflammation", "health"),
    ("salt and blood pressure", "health"),
    ("should homework be banned", "debate"),
    ("is the death penalty justified", "debate"),
    ("should voting be compulsory", "debate"),
    ("free university tuition for students", "debate"),
]


class HashEmbedder:
    """Deterministic bag-of-words hashing embedder (no model), L2-normalised."""

    def __init__(self, dim: int = 64) -> None:
        self._dim = dim

    @property
    def model_name(self) -> str:
        return f"hash-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def warm_up(self) -> None:
        return None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                h = int(hashlib.md5(word.encode()).hexdigest(), 16)
                out[i, h % self._dim] += 1.0 if (h >> 64) % 2 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "hash", "dim": self._dim}


@pytest.fixture()
def hash_embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture()
def corpus_dir(tmp_path: Path) -> Path:
    """A folder per domain, one markdown file per document."""
    root = tmp_path / "corpus"
    for domain, docs in DOMAINS.items():
        (root / domain).mkdir(parents=True)
        for i, text in enumerate(docs):
            (root / domain / f"doc{i}.md").write_text(text + "\n", encoding="utf-8")
    return root


@pytest.fixture()
def index(corpus_dir: Path, tmp_path: Path, hash_embedder: HashEmbedder) -> Any:
    from ragsieve.config import PipelineConfig
    from ragsieve.index import Index

    return Index.build(corpus_dir, tmp_path / "index", config=PipelineConfig(), embedder=hash_embedder)


@pytest.fixture()
def labels_file(tmp_path: Path) -> Path:
    import json

    path = tmp_path / "questions.jsonl"
    path.write_text(
        "".join(json.dumps({"text": t, "domain": d}) + "\n" for t, d in QUESTIONS), encoding="utf-8"
    )
    return path
