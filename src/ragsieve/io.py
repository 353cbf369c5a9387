"""Crash-safe file writes: write to a temporary file beside the target, flush it, then rename.

A crash mid-write leaves the previous file intact; readers never see a half-written file, and
the rename itself is flushed to disk (the folder is fsynced) before the call returns.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragsieve.errors import RagsieveError


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# Files whose contents matched their recorded checksum in this process, by identity: a file
# replaced or rewritten since gets a new inode, size or mtime and is hashed again.
_VERIFIED: set[tuple[Any, ...]] = set()


def file_checksum_problem(path: str | Path, size: int, sha256: str, *, cached: bool = True) -> str | None:
    """Why ``path`` does not hold the bytes recorded as ``size`` and ``sha256`` (``"missing"``,
    ``"not a regular file"``, ``"size"`` or ``"checksum"``), or None when it does. With
    ``cached`` a file already verified in this process, and unchanged since (same inode, size and
    modification time), is not read again: cheap enough to run on every open."""
    import stat

    try:
        st = os.lstat(path)
    except OSError:
        return "missing"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_size != size:
        return "size"
    key = (os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, sha256)
    if cached and key in _VERIFIED:
        return None
    if sha256_file(path) != sha256:
        return "checksum"
    _VERIFIED.add(key)
    return None


def forget_verified_files() -> None:
    """Forget which files :func:`file_checksum_problem` verified in this process, so each is read
    and hashed again on its next check, as in a new process (for timing a first open)."""
    _VERIFIED.clear()


def fsync_dir(path: str | Path) -> None:
    """Flush a folder's entries (a rename or a new file) to disk; a no-op where folders cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # Windows cannot open folders; its renames are journalled by NTFS
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_path(target: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it onto ``target`` on success."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix + ".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.replace(tmp, target)
        fsync_dir(target.parent)
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write_text(target: str | Path, text: str) -> None:
    with atomic_path(target) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def atomic_write_json(target: str | Path, data: Any) -> None:
    atomic_write_text(target, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


def atomic_write_jsonl(target: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    n = 0
    with atomic_path(target) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
        fh.flush()
        os.fsync(fh.fileno())
    return n


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the objects of a JSONL file (gzip-compressed when its name ends in ``.gz``); a
    malformed line raises with its line number."""
    from ragsieve.errors import InputError

    opener: Any = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{lineno} is not valid JSON ({exc.msg}); fix or remove that line") from exc
            if not isinstance(obj, dict):
                raise InputError(f"{path}:{lineno} is a JSON {type(obj).__name__}, expected an object")
            yield obj


def read_json_file(path: str | Path, what: str, how_to_create: str) -> Any:
    """Parse a JSON file the user keeps; a missing or malformed file raises a clear InputError.

    ``what`` names the file in messages ("classifier file"), ``how_to_create`` says how to make one.
    """
    from ragsieve.errors import InputError

    p = Path(path)
    if not p.is_file():
        raise InputError(f"{what} {p} does not exist; {how_to_create}")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} {p} is not valid JSON ({exc.msg}); recreate it: {how_to_create}") from exc


def fsync_tree(root: str | Path) -> None:
    """Flush every file, then every folder (deepest first), so a finished tree survives a power loss."""
    folders = []
    for dirpath, _, filenames in os.walk(root):
        folders.append(Path(dirpath))
        for name in filenames:
            fd = os.open(Path(dirpath) / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for folder in reversed(folders):
        fsync_dir(folder)


# Written into every folder atomic_directory builds: proves a later call may replace that folder.
ARTIFACT_MARKER = ".ragsieve-artifact"


class ArtifactSaveError(RagsieveError):
    """Saving a folder (atomic_directory) failed; the previous version is left in place."""


# Linux renameat2(2) flag: swap two paths in one step, so the target always names a complete folder.
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap folders ``a`` and ``b``; False where the platform cannot (then the caller
    falls back to two renames)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd = -100
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP):
        return False  # the file system does not support the exchange
    raise OSError(err, os.strerror(err), str(b))


@contextmanager
def atomic_directory(target: str | Path, lock_timeout_s: float = 120.0) -> Iterator[Path]:
    """Build a directory in a temporary sibling, then swap it into place.

    The old directory is kept until the new one is complete and flushed to disk, so an
    interrupted build leaves the previous version usable. On Linux the swap is one atomic
    exchange: a reader always finds a complete folder at ``target``, old or new, never none.
    Saves into one parent folder are serialised by an ``flock`` on that folder (no lock file is
    left behind), so concurrent saves each publish whole, the last one winning; a failure raises
    :class:`ArtifactSaveError` naming the folder and the fix. An existing folder is replaced only
    when ragsieve wrote it (it holds the marker file) or when the new build rewrites every
    entry in it; anything else raises before a byte is written, so a user's folder is never lost.
    """
    from ragsieve.errors import InputError

    target = Path(target)
    if target.name in {"", ".", ".."}:
        raise InputError(f"{target} names a folder by '.' or '..'; pass a new folder name to write into")
    if target.exists() and not target.is_dir():
        raise InputError(f"{target} exists and is a file; pass a folder path that is new or was written by ragsieve")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".building", dir=target.parent))
    except OSError as exc:
        raise ArtifactSaveError(
            f"cannot create a folder beside {target} ({exc.strerror or exc}); check the path and its permissions"
        ) from exc
    try:
        yield tmp
        try:
            with _folder_lock(target, lock_timeout_s):
                _publish(tmp, target)
        except OSError as exc:
            raise ArtifactSaveError(
                f"saving {target} failed ({exc.strerror or exc}); the previous version is unchanged. "
                "Check free space and permissions, then save again"
            ) from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _folder_lock(target: Path, timeout_s: float) -> Iterator[None]:
    """Exclusive ``flock`` on ``target``'s parent folder (a no-op where flock does not exist)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: its renames are not atomic for readers anyway
        yield
        return
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ArtifactSaveError(
                        f"another save into {target.parent} kept it locked for over {timeout_s:.0f} s; "
                        "wait for it to finish and save again"
                    ) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # releases the lock


def _publish(tmp: Path, target: Path) -> None:
    from ragsieve.errors import InputError

    (tmp / ARTIFACT_MARKER).write_text("written by ragsieve; this folder is replaced on the next save\n")
    if target.is_dir() and not (target / ARTIFACT_MARKER).is_file():
        foreign = sorted(p.name for p in target.iterdir() if not (tmp / p.name).exists())
        if foreign:
            raise InputError(
                f"{target} already holds files ragsieve did not write ({', '.join(foreign[:5])}); "
                "save into a new folder, or move those files away first"
            )
    fsync_tree(tmp)
    if target.is_dir() and _exchange(tmp, target):
        fsync_dir(target.parent)
        return  # tmp now holds the previous version; the caller removes it
    old = target.with_name(f".{target.name}.{os.getpid()}-{time.monotonic_ns()}.old")
    if target.exists():
        os.replace(target, old)
    os.replace(tmp, target)
    fsync_dir(target.parent)
    if old.exists():
        shutil.rmtree(old)


def user_cache_dir() -> Path:
    """ragsieve's per-user cache: ``$XDG_CACHE_HOME/ragsieve`` (``~/.cache/ragsieve`` by default)."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ragsieve"
