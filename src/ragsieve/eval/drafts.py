"""Training drafts for the decide stage's model: realistic retrieval problems answered by the sieve
in observe mode, each draft labelled by its gold answers: :class:`DraftBuilder` and
:class:`DraftRecord`.

A training set's rows (question, gold answers, gold passage, article title) become **one corpus**:
every distinct passage of the set is one chunk of one ragsieve index, so retrieval returns the
other passages of the article and of the set as distractors, not just the gold passage. Each
question is planned as one problem of one kind:

* ``answerable``: the question against the whole corpus;
* ``unanswerable``: the question against the corpus **without its gold passage** (a near miss: the
  article's other passages remain);
* ``attacked``: the question against the corpus plus five passages one of the project's attack
  writers (:mod:`ragsieve.attack.poison`: ``template``, ``assert``, ``mirror``, ``spread``) wrote
  for it, asserting a same-type wrong answer.

The overlay is ragsieve's own metadata filter (the request's ``where``), not an index per
question: every chunk carries a ``drafts_view`` list of view tags and each problem asks with the
tags of its view. Clean chunks carry ``clean``; an attack passage carries ``attack:<question id>``
(it is seen by that question only); a passage that is the gold passage of a planned unanswerable
question carries ``hideable`` and one tag per hiding bucket it is *visible* in. Unanswerable
questions are dealt into :data:`BUCKETS` buckets (round-robin in article order, so one article's
questions land in different buckets); a question of bucket ``b`` asks with ``["clean", "b<b>"]``,
which hides the gold passages of its bucket's questions (its own among them: checked on every
problem, :meth:`DraftBuilder.visible`) and nothing else.

The plan covers every row of a set, seeded, whatever number of drafts is then built: a prefix of
:meth:`DraftBuilder.plan` is a random sample with the kinds in proportion (half answerable, a third
unanswerable, a sixth attacked) and the sets interleaved by size, and the index never depends on
how many drafts are asked for. The split holds out whole articles (``validation``, a seeded share of
the titles), so a model chosen on it has seen none of their passages in training drafts.

The sets ``reddit`` and ``amazon_reviews`` are for evaluation under domain shift only: the builder
refuses them (:func:`check_training_set`).

Labels (:func:`draft_label`) use the gold answers with eval's answer matching (a gold answer
contained in the draft, citation markers aside: :mod:`ragsieve.eval.scoring`): ``right``,
``wrong``, or ``non-answer`` (no draft: a check stopped the run before generation, an empty reply,
or a reply that declines). An unanswerable problem's label is judged the same way;
``answer_in_view`` says whether any passage it could retrieve still contains a gold answer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ragsieve.errors import InputError

logger = logging.getLogger(__name__)

__all__ = [
    "ATTACK_WRITERS",
    "build_drafts",
    "EVALUATION_ONLY_SETS",
    "DraftBuilder",
    "DraftCache",
    "DraftRecord",
    "Problem",
    "QARow",
    "check_training_set",
    "draft_label",
    "load_training_rows",
    "settings_hash",
    "settings_payload",
]

Kind = Literal["answerable", "unanswerable", "attacked"]
Label = Literal["right", "wrong", "non-answer"]
Split = Literal["train", "validation"]

VERSION = 1
# evaluation under domain shift only: nothing trained on them ships, so no training draft comes from them
EVALUATION_ONLY_SETS: frozenset[str] = frozenset({"reddit", "amazon_reviews"})
ATTACK_WRITERS: tuple[str, ...] = ("template", "assert", "mirror", "spread")
# the kinds in plan order, repeated: half answerable, a third unanswerable, a sixth attacked
KIND_CYCLE: tuple[Kind, ...] = ("answerable", "unanswerable", "answerable", "attacked", "unanswerable", "answerable")
BUCKETS = 128
PASSAGES_PER_ATTACK = 5  # as the attack benchmarks plant (benchmarks/trust_sieve.py's N_PASSAGES)
VIEW_KEY = "drafts_view"
CLEAN, HIDEABLE = "clean", "hideable"


def check_training_set(name: str, source: str = "") -> None:
    """Refuse a set kept for evaluation under domain shift (by its name or its rows' ``source``)."""
    for held in EVALUATION_ONLY_SETS:
        if name == held or held in name or held in source:
            raise InputError(
                f"the set {name!r} ({source or 'no source'}) is {held}, kept for evaluation under domain shift "
                f"only: no training draft may come from it; train on new_wiki or nq_gold"
            )


@dataclass(frozen=True)
class QARow:
    """One training row: a question, its gold answers and its gold passage (with its article)."""

    id: str
    question: str
    answers: tuple[str, ...]
    title: str
    passage: str


def load_training_rows(path: str | Path, set_name: str) -> list[QARow]:
    """The rows of a training set file (``id``, ``question``, ``answers``, ``contexts``: one
    ``{title, text}``), refusing the evaluation-only sets and rows without answers or passage."""
    from ragsieve.io import read_jsonl

    check_training_set(set_name, str(path))
    rows: list[QARow] = []
    for raw in read_jsonl(path):
        check_training_set(set_name, str(raw.get("source", "")))
        contexts = raw.get("contexts") or []
        answers = tuple(str(a) for a in raw.get("answers") or [] if str(a).strip())
        if not contexts or not answers or not str(raw.get("question", "")).strip():
            raise InputError(f"{path}: row {raw.get('id')!r} needs a question, answers and one context")
        ctx = contexts[0]
        rows.append(QARow(id=str(raw["id"]), question=str(raw["question"]).strip(), answers=answers,
                          title=str(ctx.get("title", "")).strip(), passage=str(ctx["text"]).strip()))  # fmt: skip
    if not rows:
        raise InputError(f"{path} holds no rows")
    return rows


@dataclass(frozen=True)
class Problem:
    """One planned retrieval problem: a question of a set, its kind, its split and its view."""

    set: str
    row: QARow
    kind: Kind
    split: Split
    gold_chunk: str
    view: tuple[str, ...]
    attack_writer: str | None = None
    attack_answer: str | None = None

    @property
    def where(self) -> dict[str, Any]:
        """The request's metadata filter that shows this problem its corpus."""
        return {VIEW_KEY: list(self.view)}


@dataclass(frozen=True)
class DraftRecord:
    """One draft: the problem, what the sieve (observe mode) wrote, every signal and the label.

    ``signals``: the decide stage's record, keyed by declared signal names
    (:data:`ragsieve.signals.DECLARED`); empty when a check stopped the run before any draft.
    ``plain_confidence``: plain RAG's own confidences of the same draft, ``retrieval`` (the
    normalised top retrieval score, ``retrieval.top_score``) and ``token_prob`` (the draft's
    geometric-mean token probability under its prompt, ``answer.token_prob``), as the fair
    baselines define them (:mod:`ragsieve.eval.baselines`)."""

    question_id: str
    set: str
    split: Split
    kind: Kind
    attack_writer: str | None
    attack_answer: str | None
    model: str
    model_identity: str
    settings: str
    question: str
    draft: str | None
    answers: tuple[str, ...]
    label: Label
    answer_in_view: bool
    states_attack_answer: bool | None
    stopped_by: str | None
    fired: tuple[str, ...]
    signals: dict[str, float] = field(default_factory=dict)
    plain_confidence: dict[str, float | None] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def key(self) -> str:
        return record_key(self.question_id, self.kind, self.model, self.settings)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["answers"], out["fired"] = list(self.answers), list(self.fired)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DraftRecord:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"a draft record has unknown fields {unknown}; was it written by a newer ragsieve?")
        values = dict(data)
        values["answers"] = tuple(values.get("answers") or ())
        values["fired"] = tuple(values.get("fired") or ())
        values["signals"] = {str(k): float(v) for k, v in (values.get("signals") or {}).items()}
        return cls(**values)


