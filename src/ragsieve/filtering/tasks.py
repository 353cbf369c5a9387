"""Task templates for retrieval-augmented classification with knowledge filtering.

Each task (sentiment, question category, grammatical correctness) has its labels and
verbalizers, an instruction for label prediction, and the multiple-choice question the
direct and in-context filters ask: "(A) Harmful (B) Harmless".

Prompts are ordered so that everything that depends only on the query comes first
(instruction, then the text) and the knowledge piece comes last; the backends reuse the
key/value state of that shared prefix across the knowledge pieces of one query.

Example:
    >>> t = get_task("sst-2")
    >>> t.labels
    ['negative', 'positive']
    >>> "Harmless" in t.filter_prompt("a fine film .", "Cats are mammals.")
    True
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from ragsieve.errors import InputError

TaskKind = Literal["sentiment", "question", "grammar"]
TaskName = Literal["sst-2", "sst-5", "mr", "trec", "cola"]


class TaskTemplate(NamedTuple):
    name: str
    kind: TaskKind
    labels: list[str]
    verbalizers: dict[str, str]  # label -> word the model is scored on (first tokens distinct)
    instruction: str  # label prediction instruction, placed before the text
    text_name: str  # "Review", "Question", "Sentence"
    goal: str  # what the knowledge should help with, used in the filter question

    def classify_prompt(self, text: str, knowledge: list[str] | None = None) -> str:
        """The label-prediction prompt; the knowledge comes last so the rest is a shared prefix."""
        options = ", ".join(self.verbalizers[label] for label in self.labels)
        head = f"{self.instruction} Answer with one word ({options}).\n{self.text_name}: {text}"
        if knowledge:
            head += "\nKnowledge: " + " ".join(knowledge)
        return head

    def filter_prefix(self, text: str) -> str:
        """The query-only part of the filter prompt (shared across knowledge pieces)."""
        return (
            f"Is the knowledge below harmful or harmless for {self.goal}?\n(A) Harmful\n(B) Harmless\n"
            f"Answer with A or B.\n{self.text_name}: {text}\n"
        )

    def filter_prompt(self, text: str, knowledge: str) -> str:
        """Multiple-choice filter question; only the knowledge differs between pieces."""
        return f"{self.filter_prefix(text)}Knowledge: {knowledge}"


_SENTIMENT2 = {"negative": "negative", "positive": "positive"}
_SENTIMENT5 = {"terrible": "terrible", "bad": "bad", "neutral": "neutral", "good": "good", "great": "great"}

TASKS: dict[str, TaskTemplate] = {
    "sst-2": TaskTemplate(
        "sst-2",
        "sentiment",
        ["negative", "positive"],
        _SENTIMENT2,
        "Classify the sentiment of the movie review as positive or negative.",
        "Review",
        "predicting the sentiment of the review",
    ),
    "mr": TaskTemplate(
        "mr",
        "sentiment",
        ["negative", "positive"],
        _SENTIMENT2,
        "Classify the sentiment of the movie review as positive or negative.",
        "Review",
        "predicting the sentiment of the review",
    ),
    "sst-5": TaskTemplate(
        "sst-5",
        "sentiment",
        ["terrible", "bad", "neutral", "good", "great"],
        _SENTIMENT5,
        "Rate the sentiment of the movie review as terrible, bad, neutral, good or great.",
        "Review",
        "predicting the sentiment of the review",
    ),
    "trec": TaskTemplate(
        "trec",
        "question",
        ["abbreviation", "description", "entity", "human", "location", "numeric"],
        {
            "abbreviation": "abbreviation",
            "description": "description",
            "entity": "entity",
            "human": "human",
            "location": "location",
            "numeric": "number",
        },
        "Classify what the question asks for: an abbreviation, a description, an entity, a human, "
        "a location or a number.",
        "Question",
        "predicting the category of the question",
    ),
    "cola": TaskTemplate(
        "cola",
        "grammar",
        ["unacceptable", "acceptable"],
        {"unacceptable": "no", "acceptable": "yes"},
        "Is the sentence grammatically correct? Answer yes or no.",
        "Sentence",
        "judging the grammatical correctness of the sentence",
    ),
}


def get_task(name: str) -> TaskTemplate:
    """Look up a task template by dataset name."""
    try:
        return TASKS[name]
    except KeyError:
        raise InputError(f"unknown task {name!r}; choose one of {sorted(TASKS)}") from None


def custom_task(
    labels: list[str],
    verbalizers: dict[str, str] | None = None,
    kind: TaskKind = "sentiment",
    instruction: str | None = None,
) -> TaskTemplate:
    """A template for a user-given label set (used by ``ragsieve classify``)."""
    if len(labels) < 2:
        raise InputError("a label set needs at least two labels; pass e.g. --labels positive,negative")
    verb = {label: (verbalizers or {}).get(label, label) for label in labels}
    base = {"sentiment": TASKS["sst-2"], "question": TASKS["trec"], "grammar": TASKS["cola"]}[kind]
    instr = instruction or f"Classify the text as one of: {', '.join(labels)}."
    return TaskTemplate("custom", kind, list(labels), verb, instr, base.text_name, base.goal)
