"""Pipeline.stream / ask_with_events / aask / astream, callbacks and OpenTelemetry spans, with
fake LLMs (the real bundled model's stream is checked in tests/llm)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from tests.helpers import HashEmbedder, copy_corpus
from tests.test_pipeline import MOON_Q, KeywordJudge, QueueLLM, sieve

from ragsieve.cancel import GenerationCancelledError, check_cancelled, current_token
from ragsieve.config import PipelineConfig
from ragsieve.index import Index
from ragsieve.llm.base import Generation, SupportsStreaming, generate_streaming
from ragsieve.sieve.events import Final, PipelineCallbacks, Retracted, StageFinished, StageStarted, Token
from ragsieve.sieve.pipeline import Pipeline

SUPPORTED = "Apollo 11 landed on the Moon in July 1969 [1]."


@pytest.fixture(scope="module")
def hash_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("stream")
    return Index.build(copy_corpus(root), root / "idx", embedder=HashEmbedder())


class StreamingLLM(QueueLLM):
    """QueueLLM that also streams its reply word by word; ``gate`` (when set) is waited on after
    the first word, so a test can prove it read that word before the rest was generated."""

    def __init__(self, *replies: str, gate: threading.Event | None = None) -> None:
        super().__init__(*replies)
        self.gate = gate
        self.gate_passed: bool | None = None
        self.streams = 0

    def generate_stream(self, prompt, *, max_tokens=256, temperature=0.0, stop=None, seed=None):
        self.streams += 1
        text = self.generate(prompt).text
        pieces = [w + " " for w in text.split(" ")]
        pieces[-1] = pieces[-1].rstrip()
        for n, piece in enumerate(pieces):
            check_cancelled()
            yield piece
            if n == 0 and self.gate is not None:
                self.gate_passed = self.gate.wait(10)
        return Generation(text, 100, len(pieces), "stop")


def _comparable(answer) -> dict[str, Any]:
    out = answer.to_dict()
    out["trace"].pop("timings_ms")
    return out


def test_the_streaming_capability_and_its_one_piece_fallback():
    assert isinstance(StreamingLLM("a b"), SupportsStreaming)
    assert not isinstance(QueueLLM("a b"), SupportsStreaming)
    pieces: list[str] = []
    out = generate_streaming(QueueLLM("one piece only"), "q", pieces.append)
    assert pieces == ["one piece only"] and out.text == "one piece only"
    pieces.clear()
    out = generate_streaming(StreamingLLM("three words here"), "q", pieces.append)
    assert pieces == ["three ", "words ", "here"] and out.text == "".join(pieces) and out.completion_tokens == 3


def test_stream_yields_stages_tokens_then_the_same_answer_as_ask(hash_index):
    judge = KeywordJudge(relevant=("apollo",), ambiguous=("sun",))
    events = list(sieve(hash_index, StreamingLLM(SUPPORTED), judge).stream(MOON_Q))
    asked = sieve(hash_index, QueueLLM(SUPPORTED), KeywordJudge(relevant=("apollo",), ambiguous=("sun",))).ask(MOON_Q)
    kinds = [e.kind for e in events]
    assert kinds[0] == "stage_start" and kinds[-1] == "answer" and "retracted" not in kinds
    finished = [e.stage for e in events if isinstance(e, StageFinished)]
    assert finished == ["warm_up", *[s.name for s in sieve(hash_index, QueueLLM("x"), judge).stages]]
    # tokens arrive inside the generate stage, before it finishes
    start = next(i for i, e in enumerate(events) if isinstance(e, StageStarted) and e.stage == "generate")
    end = next(i for i, e in enumerate(events) if isinstance(e, StageFinished) and e.stage == "generate")
    tokens = [i for i, e in enumerate(events) if isinstance(e, Token)]
    assert len(tokens) == len(SUPPORTED.split()) and start < tokens[0] and tokens[-1] < end
    judge_done = next(e for e in events if isinstance(e, StageFinished) and e.stage == "judge")
    assert judge_done.decisions and all(d["check"] == "judge" for d in judge_done.decisions)
    assert judge_done.duration_ms >= 0 and judge_done.candidates is not None
    final = events[-1]
    assert isinstance(final, Final) and final.streamed_is_final
    assert "".join(e.text for e in events if isinstance(e, Token)) == final.answer.text
    assert _comparable(final.answer) == _comparable(asked)
    assert final.to_dict()["answer"]["answer"] == asked.text


def test_a_regenerated_answer_retracts_the_first_one(hash_index):
    llm = StreamingLLM(
        "Apollo 11 landed on the Moon in July 1969 [1]. Mitochondria are made of cheese [2].", SUPPORTED
    )
    judge = KeywordJudge(relevant=("apollo", "mitochondria"))
    events = list(sieve(hash_index, llm, judge).stream(MOON_Q + " And what do mitochondria do?"))
    retracted = [e for e in events if isinstance(e, Retracted)]
    assert len(retracted) == 1 and retracted[0].replacement == "regenerated" and "cheese" in retracted[0].text
    after = events[events.index(retracted[0]) + 1 :]
    assert {e.attempt for e in after if isinstance(e, Token)} == {"regenerate_generate"}
    assert isinstance(events[-1], Final) and events[-1].streamed_is_final and events[-1].answer.text == SUPPORTED


def test_checked_text_and_abstentions_retract_the_streamed_text(hash_index):
    reply = SUPPORTED + " It was filmed in Hollywood [1]."
    events = list(sieve(hash_index, StreamingLLM(reply), KeywordJudge(relevant=("apollo",))).stream(MOON_Q))
    retracted = [e for e in events if isinstance(e, Retracted)]
    assert [r.replacement for r in retracted] == ["checked"] and "Hollywood" in retracted[0].text
    assert events[-1].answer.text == SUPPORTED and not events[-1].streamed_is_final
    events = list(sieve(hash_index, StreamingLLM("I don't know."), KeywordJudge(relevant=("apollo",))).stream(MOON_Q))
    retracted = [e for e in events if isinstance(e, Retracted)]
    assert [r.replacement for r in retracted] == ["abstained"] and "no answer" in retracted[0].reason
    assert events[-1].answer.abstained
    # a backend that cannot stream sends the answer in one token
    events = list(sieve(hash_index, QueueLLM(SUPPORTED), KeywordJudge(relevant=("apollo",))).stream(MOON_Q))
    assert [e.text for e in events if isinstance(e, Token)] == [SUPPORTED]


def test_the_first_token_is_read_before_the_last_one_is_generated(hash_index):
    gate = threading.Event()
    llm = StreamingLLM(SUPPORTED, gate=gate)
    seen_before_release: list[str] = []
    for event in sieve(hash_index, llm, KeywordJudge(relevant=("apollo",))).stream(MOON_Q):
        if isinstance(event, Token) and not gate.is_set():
            seen_before_release.append(event.text)
            gate.set()  # the LLM generates the remaining words only now
    assert seen_before_release == ["Apollo "] and llm.gate_passed is True


class BlockingLLM(StreamingLLM):
    """Streams one word, then blocks until its job is cancelled (records that it was)."""

    def __init__(self) -> None:
        super().__init__(SUPPORTED)
        self.cancelled = threading.Event()

    def _block(self) -> None:
        token = current_token()
        assert token is not None, "the pipeline runs the LLM under a cancel token"
        if token.wait(10):
            self.cancelled.set()
        check_cancelled()

    def generate_stream(self, prompt, *, max_tokens=256, temperature=0.0, stop=None, seed=None):
        self.streams += 1
        yield "Apollo "
        self._block()
        return None

    def generate(self, prompt, *, max_tokens=256, temperature=0.0, stop=None, seed=None) -> Generation:
        self.prompts.append(prompt)
        self._block()
        return Generation("never", 1, 1, "stop")


def test_leaving_a_stream_early_cancels_the_llm_call(hash_index):
    llm = BlockingLLM()
    stream = sieve(hash_index, llm, KeywordJudge(relevant=("apollo",))).stream(MOON_Q)
    for event in stream:
        if isinstance(event, Token):
            break
    stream.close()  # what a for loop's break leaves to the garbage collector; explicit here
    assert llm.cancelled.is_set()


def test_errors_reach_the_stream_reader(hash_index):
    class Broken(QueueLLM):
        def generate(self, prompt, **_: Any) -> Generation:
            raise GenerationCancelledError("test failure")

    with pytest.raises(GenerationCancelledError, match="test failure"):
        list(sieve(hash_index, Broken("x"), KeywordJudge(relevant=("apollo",))).stream(MOON_Q))


def test_aask_and_astream_match_ask(hash_index):
    judge = KeywordJudge(relevant=("apollo",))
    asked = sieve(hash_index, QueueLLM(SUPPORTED), judge).ask(MOON_Q)

    async def run() -> tuple[Any, list[Any]]:
        pipe = sieve(hash_index, StreamingLLM(SUPPORTED), KeywordJudge(relevant=("apollo",)))
        answer = await pipe.aask(MOON_Q)
        events = [e async for e in pipe.astream(MOON_Q)]
        return answer, events

    answer, events = asyncio.run(run())
    assert _comparable(answer) == _comparable(asked)
    assert _comparable(events[-1].answer) == _comparable(asked)
    assert [e.kind for e in events].count("token") == len(SUPPORTED.split())


def test_cancelling_aask_or_astream_cancels_the_llm_call(hash_index):
    async def cancel_aask(llm: BlockingLLM) -> None:
        task = asyncio.ensure_future(sieve(hash_index, llm, KeywordJudge(relevant=("apollo",))).aask(MOON_Q))
        for _ in range(500):
            if llm.prompts:  # the LLM call has started
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def cancel_astream(llm: BlockingLLM) -> None:
        async def consume() -> None:
            async for _ in sieve(hash_index, llm, KeywordJudge(relevant=("apollo",))).astream(MOON_Q):
                pass

        task = asyncio.ensure_future(consume())
        for _ in range(500):
            if llm.streams:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    for scenario in (cancel_aask, cancel_astream):
        llm = BlockingLLM()
        asyncio.run(scenario(llm))
        assert llm.cancelled.wait(5), scenario.__name__


class Recorder(PipelineCallbacks):
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def on_stage_start(self, stage: str, question: str) -> None:
        self.calls.append(("start", stage))

    def on_stage_end(self, stage: str, duration_ms: float, records: list[dict[str, Any]]) -> None:
        self.calls.append(("end", stage, str(len(records))))

    def on_token(self, text: str, attempt: str) -> None:
        self.calls.append(("token", text))


def test_callbacks_see_every_stage_and_token_and_cannot_break_the_answer(hash_index):
    class Broken:
        def on_stage_end(self, *args: Any) -> None:
            raise RuntimeError("a broken monitoring hook")

    recorder = Recorder()
    cfg = sieve(hash_index, QueueLLM("x"), KeywordJudge()).config
    pipe = Pipeline(cfg, index=hash_index, llm=StreamingLLM(SUPPORTED), judge=KeywordJudge(relevant=("apollo",)),
                    callbacks=[recorder, Broken()])
    answer = pipe.ask(MOON_Q)
    assert answer.text == SUPPORTED
    stages = [c[1] for c in recorder.calls if c[0] == "start"]
    assert stages == ["warm_up", *[s.name for s in pipe.stages]]
    assert [c[1] for c in recorder.calls if c[0] == "end"] == stages
    assert "".join(c[1] for c in recorder.calls if c[0] == "token") == SUPPORTED
    generate_end = recorder.calls.index(("end", "generate", "1"))
    assert max(i for i, c in enumerate(recorder.calls) if c[0] == "token") < generate_end


@pytest.fixture()
def memory_spans() -> Iterator[Any]:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    class WhileTesting(SimpleSpanProcessor):
        # The provider is global and has no way to remove a processor: a shut-down one stays
        # attached and warns on every later span (in later tests' server threads, through log
        # handlers whose streams are closed by then), so this one is only switched off.
        active = True

        def on_end(self, span: Any) -> None:
            if self.active:
                super().on_end(span)

    processor = WhileTesting(exporter)
    provider.add_span_processor(processor)
    yield exporter
    processor.active = False
    exporter.clear()


def test_opentelemetry_spans_per_stage(hash_index, memory_spans):
    pipe = sieve(hash_index, QueueLLM(SUPPORTED), KeywordJudge(relevant=("apollo",)))
    pipe.ask(MOON_Q)
    spans = memory_spans.get_finished_spans()
    names = [s.name for s in spans]
    assert [n.removeprefix("ragsieve.stage.") for n in names if n.startswith("ragsieve.stage.")] == [
        "warm_up", *[s.name for s in pipe.stages]
    ]
    root = next(s for s in spans if s.name == "ragsieve.ask")
    judge = next(s for s in spans if s.name == "ragsieve.stage.judge")
    assert judge.parent is not None and judge.parent.span_id == root.context.span_id
    assert judge.attributes["ragsieve.candidates_in"] > 0 and "ragsieve.duration_ms" in judge.attributes


def test_spans_are_a_no_op_without_opentelemetry(monkeypatch):
    import subprocess
    import sys

    from ragsieve import telemetry

    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)  # as if never imported
    monkeypatch.setattr(telemetry, "_tracer", None)
    with telemetry.span("ragsieve.stage.x", a=1) as current:
        assert current is None
    assert telemetry.traced("x")(lambda v: v + 1)(1) == 2
    assert telemetry._tracer is None
    # ragsieve never imports OpenTelemetry itself (no cold-start cost for unused spans)
    code = (
        "import sys; from ragsieve import telemetry\n"
        "with telemetry.span('s'): pass\n"
        "print('opentelemetry' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


def test_plain_preset_streams_too(hash_index):
    pipe = Pipeline(PipelineConfig(pipeline="plain"), index=hash_index, llm=StreamingLLM("Apollo 11 [1]."))
    events = list(pipe.stream(MOON_Q))
    assert [e.text for e in events if isinstance(e, Token)] == ["Apollo ", "11 ", "[1]."]
    assert events[-1].answer.text == "Apollo 11 [1]." and events[-1].streamed_is_final
