"""The bundled demo data: a small three-domain corpus, questions with reference answers, and
long-form writing requests, all written for this project.

The corpus lives in ``corpus/<domain>/`` (``physics``, ``chemistry``, ``nanoscience``) as
Markdown, plain text, HTML and one JSONL glossary per domain. Files are located with
:mod:`importlib.resources`, so they resolve from an installed package as well as a checkout.

Example:
    >>> from ragsieve.demo import demo_corpus_dir, demo_questions, demo_writing_requests
    >>> sorted(p.name for p in demo_corpus_dir().iterdir() if p.is_dir())
    ['chemistry', 'nanoscience', 'physics']
    >>> q = demo_questions()[0]
    >>> sorted(q)
    ['answer', 'answer_aliases', 'doc_ids', 'domain', 'id', 'question']
    >>> len(demo_writing_requests())
    20
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from ragsieve.errors import ConfigError, InputError
from ragsieve.io import read_jsonl

__all__ = [
    "DEMO_DOMAINS",
    "DEMO_SHOWCASE",
    "demo_corpus_dir",
    "demo_data_path",
    "demo_questions",
    "demo_writing_requests",
]

DEMO_DOMAINS: tuple[str, ...] = ("physics", "chemistry", "nanoscience")


def demo_data_path(name: str) -> Path:
    """A real filesystem path to a file or folder of the bundled demo data (``"questions.jsonl"``,
    ``"corpus"``), for tools that take a path rather than the rows :func:`demo_questions` returns."""
    ref = resources.files(__name__).joinpath(name)
    path = Path(str(ref))
    if not path.exists():
        raise ConfigError(
            f"bundled demo data {name!r} not found at {path}: the ragsieve installation is incomplete "
            "or was installed from a zip; reinstall with `pip install -e .` (or a regular wheel install)"
        )
    return path


def demo_corpus_dir() -> Path:
    """Folder of the bundled demo corpus; its first-level subfolders are the domains."""
    return demo_data_path("corpus")


def _read_jsonl(name: str) -> list[dict[str, Any]]:
    try:
        return list(read_jsonl(demo_data_path(name)))
    except InputError as exc:
        raise ConfigError(f"bundled demo data is damaged: {exc}; reinstall ragsieve") from exc


def demo_questions(include_unanswerable: bool = False) -> list[dict[str, Any]]:
    """The 40 answerable demo questions, and with ``include_unanswerable`` the 12 the corpus
    cannot answer.

    Each record has ``id``, ``question``, ``domain`` (one domain, or two joined by ``+`` for
    questions that span domains), ``answer`` (a short reference answer), ``answer_aliases``
    (strings a correct answer contains) and ``doc_ids`` (supporting files, relative to
    :func:`demo_corpus_dir`, e.g. ``"physics/029-superconductivity.md"``). Unanswerable rows
    (ids ``u01``...) carry ``"answerable": false``, an empty ``answer`` and no aliases or
    documents: plausible questions in a demo domain that no corpus file answers, for measuring
    abstention.
    """
    rows = _read_jsonl("questions.jsonl")
    return rows if include_unanswerable else [r for r in rows if r.get("answerable", True)]


# What ``ragsieve demo`` asks by default: a question the corpus answers (the judge drops the
# off-topic candidates) and one it cannot answer (the sieve should abstain).
DEMO_SHOWCASE: tuple[str, ...] = (
    "What is graphene made of?",
    "Who invented the cyclotron, and in which year?",
)


def demo_writing_requests() -> list[dict[str, Any]]:
    """The 20 long-form writing requests over the demo corpus (``id``, ``request``, ``domain``)."""
    return _read_jsonl("writing_requests.jsonl")
