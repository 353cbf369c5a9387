"""Yes/no questions: read the answer's polarity from log-probabilities, not from sampled text.

A small model asked "Are A and B both orchids?" often answers without saying yes or no ("Both
are genera of ...") or opens every such answer with the same word whatever the evidence says.
:func:`polar_label` asks the model which of "Yes" and "No" it would put first, by comparing the
two words' log-probabilities as the first token of the reply, and :func:`with_polar_label` writes
that word at the start of the generated reply when the reply does not already open with yes or
no. The sampled text is never parsed for the label.

Example:
    >>> from ragsieve.generate.polar import is_polar_question, with_polar_label
    >>> is_polar_question("Are Broughtonia and Laeliocattleya both orchids?")
    True
    >>> is_polar_question("Who is older, Annie Morton or Terry Richardson?")
    False
    >>> with_polar_label("Both are genera of orchids.", "Yes")
    ('Yes, both are genera of orchids.', True)
"""

from __future__ import annotations

import re
from typing import Any, Literal, NamedTuple

from ragsieve.lexicon import WORD_RE
from ragsieve.llm.base import Prompt

__all__ = ["AUXILIARIES", "PolarLabel", "is_polar_question", "polar_label", "starts_with_polarity",
           "with_polar_label"]

# Auxiliaries and copulas: they open a yes/no question ("Is ...", "Did ...", "Can ...") and are
# inverted after a question word ("what country is X"; ragsieve.attack.poison.question_statement).
AUXILIARIES = frozenset({
    "am", "is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have", "had", "will", "would",
    "shall", "should", "may", "might", "must",
})
_POLARITY_RE = re.compile(r"\s*(yes|no)\b", re.IGNORECASE)
# Openers lower-cased after "Yes, ": pronouns and determiners that never start a name. Any
# other first word ("Distortion Mirrors", "The Ring") may be part of a name and keeps its case.
_COMMON_OPENERS = frozenset({"both", "neither", "either", "they", "it", "he", "she", "we", "this", "these",
                             "those", "that", "there", "each", "all", "none"})


class PolarLabel(NamedTuple):
    """The model's yes/no for one prompt: ``label`` and ``margin`` = log p("Yes") - log p("No")."""

    label: Literal["Yes", "No"]
    margin: float


def is_polar_question(question: str) -> bool:
    """True for a yes/no question: it opens with an auxiliary or copula and offers no
    alternatives ("Is A or B older?" asks to choose, so it is not polar)."""
    words = [w.lower() for w in WORD_RE.findall(question)]
    return bool(words) and words[0] in AUXILIARIES and "or" not in words[1:]


def starts_with_polarity(text: str) -> bool:
    """True when ``text`` opens with the word yes or no (any case)."""
    return _POLARITY_RE.match(text) is not None


def polar_label(llm: Any, prompt: Prompt) -> PolarLabel:
    """Which of "Yes" and "No" the model puts first in its reply to ``prompt``.

    One forward pass (:meth:`ragsieve.llm.LLM.next_token_logprobs`: the first token of each
    word, which is the whole word in common vocabularies, and what servers with only chat
    log-probabilities can give); ties go to "Yes". Raises what the backend raises when it
    cannot score (a server without log-probabilities): callers fall back to the free answer.
    """
    yes, no = llm.next_token_logprobs(prompt, ["Yes", "No"])
    margin = float(yes - no)
    return PolarLabel("Yes" if margin >= 0 else "No", margin)


def with_polar_label(text: str, label: str) -> tuple[str, bool]:
    """``text`` opening with ``label``, and whether the label was added.

    A reply that already opens with yes or no is kept as it is: the label is the model's own
    first-word preference between the two, so a greedy reply that starts with one of them
    starts with the same one. An empty reply becomes the label alone.
    """
    body = text.strip()
    if starts_with_polarity(body):
        return body, False
    if not body:
        return f"{label}.", True
    first = WORD_RE.match(body)
    if first and first.group(0).lower() in _COMMON_OPENERS:
        body = body[0].lower() + body[1:]
    return f"{label}, {body}", True