def record_key(question_id: str, kind: str, model: str, settings: str) -> str:
    return f"{question_id}|{kind}|{model}|{settings}"


def draft_label(draft: str | None, answers: Sequence[str], declined: bool = False) -> Label:
    """``right`` when a gold answer is contained in the draft (eval's matching, citation markers
    aside), ``non-answer`` when there is no draft, it is empty or it declines, else ``wrong``."""
    from ragsieve.answers import contains_answer
    from ragsieve.verify.claims import strip_markers

    if draft is None or not strip_markers(draft).strip():
        return "non-answer"
    if answers and contains_answer(strip_markers(draft), list(answers)):
        return "right"
    return "non-answer" if declined else "wrong"


def settings_payload(config: Any, plan: Mapping[str, Any]) -> dict[str, Any]:
    """What a draft depends on besides its question, kind and model: the pipeline's settings
    (its index folder aside) and the plan's."""
    dumped = config.model_dump(mode="json") if hasattr(config, "model_dump") else dict(config)
    dumped.pop("index_dir", None)
    return {"v": VERSION, "config": dumped, "plan": dict(plan)}


def settings_hash(config: Any, plan: Mapping[str, Any]) -> str:
    """The short hash of :func:`settings_payload` that keys the drafts."""
    payload = settings_payload(config, plan)
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _unit(*parts: object) -> float:
    """A seeded number in [0, 1) from the parts' text (stable across runs and processes)."""
    key = "\x1f".join(str(p) for p in parts)
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:15], 16) / 16**15


