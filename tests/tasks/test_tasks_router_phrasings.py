"""The task router on phrasings it was not trained on (who-is / bio questions about obscure people)."""

from __future__ import annotations

import re

from ragsieve.tasks.classifier import TfidfTaskClassifier
from ragsieve.tasks.labels import bundled_requests_path, load_task_requests


def _heldout():  # type: ignore[no-untyped-def]
    return load_task_requests(path=bundled_requests_path().with_name("task_requests_heldout_phrasings.jsonl"))


def test_heldout_phrasings_share_no_text_or_name_with_training() -> None:
    rows = load_task_requests()
    heldout = _heldout()
    seen = {r.text.lower() for r in rows}
    assert not [r.text for r in heldout if r.text.lower() in seen]
    # Capitalised two-word names (people) of the held-out rows never occur in a training row.
    names = {m for r in heldout for m in re.findall(r"[A-Z][a-z]+ [A-Z][a-z]+(?:-[A-Z][a-z]+)?", r.text)}
    corpus = " ".join(r.text for r in rows)
    assert names and not [n for n in names if n in corpus]


def test_router_sends_unseen_who_is_and_bio_requests_to_retrieval() -> None:
    train = load_task_requests("train")
    clf = TfidfTaskClassifier().fit([r.text for r in train], [r.label for r in train])
    heldout = _heldout()
    needs = [r for r in heldout if r.label != "general_qa"]
    pred = clf.predict([r.text for r in needs])
    reached = sum(p != "general_qa" for p in pred) / len(needs)
    # Measured 0.89 with the entity-template rows and 0.69 without (docs/results.md).
    assert reached >= 0.8
    assert clf.classify("Who is Tancredi Lomellini?").label == "information_retrieval"
    assert clf.classify("Tell me a bio of Valter Ruusmaa.").label != "general_qa"
