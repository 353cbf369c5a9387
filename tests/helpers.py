"""Small test utilities shared across test modules."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "corpus"


def copy_corpus(dest: Path) -> Path:
    target = dest / "corpus"
    shutil.copytree(CORPUS, target)
    return target


def copy_demo_corpus(dest: Path) -> Path:
    """The bundled demo corpus's Markdown and text files under ``dest / "corpus"`` (the loaders
    of other formats are tested elsewhere)."""
    from ragsieve.demo import demo_corpus_dir

    src = demo_corpus_dir()
    target = dest / "corpus"
    for path in sorted(src.rglob("*")):
        if path.suffix in (".md", ".txt"):
            copied = target / path.relative_to(src)
            copied.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copied)
    return target


class HashEmbedder:
    """Deterministic bag-of-words embedder: fast, and a distinct model name for mismatch tests."""

    def __init__(self, name: str = "test/hash-embedder", dim: int = 64) -> None:
        self._name = name
        self._dim = dim

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def warm_up(self) -> None:
        pass

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                h = int(hashlib.md5(word.strip(".,?!").encode()).hexdigest(), 16)
                out[i, h % self._dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "test", "model": self._name}


def minimal_pdf(text: str) -> bytes:
    """A valid one-page PDF showing ``text`` (built by hand so tests need no PDF writer)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def load_script(path: Path, name: str) -> ModuleType:
    """A script that is not a package module (a file under benchmarks/), imported by path as ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
