"""A generation is on disk before the pointer names it: every file and folder is fsynced first."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from tests.reliability.support import FAST

from ragsieve.index import Index


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="maps file descriptors to paths via /proc")
@pytest.mark.skipif(sys.platform != "linux", reason="Linux /proc")
def test_every_file_and_folder_is_fsynced_before_the_pointer_switches(tmp_path, corpus, hash_embedder, monkeypatch):
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst) -> None:
        real_replace(src, dst)
        events.append(("replace", str(Path(dst).resolve())))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    index = Index.build(corpus, tmp_path / "idx", config=FAST, embedder=hash_embedder)
    monkeypatch.undo()

    root = index.dir.resolve()
    gen = index.generation_dir.resolve()
    published = events.index(("replace", str(gen)))
    pointer = events.index(("replace", str(root / "CURRENT")))
    assert published < pointer
    building = {Path(path) for kind, path in events[:published] if kind == "fsync"}
    # Paths were recorded under the temporary name the generation had while it was built.
    tmp_name = next(p for p in building if p.parent == root / "generations" and p.name.startswith(".building-"))
    synced = {p.relative_to(tmp_name).as_posix() for p in building if p.is_relative_to(tmp_name)}
    on_disk = {p.relative_to(gen).as_posix() for p in gen.rglob("*")}
    assert on_disk <= synced  # every file and every sub-folder
    assert "." in synced  # the generation folder itself
    after = [Path(p) for kind, p in events[published:pointer] if kind == "fsync"]
    assert root / "generations" in after  # the rename into place is durable before the pointer moves
    assert any(p.parent == root and p.name.startswith(".CURRENT.") for p in after)  # the new pointer's bytes
    assert root in [Path(p) for kind, p in events[pointer:] if kind == "fsync"]  # and so is the pointer switch
