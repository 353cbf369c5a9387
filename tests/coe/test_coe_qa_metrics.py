from __future__ import annotations

import pytest

from ragsieve.answers import contains_answer, exact_match, normalize_answer, token_f1


def test_normalize_squad_style():
    assert normalize_answer("The  Beatles!") == "beatles"
    assert normalize_answer("An apple, a day") == "apple day"


def test_contains_answer_whole_tokens_only():
    assert contains_answer("I think it's Chief of Protocol.", ["chief of protocol"])
    assert not contains_answer("Parisian", ["Paris"])
    assert contains_answer("yes", "Yes")
    assert not contains_answer("anything", [""])


def test_exact_match():
    assert exact_match("the Eiffel Tower", ["Eiffel tower"])
    assert not exact_match("Eiffel", ["Eiffel tower"])


@pytest.mark.parametrize(
    ("pred", "gold", "f1"),
    [("Paris France", ["Paris"], 2 / 3), ("a b c", ["a b c"], 1.0), ("x", ["y"], 0.0), ("", [""], 1.0)],
)
def test_token_f1(pred, gold, f1):
    assert token_f1(pred, gold) == pytest.approx(f1)


def test_token_f1_best_of_golds():
    assert token_f1("new york city", ["york", "new york city"]) == pytest.approx(1.0)
