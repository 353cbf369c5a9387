"""Question sets for ``ragsieve eval``: JSONL rows read into :class:`QAItem`.

Accepted fields (first one present wins):

- question: ``question`` (or FlashRAG/IRCoT's ``question_text``);
- gold answers: ``answer_aliases`` (short strings a correct answer contains, as in the demo set),
  ``answers``, ``golden_answers`` (FlashRAG), ``answer``; a string or a list of strings;
- gold evidence ids (optional, for citation precision/recall): ``evidence_ids``,
  ``supporting_ids``, ``doc_ids``; matched against a cited chunk's id or its document id;
- ``answerable`` (default true): ``false`` marks a question the corpus cannot answer, whose
  correct outcome is an abstention;
- ``id`` (default: the line number).

Example:
    >>> from ragsieve.eval.data import QAItem
    >>> QAItem.from_row({"question": "Who?", "golden_answers": ["Ada"]}, 0).answers
    ['Ada']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ragsieve.errors import InputError, check_unicode

__all__ = ["QAItem", "load_qa"]

_ANSWER_FIELDS = ("answer_aliases", "answers", "golden_answers", "answer")
_EVIDENCE_FIELDS = ("evidence_ids", "supporting_ids", "doc_ids")


def _strings(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, Sequence):
        return [str(v) for v in value if isinstance(v, (str, int, float)) and str(v).strip()]
    return []


@dataclass(frozen=True)
class QAItem:
    """One evaluation question with its gold answers and (optional) gold evidence ids."""

    id: str
    question: str
    answers: list[str]
    answerable: bool = True
    gold_ids: list[str] = field(default_factory=list)
    # Every gold string (short aliases and the long reference answer) for EM and token F1.
    references: list[str] = field(default_factory=list)

    @classmethod
    def from_row(cls, row: dict[str, Any], lineno: int, where: str = "row") -> QAItem:
        question = row.get("question", row.get("question_text"))
        if not isinstance(question, str) or not question.strip():
            raise InputError(f"{where}:{lineno} has no 'question' string; every row needs a non-empty question")
        check_unicode(question, f"the question at {where}:{lineno}")
        answerable = row.get("answerable", True)
        if not isinstance(answerable, bool):
            raise InputError(f"{where}:{lineno} has answerable={answerable!r}; use true or false")
        answers: list[str] = []
        for name in _ANSWER_FIELDS:
            answers = _strings(row.get(name))
            if answers:
                break
        if answerable and not answers:
            raise InputError(
                f"{where}:{lineno} has no gold answer; add 'answer', 'answers' or 'golden_answers' "
                'or mark the row "answerable": false'
            )
        references = list(dict.fromkeys(answers + _strings(row.get("answer"))))
        gold_ids: list[str] = []
        for name in _EVIDENCE_FIELDS:
            gold_ids = _strings(row.get(name))
            if gold_ids:
                break
        return cls(
            id=str(row.get("id", lineno)),
            question=question.strip(),
            answers=answers,
            answerable=answerable,
            gold_ids=gold_ids,
            references=references,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QAItem:
        return cls(**data)


def load_qa(path: str | Path, limit: int | None = None) -> list[QAItem]:
    """Read a JSONL question file; ``limit`` keeps the first N rows."""
    from ragsieve.io import read_jsonl

    p = Path(path)
    if not p.is_file():
        raise InputError(f"question file {p} does not exist; pass a JSONL file with 'question' and 'answer' fields")
    items: list[QAItem] = []
    seen: set[str] = set()
    for lineno, row in enumerate(read_jsonl(p), 1):
        item = QAItem.from_row(row, lineno, where=str(p))
        if item.id in seen:
            raise InputError(f"{p}:{lineno} repeats id {item.id!r}; give every row a unique 'id'")
        seen.add(item.id)
        items.append(item)
        if limit is not None and len(items) >= limit:
            break
    if not items:
        raise InputError(f"question file {p} has no rows; add one JSON object per line")
    return items
