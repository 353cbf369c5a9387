"""What the service runs: the library's operations over one index snapshot, reloaded when it changes.

The engine owns the shared heavy objects (the LLM, the embedder, the open index) and builds one
pipeline per preset on demand, all sharing them. Every request takes a *snapshot* (index +
pipelines) at its start and keeps it to the end, so a re-ingest that swaps the index directory
mid-request changes nothing for that request; new requests see the new index.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from ragsieve.citations import evidence_documents, inert_links
from ragsieve.config import PipelineConfig, PipelineName, apply_overrides
from ragsieve.errors import ConfigError, DamagedFileError, IndexStoreError, InputError, check_question
from ragsieve.index.access import Access, scoped, searchable_index
from ragsieve.present import present_answer

logger = logging.getLogger(__name__)

# "ragsieve" is the name OpenAI clients use for the server's default pipeline.
DEFAULT_MODEL_NAME = "ragsieve"
PIPELINE_NAMES: tuple[str, ...] = get_args(PipelineName)

PipelineFactory = Callable[[PipelineConfig], Any]
IndexOpener = Callable[[str], Any]


IndexSignature = tuple[Any, ...]


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def index_signature(index_dir: str | Path) -> IndexSignature | None:
    """Identity of what the index folder currently publishes (None while nothing is readable).

    The current layout keeps a small ``CURRENT`` pointer at the top, replaced atomically by each
    re-ingest, naming the live ``generations/<id>/``: its text plus its inode (a replace makes a new
    one even within one mtime tick) plus the named generation's manifest identify the build. An
    index without ``CURRENT`` (the format-1 layout, or a custom store) is identified by the
    ``manifest.json`` at its top. None means "mid-swap or unreadable: keep the snapshot".
    """
    root = Path(index_dir)
    pointer = root / "CURRENT"
    try:
        text = pointer.read_bytes()
    except FileNotFoundError:
        text = None
    except OSError:
        return None
    if text is not None:
        key = _stat_key(pointer)
        try:
            generation = str(json.loads(text)["generation"])
        except (ValueError, KeyError, TypeError):
            return None  # a torn or corrupt pointer: the opener would fail; keep serving
        manifest = _stat_key(root / "generations" / generation / "manifest.json") if "/" not in generation else None
        if key is None or manifest is None:
            return None
        return ("current", hashlib.sha256(text).hexdigest(), key, manifest)
    legacy = _stat_key(root / "manifest.json")
    return None if legacy is None else ("manifest", legacy)


def manifest_signature(index_dir: str | Path) -> IndexSignature | None:
    """Kept for callers of the earlier name: :func:`index_signature`."""
    return index_signature(index_dir)


def index_generation(index: Any, index_dir: str | Path) -> str | None:
    """The index's snapshot id: its own ``generation`` when it has one, else a manifest digest."""
    generation = getattr(index, "generation", None)
    if generation:
        return str(generation)
    try:
        return hashlib.sha256((Path(index_dir) / "manifest.json").read_bytes()).hexdigest()[:16]
    except OSError:
        return None


@dataclass
class Snapshot:
    """One open index and the pipelines built over it."""

    index: Any
    generation: str | None
    signature: IndexSignature | None
    pipelines: dict[str, Any] = field(default_factory=dict)
    # The index as each reader scope sees it (ragsieve.index.access.ScopedIndex), by scope key.
    views: dict[str, Any] = field(default_factory=dict)
    # Corpus audits of this snapshot, by reader scope and checks (an audit reads the whole
    # index, so one per scope and generation is computed and then served from here).
    audits: dict[tuple[str, tuple[str, ...]], Any] = field(default_factory=dict)
    # Requests using this snapshot; a replaced snapshot is closed when the last one finishes,
    # so its generation's reader lease is released and the next writer may remove it.
    users: int = 0
    retired: bool = False


