"""Readers keep their snapshot, writers take turns, and kill -9 never costs the previous index."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock
from tests.helpers import HashEmbedder
from tests.reliability.support import FAST, run_cli, start_worker, write_corpus

from ragsieve.errors import IndexStoreError
from ragsieve.index import Index
from ragsieve.index.storage import WRITER_LOCK

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="kill -9 and flock are POSIX")


def hits(index: Index, query: str = "red planet energy sugar") -> list[tuple[str, float]]:
    return [(h.chunk.id, round(h.score, 6)) for h in index.search(query, k=5)]


def wait_for(path: Path, proc, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"worker ended early: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("worker never reached the point to interrupt")
        time.sleep(0.02)


@posix_only
def test_a_reader_keeps_its_snapshot_across_reingests(tmp_path, corpus, hash_embedder):
    old_a = Index.build(corpus, tmp_path / "idx", config=FAST, embedder=hash_embedder)
    old_b = Index.open(old_a.dir, embedder=hash_embedder)  # nothing loaded lazily yet
    expected = hits(old_a)
    gen = old_a.generation
    for extra in (" Mars also has two moons.", " Mars has the tallest volcano."):
        (corpus / "astronomy" / "mars.md").write_text("# Mars\n\nA cold desert world, red with iron oxide." + extra)
        (corpus / "biology" / "cells.txt").unlink(missing_ok=True)
        new = Index.build(corpus, old_a.dir, config=FAST, embedder=hash_embedder)
    assert new.generation != gen and hits(new) != expected
    # Two re-ingests later the old generation is no longer the kept previous one, yet a reader holds it.
    assert (old_a.dir / "generations" / gen).is_dir()
    assert hits(old_b) == expected  # its partitions load now, from its own generation
    assert {c.id for c in old_b.chunks} != {c.id for c in new.chunks}
    assert old_b.generation == gen
    old_a.close()
    old_b.close()
    with Index.build(corpus, old_a.dir, config=FAST, embedder=hash_embedder) as latest:
        assert not (old_a.dir / "generations" / gen).exists()
        kept = sorted(p.name for p in (latest.dir / "generations").iterdir() if p.is_dir())
        assert latest.generation in kept and len(kept) <= 3


def test_a_second_writer_waits_then_fails_clearly(tmp_path, corpus, hash_embedder, caplog):
    index = Index.build(corpus, tmp_path / "idx", config=FAST, embedder=hash_embedder)
    cfg = FAST.model_copy(update={"ingest": FAST.ingest.model_copy(update={"lock_timeout_s": 0.3})})
    with FileLock(str(index.dir / WRITER_LOCK)):
        start = time.monotonic()
        with pytest.raises(IndexStoreError, match="another ragsieve ingest kept .* locked"):
            Index.build(corpus, index.dir, config=cfg, embedder=hash_embedder)
        assert time.monotonic() - start >= 0.3
    assert "waiting up to" in caplog.text
    assert Index.open(index.dir, embedder=hash_embedder).generation == index.generation


def test_cli_lock_timeout_is_exit_2(tmp_path, corpus, fake_embedder, capsys):
    assert run_cli(capsys, "ingest", corpus, "--index", tmp_path / "idx")[0] == 0
    with FileLock(str(tmp_path / "idx" / WRITER_LOCK)):
        code, _, err = run_cli(capsys, "ingest", corpus, "--index", tmp_path / "idx", "--lock-timeout", "0.2")
    assert code == 2 and "another ragsieve ingest" in err and "Traceback" not in err


@posix_only
def test_two_concurrent_ingest_processes_take_turns(tmp_path):
    first = write_corpus(tmp_path / "c1")
    second = write_corpus(tmp_path / "c2", extra=" Olympus Mons is a volcano.")
    (second / "biology" / "extra.txt").write_text("Ribosomes build proteins.")
    index = tmp_path / "idx"
    signal_file = tmp_path / "first-is-embedding"
    a = start_worker(first, index, "--slow-embed", "1.0", "--signal", str(signal_file))
    wait_for(signal_file, a)
    b = start_worker(second, index)
    out_a, err_a = a.communicate(timeout=120)
    out_b, err_b = b.communicate(timeout=120)
    assert a.returncode == 0, err_a
    assert b.returncode == 0, err_b
    assert "another ingest is writing to" in err_b  # it waited instead of racing
    ra, rb = json.loads(out_a), json.loads(out_b)
    assert ra["generation"] < rb["generation"]
    live = Index.open(index, embedder=HashEmbedder())
    assert live.generation == rb["generation"]
    assert sorted(c.id for c in live.chunks) == rb["ids"] and "biology/extra.txt:0" in rb["ids"]


@posix_only
@pytest.mark.parametrize("stage", ["embedding", "writing"])
def test_kill_9_mid_ingest_keeps_the_previous_index(tmp_path, corpus, hash_embedder, stage):
    before = Index.build(corpus, tmp_path / "idx", config=FAST, embedder=hash_embedder)
    expected, gen = hits(before), before.generation
    before.close()
    (corpus / "astronomy" / "venus.txt").write_text("Venus is the hottest planet.")
    signal_file = tmp_path / "reached"
    flag = "--slow-embed" if stage == "embedding" else "--stall-write"
    proc = start_worker(corpus, tmp_path / "idx", flag, "30", "--signal", str(signal_file))
    wait_for(signal_file, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    survivor = Index.open(tmp_path / "idx", embedder=hash_embedder, verify=True)
    assert survivor.generation == gen and hits(survivor) == expected
    survivor.close()
    # The lock died with the process, so a re-run goes ahead and completes.
    rerun = Index.build(corpus, tmp_path / "idx", config=FAST, embedder=hash_embedder)
    assert "astronomy/venus.txt:0" in {c.id for c in rerun.chunks}
    assert not list((rerun.dir / "generations").glob(".building-*"))


@posix_only
def test_readers_polling_during_reingests_always_see_a_whole_index(tmp_path, corpus, hash_embedder):
    Index.build(corpus, tmp_path / "idx", config=FAST, embedder=hash_embedder).close()
    variants = [write_corpus(tmp_path / f"v{i}", extra=f" Variant {i} of the text.") for i in range(3)]
    done = threading.Event()
    failures: list[str] = []

    def writers() -> None:
        for v in variants:
            proc = start_worker(v, tmp_path / "idx")
            out, err = proc.communicate(timeout=120)
            if proc.returncode != 0:
                failures.append(f"writer failed: {err}")
        done.set()

    thread = threading.Thread(target=writers)
    thread.start()
    reads = 0
    generations = set()
    while not done.is_set() or reads < 5:
        try:
            with Index.open(tmp_path / "idx", embedder=hash_embedder) as index:
                assert index.search("planet", k=2, domains=["astronomy"])
                generations.add(index.generation)
        except Exception as exc:  # any failure at all is a torn read
            failures.append(repr(exc))
        reads += 1
    thread.join()
    assert failures == []
    assert reads > 5 and len(generations) >= 2


@posix_only
def test_kill_9_while_upgrading_a_format_one_index_keeps_it_searchable(tmp_path, corpus, hash_embedder):
    with Index.build(corpus, tmp_path / "v2", config=FAST, embedder=hash_embedder) as current:
        expected = hits(current)
        legacy = tmp_path / "old"
        shutil.copytree(current.generation_dir, legacy)
    manifest = json.loads((legacy / "manifest.json").read_text())
    manifest.pop("checksums")
    manifest["format_version"] = 1
    (legacy / "manifest.json").write_text(json.dumps(manifest))
    signal_file = tmp_path / "reached"
    proc = start_worker(corpus, legacy, "--stall-write", "30", "--signal", str(signal_file))
    wait_for(signal_file, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)

    still_old = Index.open(legacy, embedder=hash_embedder)
    assert still_old.generation == "" and hits(still_old) == expected
    upgraded = Index.build(corpus, legacy, config=FAST, embedder=hash_embedder)
    assert upgraded.generation and hits(upgraded) == expected
    assert not (legacy / "manifest.json").exists() and not list((legacy / "generations").glob(".building-*"))
