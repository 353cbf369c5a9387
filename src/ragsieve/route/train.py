"""Training data for the router and training/persistence next to an index.

Two sources, so routing works out of the box:

* labelled questions: a JSONL file of ``{"text": ..., "domain": ...}`` rows;
* the indexed chunks themselves: each chunk's text labelled with its domain, capped per
  domain (a fixed-seed sample) so a large domain does not drown the small ones.

The router is trained at the end of ingest (:func:`ensure_router`) and saved to
``<index dir>/router/``: ``router.npz`` (numpy arrays, for logreg, multinomial-nb and
embedding-logreg) or ``router.skops`` (a skops model that loads without unpickling, for the
others), + ``router.json``, each file written atomically.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from ragsieve.config import RouterConfig
from ragsieve.errors import ConfigError, IndexStoreError, InputError
from ragsieve.io import read_jsonl
from ragsieve.route.router import ClassifierName, DomainRouter
from ragsieve.types import Chunk

logger = logging.getLogger(__name__)

ROUTER_DIR = "router"


# The router's options are declared with the other config sections (``stages.route`` holds them).
RouteConfig = RouterConfig


class LabelledTexts(NamedTuple):
    texts: list[str]
    domains: list[str]
    origin: Literal["labels", "chunks"]


def examples_from_chunks(chunks: Sequence[Chunk], max_per_domain: int = 3000, seed: int = 0) -> LabelledTexts:
    """Chunk texts labelled with their domain, at most ``max_per_domain`` per domain."""
    by_domain: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        if c.text.strip():
            by_domain.setdefault(c.domain, []).append(i)
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    domains: list[str] = []
    for domain in sorted(by_domain):
        rows = by_domain[domain]
        if len(rows) > max_per_domain:
            rows = sorted(rng.choice(rows, size=max_per_domain, replace=False).tolist())
        texts.extend(chunks[i].text for i in rows)
        domains.extend([domain] * len(rows))
    return LabelledTexts(texts, domains, "chunks")


def examples_from_jsonl(
    path: str | Path, text_field: str = "text", domain_field: str = "domain"
) -> LabelledTexts:
    """Labelled questions from a JSONL file with ``text`` and ``domain`` fields."""
    p = Path(path)
    if not p.is_file():
        raise InputError(
            f"labelled questions file {p} does not exist; pass a JSONL file with text and domain"
        )
    texts: list[str] = []
    domains: list[str] = []
    for n, row in enumerate(read_jsonl(p), 1):
        if text_field not in row or domain_field not in row:
            raise InputError(
                f"{p} row {n} lacks {text_field!r} or {domain_field!r}; each row needs both, "
                f'e.g. {{"{text_field}": "is coffee healthy?", "{domain_field}": "health"}}'
            )
        texts.append(str(row[text_field]))
        domains.append(str(row[domain_field]))
    if not texts:
        raise InputError(f"{p} holds no labelled questions")
    return LabelledTexts(texts, domains, "labels")


def default_classifier(origin: Literal["labels", "chunks"]) -> ClassifierName:
    """The classifier used when none is configured, by training source."""
    return "logreg" if origin == "labels" else "multinomial-nb"


def check_domains(router_domains: Sequence[str], index_domains: Sequence[str]) -> list[str]:
    """The router's domains that the index has; raises when they share none."""
    shared = [d for d in router_domains if d in set(index_domains)]
    if not shared:
        raise IndexStoreError(
            f"the router was trained on domains {', '.join(router_domains)} but the index has "
            f"{', '.join(index_domains) or 'none'}; retrain it with `ragsieve router train`"
        )
    missing = sorted(set(router_domains) - set(shared))
    if missing:
        logger.warning("router domains %s are not in the index; they are ignored", ", ".join(missing))
    return shared


def train_router(
    index: Any,
    config: RouteConfig | dict[str, Any] | None = None,
    labels: str | Path | None = None,
    embedder: Any = None,
    save: bool = True,
) -> DomainRouter:
    """Fit a router for ``index`` from labelled questions, or from its chunks when none
    are given, and save it to ``index.dir / "router"``."""
    cfg = RouteConfig.parse(config)
    if len(index.domains) < 2:
        raise InputError(
            f"the index at {index.dir} has {len(index.domains)} domain(s) ({', '.join(index.domains)}); "
            "routing needs at least two: ingest with --partition-by folder|FIELD"
        )
    data = (
        examples_from_jsonl(labels)
        if labels is not None
        else examples_from_chunks(index.chunks, cfg.max_chunks_per_domain, cfg.seed)
    )
    unknown = sorted(set(data.domains) - set(index.domains))
    if unknown:
        raise InputError(
            f"labelled questions name domains the index does not have: {', '.join(unknown)}; "
            f"the index has {', '.join(index.domains)}"
        )
    classifier = cfg.classifier or default_classifier(data.origin)
    router = DomainRouter(classifier=classifier, random_state=cfg.seed)
    if router.uses_embeddings:
        router.set_embedder(embedder if embedder is not None else index.embedder)
    router.fit(data.texts, data.domains)
    if save:
        router.save(
            Path(index.dir) / ROUTER_DIR,
            extra={
                "trained_on": data.origin,
                "labels": str(labels) if labels else None,
                "config": cfg.model_dump(),
            },
        )
    logger.info(
        "trained a %s router on %d %s over %d domains",
        classifier,
        len(data.texts),
        data.origin,
        len(router.classes_),
    )
    return router


def router_is_current(index: Any) -> bool:
    """Whether ``index`` has a saved router trained on exactly its domains."""
    from ragsieve.route.router import ARRAY_FILE, MODEL_FILE

    folder = Path(index.dir) / ROUTER_DIR
    if not any((folder / name).is_file() for name in (ARRAY_FILE, MODEL_FILE)):
        return False
    meta = DomainRouter.read_meta(folder)
    return sorted(str(c) for c in meta.get("classes", [])) == sorted(index.domains)


def ensure_router(index: Any, config: RouteConfig | dict[str, Any] | None = None) -> DomainRouter | None:
    """Train and save the router of a multi-domain ``index`` unless a current one is saved, so
    no query process trains it (called at the end of ingest). A single-domain index, or one
    whose chunks give no usable words, gets none (routing then falls back to the global index)."""
    if len(index.domains) < 2 or router_is_current(index):
        return None
    try:
        return train_router(index, config)
    except (InputError, ConfigError) as exc:
        # ingest succeeded; routing trains on first use or falls back to the global index
        logger.warning("no router trained for %s: %s", index.dir, exc)
        return None


def load_router(index: Any) -> DomainRouter:
    """The router saved with ``index``; the embedding variant reuses the index's embedder."""
    router = DomainRouter.load(Path(index.dir) / ROUTER_DIR)
    if router.uses_embeddings:
        router.set_embedder(index.embedder)
    check_domains([str(c) for c in router.classes_], index.domains)
    return router


__all__ = [
    "ROUTER_DIR",
    "LabelledTexts",
    "RouteConfig",
    "check_domains",
    "default_classifier",
    "ensure_router",
    "examples_from_chunks",
    "examples_from_jsonl",
    "load_router",
    "router_is_current",
    "train_router",
]