class Engine:
    """The library behind the HTTP service.

    Args:
        config: the pipeline config (``index_dir`` must be set).
        pipeline_factory: builds a pipeline from a config (default
            :func:`ragsieve.sieve.pipeline.build_pipeline`); its result needs ``ask(question)``.
        index_opener: opens the index directory (default: :func:`ragsieve.store.open.open_index`:
            the folder index, or the store ``config.store`` names, with one embedder shared across reloads).
        llm: an already-built LLM (default: :func:`ragsieve.llm.load_llm` on ``config.llm``).

    Example:
        >>> engine = Engine(PipelineConfig(index_dir="demo-index"))  # doctest: +SKIP
        >>> engine.warm_up()                                          # doctest: +SKIP
        >>> engine.search("graphene", k=3)["hits"][0]["id"]           # doctest: +SKIP
    """

    def __init__(
        self,
        config: PipelineConfig,
        *,
        pipeline_factory: PipelineFactory | None = None,
        index_opener: IndexOpener | None = None,
        llm: Any | None = None,
    ) -> None:
        if not config.index_dir:
            raise ConfigError("the service needs an index; pass --index DIR (build one with `ragsieve ingest`)")
        self.config = config
        self.index_dir = str(config.index_dir)
        self._pipeline_factory = pipeline_factory
        self._index_opener = index_opener
        self.llm = llm
        self._embedder: Any = None
        self._snapshot: Snapshot | None = None
        self._reload_lock = threading.Lock()
        self._users_lock = threading.Lock()
        self._failed_signature: IndexSignature | None = None
        self._classifiers: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self.model_loaded = False
        self.problem: str | None = None
        # What is wrong with the index being served (a damaged file found by a request or by the
        # warm-up's check), keyed to that snapshot: a reload to a good build clears it.
        self.index_problem: tuple[Snapshot, str] | None = None
        self.reloads = 0
        self.on_reload: Callable[[], None] | None = None

    @property
    def allow_link_hosts(self) -> list[str]:
        """The hosts an answer may link to besides its evidence (``present.allow_link_hosts``)."""
        return list(self.config.present.allow_link_hosts)

    @property
    def default_pipeline(self) -> str:
        return str(self.config.pipeline)

    # ------------------------------------------------------------------ loading
    def warm_up(self) -> None:
        """Open the index, check the files its queries read, and load the LLM (idempotent)."""
        snap = self.snapshot()
        self.check_index(snap)
        self._ready_llm()

    def check_index(self, snap: Snapshot | None = None) -> None:
        """Load every partition of the served index now (each file checked against its recorded
        checksum as it loads), so that health reports a damaged file before a query meets it.
        A damaged file is recorded (health: degraded), not raised: the model still loads, and
        searches over the undamaged parts keep working."""
        snap = snap or self.snapshot()
        load = getattr(snap.index, "warm_up", None)
        if not callable(load):
            return
        try:
            load()
        except IndexStoreError as exc:
            self._index_damaged(snap, exc)

    def _index_damaged(self, snap: Snapshot, exc: IndexStoreError) -> None:
        if isinstance(exc, DamagedFileError):
            text = f"the {exc.role} of the served index is damaged; repair it: {without_paths(exc.repair)}"
        else:
            text = f"the served index cannot be read ({without_paths(str(exc))})"
        if self.index_problem is None or self.index_problem[1] != text:
            logger.error("index %s: %s", self.index_dir, exc)
        self.index_problem = (snap, text)

    def _ready_llm(self) -> Any:
        if self.llm is None:
            from ragsieve.llm import load_llm

            self.llm = load_llm(self.config.llm)
        if not self.model_loaded:
            self.llm.warm_up()
            self.model_loaded = True
        return self.llm

    def _open_index(self) -> Any:
        if self._index_opener is not None:
            return self._index_opener(self.index_dir)
        from ragsieve.embed import load_embedder
        from ragsieve.store.open import open_index

        if self._embedder is None:
            self._embedder = load_embedder(self.config.embedder)
        return open_index(self.config, self._embedder)

    def snapshot(self) -> Snapshot:
        """The current index snapshot, reopened first if the folder was re-ingested.

        Callers that use it for a whole request should hold it with :meth:`using`."""
        current = self._snapshot
        signature = index_signature(self.index_dir)
        if current is not None and (signature is None or signature == current.signature):
            return current  # unchanged, or mid-swap: keep serving the snapshot we have
        with self._reload_lock:
            current = self._snapshot
            signature = index_signature(self.index_dir)
            if current is not None and (signature is None or signature == current.signature):
                return current
            if current is not None and signature == self._failed_signature:
                return current  # this build already failed to open; do not retry it on every request
            try:
                index = self._open_index()
            except Exception as exc:
                # A half-written or broken re-ingest must not take down a working service.
                if current is None:
                    raise
                self._failed_signature = signature
                self.problem = f"reloading the re-ingested index failed ({exc}); still serving the previous one"
                logger.warning(self.problem)
                return current
            fresh = Snapshot(index, index_generation(index, self.index_dir), signature)
            self._failed_signature = None
            if current is not None:
                self.reloads += 1
                logger.info(
                    "index %s changed: generation %s -> %s", self.index_dir, current.generation, fresh.generation
                )
                if self.on_reload is not None:
                    self.on_reload()
            self.problem = None
            self._snapshot = fresh
            if current is not None:
                self._retire(current)
            return fresh

    @contextlib.contextmanager
    def using(self) -> Iterator[Snapshot]:
        """Hold the current snapshot for one request: everything the request reads comes from
        this one generation, however many re-ingests happen meanwhile."""
        while True:
            snap = self.snapshot()
            with self._users_lock:
                if not snap.retired or snap is self._snapshot:
                    snap.users += 1
                    break
            # Replaced between snapshot() and here: take the newer one.
        try:
            yield snap
        except IndexStoreError as exc:
            self._index_damaged(snap, exc)
            raise
        finally:
            with self._users_lock:
                snap.users -= 1
                close = snap.retired and snap.users == 0
            if close:
                self._close(snap)

    def _retire(self, snap: Snapshot) -> None:
        with self._users_lock:
            snap.retired = True
            close = snap.users == 0
        if close:
            self._close(snap)

    @staticmethod
    def _close(snap: Snapshot) -> None:
        closer = getattr(snap.index, "close", None)
        if callable(closer):
            try:
                closer()
            except Exception as exc:  # closing only releases a lease; never fail a request for it
                logger.debug("closing a replaced index snapshot failed: %s", exc)

    def chosen_pipeline(self, requested: str | None) -> str:
        """Resolve a request's pipeline or model name; unknown names raise :class:`InputError`."""
        if requested is None or requested == DEFAULT_MODEL_NAME:
            return self.default_pipeline
        if requested not in PIPELINE_NAMES:
            raise InputError(
                f"unknown pipeline {requested!r}; use {DEFAULT_MODEL_NAME!r} (the server's default, "
                f"{self.default_pipeline}) or one of {', '.join(PIPELINE_NAMES)}"
            )
        return requested

    def scoped_index(self, snap: Snapshot, access: Access | None) -> Any:
        """``snap``'s index as a reader with ``access`` sees it (the index itself for all-access):
        every search, lookup and chunk list through it holds only passages the reader may read."""
        if access is None or access.everything:
            return snap.index
        key = access.scope_key
        with self._users_lock:
            view = snap.views.get(key)
            if view is None:
                view = snap.views[key] = scoped(snap.index, access)
        return view

    def _pipeline(self, snap: Snapshot, name: str, access: Access | None = None) -> Any:
        """The pipeline ``name`` over ``snap``, one per reader scope: a scoped reader's pipeline
        (every stage of it) holds the index as that reader sees it, so nothing it retrieves,
        re-retrieves or looks up can be a passage the reader may not read."""
        index = self.scoped_index(snap, access)
        key = name if index is snap.index else f"{name}\0{access.scope_key if access else ''}"
        pipe = snap.pipelines.get(key)
        if pipe is None:
            if self._pipeline_factory is None:
                from ragsieve.sieve.pipeline import build_pipeline

                factory: PipelineFactory = build_pipeline
            else:
                factory = self._pipeline_factory
            pipe = factory(apply_overrides(self.config, {"pipeline": name}))
            if index is not snap.index and not hasattr(pipe, "index"):
                # It would open the whole index itself: a scoped reader must not get such a pipeline.
                raise ConfigError(
                    f"pipeline {name} takes no index, so it cannot be limited to what a key may read; "
                    "give this key all = true or serve a pipeline that takes the engine's index"
                )
            # Share the open index and the loaded model instead of each pipeline loading its own.
            for attr, value in (("index", index), ("llm", self._ready_llm())):
                if hasattr(pipe, attr):
                    setattr(pipe, attr, value)
            snap.pipelines[key] = pipe
        return pipe

    @staticmethod
    def _check_route(snap: Snapshot, route: str | None) -> None:
        """An unknown domain in a request's ``route`` field, in the request's own terms (the
        library's message names the command line's ``--route``). Partition names are the
        index's, whatever the reader may read (a partition is not a document)."""
        if route is None or route in ("all", "auto"):
            return
        domains = [str(d) for d in (getattr(snap.index, "domains", None) or [])]
        if route not in domains:
            raise InputError(
                f"unknown domain {route!r} in the request's route field; this index has "
                f"{', '.join(domains) or 'no domains'}: send one of them, 'auto' (the router) or 'all'"
            )

    # ------------------------------------------------------------------ operations
    def ask(
        self,
        question: str,
        *,
        pipeline: str | None = None,
        k: int | None = None,
        route: str | None = None,
        no_retrieval: bool = False,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        access: Access | None = None,
    ) -> dict[str, Any]:
        """``Answer.to_dict()`` of the named pipeline, plus the pipeline and index generation.

        ``access``: what the caller may read (``None``: everything); the pipeline retrieves only
        from those passages, so the answer, its evidence and its trace hold no other.

        ``on_event`` gets the pipeline's :mod:`ragsieve.sieve.events` as JSON-ready dicts while it
        answers (stages, tokens, retractions), and last ``{"kind": "answer", "answer": <this
        method's result>, "streamed_is_final": ...}``; a pipeline without ``ask_with_events`` sends
        only that last event. Runs on the LLM thread (the caller serialises)."""
        check_question(question)
        name = self.chosen_pipeline(pipeline)
        with self.using() as snap:
            self._check_route(snap, route)
            pipe = self._pipeline(snap, name, access)
            options = {"k": k, "route": route, "no_retrieval": no_retrieval or None}
            wanted = {key: value for key, value in options.items() if value is not None}
            params = inspect.signature(pipe.ask).parameters
            unsupported = [key for key in wanted if key not in params]
            if unsupported:
                raise InputError(
                    f"pipeline {name} does not take {', '.join(unsupported)}; leave it out of the request"
                )
            streamed_is_final = False
            if on_event is not None and callable(getattr(pipe, "ask_with_events", None)):
                from ragsieve.sieve.events import Final

                def relay(event: Any) -> None:
                    nonlocal streamed_is_final
                    if isinstance(event, Final):  # sent below, with the service's fields added
                        streamed_is_final = event.streamed_is_final
                    else:
                        on_event(event.to_dict())

                answer = pipe.ask_with_events(question, relay, **wanted)
            else:
                answer = pipe.ask(question, **wanted)
        out: dict[str, Any] = answer.to_dict()
        out["pipeline"] = name
        out["index_generation"] = snap.generation
        hosts = self.allow_link_hosts
        out["presentation"] = present_answer(out, allow_link_hosts=hosts).to_dict()  # what the page and chat show
        # The answer's own text without images and links to outside addresses too (a client may render
        # it); the presentation's ``inert_links`` says what was made inert.
        out["answer"] = inert_links(str(out.get("answer") or ""), evidence_documents(out.get("evidence") or []),
                                    hosts).text
        if on_event is not None:
            on_event({"kind": "answer", "answer": out, "streamed_is_final": streamed_is_final})
        return out

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        mode: str | None = None,
        route: str | None = None,
        where: dict[str, Any] | None = None,
        access: Access | None = None,
    ) -> dict[str, Any]:
        """Ranked hits with each retriever's score, as ``ragsieve search --json``. Thread-safe.
        ``access``: what the caller may read (``None``: everything), applied inside the search."""
        from ragsieve.sieve.pipeline import Pipeline
        from ragsieve.types import Trace

        check_question(query, "the query")
        cfg = self.config if mode is None else apply_overrides(self.config, {"retrieval.mode": mode})
        with self.using() as snap:
            self._check_route(snap, route)
            pipe = Pipeline(cfg, index=self.scoped_index(snap, access))
            trace = Trace(query=query)
            with trace.timed("search"):
                domains = pipe.resolve_domains(query, trace, route)
                hits = pipe.retrieve(query, trace, k=k, domains=domains, where=where or None)[:k]
        out: dict[str, Any] = {
            "query": query,
            "hits": [h.to_dict() for h in hits],
            "trace": trace.to_dict(),
            "index_generation": snap.generation,
        }
        if not hits and str(cfg.retrieval.mode) == "sparse":
            from ragsieve.index.store import sparse_query_note

            note = sparse_query_note(query)
            if note:
                out["note"] = note
        return out

    def audit(self, *, checks: Sequence[str] | None = None, access: Access | None = None) -> dict[str, Any]:
        """The corpus audit (:func:`ragsieve.audit.audit_index`) of the passages the caller may
        read, as ``ragsieve audit --json`` writes it; computed once per index generation, reader
        scope and set of checks, then served from the snapshot. Thread-safe."""
        from ragsieve.audit.run import DEFAULT_CHECKS, audit_index, check_kinds

        wanted = check_kinds(checks, "check") if checks else DEFAULT_CHECKS
        if "harmful-source" in wanted:
            raise InputError("the harmful-source check needs labelled questions; run `ragsieve audit --questions FILE`")
        with self.using() as snap:
            scope = "" if access is None or access.everything else access.scope_key
            key = (scope, tuple(wanted))
            with self._users_lock:
                report = snap.audits.get(key)
            if report is None:
                view = self.scoped_index(snap, access) if scope else audit_view(snap.index)
                report = audit_index(view, checks=wanted)
                with self._users_lock:
                    snap.audits[key] = report
        out: dict[str, Any] = json.loads(report.to_json(indent=None))
        out["index_generation"] = snap.generation
        return out

    def classify(
        self,
        text: str,
        labels: list[str],
        *,
        template: str | None = None,
        knowledge: list[str] | None = None,
        calibrate: bool = True,
    ) -> dict[str, Any]:
        """A label distribution from the LLM's log-probabilities. Runs on the LLM thread."""
        from ragsieve.generate.classify import LabelClassifier

        llm = self._ready_llm()
        key = (tuple(labels), template, calibrate)
        clf = self._classifiers.get(key)
        if clf is None:
            kwargs: dict[str, Any] = {"calibrate": calibrate}
            if template:
                kwargs["template"] = template
            clf = LabelClassifier(labels, **kwargs)
            if calibrate:
                clf.fit_calibration(llm)
            self._classifiers[key] = clf
            # Calibration costs LLM calls; keep the classifiers of recent label sets.
            while len(self._classifiers) > 32:
                self._classifiers.popitem(last=False)
        else:
            self._classifiers.move_to_end(key)
        start = time.perf_counter()
        dist = clf.predict_proba(llm, text, knowledge=knowledge or None)
        ms = (time.perf_counter() - start) * 1000
        return {
            "text": text,
            "labels": dist,
            "prediction": max(dist, key=lambda lab: dist[lab]),
            "calibrated": calibrate,
            "ms": round(ms, 2),
        }

    def health(self, llm_stuck: str | None = None) -> dict[str, Any]:
        """Status for ``/v1/health``. It is public, so it names no file-system path: the index is
        identified by its generation only. ``llm_stuck`` (from the LLM queue) marks the service
        degraded while the model lane is held past its deadline."""
        snap = self._snapshot
        model = getattr(self.llm, "model_name", None) if self.llm is not None else None
        damaged = self.index_problem[1] if self.index_problem and self.index_problem[0] is snap else None
        problem = self.problem or damaged or llm_stuck
        if problem:
            status = "degraded"
        elif snap is None or not self.model_loaded:
            status = "starting"
        else:
            status = "ok"
        return {
            "status": status,
            "index_generation": snap.generation if snap else None,
            "model_loaded": self.model_loaded,
            "model": without_paths(str(model)) if model is not None else None,
            "pipeline": self.default_pipeline,
            "problem": without_paths(problem) if problem else None,
        }


_ABSOLUTE_PATH = re.compile(r"(?<![\w:/])(?:/[^\s/'\"():;,]+)+/?|[A-Za-z]:\\[^\s'\"():;,]+")


def audit_view(opened: Any) -> Any:
    """What the corpus audit reads of an open index: the index itself when it holds its chunks
    and vectors (the folder index), else the folder index behind a store."""
    if hasattr(opened, "chunks") and hasattr(opened, "embeddings"):
        return opened
    return searchable_index(opened)


def without_paths(text: str) -> str:
    """``text`` with absolute file-system paths reduced to their last component (``.../name``):
    what the service sends to clients never reveals where its files live."""
    return _ABSOLUTE_PATH.sub(lambda m: ".../" + re.split(r"[\\/]", m.group(0).rstrip("/\\"))[-1], text)
