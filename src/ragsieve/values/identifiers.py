"""Code identifiers: snake_case, camelCase and CamelCase, ALL_CAPS with digits or underscores,
dotted names (``os.path.join``) and calls (``call()``); matched exactly as a whole token (code is
case-sensitive). A word with one inner capital right after a given name ("William McLellan") is a
surname, not a code name.
"""

from __future__ import annotations

import re

from ragsieve.values.core import Match, Value, phrase_pattern
from ragsieve.values.names import _SENTENCE_START_RE

_IDENT_RE = re.compile(
    r"(?<![\w.])(?:"
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?"  # dotted
    r"|[A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9](?:\(\))?"  # snake_case / ALL_CAPS_WITH_UNDERSCORES
    r"|[a-z]+[A-Z][A-Za-z0-9]*(?:\(\))?"  # camelCase
    r"|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+(?:\(\))?"  # CamelCase
    r"|[A-Z]+[0-9][A-Z0-9]*|[A-Z]{2,}[0-9]+[A-Z0-9]*"  # ALL CAPS with digits (ASN1, SHA256)
    r"|[A-Za-z_][A-Za-z0-9_]*\(\)"  # call()
    r")(?![\w])"
)


def _is_surname_after_given_name(word: str, before: str) -> bool:
    """Whether ``word``, a capitalised word with one inner capital ("McLellan", "DeVito"), comes
    right after a capitalised word inside a sentence ("claimed by William McLellan"): a name
    then, as code names are not written after a given name. Not after a sentence's first word,
    which may be a verb ("Call HttpClient")."""
    if not (word.isalpha() and word[0].isupper() and word[1].islower() and sum(c.isupper() for c in word) == 2):
        return False
    if not before.endswith(" ") or before.endswith("  "):
        return False
    head, _, given = before[:-1].rpartition(" ")
    if not (len(given) > 1 and given.isalpha() and given[0].isupper() and given[1:].islower()):
        return False
    return bool(head) and _SENTENCE_START_RE.search(head + " ") is None


def _identifier_match(value: Value, evidence_text: str) -> Match | None:
    ident = value.tokens[0] if value.tokens else value.text
    m = phrase_pattern(ident).search(evidence_text)
    if m:
        return Match(value, Value("identifier", m.group(0), m.group(0), m.span(), tokens=(m.group(0),)), "exact")
    return None
