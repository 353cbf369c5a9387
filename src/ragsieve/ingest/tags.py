"""The tags file of ``ragsieve ingest --tags-file FILE``: globs on a file's path under the
ingested folder, each with the document tags it gives (``ingest.tag_rules``; docs/sharing.md).

TOML (``.toml``) or YAML (``.yaml``/``.yml``), one entry per glob::

    "hr/*" = ["hr"]
    "*/contracts/*" = ["legal", "restricted"]
    "handbook.md" = "public"

A file gets the tags of every glob it matches (``fnmatch``, case-sensitive; ``*`` also crosses
``/``), besides its folder tags and its front matter's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragsieve.errors import ConfigError


def parse_tag_rules(data: Any, source: str = "the tags file") -> dict[str, list[str]]:
    """``{glob: [tags]}`` from a parsed tags file; a :class:`ConfigError` naming the entry and the fix."""
    if not isinstance(data, dict) or not data:
        raise ConfigError(
            f"{source} must map globs to tags, one entry per glob, e.g. \"hr/*\" = [\"hr\"]; "
            "it is empty or not a mapping"
        )
    rules: dict[str, list[str]] = {}
    for glob, value in data.items():
        if not isinstance(glob, str) or not glob.strip():
            raise ConfigError(f"{source}: {glob!r} is not a glob; write a path pattern such as \"hr/*\"")
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not values or not all(isinstance(v, str) and v.strip() for v in values):
            raise ConfigError(
                f"{source}: the tags of {glob!r} must be a text or a non-empty list of texts, "
                f"e.g. \"{glob}\" = [\"hr\"]; got {value!r}"
            )
        rules[glob.strip()] = list(dict.fromkeys(v.strip() for v in values))
    return rules


def read_tags_file(path: Path) -> dict[str, list[str]]:
    """The rules of the tags file at ``path`` (TOML, or YAML by its ``.yaml``/``.yml`` suffix)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the tags file {path} ({exc}); check the path") from exc
    source = f"the tags file {path}"
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source} is not valid YAML ({exc}); write one `glob: [tags]` line per glob") from exc
    else:
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(
                f"{source} is not valid TOML ({exc}); write one `\"glob\" = [\"tag\"]` line per glob "
                "(or name it .yaml for YAML)"
            ) from exc
    return parse_tag_rules(data, source)


__all__ = ["parse_tag_rules", "read_tags_file"]
