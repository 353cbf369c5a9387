"""A value the model wrote twice, glued by punctuation ("1997.1997 [1]."), is written once;
decimals, grouped thousands and different values are left as written."""

from __future__ import annotations

import pytest

from ragsieve.generate.cleanup import clean_answer, collapse_glued_repeats


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("1997.1997 [1].", "1997 [1]."),
        ("The bridge opened in 1931,1931 [2].", "The bridge opened in 1931 [2]."),
        ("Leiden.Leiden [1]", "Leiden [1]."),
        ("It opened on 14 May 1997.14 May 1997 [1].", "It opened on 14 May 1997 [1]."),
        ("1997.1997.1997", "1997."),
    ],
)
def test_a_glued_repeat_is_written_once(raw: str, clean: str) -> None:
    out = clean_answer(raw)
    assert out.text == clean
    assert "wrote a value repeated without a space once" in out.changes


@pytest.mark.parametrize(
    "text", ["It weighs 2.2 kg [1].", "Version 10.10 [1].", "About 100,100 people [2].", "1931.1932 [1].",
             "See 192.168.1.1 [1].", "The U.S. budget [1]."],
)
def test_numbers_and_different_values_are_left_alone(text: str) -> None:
    assert collapse_glued_repeats(text) == text
