"""The keys file: its format, its errors (each naming the entry, the line and the fix), and
its reload while the service runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.serve.fakes import fake_engine, write_index_dir

from ragsieve.errors import ConfigError
from ragsieve.serve.app import ServeSettings, create_app
from ragsieve.serve.keys import KeyRing, key_digest, parse_keys

HR = "hr-reader-key-0123456789"
ADMIN = "admin-key-0123456789abcdef"
GOOD = f"""
# who reads what
[[key]]
name = "hr"
sha256 = "{key_digest(HR)}"
domains = ["hr"]
tags = ["hr", "public"]
paths = ["./policies/", "handbook.md"]

[[key]]
name = "admin"
key = "{ADMIN}"
all = true
"""


def test_a_keys_file_maps_each_key_to_its_grants() -> None:
    keys = parse_keys(GOOD)
    hr = keys[key_digest(HR)]
    assert (hr.everything, hr.domains, hr.tags, hr.paths, hr.name) == (
        False, frozenset({"hr"}), frozenset({"hr", "public"}), ("policies", "handbook.md"), "hr"
    )
    assert keys[key_digest(ADMIN)].everything
    ring_file_free = KeyRing(api_key="single-all-access-key")
    assert ring_file_free.access_for_key(b"single-all-access-key").everything  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[[key]\nname = 1", "is not valid TOML"),
        ("[server]\nport = 1", "unknown top-level entry 'server'"),
        ("", "has no [[key]] table"),
        ('[[key]]\nname = "x"\ndomains = ["a"]', "give exactly one of sha256"),
        (f'[[key]]\nkey = "{HR}"\nsha256 = "{key_digest(HR)}"\ndomains = ["a"]', "give exactly one of sha256"),
        ('[[key]]\nsha256 = "abc"\ndomains = ["a"]', "sha256 must be 64 hex digits"),
        ('[[key]]\nkey = "short"\ndomains = ["a"]', "at least 16 characters"),
        (f'[[key]]\nkey = "{HR}"', "grants nothing"),
        (f'[[key]]\nkey = "{HR}"\nall = true\ntags = ["x"]', "all = true already reads everything"),
        (f'[[key]]\nkey = "{HR}"\nall = "yes"', "all must be true or false"),
        (f'[[key]]\nkey = "{HR}"\ntags = [1]', "tags must be a list of non-empty texts"),
        (f'[[key]]\nkey = "{HR}"\npaths = ["../etc"]', "paths must name folders or files inside"),
        (f'[[key]]\nkey = "{HR}"\ndomain = ["hr"]', "unknown field 'domain'"),
        (f'[[key]]\nname="a"\nkey = "{HR}"\ntags = ["x"]\n\n[[key]]\nname="b"\nkey = "{HR}"\ntags = ["y"]',
         "the same key as 'a'"),
    ],
)
def test_a_bad_keys_file_is_refused_naming_the_problem_and_the_fix(text: str, said: str) -> None:
    with pytest.raises(ConfigError, match="keys") as caught:
        parse_keys(text, "the keys file keys.toml")
    assert said in str(caught.value)


def test_an_error_names_the_entry_and_its_line() -> None:
    text = GOOD + '\n[[key]]\nname = "broken"\nsha256 = "nothex"\ntags = ["x"]\n'
    with pytest.raises(ConfigError) as caught:
        parse_keys(text)
    line = text.splitlines().index('name = "broken"')  # the [[key]] header is the line before
    assert f"key 3 'broken' (line {line})" in str(caught.value)


def test_an_unreadable_keys_file_fails_the_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the keys file"):
        KeyRing(keys_file=tmp_path / "missing.toml")


def _touch_later(path: Path, text: str) -> None:
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))  # a new mtime even on coarse clocks


def test_the_service_rereads_the_keys_file_when_it_changes(tmp_path: Path) -> None:
    keys = tmp_path / "keys.toml"
    keys.write_text(GOOD, encoding="utf-8")
    ring = KeyRing(api_key="the-old-single-key-000", keys_file=keys)
    app = create_app(fake_engine(write_index_dir(tmp_path / "index")), ServeSettings(keys=ring, warm_up=False))
    new_key = "a-key-added-later-0123456789"

    def status(key: str) -> int:
        # 401 or let in (the fake index is no folder index: a scoped key's search is 503, fail closed)
        code = client.post("/v1/search", json={"query": "carbon"}, headers={"X-API-Key": key}).status_code
        assert code in (200, 401, 503)
        return 401 if code == 401 else 200

    with TestClient(app) as client:
        assert (status(HR), status(ADMIN), status(new_key), status("the-old-single-key-000")) == (200, 200, 401, 200)
        # the operator adds a key and removes the admin's: both take effect without a restart
        _touch_later(keys, GOOD.split("[[key]]\nname = \"admin\"")[0] + f'[[key]]\nkey = "{new_key}"\ntags = ["x"]\n')
        assert (status(HR), status(ADMIN), status(new_key)) == (200, 401, 200)
        assert status("the-old-single-key-000") == 200  # the --api-key-file key stays all-access
        # a broken save is not taken: the last good keys stay, health says so without details
        _touch_later(keys, "[[key]\n")
        assert (status(HR), status(new_key)) == (200, 200)
        health = client.get("/v1/health").json()
        assert health["status"] == "degraded" and "keys file" in health["problem"]
        assert "line" not in health["problem"] and "hr" not in health["problem"].split()
        assert ring.problem is not None and "not valid TOML" in ring.problem
        # fixed: taken, and health clears
        _touch_later(keys, GOOD)
        assert (status(ADMIN), status(new_key)) == (200, 401)
        assert ring.problem is None


def test_serve_with_a_bad_keys_file_fails_before_listening(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragsieve.cli import main

    keys = tmp_path / "keys.toml"
    keys.write_text('[[key]]\nname = "team"\nsha256 = "abc"\ntags = ["x"]\n', encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--index", str(write_index_dir(tmp_path / "index")), "--keys-file", str(keys)])
    assert exc.value.code == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "key 1 'team' (line 1): sha256 must be 64 hex digits" in said


def test_a_keys_file_is_a_key_for_a_non_loopback_bind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragsieve.serve.cli import refuse_open_bind

    monkeypatch.delenv("RAGSIEVE_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="--keys-file FILE"):
        refuse_open_bind("0.0.0.0", None, "the service")
    refuse_open_bind("0.0.0.0", None, "the service", tmp_path / "keys.toml")  # no error


def test_mcp_takes_a_keys_file_over_http_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mcp")
    from ragsieve.cli import main

    keys = tmp_path / "keys.toml"
    keys.write_text(GOOD, encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["mcp", "--index", str(tmp_path), "--keys-file", str(keys)])
    assert exc.value.code == 2
    assert "--keys-file is for --http" in " ".join(capsys.readouterr().err.split())
