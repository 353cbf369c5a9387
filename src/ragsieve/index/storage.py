"""The on-disk layout of an index folder: marker, generations, pointer, locks and checksums.

An index folder holds immutable *generations* and a small pointer naming the live one::

    .ragsieve-index          marker: proves the folder is a ragsieve index (format id + version)
    CURRENT                  {"generation": id, "manifest_sha256": ...}, replaced atomically
    .writer.lock             single-writer lock (filelock)
    generations/<id>/        one complete, fsynced build; never modified after it is published
    generations/<id>.lock    readers hold a shared lock on it while they use that generation
    generations/<id>.staged  a generation written beside the live one, not switched to yet
                             (``ragsieve audit --exclude``): its manifest's sha256, the live
                             generation it was made from and why; ``ragsieve index use`` switches
    audits/<id>.json         the saved audit of generation <id> (``ragsieve audit --save``)

A writer builds ``generations/.building-<id>/``, fsyncs every file and folder, renames it to
``generations/<id>/`` and only then switches ``CURRENT``. A crash at any point leaves the
previous generation live. Old generations are removed by the next writer once no reader holds
their lock (the newest previous one, the one live before the current one, which ``CURRENT``
records, and every staged one are always kept).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ragsieve.errors import DamagedFileError, IndexStoreError, InputError
from ragsieve.io import atomic_write_text, file_checksum_problem, fsync_dir, sha256_file
from ragsieve.io import fsync_tree as fsync_tree  # re-exported: writers flush a generation with it

logger = logging.getLogger(__name__)

FORMAT_ID = "ragsieve-index"
FORMAT_VERSION = 2
MARKER = ".ragsieve-index"
CURRENT = "CURRENT"
GENERATIONS = "generations"
WRITER_LOCK = ".writer.lock"
MANIFEST = "manifest.json"
BUILDING_PREFIX = ".building-"
STAGED_SUFFIX = ".staged"
AUDITS = "audits"
# Without flock (Windows) nobody can tell whether a reader still uses an old generation, so it
# is kept this long after it stopped being live.
NO_LOCK_GRACE_S = 3600.0

# atomic_write_text's temporary file for the marker (".<name>.<random>.tmp").
_MARKER_TMP = re.compile(r"^\.\.ragsieve-index\.[A-Za-z0-9_]+\.tmp$")
_SAFE_COMPONENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")

try:  # POSIX advisory locks for readers; absent on Windows
    import fcntl
except ImportError:  # pragma: no cover - exercised only on Windows
    fcntl = None  # type: ignore[assignment]

DirState = Literal["absent", "empty", "index", "legacy", "foreign"]


def _reingest_hint(index_dir: Path) -> str:
    return f"re-ingest it with `ragsieve ingest PATH --index {index_dir}`"


# ---------------------------------------------------------------------- names and paths
def safe_component(name: str, what: str) -> str:
    """Check that a name read from a manifest or pointer is one plain path component."""
    if not isinstance(name, str) or not _SAFE_COMPONENT.match(name) or name in {".", ".."}:
        raise IndexStoreError(f"{what} {name!r} is not a valid name inside an index; the index was tampered with")
    return name


def partition_dirname(domain: str) -> str:
    """A folder name for a domain: readable, one path component, and distinct for distinct domains.

    Domains come from folder names and record fields, so two of them may sanitise to the same
    text (``my docs`` and ``my_docs``); the hash of the exact domain keeps them apart.
    """
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", domain)[:40].strip("._-") or "d"
    digest = hashlib.sha256(domain.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{readable}-{digest}"


def new_generation_id() -> str:
    """Sortable by creation time; the random tail separates builds in the same microsecond."""
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    return f"{stamp}{int(now * 1e6) % 1_000_000:06d}-{secrets.token_hex(3)}"


def check_index_location(index_dir: Path, corpus: Path | None = None) -> Path:
    """Refuse index folders that would overwrite or re-ingest the user's own files."""
    given = str(index_dir)
    if Path(given).name in {"", ".", ".."}:
        raise InputError(
            f"--index {given!r} names the current folder or a parent; pass a new folder for the index, e.g. ./my-index"
        )
    target = index_dir.expanduser().resolve()
    if corpus is not None:
        root = corpus.expanduser().resolve()
        if target == root:
            raise InputError(
                f"the index folder {given} is the folder being ingested; pass a separate folder, e.g. --index my-index"
            )
        if root.is_dir() and target.is_relative_to(root):
            raise InputError(
                f"the index folder {given} is inside the folder being ingested ({root}), so each run would "
                "ingest the index itself; put the index outside it"
            )
        if root.is_relative_to(target):
            raise InputError(
                f"the folder being ingested ({root}) is inside the index folder {given}; "
                "put the index in a separate folder"
            )
    cwd = Path.cwd().resolve()
    if target == cwd or cwd.is_relative_to(target):
        raise InputError(
            f"--index {given} is the working folder or one of its parents ({target}); "
            "pass a new folder for the index, e.g. ./my-index"
        )
    return target