def _chunk_id(set_name: str, title: str, passage: str) -> str:
    return f"{set_name}:" + hashlib.sha256(f"{title}\x1f{passage}".encode()).hexdigest()[:16]


class DraftCache:
    """Append-only JSONL of :class:`DraftRecord` (one file per worker), keyed by
    :attr:`DraftRecord.key`: a rerun skips what is done. A line cut short by a killed process is
    skipped (logged) and that draft is built again."""

    def __init__(self, folder: str | Path, model: str) -> None:
        self.folder = Path(folder)
        self.model = model

    def path(self, worker: int = 0) -> Path:
        return self.folder / f"drafts-{self.model}.w{worker}.jsonl"

    def paths(self) -> list[Path]:
        return sorted(self.folder.glob(f"drafts-{self.model}.w*.jsonl"))

    def records(self) -> Iterator[DraftRecord]:
        from ragsieve.io import read_jsonl

        for path in self.paths():
            try:
                rows = list(read_jsonl(path))
            except InputError:
                rows = list(_tolerant_rows(path))
            for row in rows:
                yield DraftRecord.from_dict(row)

    def done(self) -> set[str]:
        return {r.key for r in self.records()}

    def append(self, record: DraftRecord, worker: int = 0) -> None:
        for held in EVALUATION_ONLY_SETS:
            if record.set == held:
                raise InputError(f"refusing to write a draft of the evaluation-only set {held!r}")
        path = self.path(worker)
        path.parent.mkdir(parents=True, exist_ok=True)
        # a line a killed run cut short must not swallow the next record
        torn = False
        if path.is_file() and path.stat().st_size > 0:
            with open(path, "rb") as last:
                last.seek(-1, 2)
                torn = last.read(1) != b"\n"
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(("\n" if torn else "") + json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
            fh.flush()


def _tolerant_rows(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                logger.warning("%s:%d is cut short (a killed run?); that draft will be built again", path, lineno)


class DraftBuilder:
    """Plans the problems of the given training sets, builds each set's index (clean corpus plus
    every planned attack's passages, tagged by view) and turns one problem into a
    :class:`DraftRecord` with a sieve pipeline in observe mode.

    ``sets``: set name to rows (:func:`load_training_rows`). ``work_dir``: where the indexes and
    the attack passages go (reused when their plan matches). ``embedder``: the index's (the
    bundled one when ``None``). ``assert_llm``: the LLM the ``assert`` writer samples from (its
    templates when ``None``). ``capacity``: plan only that many problems (each set its share by
    size; the indexes then hold only their attacks and hiding; ``None``: every row). Everything is
    seeded by ``seed``.

    Example:
        >>> builder = DraftBuilder({"new_wiki": rows}, "drafts-work")  # doctest: +SKIP
        >>> builder.warm_up()  # doctest: +SKIP
        >>> record = builder.draft(builder.plan()[0], pipeline, model="smollm2")  # doctest: +SKIP
    """

    def __init__(
        self,
        sets: Mapping[str, Sequence[QARow]],
        work_dir: str | Path,
        *,
        seed: int = 0,
        validation_share: float = 0.2,
        buckets: int = BUCKETS,
        passages_per_attack: int = PASSAGES_PER_ATTACK,
        embedder: Any = None,
        assert_llm: Any = None,
        capacity: int | None = None,
    ) -> None:
        if not sets:
            raise InputError("no training set given; pass new_wiki and/or nq_gold rows")
        for name in sets:
            check_training_set(name)
        if not 0.0 < validation_share < 1.0:
            raise InputError(f"validation_share must be in (0, 1), got {validation_share}")
        if buckets < 1:
            raise InputError(f"buckets must be at least 1, got {buckets}")
        if capacity is not None and capacity < 1:
            raise InputError(f"capacity must be at least 1 problem, got {capacity}")
        self.sets = {name: list(rows) for name, rows in sets.items()}
        self.work_dir = Path(work_dir)
        self.seed = seed
        self.validation_share = validation_share
        self.buckets = buckets
        self.passages_per_attack = passages_per_attack
        self.embedder = embedder
        self.assert_llm = assert_llm
        self.capacity = capacity
        self._plan: list[Problem] | None = None
        self._indexes: dict[str, Any] = {}
        self._writers: dict[str, dict[str, str]] = {}

    # ------------------------------------------------------------------ plan
    def plan_settings(self, set_name: str | None = None) -> dict[str, Any]:
        """What the plan and the indexes depend on (in the records' settings hash): of one set
        (its problems depend on its own rows only), or of every set."""
        names = sorted(self.sets) if set_name is None else [set_name]
        return {
            "planned": {name: self.planned_rows(name) for name in names},
            "seed": self.seed, "validation_share": self.validation_share, "buckets": self.buckets,
            "passages_per_attack": self.passages_per_attack, "kinds": list(KIND_CYCLE),
            "writers": list(ATTACK_WRITERS), "assert_llm": self.assert_llm is not None,
            "sets": {name: hashlib.sha256("\n".join(r.id for r in self.sets[name]).encode()).hexdigest()[:12]
                     for name in names},
        }  # fmt: skip

    def planned_rows(self, set_name: str) -> int:
        """How many of the set's rows (in its seeded order) are planned: all of them, or its
        share by size of ``capacity`` problems."""
        n = len(self.sets[set_name])
        if self.capacity is None:
            return n
        total = sum(len(rows) for rows in self.sets.values())
        return min(n, math.ceil(self.capacity * n / total))

    def split_of(self, set_name: str, title: str) -> Split:
        """``validation`` for a seeded share of the articles (whole articles, never single rows)."""
        return "validation" if _unit(self.seed, "split", set_name, title) < self.validation_share else "train"

    def plan(self) -> list[Problem]:
        """Every problem of every set, in building order: each set's rows in a seeded order with
        the kinds cycling through :data:`KIND_CYCLE`, the sets interleaved by size."""
        if self._plan is not None:
            return self._plan
        ordered: list[tuple[float, int, Problem]] = []
        for set_pos, (name, rows) in enumerate(sorted(self.sets.items())):
            problems = self._plan_set(name, rows)
            for pos, p in enumerate(problems):
                ordered.append(((pos + 0.5) / len(problems), set_pos, p))
        ordered.sort(key=lambda t: (t[0], t[1]))
        self._plan = [p for _, _, p in ordered]
        return self._plan

    def _plan_set(self, name: str, rows: Sequence[QARow]) -> list[Problem]:
        ids = [r.id for r in rows]
        if len(set(ids)) != len(ids):
            raise InputError(f"the set {name!r} repeats question ids; each row needs its own id")
        order = list(rows)
        random.Random(f"{self.seed}:{name}").shuffle(order)
        order = order[: self.planned_rows(name)]
        kinds = {r.id: KIND_CYCLE[i % len(KIND_CYCLE)] for i, r in enumerate(order)}
        attacked = [r for r in order if kinds[r.id] == "attacked"]
        wrong = self._wrong_answers(attacked, rows)
        writer_of = {r.id: ATTACK_WRITERS[i % len(ATTACK_WRITERS)] for i, r in enumerate(attacked)}
        # unanswerable questions dealt round-robin in article order: one article's in different buckets
        unanswerable = sorted((r for r in order if kinds[r.id] == "unanswerable"), key=lambda r: r.title)
        bucket = {r.id: i % self.buckets for i, r in enumerate(unanswerable)}
        out = []
        for r in order:
            kind = kinds[r.id]
            if kind == "attacked" and r.id not in wrong:
                kind = "answerable"  # no wrong answer to plant: asked as it is
            gold = _chunk_id(name, r.title, r.passage)
            writer = answer = None
            if kind == "answerable":
                view: tuple[str, ...] = (CLEAN, HIDEABLE)
            elif kind == "unanswerable":
                view = (CLEAN, f"b{bucket[r.id]}")
            else:
                view = (CLEAN, HIDEABLE, f"attack:{r.id}")
                writer, answer = writer_of[r.id], wrong[r.id]
            out.append(Problem(set=name, row=r, kind=kind, split=self.split_of(name, r.title), gold_chunk=gold,
                               view=view, attack_writer=writer, attack_answer=answer))  # fmt: skip
        return out

    def _wrong_answers(self, attacked: Sequence[QARow], rows: Sequence[QARow]) -> dict[str, str]:
        """Per attacked row, the answer its attack plants: a same-type wrong answer
        (:func:`ragsieve.coe.perturb.same_type_wrong_answer`, as the attack benchmarks pick it)
        from a seeded pool of the set's other answers, else any of the pool's answers that is
        not a gold one (seeded)."""
        from ragsieve.answers import contains_answer
        from ragsieve.coe.perturb import same_type_wrong_answer

        answers = sorted({r.answers[0] for r in rows})
        pool = random.Random(f"{self.seed}:pool").sample(answers, min(len(answers), 400))
        out: dict[str, str] = {}
        for r in attacked:
            try:
                w = same_type_wrong_answer(r.answers[0], pool, seed=self.seed)
            except InputError:
                w = ""
            if not w or contains_answer(w, list(r.answers)) or contains_answer(r.answers[0], [w]):
                others = [
                    a
                    for a in pool
                    if not contains_answer(a, list(r.answers)) and not contains_answer(r.answers[0], [a])
                ]
                w = random.Random(f"{self.seed}:{r.id}").choice(others) if others else ""
            if w:
                out[r.id] = w
        return out

    # ------------------------------------------------------------------ indexes
    def _clean_chunks(self, name: str) -> list[Any]:
        from ragsieve.types import Chunk

        hidden_in: dict[str, set[int]] = {}
        for p in self.plan():
            if p.set == name and p.kind == "unanswerable":
                hidden_in.setdefault(p.gold_chunk, set()).add(int(p.view[1][1:]))
        chunks: dict[str, Chunk] = {}
        positions: dict[str, int] = {}
        for r in self.sets[name]:
            cid = _chunk_id(name, r.title, r.passage)
            if cid in chunks:
                continue
            if cid in hidden_in:
                view = [HIDEABLE] + [f"b{b}" for b in range(self.buckets) if b not in hidden_in[cid]]
            else:
                view = [CLEAN]
            positions[r.title] = positions.get(r.title, -1) + 1
            chunks[cid] = Chunk(id=cid, text=r.passage, doc_id=f"{name}:{r.title}", source=f"{name}.example/{r.title}",
                                domain=name, title=r.title, position=positions[r.title],
                                metadata={VIEW_KEY: view})  # fmt: skip
        return list(chunks.values())

    def _folder(self, name: str) -> Path:
        plan = self.plan_settings(name)
        digest = hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()[:10]
        return self.work_dir / f"{name}-{digest}"

    def warm_up(self, progress: Callable[[str, int, int], None] | None = None) -> None:
        """Build (or reopen) every set's index; idempotent."""
        for name in sorted(self.sets):
            if name not in self._indexes:
                self._indexes[name] = self._open_or_build(name, progress)

    def index(self, set_name: str) -> Any:
        if set_name not in self._indexes:
            self.warm_up()
        return self._indexes[set_name]

    def _open_or_build(self, name: str, progress: Callable[[str, int, int], None] | None) -> Any:
        import shutil

        from ragsieve.attack.poison import inject
        from ragsieve.index import Index
        from ragsieve.io import atomic_write_jsonl

        folder = self._folder(name)
        done = folder / "done.json"
        embedder = self._embedder()
        if done.is_file():
            return Index.open(folder / "index", embedder=embedder)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        clean = Index.from_chunks(self._clean_chunks(name), folder / "clean", embedder=embedder, progress=progress)
        passages = self._attack_passages(name, clean)
        atomic_write_jsonl(folder / "attack-passages.jsonl", [p.to_dict() for p in passages])
        index = inject(clean, passages, folder / "index", attack={"by": "ragsieve.eval.drafts", "set": name})
        shutil.rmtree(folder / "clean")
        (folder / "done.json").write_text(json.dumps(self.plan_settings(name), sort_keys=True), encoding="utf-8")
        return index

    def _embedder(self) -> Any:
        if self.embedder is None:
            from ragsieve.config import EmbedderConfig
            from ragsieve.embed import load_embedder

            self.embedder = load_embedder(EmbedderConfig())
        return self.embedder

    def _attack_passages(self, name: str, clean: Any) -> list[Any]:
        """Every planned attack's passages, written against the clean index, on attacker hosts,
        each tagged to be seen by its question only. A target a writer cannot attack (the mirror
        writer finds no gold passage to copy, the spread writer no register) gets the template
        writer's passages instead; the problem records the writer that wrote them."""
        from ragsieve.attack.poison import (
            AssertionWriter,
            MirrorWriter,
            SpreadWriter,
            Target,
            TemplateWriter,
            assign_sources,
        )

        writers: dict[str, Any] = {
            "template": TemplateWriter(seed=self.seed),
            "assert": AssertionWriter(self.assert_llm, seed=self.seed, templates_only=self.assert_llm is None,
                                      cache_path=self._folder(name).parent / "assert-writer-cache.jsonl"),
            "mirror": MirrorWriter(clean, seed=self.seed),
            "spread": SpreadWriter(self._embedder(), seed=self.seed),
        }  # fmt: skip
        out: list[Any] = []
        for p in self.plan():
            if p.set != name or p.kind != "attacked" or p.attack_writer is None or p.attack_answer is None:
                continue
            target = Target(id=p.row.id, question=p.row.question, answers=list(p.row.answers), wrong=p.attack_answer)
            passages = writers[p.attack_writer].write(target, self.passages_per_attack)
            if not passages:
                passages = writers["template"].write(target, self.passages_per_attack)
            out += [replace(x, metadata={**x.metadata, VIEW_KEY: [f"attack:{p.row.id}"], "writer": x.writer})
                    for x in passages]  # fmt: skip
        return assign_sources(out, "sources", seed=self.seed, domains={x.target_id: name for x in out})

    def writer_used(self, problem: Problem) -> str | None:
        """The writer whose passages an attacked problem's corpus holds (read from the index: a
        target its planned writer could not attack has the template writer's)."""
        if problem.kind != "attacked":
            return None
        if problem.set not in self._writers:
            index = self.index(problem.set)
            self._writers[problem.set] = {
                str(c.metadata["target_id"]): str(c.metadata.get("writer", ""))
                for c in index.chunks if isinstance(c.metadata, dict) and "target_id" in c.metadata
            }  # fmt: skip
        return self._writers[problem.set].get(problem.row.id) or problem.attack_writer

    # ------------------------------------------------------------------ one problem
    def visible(self, problem: Problem) -> list[Any]:
        """The chunks ``problem`` can retrieve; an unanswerable problem's gold passage is never
        among them (checked: a ``RuntimeError`` names the problem otherwise)."""
        from ragsieve.index.filters import where_mask

        index = self.index(problem.set)
        mask = where_mask(index.chunks, problem.where)
        chunks = [c for c, keep in zip(index.chunks, mask, strict=True) if keep]
        if problem.kind == "unanswerable" and any(c.id == problem.gold_chunk for c in chunks):
            raise RuntimeError(f"the gold passage of unanswerable problem {problem.row.id!r} is retrievable")
        return chunks

    def draft(
        self, problem: Problem, pipeline: Any, model: str, model_identity: str = "", settings: str = ""
    ) -> DraftRecord:
        """Ask ``problem``'s question of ``pipeline`` (a sieve in observe mode over this set's
        index) within its view, and record the draft, every signal and the label."""
        from ragsieve.answers import contains_answer
        from ragsieve.attack.metrics import attack_succeeded
        from ragsieve.eval.checks import fired_checks

        check_training_set(problem.set)
        decide = getattr(getattr(pipeline, "config", None), "decide", None)
        if decide is None or decide.mode != "observe":
            raise InputError('the draft builder needs the sieve in observe mode; set decide.mode = "observe"')
        visible = self.visible(problem)
        start = time.perf_counter()
        answer = pipeline.ask(problem.row.question, where=problem.where)
        seconds = time.perf_counter() - start
        retrieved = [c.get("id") for e in answer.trace.stage("retrieve") for c in e.get("candidates") or []
                     if isinstance(c, dict)]  # fmt: skip
        if problem.kind == "unanswerable" and problem.gold_chunk in retrieved:
            raise RuntimeError(f"unanswerable problem {problem.row.id!r} retrieved its gold passage")
        fired, draft = fired_checks(answer.trace)
        decided = answer.trace.stage("decide")
        signals = {str(k): float(v) for k, v in (decided[-1].get("signals") or {}).items()} if decided else {}
        if not decided:
            draft = None
        label = draft_label(draft, problem.row.answers, declined=signals.get("verify.declined") == 1.0)
        states_attack = None
        if problem.kind == "attacked" and problem.attack_answer is not None:
            states_attack = bool(draft) and attack_succeeded(draft or "", problem.attack_answer,
                                                             list(problem.row.answers))  # fmt: skip
        plain = {"retrieval": signals.get("retrieval.top_score"), "token_prob": signals.get("answer.token_prob")}
        return DraftRecord(
            question_id=problem.row.id, set=problem.set, split=problem.split, kind=problem.kind,
            attack_writer=self.writer_used(problem) if problem.kind == "attacked" else None,
            attack_answer=problem.attack_answer, model=model, model_identity=model_identity, settings=settings,
            question=problem.row.question, draft=draft, answers=problem.row.answers, label=label,
            answer_in_view=any(contains_answer(c.text, list(problem.row.answers)) for c in visible),
            states_attack_answer=states_attack,
            stopped_by=answer.abstain_reason if answer.abstained and not decided else None,
            fired=tuple(fired), signals=signals, plain_confidence=plain,
            timings_ms={str(k): round(float(v), 1) for k, v in answer.trace.timings_ms.items()},
            seconds=round(seconds, 3),
        )  # fmt: skip


def build_drafts(
    builder: DraftBuilder,
    problems: Sequence[Problem],
    pipeline_for: Callable[[str], Any],
    cache: DraftCache,
    model: str,
    *,
    model_identity: str = "",
    settings: str | Mapping[str, str] = "",
    worker: int = 0,
    workers: int = 1,
    progress: Callable[[str, int, int], None] | None = None,
    deadline: float | None = None,
) -> int:
    """Build the drafts of ``problems`` the cache lacks (this worker's share: every
    ``workers``-th problem from ``worker``), appending each to the cache as it is done;
    ``pipeline_for(set_name)`` gives the set's pipeline (asked for on first use only, so a rerun
    with everything done loads no model). Stops at ``deadline`` (``time.monotonic()``). Returns
    how many drafts it built. ``settings``: the settings hash (:func:`settings_hash`), or one
    per set."""
    if not 0 <= worker < workers:
        raise InputError(f"worker must be in [0, {workers}), got {worker}")

    def settings_of(p: Problem) -> str:
        return settings if isinstance(settings, str) else settings[p.set]

    done = cache.done()
    mine = [p for i, p in enumerate(problems) if i % workers == worker]
    todo = [p for p in mine if record_key(p.row.id, p.kind, model, settings_of(p)) not in done]
    pipes: dict[str, Any] = {}
    built = 0
    if progress is not None:
        progress(f"drafts (worker {worker})", len(mine) - len(todo), len(mine))
    for p in todo:
        if deadline is not None and time.monotonic() > deadline:
            break
        if p.set not in pipes:
            pipes[p.set] = pipeline_for(p.set)
        cache.append(builder.draft(p, pipes[p.set], model, model_identity, settings_of(p)), worker)
        built += 1
        if progress is not None:
            progress(f"drafts (worker {worker})", len(mine) - len(todo) + built, len(mine))
    return built


def plan_counts(problems: Iterable[Problem]) -> dict[str, dict[str, int]]:
    """Problems per set, kind and split (for the report and the docs)."""
    out: dict[str, dict[str, int]] = {}
    for p in problems:
        row = out.setdefault(p.set, {})
        for key in (p.kind, p.split, "all"):
            row[key] = row.get(key, 0) + 1
    return out


def rate_line(done: int, total: int, seconds: float) -> str:
    """``12 of 4000 drafts, 31.2 s per draft, about 34.5 h left``."""
    per = seconds / done if done else math.nan
    left = (total - done) * per / 3600 if done else math.nan
    return f"{done} of {total} drafts, {per:.1f} s per draft, about {left:.1f} h left"
