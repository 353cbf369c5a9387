from __future__ import annotations

import pytest

from ragsieve.errors import InputError
from ragsieve.io import atomic_directory, atomic_write_json, atomic_write_text, read_jsonl


def test_failed_atomic_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "weights.json"
    atomic_write_json(target, {"a": 1})

    class BoomError(Exception):
        pass

    with pytest.raises(BoomError):
        from ragsieve.io import atomic_path

        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise BoomError
    assert target.read_text().strip().startswith("{") and '"a": 1' in target.read_text()
    assert list(tmp_path.iterdir()) == [target]


def test_atomic_directory_swaps_only_on_success(tmp_path):
    target = tmp_path / "idx"
    with atomic_directory(target) as d:
        (d / "v").write_text("1")
    with pytest.raises(RuntimeError), atomic_directory(target) as d:
        (d / "v").write_text("2")
        raise RuntimeError
    assert (target / "v").read_text() == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_read_jsonl_names_the_bad_line(tmp_path):
    path = tmp_path / "x.jsonl"
    atomic_write_text(path, '{"a": 1}\n\n[1]\n')
    with pytest.raises(InputError, match=r"x.jsonl:3 is a JSON list"):
        list(read_jsonl(path))
    atomic_write_text(path, '{"a": 1}\n{oops\n')
    with pytest.raises(InputError, match=r"x.jsonl:2 is not valid JSON"):
        list(read_jsonl(path))


def test_read_json_file_names_missing_and_malformed_files(tmp_path):
    from ragsieve.io import read_json_file

    with pytest.raises(InputError, match=r"weights file .*missing.json does not exist; run fit"):
        read_json_file(tmp_path / "missing.json", "weights file", "run fit")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(InputError, match="is not valid JSON"):
        read_json_file(bad, "weights file", "run fit")
    atomic_write_json(bad, {"ok": True})
    assert read_json_file(bad, "weights file", "run fit") == {"ok": True}


def test_atomic_directory_never_replaces_a_folder_it_did_not_write(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    with pytest.raises(InputError, match="did not write .*thesis.tex"), atomic_directory(mine) as d:
        (d / "model.json").write_text("{}")
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]
    # A folder whose every entry the new build rewrites loses nothing, so it may be replaced.
    (mine / "model.json").write_text("old")
    (mine / "thesis.tex").unlink()
    with atomic_directory(mine) as d:
        (d / "model.json").write_text("new")
    assert (mine / "model.json").read_text() == "new"
    with pytest.raises(InputError, match="'.' or '..'"), atomic_directory(tmp_path / ".."):
        pass
