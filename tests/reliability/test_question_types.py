"""A question that is not text gets an error naming what was passed, not "the question is empty"."""

from __future__ import annotations

from typing import Any

import pytest

from ragsieve.config import PipelineConfig
from ragsieve.errors import InputError
from ragsieve.sieve.pipeline import Pipeline


@pytest.mark.parametrize(
    ("question", "said"),
    [(b"what is graphene?", "is bytes, not text"), (42, "must be a string, not int"), (None, "is None"),
     ("  ", "is empty")],
)
def test_pipeline_ask_names_the_wrong_type(question: Any, said: str) -> None:
    pipeline = Pipeline(PipelineConfig(pipeline="plain"))  # nothing is loaded before the check
    with pytest.raises(InputError, match=said):
        pipeline.ask(question)
