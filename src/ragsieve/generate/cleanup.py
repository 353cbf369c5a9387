"""Strip small models' formatting habits from a generated answer before it is verified.

Small instruction models wrap an answer in habits learnt from chat data: a label or filler
before it (``The answer is:``, ``Answer:``, ``Based on the context,``, ``Sure!``), an echo of
the prompt's own sections (``Question: ...``, ``Evidence: [1] ...``), markdown emphasis, a
numbered list where one sentence was asked for (``1. Onnes 2. 1911``) and citation debris at
the end (``Sources: [1], [2]``, a lone ``[``). :func:`clean_answer` removes them with general
rules about the shape of the reply, never about its words' topic, and says what it removed:

* prompt sections: when the reply echoes the answer prompt's section labels
  (:data:`SECTION_LABELS`), the text under its last ``Answer:`` label is the answer; without
  one, echoed ``Question:`` sections are dropped and an ``Evidence:``/``Context:`` label is
  removed (what follows is then judged as what it is, a pasted passage, by
  :mod:`ragsieve.verify.responsive`);
* leading filler (:data:`FILLER_PATTERNS`), repeated until none is left;
* lists rewritten as prose (:func:`ragsieve.text.sentences.normalize_lists`);
* trailing citation debris: a ``Sources:``/``References:`` label before markers is dropped and
  its markers kept, unfinished markers (``[1``, ``[``) and empty brackets are removed;
* a value the model wrote twice, glued by punctuation without a space (``1997.1997``,
  ``Leiden,Leiden``), written once (:func:`collapse_glued_repeats`).

Example:
    >>> from ragsieve.generate.cleanup import clean_answer
    >>> clean_answer("The answer is: Graphene.").text
    'Graphene.'
    >>> clean_answer("1. Heike Kamerlingh Onnes 2. 1911").text
    'Heike Kamerlingh Onnes; 1911.'
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ragsieve.lexicon import CITATION_MARKER_RE, citation_markers
from ragsieve.text.sentences import first_sentence_end, normalize_lists

__all__ = [
    "FILLER_PATTERNS", "LABEL_OPEN_RE", "SECTION_LABELS", "CleanAnswer", "clean_answer", "collapse_glued_repeats",
    "opened_with_label",
]

# The labels of the answer prompt's sections (ragsieve.generate.answer.build_answer_messages)
# and their common variants, as a model echoes them at a line start.
SECTION_LABELS = ("answer", "final answer", "short answer", "question", "evidence", "context", "passages",
                  "sources", "references", "citations")
_SECTION_RE = re.compile(
    r"(?:^|\n)[ \t]*(?:#+[ \t]*)?(?P<label>" + "|".join(sorted(SECTION_LABELS, key=len, reverse=True))
    + r")[ \t]*:[ \t]*", re.IGNORECASE)

_CONTEXT_NOUN = r"(?:context|evidence|information|passages?|texts?|documents?|sources?|excerpts?|snippets?)"
_FILLER_RE = [
    # "The answer is:", "The final answer to the question is", "The correct answer would be that"
    r"(?:so,?\s+|therefore,?\s+)?(?:the|my|our)\s+(?:final\s+|short\s+|correct\s+|best\s+)?answer"
    r"(?:\s+to\s+(?:the|this|your)\s+question)?\s+(?:is|would\s+be|will\s+be)(?:\s+that)?\s*[:\-–—]?\s+",
    # "Answer:", "A:", "Final answer -"
    r"(?:final\s+|short\s+)?answer\s*[:\-–—]\s*|a\s*:\s+",
    # "Based on the (provided) context,", "According to the evidence above,", "From the passages:"
    r"(?:based\s+(?:on|upon)|according\s+to|from|using|given|in)\s+(?:the\s+|this\s+|these\s+)?"
    r"(?:provided\s+|given\s+|above\s+|numbered\s+|available\s+|retrieved\s+)?" + _CONTEXT_NOUN
    + r"(?:\s+(?:provided|given|above|below))?(?:\s*\[\d{1,3}\])*\s*[,:]\s*",
    # "Sure!", "Certainly,", "Okay.", "Of course:"
    r"(?:sure|certainly|of\s+course|okay|ok|great|absolutely)\s*[!,.:]\s+",
    # "Here is the answer:", "Here's a short answer based on the evidence:"
    r"here(?:\s+is|'s)\s+(?:the|an|my|a)\s+(?:short\s+|brief\s+)?answer(?:\s+to\s+(?:the|your|this)\s+question)?"
    r"(?:\s+(?:based\s+on|from|according\s+to|using)\s+(?:the\s+)?(?:provided\s+|given\s+)?" + _CONTEXT_NOUN + r")?"
    r"\s*[:.!]\s*",
    # "The evidence states that", "The provided context [2] shows that"
    r"(?:the\s+)?(?:provided\s+|given\s+|above\s+)?" + _CONTEXT_NOUN + r"(?:\s*\[\d{1,3}\])*\s+"
    r"(?:says|states|shows|indicates|mentions|suggests|explains|confirms)\s+that\s+",
]
FILLER_PATTERNS: tuple[str, ...] = tuple(_FILLER_RE)
_FILLER = [re.compile(r"^\s*(?:" + p + ")", re.IGNORECASE) for p in FILLER_PATTERNS]
_TRAILING_LABEL_RE = re.compile(
    r"[\s(]*(?:sources?|references?|citations?|cited|see)\s*:?\s*((?:\[\d{1,3}\][\s,;]*(?:and\s+)?)+)\)?\s*$",
    re.IGNORECASE)
_BROKEN_MARKER_RE = re.compile(r"\[\s*\]|\[\d{0,3}\s*$|\[\s*$")
_SENTENCE_END = ".!?…"
# A reply that opens with a citation marker or an evidence label pastes what follows; cleanup
# removes the label, so whether the raw reply had one is kept for the responsiveness check.
LABEL_OPEN_RE = re.compile(r"^\s*(?:\[\d{1,3}\]|(?:evidence|context|passage|source)s?\s*:)", re.IGNORECASE)


# A value written twice with one punctuation mark between and no space ("1997.1997", "Leiden,Leiden",
# "14 May 1997.14 May 1997"): a small model's stutter, since nothing written that way is one value.
_GLUED_REPEAT_RE = re.compile(r"(?<![\w.,;:])(?P<value>\w(?:[\w ]*\w)?)(?P<glue>[.,;:])(?P=value)(?![\w])")
# All-digit values shorter than this are left alone: "2.2" and "10.10" are decimals, "100,100" a
# grouped thousand; four digits glued to the same four digits are no number anyone writes.
_MIN_GLUED_DIGITS = 4


def collapse_glued_repeats(text: str) -> str:
    """``text`` with each value repeated at once and glued by one punctuation mark written once.

    >>> collapse_glued_repeats("1997.1997 [1].")
    '1997 [1].'
    >>> collapse_glued_repeats("It weighs 2.2 kg; it opened in 1931,1931.")
    'It weighs 2.2 kg; it opened in 1931.'
    """

    def one(m: re.Match[str]) -> str:
        value = m.group("value")
        if value.replace(" ", "").isdigit() and len(value) < _MIN_GLUED_DIGITS:
            return m.group(0)
        if not any(ch.isdigit() for ch in value) and len(value) < 2:
            return m.group(0)  # "a.a", an abbreviation's letters
        return value

    previous = None
    while previous != text:  # "1997.1997.1997"
        previous, text = text, _GLUED_REPEAT_RE.sub(one, text)
    return text


# Inline pieces whose source markdown-it's tokens give back: text, code spans, line breaks,
# links; emphasis markers are dropped. An inline run holding anything else is left as written.
_EMPHASIS_MARKS = frozenset({"em_open", "em_close", "strong_open", "strong_close"})


def _inline_source(children: list[Any]) -> str | None:
    out: list[str] = []
    links: list[Any] = []
    for tok in children:
        if tok.type in _EMPHASIS_MARKS:
            continue
        if tok.type in ("text", "html_inline"):
            out.append(tok.content)
        elif tok.type == "code_inline":
            out.append(tok.markup + tok.content + tok.markup)
        elif tok.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif tok.type == "link_open":
            links.append(tok)
            out.append("<" if tok.markup == "autolink" else "[")
        elif tok.type == "link_close" and links:
            link = links.pop()
            out.append(">" if link.markup == "autolink" else f"]({link.attrs.get('href', '')})")
        else:
            return None
    return "".join(out)


def _markdown_tokens(text: str) -> list[Any]:
    from markdown_it import MarkdownIt

    return list(MarkdownIt("commonmark").parse(text))


def _without_headings(text: str) -> str:
    """``text`` with each markdown heading (``## Result``, a setext ``Result\\n===``) as its
    plain words, as markdown-it (CommonMark, already the loader's markdown reader) reads them;
    a heading inside a list or a quote keeps its marks."""
    tokens = _markdown_tokens(text)
    lines = text.split("\n")
    for tok, inline in zip(tokens, tokens[1:], strict=False):
        if tok.type == "heading_open" and tok.level == 0 and tok.map:
            first, end = tok.map
            lines[first:end] = [inline.content] + [""] * (end - first - 1)  # a setext underline goes
    return "\n".join(lines)


def _without_emphasis(text: str) -> str:
    """``text`` without emphasis marks (``**bold**``, ``*it*``, ``__bold__``, ``_it_``) where
    markdown-it reads emphasis."""
    out = text
    for tok in _markdown_tokens(text):
        if tok.type == "inline" and any(c.type in _EMPHASIS_MARKS for c in tok.children or []):
            plain = _inline_source(tok.children or [])
            if plain is not None:
                out = out.replace(tok.content, plain, 1)
    return out


def opened_with_label(raw: str) -> bool:
    """Whether a raw model reply opens with a ``[n]`` marker or an ``Evidence:``-style label.

    >>> opened_with_label("Evidence: [1] The Atomic Force Microscope ..."), opened_with_label("Leiden [1].")
    (True, False)
    """
    return bool(LABEL_OPEN_RE.match(raw))


@dataclass
class CleanAnswer:
    """A cleaned answer: ``text`` is what is verified and shown; ``original`` the model's reply;
    ``removed`` the pieces taken out and ``changes`` the rules that fired (for the trace)."""

    text: str
    original: str
    removed: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.text != self.original

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _sections(text: str) -> list[tuple[str, str]]:
    """``(label, body)`` pairs of a reply that echoes section labels; the text before the first
    label has the label ``""``."""
    parts: list[tuple[str, str]] = []
    last_label, last_end = "", 0
    for m in _SECTION_RE.finditer(text):
        parts.append((last_label, text[last_end : m.start()]))
        last_label, last_end = m.group("label").lower(), m.end()
    parts.append((last_label, text[last_end:]))
    return [(label, body) for label, body in parts if body.strip() or label]


def _strip_sections(text: str, out: CleanAnswer) -> str:
    sections = _sections(text)
    if len(sections) == 1 and not sections[0][0]:
        return text
    answers = [body for label, body in sections if label.endswith("answer") and body.strip()]
    if answers:
        kept = answers[-1]
        out.changes.append("kept the text under the answer label")
    else:
        pieces: list[str] = []
        source_markers: list[str] = []
        for label, body in sections:
            if label == "question":
                out.changes.append("dropped an echoed question")
                out.removed.append(body.strip())
                continue
            if label in ("sources", "references", "citations"):
                markers = citation_markers(body)
                if markers and not re.sub(r"[\[\]\d\s,;]|and", "", body):
                    source_markers += markers
                    out.changes.append("kept the markers of a sources label")
                    continue
            if label:
                out.changes.append(f"removed the label {label.title()}:")
            pieces.append(body)
        kept = " ".join(p.strip() for p in pieces if p.strip())
        extra = [m for m in dict.fromkeys(source_markers) if m not in kept]
        if extra:
            kept = f"{kept} {' '.join(extra)}"
    removed = text.replace(kept, "", 1).strip() if kept in text else ""
    if removed and removed not in out.removed:
        out.removed.append(removed)
    return kept


def _strip_filler(text: str, out: CleanAnswer) -> str:
    for _ in range(6):
        for pattern in _FILLER:
            m = pattern.match(text)
            if m and text[m.end() :].strip():
                out.removed.append(m.group(0).strip())
                out.changes.append("removed leading filler")
                text = text[m.end() :]
                break
        else:
            return text
    return text


def _strip_debris(text: str, out: CleanAnswer) -> str:
    m = _TRAILING_LABEL_RE.search(text)
    if m and text[: m.start()].strip():
        head = text[: m.start()]
        markers = " ".join(k for k in dict.fromkeys(citation_markers(m.group(1))) if k not in head)
        out.removed.append(m.group(0).strip())
        out.changes.append("kept the markers of a trailing sources label")
        text = (head.rstrip() + " " + markers).rstrip()
    broken = _BROKEN_MARKER_RE.sub("", text)
    if broken != text:
        out.changes.append("removed unfinished citation markers")
        text = broken
    return text


def clean_answer(text: str, question: str | None = None) -> CleanAnswer:
    """The answer without prompt echoes, filler, markdown, list fragments and citation debris.

    ``question``, when given, lets an echoed question opening the reply be dropped too. The
    text that remains keeps its ``[n]`` markers; a first letter lower-cased by a removed
    prefix is capitalised and an answer whose filler was removed ends with a full stop.

    >>> clean_answer("Based on the provided context, the answer is: 1911 [1]").text
    '1911 [1].'
    >>> clean_answer("**Answer:** Leiden [2]\\n\\nSources: [2]").text
    'Leiden [2].'
    """
    out = CleanAnswer(text="", original=text)
    body = _without_headings(text)
    emphasis = _without_emphasis(body)
    if emphasis != body:
        out.changes.append("removed markdown emphasis")
        body = emphasis
    body = _strip_sections(body, out)
    asked = (question or "").strip()
    if asked and body.strip().lower().startswith(asked.lower()) and body.strip()[len(asked) :].strip():
        out.removed.append(asked)
        out.changes.append("dropped an echoed question")
        body = body.strip()[len(asked) :]
    n_removed = len(out.removed)
    body = _strip_filler(body, out)
    filler = out.removed[n_removed:]
    listed = normalize_lists(body)
    if listed != body:
        out.changes.append("rewrote a list as prose")
        body = listed
    body = _strip_debris(body, out)
    collapsed = collapse_glued_repeats(body)
    if collapsed != body:
        out.changes.append("wrote a value repeated without a space once")
        body = collapsed
    body = re.sub(r"[ \t]+", " ", body).strip()
    body = re.sub(r"\s+([.,;:!?])", r"\1", body)
    # markers a removed filler carried ("According to the context [1], ...") move to the end of
    # the first sentence, the statement they cite
    carried = [m for m in dict.fromkeys(citation_markers(" ".join(filler))) if m not in body]
    if carried and body:
        at = first_sentence_end(body)
        body = body[:at].rstrip() + " " + " ".join(carried) + body[at:]
    if out.changes and body:
        if body[0].islower() and (len(body) < 2 or not body[1].isupper()):
            body = body[0].upper() + body[1:]
        bare = CITATION_MARKER_RE.sub("", body).rstrip()  # its last character is the sentence's
        if bare and bare[-1] not in _SENTENCE_END + ":;\"')]":
            body = body + "."
    out.text = body
    return out
