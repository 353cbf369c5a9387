"""``ragsieve serve`` refuses to expose an unauthenticated service beyond loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragsieve.cli import main
from ragsieve.errors import ConfigError
from ragsieve.serve.cli import is_loopback, read_api_key


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("::1", True), ("localhost", True),
                                                  ("0.0.0.0", False), ("10.1.2.3", False), ("::", False)])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_api_key_from_file_or_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIEVE_API_KEY", " from-env ")
    assert read_api_key(None) == "from-env"
    key_file = tmp_path / "key"
    key_file.write_text("from-file\n", encoding="utf-8")
    assert read_api_key(key_file) == "from-file"
    key_file.write_text("\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="is empty"):
        read_api_key(key_file)
    with pytest.raises(ConfigError, match="cannot read"):
        read_api_key(tmp_path / "nope")
    monkeypatch.delenv("RAGSIEVE_API_KEY")
    assert read_api_key(None) is None


def test_non_loopback_without_key_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RAGSIEVE_API_KEY", raising=False)
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--index", str(tmp_path), "--host", "0.0.0.0"])
    assert exc.value.code == 2
    assert "set an API key" in " ".join(capsys.readouterr().err.split())


def test_missing_index_fails_before_listening(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--index", str(tmp_path / "nothing"), "--port", "1"])
    assert exc.value.code == 2
    assert "no index at" in " ".join(capsys.readouterr().err.split())


def test_serve_flags_reach_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn
    from tests.serve.fakes import fake_engine, write_index_dir

    from ragsieve.cli import main

    index_dir = write_index_dir(tmp_path / "idx")
    started: list[Any] = []

    class RecordingServer:
        def __init__(self, config: Any) -> None:
            self.config = config

        def run(self) -> None:
            started.append(self.config)

    engine = fake_engine(index_dir)  # built before Engine is replaced below
    monkeypatch.setattr("ragsieve.serve.engine.Engine", lambda cfg: engine)
    monkeypatch.setattr(uvicorn, "Server", RecordingServer)
    main(["serve", "--index", str(index_dir), "--max-body-bytes", "5000", "--allowed-host", "box.lan",
          "--header-timeout", "3", "--max-connections", "7", "--body-timeout", "4"])
    (config,) = started
    settings = config.app.state.settings
    assert settings.max_body_bytes == 5000 and settings.body_timeout_s == 4.0
    assert settings.allowed_hosts == frozenset({"127.0.0.1", "localhost", "::1", "box.lan"})
    assert config.limit_concurrency == 7 and config.http.__name__.startswith("Guarded")
