"""API keys and what each may read: the keys file (``--keys-file``) and the single all-access key
(``--api-key-file`` / ``$RAGSIEVE_API_KEY``), for ``ragsieve serve`` and ``ragsieve mcp --http``.

The keys file is TOML, one ``[[key]]`` table per key (docs/sharing.md)::

    [[key]]
    name = "hr-team"             # for the operator's logs; never sent to a client
    sha256 = "<64 hex digits>"   # sha256 of the key (or: key = "the key itself")
    domains = ["hr"]             # partitions it may read
    tags = ["hr", "public"]      # document tags it may read
    paths = ["policies/"]        # files under these folders (relative to the ingested folder)

    [[key]]
    name = "admin"
    sha256 = "<64 hex digits>"
    all = true                   # reads everything

:class:`KeyRing` answers "which grants does this request's key hold" (``None``: no valid key, a
401); it re-reads the file when its modification time, size or inode change, checked on each
request. A file that fails to parse on a reload is not taken: the last good keys stay in force
and :attr:`KeyRing.problem` (logged, and shown by ``/v1/health``) says what is wrong.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragsieve.errors import ConfigError
from ragsieve.index.access import Access, normalise_prefix, tags_of

if TYPE_CHECKING:
    from starlette.types import Scope

logger = logging.getLogger(__name__)

_FIELDS = ("name", "key", "sha256", "all", "domains", "tags", "paths")
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
_TABLE = re.compile(r"^\s*\[\[\s*key\s*\]\]")


def presented_key(scope: Scope) -> bytes:
    """The key a request carries, as ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` (the
    bearer form wins when both are sent); empty when it carries none."""
    given = b""
    for name, value in scope.get("headers", []):
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            given = value[7:].strip()
        elif name == b"x-api-key" and not given:
            given = value.strip()
    return given


def key_digest(key: bytes | str) -> str:
    """The sha256 of a key, as the keys file's ``sha256`` field holds it (lower-case hex)."""
    raw = key.encode("utf-8") if isinstance(key, str) else key
    return hashlib.sha256(raw).hexdigest()


def _entry_lines(text: str) -> list[int]:
    """The line number of each ``[[key]]`` header, in order (for error messages)."""
    return [n for n, line in enumerate(text.splitlines(), 1) if _TABLE.match(line)]


def _texts(value: Any, field: str, where: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where}: {field} must be a list of non-empty texts, e.g. {field} = [\"hr\"]; got {value!r}")
    return tags_of(value)


def parse_keys(text: str, source: str = "the keys file") -> dict[str, Access]:
    """The keys file's entries as ``{sha256 of the key: Access}``; a :class:`ConfigError` naming the
    entry, its line and the fix for anything wrong."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{source} is not valid TOML ({exc}); write one [[key]] table per key (see docs/sharing.md)"
        ) from exc
    extra = sorted(k for k in data if k != "key")
    if extra:
        raise ConfigError(
            f"{source}: unknown top-level entry {extra[0]!r}; the file holds only [[key]] tables (see docs/sharing.md)"
        )
    entries = data.get("key")
    if entries is None:
        raise ConfigError(f"{source} has no [[key]] table; add one per key (see docs/sharing.md)")
    if not isinstance(entries, list):
        raise ConfigError(f"{source}: 'key' must be [[key]] tables (one per key), not a single value")
    lines = _entry_lines(text)
    keys: dict[str, Access] = {}
    names: dict[str, str] = {}
    for n, entry in enumerate(entries, 1):
        line = f" (line {lines[n - 1]})" if n <= len(lines) else ""
        where = f"{source}, key {n}{line}"
        unknown = sorted(set(entry) - set(_FIELDS))
        if unknown:
            raise ConfigError(f"{where}: unknown field {unknown[0]!r}; a key takes {', '.join(_FIELDS)}")
        name = entry.get("name", f"key {n}")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{where}: name must be a non-empty text")
        where = f"{source}, key {n} {name!r}{line}"
        has_key, has_hash = "key" in entry, "sha256" in entry
        if has_key == has_hash:
            raise ConfigError(
                f"{where}: give exactly one of sha256 (the key's sha256 in hex, the safer choice: "
                "`printf %s KEY | sha256sum`) or key (the key itself)"
            )
        if has_key:
            value = entry["key"]
            if not isinstance(value, str) or len(value.strip()) < 16:
                raise ConfigError(f"{where}: key must be a text of at least 16 characters (use a long random key)")
            digest = key_digest(value.strip())
        else:
            value = entry["sha256"]
            if not isinstance(value, str) or not _HEX64.match(value.strip()):
                raise ConfigError(f"{where}: sha256 must be 64 hex digits (`printf %s KEY | sha256sum`); got {value!r}")
            digest = value.strip().lower()
        everything = entry.get("all", False)
        if not isinstance(everything, bool):
            raise ConfigError(f"{where}: all must be true or false")
        domains = _texts(entry.get("domains", []), "domains", where)
        tags = _texts(entry.get("tags", []), "tags", where)
        paths = [normalise_prefix(p) for p in _texts(entry.get("paths", []), "paths", where)]
        if any(p in ("", ".") or ".." in p.split("/") for p in paths):
            raise ConfigError(
                f"{where}: paths must name folders or files inside the ingested folder (e.g. \"hr/\"); "
                "to grant everything write all = true"
            )
        if everything and (domains or tags or paths):
            raise ConfigError(f"{where}: all = true already reads everything; remove its domains, tags and paths")
        if not everything and not (domains or tags or paths):
            raise ConfigError(
                f"{where}: grants nothing; add domains, tags or paths it may read, or all = true for an admin key"
            )
        if digest in keys:
            raise ConfigError(f"{where}: the same key as {names[digest]!r}; give every key its own value")
        names[digest] = name
        keys[digest] = (
            Access.all(name=name) if everything
            else Access(domains=frozenset(domains), tags=frozenset(tags), paths=tuple(paths), name=name)
        )
    return keys


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


@dataclass
class _Loaded:
    signature: tuple[int, int, int] | None
    keys: dict[str, Access]


class KeyRing:
    """The keys a service accepts: ``api_key`` (all access) and the entries of ``keys_file``.

    With neither, every request reads everything (the command allows that on loopback only).

    Example:
        >>> ring = KeyRing(api_key="a-long-random-admin-key")
        >>> ring.access_for_key(b"a-long-random-admin-key").everything
        True
        >>> ring.access_for_key(b"wrong") is None
        True
    """

    def __init__(self, api_key: str | None = None, keys_file: Path | None = None) -> None:
        self._api_key = api_key.encode("utf-8") if api_key else None
        self.keys_file = keys_file
        self.problem: str | None = None
        self._lock = threading.Lock()
        self._loaded: _Loaded | None = None
        if keys_file is not None:
            self._loaded = self._read(keys_file)  # a bad file fails the start, naming the fix

    @property
    def open(self) -> bool:
        """Whether no key is asked for at all."""
        return self._api_key is None and self.keys_file is None

    @staticmethod
    def _read(path: Path) -> _Loaded:
        signature = _stat(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the keys file {path} ({exc}); check the path and permissions") from exc
        return _Loaded(signature, parse_keys(text, f"the keys file {path}"))

    def _current(self) -> dict[str, Access]:
        """The keys file's entries, re-read first when the file changed."""
        path = self.keys_file
        loaded = self._loaded
        if path is None or loaded is None:
            return {}
        signature = _stat(path)
        if signature is None or signature == loaded.signature:
            return loaded.keys  # unchanged, or gone mid-replace: keep the keys we have
        with self._lock:
            loaded = self._loaded
            assert loaded is not None
            if signature == loaded.signature:
                return loaded.keys
            try:
                fresh = self._read(path)
            except ConfigError as exc:
                # Keep the last good keys (an editor's half-written save must not lock everyone
                # out); remember the signature so the same bad file is not parsed per request.
                self.problem = f"the keys file was changed but not taken: {exc}"
                logger.error(self.problem)
                self._loaded = _Loaded(signature, loaded.keys)
                return loaded.keys
            self.problem = None
            self._loaded = fresh
            logger.info("keys file %s re-read: %d keys", path, len(fresh.keys))
            return fresh.keys

    def access_for_key(self, given: bytes) -> Access | None:
        """The grants of the key ``given``; ``None`` when it is no key this service accepts."""
        if self.open:
            return Access.all(name="open")
        if self._api_key is not None and given and hmac.compare_digest(given, self._api_key):
            return Access.all(name="api key")
        keys = self._current()
        if not given or not keys:
            return None
        return keys.get(key_digest(given))

    def access_for(self, scope: Scope) -> Access | None:
        """The grants of the key a request carries (``None``: answer 401)."""
        return self.access_for_key(presented_key(scope))


# Where a request's grants travel from the key check to the routes (the ASGI scope's state).
ACCESS_STATE = "ragsieve_access"


def request_access(scope: Scope) -> Access:
    """The grants the key check recorded for this request; none at all when it recorded nothing
    (a route reached without the check reads nothing rather than everything)."""
    state = scope.get("state") or {}
    access = state.get(ACCESS_STATE) if isinstance(state, dict) else None
    return access if isinstance(access, Access) else Access()


def record_access(scope: Scope, access: Access) -> None:
    state = scope.setdefault("state", {})
    state[ACCESS_STATE] = access


__all__ = [
    "ACCESS_STATE", "KeyRing", "key_digest", "parse_keys", "presented_key", "record_access", "request_access",
]
