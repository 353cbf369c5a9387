"""A question that is not valid text (a lone surrogate: a byte that is not UTF-8 on the command
line, or a stray ``\\udXXX`` JSON escape) is refused by name at every entry point, by the one
validator (:func:`ragsieve.errors.check_question`), before any model or tokenizer sees it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragsieve.config import PipelineConfig
from ragsieve.errors import InputError, check_question, check_unicode
from ragsieve.sieve.pipeline import Pipeline

BAD = "graphene \udcff"  # what Python makes of `ragsieve ask $'graphene \xff'` (surrogateescape)
SAID = "not valid text"


def test_the_validator_names_the_character_and_the_byte() -> None:
    with pytest.raises(InputError, match=r"character 10 is a lone surrogate .*the byte 0xff.*UTF-8"):
        check_question(BAD)
    with pytest.raises(InputError, match="the query is not valid text"):
        check_unicode("\ud800 x", "the query")
    assert check_question("graphène 🚀?") == "graphène 🚀?"


def test_pipeline_ask_and_its_async_and_streaming_forms_refuse_it() -> None:
    pipe = Pipeline(PipelineConfig())
    with pytest.raises(InputError, match=SAID):
        pipe.ask(BAD)
    with pytest.raises(InputError, match=SAID):
        list(pipe.stream(BAD))
    with pytest.raises(InputError, match=SAID):
        asyncio.run(pipe.aask(BAD))

    async def consume() -> None:
        async for _ in pipe.astream(BAD):
            pass

    with pytest.raises(InputError, match=SAID):
        asyncio.run(consume())


def test_eval_refuses_a_question_file_row_that_is_not_text(tmp_path: Path) -> None:
    from ragsieve.eval.data import load_qa

    path = tmp_path / "qa.jsonl"
    # json.dumps writes the surrogate as the escape \udcff, which json.loads reads back as one
    path.write_text(json.dumps({"question": BAD, "answer": "carbon"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"question at {path}:1 is {SAID}"):
        load_qa(path)


def test_the_service_refuses_it_on_ask_chat_and_the_engine(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient
    from tests.serve.fakes import fake_engine, write_index_dir

    from ragsieve.serve.app import ServeSettings, create_app

    engine = fake_engine(write_index_dir(tmp_path / "idx"))
    body = json.dumps({"question": BAD})  # the escape \udcff on the wire, valid JSON
    chat = json.dumps({"model": "ragsieve", "messages": [{"role": "user", "content": BAD}]})
    headers = {"content-type": "application/json"}
    with TestClient(create_app(engine, ServeSettings())) as client:
        replies = [client.post("/v1/ask", content=body, headers=headers),
                   client.post("/v1/chat/completions", content=chat, headers=headers)]
    for reply in replies:  # the schema (ask) or the validator (chat) refuses it, by name
        assert reply.status_code in (400, 422), reply.text
        assert "valid" in reply.json()["error"]["message"]
    with pytest.raises(InputError, match=SAID):  # and the engine, for a caller that skips the schema
        engine.ask(BAD)


def test_ragsieve_ask_refuses_a_byte_that_is_not_utf8_before_loading_anything(tmp_path: Path) -> None:
    env = {**os.environ, "RAGSIEVE_INDEX": str(tmp_path / "none"), "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("RAGSIEVE_DEBUG", None)
    result = subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"ragsieve.cli", b"ask", b"graphene \xff"],
        capture_output=True, timeout=120, env=env, stdin=subprocess.DEVNULL,
    )
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, err
    assert SAID in err and "0xff" in err
    assert "internal error" not in err and "no index" not in err
