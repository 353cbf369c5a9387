"""An independent faithfulness judge: answer-level checks that are not the sieve's own verifier.

The sieve verifies its answers with a claim judge (lexical + embedding by default); scoring the
sieve's faithfulness with that same judge measures agreement with itself ("self-judged"). The
judges here share no code or model with the verifier:

- :class:`GoldEvidenceJudge` (no model): against gold data where the question set has it.
  ``cited_has_gold``: does the evidence the answer cites contain a gold answer (SQuAD-normalised,
  whole tokens)? ``values_cited``: is every *value* the answer states (numbers, years and dates,
  capitalised names; a simple typed extraction, :func:`extract_values`) present in what it cites?
  An answer whose numbers, dates or names are not in its evidence states something the evidence
  does not say, whatever the wording around them.
- :class:`LLMAnswerJudge`: asks a served model whether the evidence states everything the
  answer says, reading P(Yes) from the next-token log-probabilities of "Yes"/"No" (the
  ``LLM`` protocol's ``next_token_logprobs``: no sampled text is parsed). It is independent
  only when its model is not the one the sieve's ``llm-logprob`` claim judge uses;
  :func:`independence_note` says when it is not.

Example:
    >>> from ragsieve.eval.faithfulness import GoldEvidenceJudge
    >>> v = GoldEvidenceJudge().judge("It opened in 1889 in Paris.", ["The tower opened in 1889 in Paris."], ["1889"])
    >>> v["values_cited"], v["cited_has_gold"], v["faithful"]
    (True, True, True)
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from ragsieve.answers import contains_answer, normalize_answer
from ragsieve.lexicon import CITATION_MARKER_RE, MONTHS, NAME_OPENERS

__all__ = [
    "GoldEvidenceJudge",
    "LLMAnswerJudge",
    "extract_values",
    "faithfulness_summary",
    "independence_note",
]

# month names and abbreviations: the one table (``ragsieve.lexicon``, from ``calendar``)
_MONTHS = "|".join(sorted(MONTHS, key=len, reverse=True))
_DATE = re.compile(
    rf"\b(?:\d{{1,2}}\s+(?:{_MONTHS})\.?(?:\s+\d{{3,4}})?|(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{3,4}})?)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?%?|(?<![\w.])[-+]?\d+(?:\.\d+)?%?")
# Two or more capitalised words (a name), or one capitalised word not opening a sentence.
_NAME = re.compile(r"\b[A-Z][\w'’-]*(?:\s+(?:of|the|de|van|von|da|di|del|la|le)?\s*[A-Z][\w'’-]*)*")
_ORDINAL = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)\b", re.IGNORECASE)
# Capitalised words that are not names when they open a sentence or stand alone.
# (the lexicon's words that may not begin a name, and the phrase a model opens its reply with)
_FUNCTION_WORDS = NAME_OPENERS | {"the answer"}


def _number_value(text: str) -> float | None:
    try:
        return float(text.replace(",", "").rstrip("%"))
    except ValueError:
        return None


def extract_values(text: str) -> dict[str, list[str]]:
    """Numbers, dates and names stated in ``text`` (citation markers removed).

    Dates are matched first and their numbers are not counted again; a capitalised word opening
    a sentence counts as a name only when it is not a function word.
    """
    text = CITATION_MARKER_RE.sub(" ", text)
    dates = [m.group(0) for m in _DATE.finditer(text)]
    rest = _DATE.sub(" ", text)
    numbers = [m.group(0) for m in _NUMBER.finditer(rest)]
    names: list[str] = []
    for m in _NAME.finditer(rest):
        name = m.group(0).strip()
        words = name.split()
        while words and words[0].lower() in _FUNCTION_WORDS:
            words = words[1:]
        if not words:
            continue
        name = " ".join(words)
        if name.lower() in _FUNCTION_WORDS or name.lower() in MONTHS:
            continue
        names.append(name)
    return {"numbers": list(dict.fromkeys(numbers)), "dates": list(dict.fromkeys(dates)),
            "names": list(dict.fromkeys(names))}  # fmt: skip


def _value_in(kind: str, value: str, evidence: str, evidence_numbers: list[float]) -> bool:
    if kind == "numbers":
        v = _number_value(value)
        return v is not None and any(math.isclose(v, e, rel_tol=1e-9, abs_tol=1e-9) for e in evidence_numbers)
    if kind == "dates":
        # every day, month and year of the date must be in the evidence (ordinals as plain numbers)
        def tokens(text: str) -> set[str]:
            return set(normalize_answer(_ORDINAL.sub(r"\1", text)).split())

        return tokens(value) <= tokens(evidence)
    return contains_answer(evidence, [value])


class GoldEvidenceJudge:
    """Answer-level faithfulness against what the answer cites and the gold answers (no model)."""

    name = "independent: gold evidence + cited values"

    def warm_up(self) -> None:
        """Nothing to load."""

    def judge(self, answer: str, cited: Sequence[str], golds: Sequence[str] = ()) -> dict[str, Any]:
        """``values_cited``: every number, date and name of ``answer`` occurs in the ``cited``
        texts (``None`` when the answer states no such value); ``cited_has_gold``: a gold answer
        occurs in them (``None`` without golds); ``faithful``: something was cited and neither
        check failed (``None`` when neither check applies: nothing checkable was stated)."""
        evidence = " ".join(cited)
        found = extract_values(evidence)
        evidence_numbers = [v for v in (_number_value(x) for x in found["numbers"] + re.findall(r"\d+", evidence))
                            if v is not None]  # fmt: skip
        values = extract_values(answer)
        missing = {
            kind: [v for v in vals if not _value_in(kind, v, evidence, evidence_numbers)]
            for kind, vals in values.items()
        }
        n_values = sum(len(v) for v in values.values())
        values_cited = None if n_values == 0 else not any(missing.values())
        cited_has_gold = contains_answer(evidence, list(golds)) if golds else None
        faithful: bool | None = bool(cited) and values_cited is not False and cited_has_gold is not False
        if cited and values_cited is None and cited_has_gold is None:
            faithful = None
        return {
            "judge": self.name,
            "values": values,
            "missing": {k: v for k, v in missing.items() if v},
            "values_cited": values_cited,
            "cited_has_gold": cited_has_gold,
            "faithful": faithful,
        }

    def to_dict(self) -> dict[str, Any]:
        return {"type": "gold-evidence"}


_JUDGE_PROMPT = (
    "You check answers against evidence. Reply Yes if the evidence states everything the answer "
    "says, No if the answer says anything the evidence does not state."
)


class LLMAnswerJudge:
    """P(the evidence states everything the answer says) from a served model's Yes/No log-probabilities.

    Example:
        >>> judge = LLMAnswerJudge(load_llm(LLMConfig(backend="openai", base_url=url, model=name)))  # doctest: +SKIP
        >>> judge.support("Paris is in France.", ["Paris is the capital of France."])  # doctest: +SKIP
        0.97
    """

    name = "independent: llm yes/no"

    def __init__(self, llm: Any, max_evidence_chars: int = 1500) -> None:
        self.llm = llm
        self.max_evidence_chars = max_evidence_chars

    def warm_up(self) -> None:
        warm = getattr(self.llm, "warm_up", None)
        if callable(warm):
            warm()

    def support(self, answer: str, cited: Sequence[str]) -> float:
        evidence = "\n".join(f"- {c[: self.max_evidence_chars]}" for c in cited) or "(none)"
        bare = CITATION_MARKER_RE.sub("", answer).strip()
        prompt = [
            {"role": "system", "content": _JUDGE_PROMPT},
            {"role": "user", "content": f"Evidence:\n{evidence}\n\nAnswer: {bare}\n\n"
                                        "Does the evidence state everything the answer says? Yes or No?"},
        ]  # fmt: skip
        yes, no = self.llm.next_token_logprobs(prompt, ["Yes", "No"])
        top = max(yes, no)
        return float(math.exp(yes - top) / (math.exp(yes - top) + math.exp(no - top)))

    def judge(self, answer: str, cited: Sequence[str], golds: Sequence[str] = ()) -> dict[str, Any]:
        score = self.support(answer, cited) if cited else 0.0
        return {"judge": self.name, "score": round(score, 6), "faithful": score >= 0.5}

    def to_dict(self) -> dict[str, Any]:
        to_dict = getattr(self.llm, "to_dict", None)
        return {"type": "llm-yes-no", "llm": to_dict() if callable(to_dict) else None}


def independence_note(config: Any, judge_model: str | None) -> str | None:
    """Why an LLM judge would not be independent of the sieve's verifier under ``config``, or ``None``."""
    sieve = getattr(config, "sieve", None)
    if sieve is None or getattr(sieve, "claim_judge", None) != "llm-logprob":
        return None
    if judge_model is None or judge_model == (config.llm.model or "bundled"):
        return (
            "the sieve verifies with llm-logprob on the same model this judge uses, so its scores are "
            "self-judged; serve a different model for the independent judge"
        )
    return None


def faithfulness_summary(verdicts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Shares over answered questions: faithful, values cited (of answers stating values), gold in cited."""

    def share(key: str) -> dict[str, Any]:
        vals = [v[key] for v in verdicts if v.get(key) is not None]
        return {"share": round(sum(map(bool, vals)) / len(vals), 4) if vals else None, "n": len(vals)}

    return {"judge": verdicts[0]["judge"] if verdicts else None, "faithful": share("faithful"),
            "values_cited": share("values_cited"), "cited_has_gold": share("cited_has_gold")}  # fmt: skip
