"""Knowledge-poisoning attacks on a corpus, and the table of how far each defence stops them.

* :mod:`ragsieve.attack.poison`: target wrong answers, black-box poisoned passages (template
  or LLM writer), attacker sources, injection into a copy of an index;
* :mod:`ragsieve.attack.evaluate`: each defence as a ``PipelineConfig``, run on the clean and
  the poisoned index, with a resumable LLM-output cache;
* :mod:`ragsieve.attack.metrics`: retrieval-level success, attack success rate, clean accuracy,
  Wilson and paired-bootstrap intervals;

The defence itself, the check that drops poisoned passages, is the sieve's ``poison`` stage
(:mod:`ragsieve.sieve.poison`). ``ragsieve attack poison`` / ``ragsieve attack eval`` run the
same on a user's index.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "PoisonedPassage": "poison",
    "Target": "poison",
    "TemplateWriter": "poison",
    "LLMWriter": "poison",
    "AssertionWriter": "poison",
    "MirrorWriter": "poison",
    "SpreadWriter": "poison",
    "replace_answer": "poison",
    "assign_sources": "poison",
    "choose_targets": "poison",
    "inject": "poison",
    "load_attack": "poison",
    "poison_index": "poison",
    "Outcome": "metrics",
    "summarize": "metrics",
    "wilson": "metrics",
    "paired_bootstrap": "metrics",
    "CachedLLM": "evaluate",
    "DEFENCES": "evaluate",
    "defence_config": "evaluate",
    "evaluate_defence": "evaluate",
    "fit_source_weights": "evaluate",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ragsieve.attack' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ragsieve.attack.{module}"), name)
