from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from ragsieve.config import EmbedderConfig
from ragsieve.embed import EmbeddingCache, OpenAIEmbedder, SentenceTransformerEmbedder, content_key, load_embedder
from ragsieve.errors import ConfigError, ModelError


def test_bundled_embedder_gives_normalised_384d_vectors(embedder):
    vecs = embedder.embed(["Graphene is a single layer of carbon atoms.", "A cat sat on the mat.", ""])
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs[:2], axis=1), 1.0, atol=1e-5)
    close = embedder.embed(["Graphene is one sheet of carbon atoms."])[0]
    assert close @ vecs[0] > close @ vecs[1] + 0.3


def test_cache_reuses_vectors_by_content(tmp_path, monkeypatch):
    emb = SentenceTransformerEmbedder(cache_dir=str(tmp_path))
    first = emb.embed(["alpha", "beta"])
    calls = []
    original = emb._encode
    monkeypatch.setattr(emb, "_encode", lambda texts: calls.append(list(texts)) or original(texts))
    again = emb.embed(["beta", "gamma", "alpha"])
    assert calls == [["gamma"]]
    assert np.allclose(again[0], first[1]) and np.allclose(again[2], first[0])
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    assert len(cache.get_many([content_key(emb.model_name, "alpha")])) == 1


def test_missing_local_model_folder_is_a_clear_error(tmp_path):
    emb = load_embedder(EmbedderConfig(model=str(tmp_path / "no-model")))
    with pytest.raises(ModelError, match="does not exist; ragsieve never downloads"):
        emb.warm_up()


class _FakeEmbeddingServer(BaseHTTPRequestHandler):
    failures_left = 0

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if type(self).failures_left > 0:
            type(self).failures_left -= 1
            self.send_response(503)
            self.end_headers()
            return
        data = [{"index": i, "embedding": [float(len(t)), 1.0, 0.0]} for i, t in enumerate(body["input"])]
        payload = json.dumps({"data": list(reversed(data))}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture()
def fake_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeEmbeddingServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_openai_embedder_orders_normalises_and_retries(fake_server):
    _FakeEmbeddingServer.failures_left = 2
    emb = OpenAIEmbedder(model="fake", base_url=fake_server, batch_size=2, max_retries=3)
    vecs = emb.embed(["a", "bbb", "cc"])
    expected = np.array([[1, 1, 0], [3, 1, 0], [2, 1, 0]], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vecs, expected)


def test_openai_embedder_unreachable_server():
    emb = OpenAIEmbedder(model="fake", base_url="http://127.0.0.1:9/v1", max_retries=1, timeout_s=1)
    with pytest.raises(ModelError, match="could not reach the embedding server"):
        emb.embed(["x"])
    with pytest.raises(ConfigError, match="needs embedder.model and embedder.base_url"):
        load_embedder(EmbedderConfig(backend="openai"))
