"""The work the configurations of one evaluation share: one index, one LLM and one embedding
memo per distinct configuration of each, the hybrid searches of a question, and the relevance
judge's scores of (question, passage) pairs.

``ragsieve eval`` answers every question with several configurations (the sieve, plain RAG, no
retrieval, ablations). Built on their own, each configuration opens the index, loads the LLM and
the embedder, embeds the question, searches, judges the candidates and embeds their sentences
itself, so ``--only sieve,plain`` does that work twice. :class:`SharedWork` builds every
configuration's :class:`~ragsieve.sieve.pipeline.Pipeline` over shared parts instead:

- the index is opened once per (index folder, store, embedder) and handed to each pipeline
  behind a :class:`MemoSearch`, which answers a search it has seen with the hits it returned
  (keyed by the query, its vector and every search argument: ``k``, mode, filters, partitions,
  the retrieval settings, the pruning threshold), so configurations whose retrieval settings
  differ never share hits;
- the embedder is loaded once per embedder configuration behind one
  :class:`~ragsieve.embed.base.MemoEmbedder` (each text embedded once for all the pipelines,
  the fixed faithfulness judge and the fair baselines; the candidates' stored index vectors are
  handed to it as they are retrieved);
- the LLM is loaded once per LLM configuration (llama.cpp generation starts from an empty KV
  cache, so a shared model gives each configuration the answers it gives alone);
- the relevance judge is built once per (judge, judge model, embedder) behind a
  :class:`MemoJudge`, which scores each (question, passage) pair once (the bundled evaluator's
  and a cross-encoder's scores are per passage).

Generation and every decision stay each configuration's own: only work that is a pure function
of its inputs is shared, so each configuration gets the answers it gets when run alone
(``tests/eval/test_eval_shared.py`` compares them).

Example:
    >>> from ragsieve.config import PipelineConfig
    >>> shared = SharedWork()
    >>> sieve = shared.pipeline(PipelineConfig(pipeline="sieve", index_dir="demo-index"))  # doctest: +SKIP
    >>> plain = shared.pipeline(PipelineConfig(pipeline="plain", index_dir="demo-index"))  # doctest: +SKIP
    >>> sieve.index is plain.index, sieve.llm is plain.llm  # doctest: +SKIP
    (True, True)
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ragsieve.embed.base import MemoEmbedder

if TYPE_CHECKING:
    from ragsieve.config import EmbedderConfig, LLMConfig, PipelineConfig
    from ragsieve.sieve.pipeline import Pipeline

__all__ = ["MemoJudge", "MemoSearch", "SharedWork"]

# Searches and judge scores kept: the evaluation is item-major (every configuration answers a
# question before the next question starts), so a few questions' worth is all that is reused.
SEARCHES_KEPT = 256
SCORES_KEPT = 16384
# Texts the shared embedding memo keeps (candidates, their sentences, answers, across configurations).
EMBEDDINGS_KEPT = 16384


def _identity(value: Any) -> Any:
    """A JSON-able stand-in for a search argument (vectors by digest, settings by their fields)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        return {"array": hashlib.sha256(arr.tobytes()).hexdigest(), "dtype": str(arr.dtype), "shape": arr.shape}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return {"model": type(value).__name__, "fields": dump(mode="json")}
    if isinstance(value, dict):
        return {str(k): _identity(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_identity(v) for v in value]
    return repr(value)


def _config_key(section: Any) -> str:
    return json.dumps(section.model_dump(mode="json"), sort_keys=True, default=str)


class _Counted:
    """An embedder that counts the texts it embeds (``embedded``); every member is the embedder's own."""

    def __init__(self, inner: Any) -> None:
        self.__dict__["_inner"] = inner
        self.__dict__["embedded"] = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_inner"], name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.__dict__["embedded"] += len(texts)
        return np.asarray(self.__dict__["_inner"].embed(texts))


class MemoSearch:
    """An opened index (or store) whose ``search`` answers a call it has seen with the hits it
    returned then; every other attribute is the index's own.

    The key holds the query, the query vector (the shared embedder's vector of the query when the
    caller passes none, which is the vector the index would compute) and every other argument,
    so only identical searches share hits. ``on_hits`` is called with the hits of each search
    actually run (the shared embedder takes their stored vectors there). ``searches`` counts them.
    """

    def __init__(
        self,
        inner: Any,
        on_hits: Callable[[Sequence[Any]], None] | None = None,
        max_items: int = SEARCHES_KEPT,
    ) -> None:
        self.__dict__["_inner"] = inner
        self.__dict__["_on_hits"] = on_hits
        self.__dict__["_max_items"] = max_items
        self.__dict__["_hits"] = OrderedDict()
        self.__dict__["_lock"] = threading.Lock()
        self.__dict__["searches"] = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_inner"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.__dict__["_inner"], name, value)

    @property
    def wrapped(self) -> Any:
        """The index itself."""
        return self.__dict__["_inner"]

    def search(self, query: str, k: int = 10, **kwargs: Any) -> list[Any]:
        inner = self.__dict__["_inner"]
        if kwargs.get("query_vector") is None and kwargs.get("mode", "hybrid") != "sparse":
            embedder = getattr(inner, "embedder", None)
            if embedder is not None and isinstance(query, str) and query.strip():
                # the text the index itself would embed (it strips the query)
                kwargs["query_vector"] = np.asarray(embedder.embed([query.strip()])[0])
        key = json.dumps(
            {"query": query, "k": k, **{name: _identity(v) for name, v in kwargs.items()}}, sort_keys=True, default=str
        )
        cache: OrderedDict[str, list[Any]] = self.__dict__["_hits"]
        with self.__dict__["_lock"]:
            found = cache.get(key)
            if found is not None:
                cache.move_to_end(key)
                return list(found)
        hits = list(inner.search(query, k=k, **kwargs))
        on_hits = self.__dict__["_on_hits"]
        if on_hits is not None:
            on_hits(hits)
        with self.__dict__["_lock"]:
            self.__dict__["searches"] += 1
            cache[key] = hits
            while len(cache) > self.__dict__["_max_items"]:
                cache.popitem(last=False)
        return list(hits)


class MemoJudge:
    """A relevance judge (:class:`ragsieve.sieve.judge.Judge`) that scores each (question,
    passage) pair once; ``name``, ``upper`` and ``lower`` are the wrapped judge's (read live:
    the bundled evaluator sets its thresholds when it warms up). ``scored`` counts the passages
    the wrapped judge scored.

    Only for judges whose score of a passage does not depend on the other passages scored with
    it (the bundled evaluator, a cross-encoder)."""

    def __init__(self, inner: Any, max_items: int = SCORES_KEPT) -> None:
        self.inner = inner
        self.max_items = max_items
        self.scored = 0
        self._scores: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def upper(self) -> float:
        return float(self.inner.upper)

    @property
    def lower(self) -> float:
        return float(self.inner.lower)

    def warm_up(self) -> None:
        self.inner.warm_up()

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        passages = list(passages)
        with self._lock:
            known = {p: self._scores[(question, p)] for p in passages if (question, p) in self._scores}
        missing = list(dict.fromkeys(p for p in passages if p not in known))
        if missing:
            fresh = [float(s) for s in self.inner.score(question, missing)]
            with self._lock:
                self.scored += len(missing)
                for p, s in zip(missing, fresh, strict=True):
                    known[p] = s
                    self._scores[(question, p)] = s
                while len(self._scores) > self.max_items:
                    self._scores.popitem(last=False)
        return [known[p] for p in passages]

    def to_dict(self) -> dict[str, Any]:
        to_dict = getattr(self.inner, "to_dict", None)
        return to_dict() if callable(to_dict) else {"type": self.name}


class SharedWork:
    """The parts the configurations of one evaluation share, each built on first use
    (see the module docstring). ``pipeline(config)`` builds a configuration's pipeline over them.

    ``load_llm`` / ``load_embedder`` build an LLM / embedder from its config section (default:
    :func:`ragsieve.llm.load_llm`, :func:`ragsieve.embed.load_embedder`); tests pass fakes.
    Not picklable (it holds loaded models): a Dask worker builds its own.
    """

    def __init__(
        self,
        load_llm: Callable[[LLMConfig], Any] | None = None,
        load_embedder: Callable[[EmbedderConfig], Any] | None = None,
    ) -> None:
        self._load_llm = load_llm
        self._load_embedder = load_embedder
        self._llms: dict[str, Any] = {}
        self._embedders: dict[str, Any] = {}
        self._indexes: dict[str, MemoSearch] = {}
        self._judges: dict[str, MemoJudge] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ parts
    def llm(self, config: LLMConfig) -> Any:
        """The LLM ``config`` describes, built once (loaded by its first user's ``warm_up``)."""
        key = _config_key(config)
        with self._lock:
            if key not in self._llms:
                if self._load_llm is None:
                    from ragsieve.llm import load_llm

                    self._llms[key] = load_llm(config)
                else:
                    self._llms[key] = self._load_llm(config)
            return self._llms[key]

    def _pool(self, config: EmbedderConfig) -> Any:
        """The :class:`ragsieve.sieve.build.SharedEmbedder` over the embedder ``config`` describes:
        calling it gives the one memo; ``remember_hits`` hands it an index's stored vectors."""
        from ragsieve.sieve.build import SharedEmbedder
        from ragsieve.sieve.state import Ref

        key = _config_key(config)
        with self._lock:
            if key not in self._embedders:
                if self._load_embedder is None:
                    from ragsieve.embed import load_embedder

                    raw = _Counted(load_embedder(config))
                else:
                    raw = _Counted(self._load_embedder(config))
                pool = SharedEmbedder(Ref(None), EMBEDDINGS_KEPT, inner=lambda: raw)
                pool.memo = MemoEmbedder(raw, EMBEDDINGS_KEPT)
                self._embedders[key] = pool
            return self._embedders[key]

    def embedder(self, config: EmbedderConfig) -> Any:
        """One :class:`ragsieve.embed.base.MemoEmbedder` per embedder configuration."""
        return self._pool(config)()

    def index(self, config: PipelineConfig) -> MemoSearch:
        """The index ``config`` names (opened once per folder, store and embedder), behind a
        :class:`MemoSearch` whose searches hand their hits' stored vectors to the shared embedder."""
        from ragsieve.errors import ConfigError
        from ragsieve.store.open import open_index

        if not config.index_dir:
            raise ConfigError("no index configured; pass --index DIR or set index_dir in the config")
        key = json.dumps(
            {"dir": str(config.index_dir), "store": _config_key(config.store), "embedder": _config_key(config.embedder)}
        )
        with self._lock:
            if key not in self._indexes:
                pool = self._pool(config.embedder)
                opened = open_index(config, self.embedder(config.embedder))
                # remember_hits reads the stored vectors from the index this box holds
                if pool.index.value is None:
                    pool.index.value = opened
                on_hits = pool.remember_hits if pool.index.value is opened else None
                self._indexes[key] = MemoSearch(opened, on_hits)
            return self._indexes[key]

    def judge(self, config: PipelineConfig) -> MemoJudge:
        """The relevance judge ``config.stages.judge`` names, over the shared embedder, scoring
        each (question, passage) once."""
        from ragsieve.sieve.judge import build_judge

        key = json.dumps(
            {
                "judge": config.stages.judge.kind,
                "model": config.stages.judge.model,
                "embedder": _config_key(config.embedder),
            }
        )
        with self._lock:
            if key not in self._judges:
                self._judges[key] = MemoJudge(build_judge(config.stages.judge, self.embedder(config.embedder)))
            return self._judges[key]

    # ------------------------------------------------------------------ pipelines
    def pipeline(self, config: PipelineConfig) -> Pipeline:
        """``config``'s pipeline over the shared index, LLM and judge (generation and decisions its own)."""
        from ragsieve.index import Index
        from ragsieve.sieve.judge import Judge
        from ragsieve.sieve.pipeline import Pipeline

        if not config.index_dir:
            return Pipeline(config, llm=self.llm(config.llm))
        # the index's and the judge's members, read through (the thresholds live, as the judge warms up)
        index, judge = cast(Index, self.index(config)), cast(Judge, self.judge(config))
        return Pipeline(config, index=index, llm=self.llm(config.llm), judge=judge)

    def counts(self) -> dict[str, int]:
        """How much work was done (not answered from the shared caches): searches run, passages
        judged, texts embedded by the embedding models."""
        return {
            "searches": sum(int(ix.searches) for ix in self._indexes.values()),
            "judged_passages": sum(j.scored for j in self._judges.values()),
            "embedded_texts": sum(int(p.memo.inner.embedded) for p in self._embedders.values()),
        }
