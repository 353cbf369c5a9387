"""An index folder is data: opening or searching one never reaches the network, reads a secret
from the environment, or follows a path outside the index because the folder says so."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
from pathlib import Path

import pytest
from tests.helpers import HashEmbedder

from ragsieve.config import EmbedderConfig
from ragsieve.errors import IndexStoreError
from ragsieve.index import Index
from ragsieve.index.storage import CURRENT, write_current

SECRET_ENV = "RAGSIEVE_TEST_SECRET_TOKEN"


class Listener:
    """A loopback TCP socket that records every connection made to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


class RecordingEnviron(dict):
    """os.environ stand-in that remembers which names were looked up."""

    def __init__(self, base: dict[str, str]) -> None:
        super().__init__(base)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):  # type: ignore[override]
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)


def rewrite_manifest(index_dir: Path, edit) -> Path:
    """Change the live manifest the way an attacker who controls the folder can: consistently."""
    gen = json.loads((index_dir / CURRENT).read_text())["generation"]
    path = index_dir / "generations" / gen / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    data = json.dumps(manifest).encode()
    path.write_bytes(data)
    write_current(index_dir, gen, hashlib.sha256(data).hexdigest())
    return path


@pytest.fixture()
def listener():
    server = Listener()
    yield server
    server.close()


def test_a_crafted_manifest_cannot_configure_the_embedder(small_index, listener, monkeypatch):
    def craft(manifest):
        manifest["embedder"]["config"] = {
            "backend": "openai",
            "model": manifest["embedder"]["model_name"],
            "base_url": f"http://127.0.0.1:{listener.port}/v1",
            "api_key_env": SECRET_ENV,
            "cache_dir": "/tmp/ragsieve-attacker-cache",
            "onnx_dir": "/tmp/ragsieve-attacker-onnx",
        }

    rewrite_manifest(small_index.dir, craft)
    seen_configs: list[EmbedderConfig] = []

    def load_embedder(config):
        seen_configs.append(config)
        return HashEmbedder()

    monkeypatch.setattr("ragsieve.index.store.load_embedder", load_embedder)
    environ = RecordingEnviron(dict(os.environ, **{SECRET_ENV: "s3cr3t"}))
    monkeypatch.setattr(os, "environ", environ)

    with Index.open(small_index.dir) as index:
        assert index.search("red planet", k=2)
    assert seen_configs == [EmbedderConfig()]  # the user's (default) config, nothing from the folder
    assert listener.connections == 0
    assert SECRET_ENV not in environ.read
    assert not Path("/tmp/ragsieve-attacker-cache").exists()


def test_the_recorded_model_and_dimension_must_match(small_index):
    with pytest.raises(IndexStoreError, match="built with embedding model"):
        Index.open(small_index.dir, embedder=HashEmbedder(name="other/model"))
    with pytest.raises(IndexStoreError, match="64-dimensional vectors .* gives 32"):
        Index.open(small_index.dir, embedder=HashEmbedder(dim=32))


@pytest.mark.slow
def test_opening_with_no_embedder_uses_only_the_users_config(tmp_path, listener, monkeypatch):
    """The real default embedder: a manifest naming an HTTP endpoint is ignored end to end."""
    from ragsieve.types import Chunk

    chunks = [Chunk(id="a", text="Graphene is a single layer of carbon atoms.", doc_id="a", source="a")]
    index = Index.from_chunks(chunks, tmp_path / "idx")
    index.close()
    rewrite_manifest(
        index.dir,
        lambda m: m["embedder"].update(
            config={"backend": "openai", "base_url": f"http://127.0.0.1:{listener.port}", "api_key_env": SECRET_ENV}
        ),
    )
    monkeypatch.setenv(SECRET_ENV, "s3cr3t")
    with Index.open(index.dir) as reopened:
        assert reopened.search("carbon sheet", k=1)[0].chunk.id == "a"
    assert listener.connections == 0


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m.update(partition_dirs={d: "../../../etc" for d in m["domains"]}), "partition folder"),
        (lambda m: m["checksums"].update({"../../outside.txt": {"size": 1, "sha256": "0"}}), "not a valid name"),
        (lambda m: m.update(checksums={}), "lists no file checksums"),
        (lambda m: m.update(format_version=1), "corrupt"),
    ],
    ids=["partition-dir-escapes", "checksum-path-escapes", "no-checksums", "wrong-version"],
)
def test_paths_in_a_manifest_never_leave_the_generation(small_index, edit, message):
    rewrite_manifest(small_index.dir, edit)
    with pytest.raises(IndexStoreError, match=message), Index.open(small_index.dir, embedder=HashEmbedder()) as idx:
        idx.warm_up()


@pytest.mark.parametrize("generation", ["../../etc", "/tmp", "..", "a/b", ""])
def test_a_pointer_outside_the_generations_folder_is_refused(small_index, generation):
    (small_index.dir / CURRENT).write_text(json.dumps({"generation": generation, "manifest_sha256": "x"}))
    with pytest.raises(IndexStoreError, match="not a valid name inside an index"):
        Index.open(small_index.dir, embedder=HashEmbedder())


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX named pipes")
@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_an_index_file_that_is_a_link_or_pipe_is_refused_without_reading_it(small_index, kind):
    target = small_index.generation_dir / "chunks.jsonl"
    size = target.stat().st_size
    target.unlink()
    if kind == "symlink":
        outside = small_index.dir.parent / "elsewhere.jsonl"
        outside.write_bytes(b"x" * size)
        target.symlink_to(outside)
    else:
        os.mkfifo(target)  # opening it for reading would block forever
    with pytest.raises(IndexStoreError, match="chunks.jsonl is not a regular file"):
        Index.open(small_index.dir, embedder=HashEmbedder(), verify=True)
