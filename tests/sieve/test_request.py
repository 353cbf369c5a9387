"""One ``ask`` signature for sync, async and streaming: every entry point takes the question and
the per-request options of ``ragsieve.sieve.request.AskOptions``, declared once, and shows
them as keyword-only parameters; an unknown option fails as a wrong keyword does."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from tests.test_pipeline import QueueLLM

from ragsieve.config import PipelineConfig
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.sieve.request import ASK_DEFAULTS, ASK_OPTIONS, AskOptions, ask_options
from ragsieve.sieve.streaming import StreamingAnswers

ENTRY_POINTS = ("ask", "ask_with_events", "stream", "aask", "astream")


def _options(method: object) -> list[tuple[str, object, object]]:
    params = inspect.signature(method).parameters.values()  # type: ignore[arg-type]
    return [(p.name, p.default, p.annotation) for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]


def test_every_entry_point_shows_the_same_options_written_once():
    assert ASK_OPTIONS == tuple(AskOptions.__annotations__) == tuple(ASK_DEFAULTS)
    expected = _options(Pipeline.ask)
    assert [name for name, _, _ in expected] == list(ASK_OPTIONS)
    assert [default for _, default, _ in expected] == [ASK_DEFAULTS[n] for n in ASK_OPTIONS]
    for cls in (Pipeline, StreamingAnswers):
        for name in ENTRY_POINTS:
            method = getattr(cls, name)
            assert _options(method) == expected, f"{cls.__name__}.{name}"
            # each takes its options as **options: Unpack[AskOptions] in its source
            source = inspect.getsource(inspect.unwrap(method))
            assert "**options: Unpack[AskOptions]" in source, f"{cls.__name__}.{name}"
            assert "no_retrieval: bool = False" not in source, f"{cls.__name__}.{name} spells the options out"
    assert list(inspect.signature(Pipeline.ask_with_events).parameters)[:3] == ["self", "question", "on_event"]


def test_an_unknown_option_is_refused_naming_the_ones_there_are(hash_index):
    with pytest.raises(TypeError, match="unexpected keyword argument 'kk'; a question takes no_retrieval, k, route"):
        ask_options({"kk": 3})
    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=hash_index, llm=QueueLLM("Apollo 11 [1]."))
    with pytest.raises(TypeError, match="'kk'"):
        pipe.ask("When did Apollo 11 land?", kk=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'kk'"):
        list(pipe.stream("When did Apollo 11 land?", kk=3))  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'kk'"):
        asyncio.run(pipe.aask("When did Apollo 11 land?", kk=3))  # type: ignore[call-arg]


def test_the_options_reach_the_request(hash_index):
    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=hash_index, llm=QueueLLM("Apollo 11 landed in 1969 [1]."))
    answer = pipe.ask("When did Apollo 11 land?", k=1)
    assert len(answer.evidence) == 1
    final = [e for e in pipe.stream("When did Apollo 11 land?", k=2) if e.kind == "answer"][-1]
    assert len(final.answer.evidence) == 2  # type: ignore[attr-defined]
    assert pipe.ask("When did Apollo 11 land?", no_retrieval=True).evidence == []


@pytest.fixture(scope="module")
def hash_index(tmp_path_factory):
    from tests.helpers import HashEmbedder, copy_corpus

    from ragsieve.index import Index

    root = tmp_path_factory.mktemp("request")
    return Index.build(copy_corpus(root), root / "idx", embedder=HashEmbedder())


def test_the_service_takes_a_subset_of_the_options_with_their_defaults():
    # the service passes a request's options on to Pipeline.ask: each it takes (a subset: where
    # comes from the caller's access, task is the task-adaptive preset's) is one of AskOptions,
    # with AskOptions' default
    from ragsieve.serve.engine import Engine
    from ragsieve.serve.schemas import AskRequest

    engine = inspect.signature(Engine.ask).parameters
    taken = [name for name in engine if name in ASK_DEFAULTS]
    assert set(taken) == {"k", "route", "no_retrieval"}
    assert {name: engine[name].default for name in taken} == {name: ASK_DEFAULTS[name] for name in taken}
    request = {name: f.default for name, f in AskRequest.model_fields.items() if name in ASK_DEFAULTS}
    assert request == {name: ASK_DEFAULTS[name] for name in taken}
