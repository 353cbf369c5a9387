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

from collections.abc import Mapping
from typing import Any, NamedTuple

from ragsieve.errors import InputError
from ragsieve.options import FilterTaskKind as TaskKind


class TaskTemplate(NamedTuple):
    name: str
    kind: TaskKind
    labels: list[str]
    verbalizers: dict[str, str]  # label -> word the model is scored on (first tokens distinct)
    instruction: str  # label prediction instruction, placed before the text
    text_name: str  # "Review", "Question", "Sentence"
    goal: str  # what the knowledge should help with, used in the filter question
    # A user's str.format prompt with {text} and optionally {knowledge}, {options}; None: built-in layout.
    template: str | None = None

    def classify_prompt(self, text: str, knowledge: list[str] | None = None) -> str:
        """The label-prediction prompt; the knowledge comes last so the rest is a shared prefix."""
        options = ", ".join(self.verbalizers[label] for label in self.labels)
        if self.template is not None:
            return self.template.format(text=text, knowledge=" ".join(knowledge or []), options=options).rstrip()
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

    @property
    def builtin(self) -> bool:
        return TASKS.get(self.name) == self

    def to_dict(self) -> dict[str, Any]:
        return {**self._asdict(), "labels": list(self.labels), "verbalizers": dict(self.verbalizers)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskTemplate:
        return resolve_task(data)


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


# How a task is named wherever one is accepted: a built-in name, a template, or a custom task's fields.
TaskSpec = str | TaskTemplate | Mapping[str, Any]

_KINDS: dict[str, str] = {"sentiment": "sst-2", "question": "trec", "grammar": "cola"}


def custom_task(
    labels: list[str],
    verbalizers: dict[str, str] | None = None,
    kind: TaskKind = "sentiment",
    instruction: str | None = None,
    template: str | None = None,
    name: str = "custom",
    text_name: str | None = None,
    goal: str | None = None,
) -> TaskTemplate:
    """A template for a user's own task: labels, an instruction and optionally a prompt template.

    ``template`` is a ``str.format`` string with ``{text}`` and optionally ``{knowledge}`` and
    ``{options}`` (as for ``ragsieve classify --template``); without it the prompt is the
    instruction followed by the text. ``kind`` only picks default wording for the filter question.

    Example:
        >>> t = custom_task(["spam", "ham"], instruction="Is this e-mail spam or ham?", goal="spotting spam")
        >>> t.classify_prompt("Win a prize!").splitlines()[0]
        'Is this e-mail spam or ham? Answer with one word (spam, ham).'
    """
    labels = [str(x) for x in labels]
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise InputError("a task needs at least two distinct labels; pass e.g. labels=['positive', 'negative']")
    if kind not in _KINDS:
        raise InputError(f"unknown task kind {kind!r}; use one of {sorted(_KINDS)}")
    if template is not None:
        if "{text}" not in template:
            raise InputError("a custom task template needs a {text} field, e.g. 'Text: {text}\\nLabel:'")
        try:
            template.format(text="t", knowledge="k", options="o")
        except (KeyError, IndexError, ValueError) as exc:
            raise InputError(
                f"the custom task template has an unknown field or bad braces ({exc}); "
                "use only {text}, {knowledge} and {options}, and double literal braces"
            ) from None
    verb = {label: (verbalizers or {}).get(label, label) for label in labels}
    base = TASKS[_KINDS[kind]]
    instr = instruction or f"Classify the text as one of: {', '.join(labels)}."
    goal = goal or f"classifying the text ({instr})"
    return TaskTemplate(name, kind, labels, verb, instr, text_name or base.text_name, goal, template)


def resolve_task(task: TaskSpec) -> TaskTemplate:
    """A task template from a built-in name, a template, or a custom task's fields.

    A mapping needs ``labels`` and may give ``instruction``, ``template``, ``verbalizers``,
    ``kind``, ``name``, ``text_name`` and ``goal`` (see :func:`custom_task`); it is what a
    filter's ``to_dict`` writes for a custom task, so saved filters load back.

    Example:
        >>> resolve_task({"labels": ["spam", "ham"], "instruction": "Spam or ham?"}).labels
        ['spam', 'ham']
    """
    if isinstance(task, TaskTemplate):
        return task
    if isinstance(task, str):
        return get_task(task)
    if isinstance(task, Mapping):
        known = {"labels", "verbalizers", "kind", "instruction", "template", "name", "text_name", "goal"}
        unknown = sorted(set(task) - known)
        if unknown:
            raise InputError(f"custom task has unknown field(s) {unknown}; use {sorted(known)}")
        if "labels" not in task:
            raise InputError("a custom task needs 'labels' (at least two), plus an 'instruction' or 'template'")
        return custom_task(**dict(task))
    raise InputError(f"a task is a name ({sorted(TASKS)}), a TaskTemplate or a dict with labels; got {type(task)}")


def task_spec(task: TaskSpec) -> str | dict[str, Any]:
    """JSON-ready form of a task: a built-in's name, or a custom task's fields."""
    t = resolve_task(task)
    return t.name if t.builtin else t.to_dict()