# ---------------------------------------------------------------------- marker and pointer
def marker_text() -> str:
    return json.dumps({"format": FORMAT_ID, "format_version": FORMAT_VERSION}) + "\n"


def read_marker(index_dir: Path) -> int:
    """The format version a marker names; a damaged marker is an IndexStoreError."""
    path = index_dir / MARKER
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT_ID:
            raise ValueError("not a ragsieve marker")
        return int(data["format_version"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise IndexStoreError(
            f"the index marker {path} is unreadable or corrupt ({exc}); if {index_dir} is a ragsieve index, "
            "delete the folder and re-ingest"
        ) from exc


def dir_state(index_dir: Path) -> DirState:
    """What is at ``index_dir``: nothing, an empty folder, an index, a format-1 index, or anything else."""
    if not index_dir.exists() and not index_dir.is_symlink():
        return "absent"
    if not index_dir.is_dir():
        return "foreign"
    names = {p.name for p in index_dir.iterdir()}
    if MARKER in names:
        read_marker(index_dir)
        return "index"
    if _is_format_one(index_dir, names):
        return "legacy"
    # Another ingest may be writing the marker into this new folder right now (its temporary
    # file is all there is): that folder is as good as empty, and the writer lock orders the two.
    if all(_MARKER_TMP.match(name) or name == WRITER_LOCK for name in names):
        return "empty"
    return "foreign"


# What a format-1 index kept at its top level; an upgrade removes exactly these, nothing else.
LEGACY_FILES = ("manifest.json", "chunks.jsonl", "embeddings.npy", "files.json")
LEGACY_DIRS = ("global", "partitions")


def _is_format_one(index_dir: Path, names: set[str]) -> bool:
    """Only a manifest with format 1's exact signature proves the folder is an old ragsieve index."""
    if not {"manifest.json", "chunks.jsonl", "embeddings.npy"} <= names:
        return False
    try:
        manifest = json.loads((index_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(manifest, dict)
        and manifest.get("format_version") == 1
        and isinstance(manifest.get("embedder"), dict)
        and {"n_chunks", "domains", "partitioned"} <= set(manifest)
    )


def finish_upgrade(index_dir: Path) -> None:
    """After the first generation of a format-1 folder is live: mark the folder, drop the old files.

    Until the marker is written the folder still reads as format 1, so a crash at any point of an
    upgrade leaves a searchable index.
    """
    if (index_dir / MARKER).exists():
        return
    atomic_write_text(index_dir / MARKER, marker_text())
    for name in LEGACY_FILES:
        with contextlib.suppress(FileNotFoundError):
            (index_dir / name).unlink()
    for name in LEGACY_DIRS:
        shutil.rmtree(index_dir / name, ignore_errors=True)
    fsync_dir(index_dir)
    logger.info("upgraded %s from index format 1 to %d", index_dir, FORMAT_VERSION)


def prepare_target(index_dir: Path, corpus: Path | None = None) -> Path:
    """Create (or accept) the folder a build writes into; never take over a folder ragsieve did not create.

    A format-1 index is accepted: the build writes its first generation beside the old files and
    :func:`finish_upgrade` removes them once that generation is live.
    """
    check_index_location(index_dir, corpus)
    state = dir_state(index_dir)
    if state == "foreign":
        what = "a file" if not index_dir.is_dir() else "a folder that is not a ragsieve index"
        raise IndexStoreError(
            f"{index_dir} exists and is {what} (no {MARKER} marker); ragsieve never replaces other files or "
            "folders: pass a new or empty folder to --index"
        )
    if state == "absent":
        _create_index_dir(index_dir)
    elif state == "empty":
        atomic_write_text(index_dir / MARKER, marker_text())
    return index_dir


def _create_index_dir(index_dir: Path) -> None:
    """Create a new index folder with its marker in one step (a renamed staging folder), so a
    second ingest racing to create the same folder finds either nothing or a marked index, and
    then waits for the writer lock instead of failing."""
    parent = index_dir.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{index_dir.name}.", suffix=".creating", dir=parent))
    try:
        atomic_write_text(staging / MARKER, marker_text())
        try:
            os.rename(staging, index_dir)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR):
                raise
        else:
            fsync_dir(parent)
            return
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    # Another ingest created it first: fine if it is an index (the writer lock orders the builds).
    if dir_state(index_dir) != "index":
        raise IndexStoreError(
            f"{index_dir} appeared while this ingest was creating it and is not a ragsieve index; "
            "pass a new or empty folder to --index"
        )


def read_current(index_dir: Path) -> tuple[str, str]:
    """(generation id, manifest sha256) of the live generation."""
    path = index_dir / CURRENT
    if not path.is_file():
        raise IndexStoreError(
            f"{index_dir} has no published generation ({CURRENT} missing); {_reingest_hint(index_dir)}"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        gen, digest = data["generation"], data["manifest_sha256"]
        if not isinstance(digest, str):
            raise TypeError("manifest_sha256 is not a string")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise IndexStoreError(f"the pointer file {path} is corrupt ({exc}); {_reingest_hint(index_dir)}") from exc
    return safe_component(gen, "generation"), digest


def write_current(
    index_dir: Path, generation: str, manifest_sha256: str, previous: tuple[str, str] | None = None
) -> None:
    """Point ``CURRENT`` at ``generation``; ``previous`` (id, manifest sha256) records the
    generation live until now, which is kept and can be switched back to (``ragsieve index use``)."""
    data: dict[str, Any] = {"generation": generation, "manifest_sha256": manifest_sha256}
    if previous is not None and previous[0] != generation:
        data["previous"] = {"generation": previous[0], "manifest_sha256": previous[1]}
    atomic_write_text(index_dir / CURRENT, json.dumps(data) + "\n")


def read_previous(index_dir: Path) -> tuple[str, str] | None:
    """(id, manifest sha256) of the generation live before the current one, when ``CURRENT``
    records it (pointers written before it was recorded do not)."""
    try:
        data = json.loads((index_dir / CURRENT).read_text(encoding="utf-8"))
        prev = data.get("previous")
        if not isinstance(prev, dict):
            return None
        gen, digest = prev["generation"], prev["manifest_sha256"]
        if not isinstance(digest, str):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return safe_component(gen, "generation"), digest


def _live_or_none(index_dir: Path) -> tuple[str, str] | None:
    try:
        return read_current(index_dir) if (index_dir / CURRENT).is_file() else None
    except IndexStoreError:
        return None


# ---------------------------------------------------------------------- staged generations and switching
@dataclass(frozen=True)
class GenerationRecord:
    """One generation of an index folder as ``ragsieve index generations`` lists it: ``role`` is
    ``live``, ``previous`` (live before the current one), ``staged`` (written beside the live one,
    never switched to) or ``old`` (kept until the next writer removes it); ``base`` and ``reason``
    say what a staged generation was made from and why."""

    generation: str
    role: str
    manifest_sha256: str | None
    base: str | None = None
    reason: str = ""
    created: str = ""
    n_chunks: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"generation": self.generation, "role": self.role, "base": self.base, "reason": self.reason,
                "created": self.created, "n_chunks": self.n_chunks}


def _staged_path(index_dir: Path, generation: str) -> Path:
    return index_dir / GENERATIONS / f"{safe_component(generation, 'generation')}{STAGED_SUFFIX}"


def read_staged(index_dir: Path, generation: str) -> dict[str, Any] | None:
    """The record of a staged generation (``None`` when ``generation`` is not staged)."""
    path = _staged_path(index_dir, generation)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("manifest_sha256"), str):
            raise ValueError("no manifest_sha256")
    except (OSError, ValueError) as exc:
        raise IndexStoreError(
            f"the staged-generation record {path} is corrupt ({exc}); delete it and write the generation again"
        ) from exc
    return data


def stage_generation(index_dir: Path, building: Path, manifest: dict[str, Any], base: str, reason: str) -> None:
    """Like :func:`publish_generation`, but ``CURRENT`` stays as it is: the finished build is
    renamed to its generation and recorded as staged (made from the live generation ``base``,
    for ``reason``) until :func:`switch_generation` makes it live. The caller holds the writer lock."""
    data = manifest_bytes(manifest)
    with open(building / MANIFEST, "wb") as fh:
        fh.write(data)
    fsync_tree(building)
    gens = building.parent
    generation = str(manifest["generation"])
    os.replace(building, gens / generation)
    record = {"manifest_sha256": hashlib.sha256(data).hexdigest(), "base": base, "reason": reason,
              "created": manifest.get("created", "")}
    atomic_write_text(_staged_path(index_dir, generation), json.dumps(record) + "\n")
    fsync_dir(gens)


def _manifest_summary(index_dir: Path, generation: str) -> tuple[str, int | None]:
    try:
        data = json.loads((index_dir / GENERATIONS / generation / MANIFEST).read_text(encoding="utf-8"))
        n = data.get("n_chunks")
        return str(data.get("created", "")), int(n) if isinstance(n, int) else None
    except (OSError, ValueError, TypeError, AttributeError):
        return "", None


def generation_records(index_dir: Path) -> list[GenerationRecord]:
    """Every generation folder of ``index_dir``, newest first (see :class:`GenerationRecord`)."""
    gens = index_dir / GENERATIONS
    live = _live_or_none(index_dir)
    previous = read_previous(index_dir)
    names = sorted((p.name for p in gens.iterdir() if p.is_dir() and _SAFE_COMPONENT.match(p.name)),
                   reverse=True) if gens.is_dir() else []
    out = []
    for name in names:
        created, n_chunks = _manifest_summary(index_dir, name)
        staged = read_staged(index_dir, name)
        if live is not None and name == live[0]:
            out.append(GenerationRecord(name, "live", live[1], created=created, n_chunks=n_chunks))
        elif staged is not None:
            out.append(GenerationRecord(name, "staged", staged["manifest_sha256"], staged.get("base"),
                                        str(staged.get("reason", "")), created, n_chunks))
        elif previous is not None and name == previous[0]:
            out.append(GenerationRecord(name, "previous", previous[1], created=created, n_chunks=n_chunks))
        else:
            out.append(GenerationRecord(name, "old", None, created=created, n_chunks=n_chunks))
    return out


def expected_manifest_sha256(index_dir: Path, generation: str) -> str:
    """The manifest sha256 recorded for ``generation`` outside it: by ``CURRENT`` (the live one
    or the previous one) or by its staged record. Any other generation cannot be opened or
    switched to: nothing vouches for its manifest."""
    safe_component(generation, "generation")
    live = _live_or_none(index_dir)
    if live is not None and live[0] == generation:
        return live[1]
    staged = read_staged(index_dir, generation)
    if staged is not None:
        return str(staged["manifest_sha256"])
    previous = read_previous(index_dir)
    if previous is not None and previous[0] == generation:
        return previous[1]
    known = ", ".join(f"{r.generation} ({r.role})" for r in generation_records(index_dir) if r.role != "old")
    raise InputError(
        f"generation {generation!r} of {index_dir} is neither live, previous nor staged, so nothing vouches for it; "
        f"use one of: {known or 'none'} (`ragsieve index generations --index {index_dir}` lists them)"
    )


def switch_generation(index_dir: Path, generation: str, timeout_s: float, *, force: bool = False) -> str:
    """Make ``generation`` (a staged one, or the previous live one: a rollback) the live one and
    return the id of the generation live until now (kept, and recorded as previous, so the
    switch can be undone the same way). A staged generation made from a generation that is no
    longer live (a re-ingest since) is refused unless ``force``: it lacks what that ingest added."""
    with writer_lock(index_dir, timeout_s):
        live = read_current(index_dir)
        if live[0] == generation:
            raise InputError(f"generation {generation} is already the live generation of {index_dir}")
        digest = expected_manifest_sha256(index_dir, generation)
        folder = index_dir / GENERATIONS / generation
        try:
            actual = hashlib.sha256((folder / MANIFEST).read_bytes()).hexdigest()
        except OSError as exc:
            raise IndexStoreError(f"the generation {folder} is missing or unreadable ({exc})") from exc
        if actual != digest:
            raise IndexStoreError(
                f"the manifest of generation {generation} changed since it was written (sha256 differs); "
                "it is not switched to"
            )
        staged = read_staged(index_dir, generation)
        if staged is not None and staged.get("base") != live[0] and not force:
            raise InputError(
                f"generation {generation} was made from generation {staged.get('base')}, but {live[0]} is live now "
                "(a re-ingest since): it lacks what that ingest changed. Write it again from the live generation "
                "(`ragsieve audit --exclude ...`), or pass --force to switch anyway"
            )
        write_current(index_dir, generation, digest, previous=live)
        with contextlib.suppress(FileNotFoundError):
            _staged_path(index_dir, generation).unlink()
        fsync_dir(index_dir / GENERATIONS)
        logger.info("switched %s from generation %s to %s", index_dir, live[0], generation)
        return live[0]


# ---------------------------------------------------------------------- durability and integrity
def checksum_tree(root: Path, skip: frozenset[str] = frozenset({MANIFEST})) -> dict[str, dict[str, Any]]:
    """``{relative path: {"size", "sha256"}}`` for every file under ``root``."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel in skip:
            continue
        out[rel] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
    return out


def file_role(rel: str) -> str:
    """What the generation file at ``rel`` is for, in words (its role, never a path)."""
    parts = rel.split("/")
    name = parts[-1]
    if parts[0] == "global":
        where = " of the global index"
    elif parts[0] == "partitions" and len(parts) > 2:
        where = f" of partition {parts[1]}"
    else:
        where = ""
    if name == "chunks.jsonl":
        return "chunk text file (chunks.jsonl)"
    if name == "embeddings.npy":
        return "stored vectors file (embeddings.npy)"
    if parts[0] == "sentences" and name in ("offsets.npy", "vectors.npy"):
        return f"sentence vectors file (sentences/{name})"
    if name == "dense.faiss":
        return f"dense vector file (dense.faiss){where}"
    if name == "ids.npy":
        return f"row id file (ids.npy){where}"
    if "bm25" in parts:
        return f"BM25 file ({'/'.join(parts[parts.index('bm25'):])}){where}"
    return f"index file ({name}){where}"


def _recorded(checksums: Any, gen_dir: Path, index_dir: Path) -> Iterator[tuple[str, Path, int, str]]:
    """(relative path, path, size, sha256) of each file the manifest records."""
    if not isinstance(checksums, dict) or not checksums:
        raise IndexStoreError(f"the manifest in {gen_dir} lists no file checksums; {_reingest_hint(index_dir)}")
    for rel, info in checksums.items():
        parts = str(rel).split("/")
        for part in parts:
            safe_component(part, "file")
        try:
            size, digest = int(info["size"]), str(info["sha256"])
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexStoreError(
                f"the manifest in {gen_dir} has a corrupt entry for {rel}; {_reingest_hint(index_dir)}"
            ) from exc
        yield str(rel), gen_dir.joinpath(*parts), size, digest


def _damaged(
    rel: str, path: Path, problem: str, actual_size: int | None, size: int, index_dir: Path
) -> IndexStoreError:
    role = file_role(rel)
    repair = _reingest_hint(index_dir)
    if problem == "missing":
        return DamagedFileError(f"the {role} at {path} is missing; {repair}", role=role, repair=repair)
    if problem == "not a regular file":
        # A link could point anywhere, and reading a pipe or device could block forever.
        return DamagedFileError(
            f"the {role} at {path} is not a regular file (a link, pipe or device); {repair}", role=role, repair=repair
        )
    if problem == "size":
        return DamagedFileError(
            f"the {role} at {path} has {actual_size} bytes, the manifest recorded {size} (truncated or overwritten); "
            f"{repair}", role=role, repair=repair,
        )
    return DamagedFileError(
        f"the {role} at {path} does not match the checksum recorded when the index was built "
        f"(changed or corrupted on disk); {repair}", role=role, repair=repair,
    )


def verify_files(gen_dir: Path, checksums: Any, index_dir: Path, hashes: bool) -> None:
    """Sizes always; contents too when ``hashes`` (every file read again). The first bad file
    raises a :class:`~ragsieve.errors.DamagedFileError` naming its role and the repair."""
    for rel, path, size, digest in _recorded(checksums, gen_dir, index_dir):
        try:
            st = path.lstat()
        except OSError:
            raise _damaged(rel, path, "missing", None, size, index_dir) from None
        if not stat.S_ISREG(st.st_mode):
            raise _damaged(rel, path, "not a regular file", None, size, index_dir)
        if st.st_size != size:
            raise _damaged(rel, path, "size", st.st_size, size, index_dir)
        if hashes and sha256_file(path) != digest:
            raise _damaged(rel, path, "checksum", None, size, index_dir)


def verify_contents(gen_dir: Path, checksums: Any, index_dir: Path, under: str) -> None:
    """The lazy integrity check: the sha256 of each recorded file that is ``under`` (a file's
    relative path, or a folder's with a trailing ``/``), each file hashed once per process (an
    unchanged file verified before is not read again). Run on the files a query reads as they
    are opened, so a same-size change (two vectors swapped) is refused without ``--verify``."""
    for rel, path, size, digest in _recorded(checksums, gen_dir, index_dir):
        if rel != under and not (under.endswith("/") and rel.startswith(under)):
            continue
        problem = file_checksum_problem(path, size, digest)
        if problem is not None:
            actual = path.stat().st_size if problem == "size" else None
            raise _damaged(rel, path, problem, actual, size, index_dir)


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """A generation's manifest as written (CURRENT records the sha256 of these bytes)."""
    return (json.dumps(manifest, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


def publish_generation(index_dir: Path, building: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest`` into the finished build folder ``building``, flush it, rename it to
    its generation and switch ``CURRENT`` to it; the caller holds the writer lock."""
    data = manifest_bytes(manifest)
    with open(building / MANIFEST, "wb") as fh:
        fh.write(data)
    fsync_tree(building)
    gens = building.parent
    os.replace(building, gens / str(manifest["generation"]))
    fsync_dir(gens)
    write_current(index_dir, str(manifest["generation"]), hashlib.sha256(data).hexdigest(),
                  previous=_live_or_none(index_dir))


def extend_generation(
    index_dir: Path, generation: str, manifest: dict[str, Any], add: Callable[[Path], dict[str, Any]]
) -> str | None:
    """Publish a copy of the live ``generation`` with files added (an index built before a
    release stored them): its files are hard-linked (copied where links fail) into a new
    generation, ``add(folder)`` writes the new files there and returns the manifest keys to
    set, the new files' checksums are recorded beside the old ones, and ``CURRENT`` switches
    to it. Published generations are never modified, so a crash at any point leaves
    ``generation`` live and intact.

    Returns the new generation's id, or None when nothing was published: another writer holds
    the lock (this does not wait for it), ``generation`` is no longer the live one (a re-ingest
    published another), or the folder cannot be written (a read-only index).
    """
    from filelock import FileLock, Timeout

    lock = FileLock(str(index_dir / WRITER_LOCK))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        logger.info("%s is being written by another process; not storing the new files this time", index_dir)
        return None
    except OSError as exc:
        logger.info("cannot lock %s for writing (%s); not storing the new files", index_dir, exc)
        return None
    building: Path | None = None
    try:
        if read_current(index_dir)[0] != generation:
            return None
        source = index_dir / GENERATIONS / generation
        new_id = new_generation_id()
        building = index_dir / GENERATIONS / f"{BUILDING_PREFIX}{new_id}"
        building.mkdir()
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source)
            target = building / rel
            if path.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            elif rel.as_posix() != MANIFEST:
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(path, target)
                except OSError:
                    shutil.copy2(path, target)
        before = {p.relative_to(building).as_posix() for p in building.rglob("*") if p.is_file()}
        changes = add(building)
        # only the new files are hashed: the linked ones keep the checksums recorded at ingest
        added = {
            rel: {"size": (building / rel).stat().st_size, "sha256": sha256_file(building / rel)}
            for rel in sorted(p.relative_to(building).as_posix() for p in building.rglob("*") if p.is_file())
            if rel not in before and rel != MANIFEST
        }
        checksums = dict(manifest.get("checksums") or {})
        checksums.update(added)
        published = {**manifest, **changes, "generation": new_id, "checksums": checksums}
        publish_generation(index_dir, building, published)
        building = None
        logger.info(
            "published generation %s of %s (generation %s with %s)", new_id, index_dir, generation, ", ".join(added)
        )
        collect_garbage(index_dir, new_id)
        return new_id
    except OSError as exc:
        logger.info("cannot store the new files in %s (%s); they are used in memory only", index_dir, exc)
        return None
    finally:
        if building is not None:
            shutil.rmtree(building, ignore_errors=True)
        lock.release()


# ---------------------------------------------------------------------- locks
@contextlib.contextmanager
def writer_lock(index_dir: Path, timeout_s: float) -> Iterator[None]:
    """Hold the index's single-writer lock; wait for another writer up to ``timeout_s``, then fail."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(index_dir / WRITER_LOCK))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        logger.warning(
            "another ingest is writing to %s; waiting up to %.0f s for it to finish", index_dir, timeout_s
        )
        try:
            lock.acquire(timeout=timeout_s)
        except Timeout:
            raise IndexStoreError(
                f"another ragsieve ingest kept {index_dir} locked for over {timeout_s:.0f} s "
                f"({index_dir / WRITER_LOCK}); wait for it to finish, or raise ingest.lock_timeout_s"
            ) from None
    try:
        yield
    finally:
        lock.release()


class GenerationLease:
    """A reader's shared lock on one generation, so writers do not delete it while it is in use."""

    def __init__(self, index_dir: Path, generation: str) -> None:
        self._fd: int | None = None
        if fcntl is None:
            return
        path = index_dir / GENERATIONS / f"{generation}.lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            # A read-only index (a shared mount) cannot be written by a writer either.
            logger.debug("cannot create %s; reading without a lease", path)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError:
            os.close(fd)
            return
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.release()


def _try_remove_generation(gens: Path, name: str) -> bool:
    folder = gens / name
    if fcntl is None:
        if time.time() - folder.stat().st_mtime < NO_LOCK_GRACE_S:
            return False
        shutil.rmtree(folder, ignore_errors=True)
        return True
    lock_path = gens / f"{name}.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a reader still uses it
        # Rename first so a reader never sees a half-deleted generation under its real name.
        doomed = gens / f"{BUILDING_PREFIX}deleting-{name}"
        os.replace(folder, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        with contextlib.suppress(OSError):
            lock_path.unlink()
        return True
    finally:
        os.close(fd)


def collect_garbage(index_dir: Path, current: str, keep_previous: int = 1) -> list[str]:
    """Remove unused old generations and leftovers of interrupted builds; call with the writer lock held."""
    gens = index_dir / GENERATIONS
    if not gens.is_dir():
        return []
    removed = []
    for leftover in gens.glob(f"{BUILDING_PREFIX}*"):
        shutil.rmtree(leftover, ignore_errors=True)
    names = sorted(p.name for p in gens.iterdir() if p.is_dir() and _SAFE_COMPONENT.match(p.name))
    older = [n for n in names if n < current]
    keep = set(older[-keep_previous:]) if keep_previous > 0 else set()
    # the generation live before this one (a switch back may be older or newer by name) and the
    # staged ones (written for the user to switch to) are never removed here
    previous = read_previous(index_dir)
    if keep_previous > 0 and previous is not None:
        keep.add(previous[0])
    keep |= {n for n in names if (gens / f"{n}{STAGED_SUFFIX}").is_file()}
    for name in names:
        if name == current or name in keep:
            continue
        if _try_remove_generation(gens, name):
            removed.append(name)
    for record in gens.glob(f"*{STAGED_SUFFIX}"):
        name = record.name[: -len(STAGED_SUFFIX)]
        # a record left by a switch interrupted after CURRENT changed, or of a removed generation
        if name == current or not (gens / name).is_dir():
            with contextlib.suppress(OSError):
                record.unlink()
    audits = index_dir / AUDITS
    if removed and audits.is_dir():
        for name in removed:
            for saved in audits.glob(f"{name}.*"):
                with contextlib.suppress(OSError):
                    saved.unlink()
    for lock in gens.glob("*.lock"):
        if not (gens / lock.stem).exists():
            with contextlib.suppress(OSError):
                if fcntl is not None:
                    fd = os.open(lock, os.O_RDWR)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        lock.unlink()
                    finally:
                        os.close(fd)
    if removed:
        fsync_dir(gens)
        logger.info("removed old index generations %s from %s", ", ".join(removed), index_dir)
    return removed
