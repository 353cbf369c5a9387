"""The trace page: one self-contained HTML document (inline CSS and JS, no network).

``GET /`` serves it empty, with a question box; ``ragsieve trace view`` writes it with a trace
embedded, for opening without a server.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ragsieve.errors import InputError

# Inside <script>, "</script>" or "<!--" in a string would end or confuse the element; escaping
# <, > and & as \u escapes keeps the JSON identical after JSON.parse. U+2028/2029 are escaped
# for old JavaScript parsers.
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def script_safe_json(data: Any) -> str:
    """JSON that can sit inside an HTML ``<script>`` element whatever strings it holds."""
    text = json.dumps(data, ensure_ascii=False, default=str)
    return "".join(_SCRIPT_ESCAPES.get(ch, ch) for ch in text)


@lru_cache(maxsize=1)
def _assets() -> tuple[str, str, str]:
    folder = resources.files("ragsieve.serve") / "static"
    return tuple(  # type: ignore[return-value]
        (folder / name).read_text(encoding="utf-8") for name in ("page.html", "page.css", "page.js")
    )


def with_presentation(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its ``presentation`` (:func:`ragsieve.present.present_answer`, the view the
    terminal prints) at the top level, where the page reads it; one the service already added is kept."""
    from ragsieve.present import present_answer

    inner: dict[str, Any] = data["ragsieve_trace"] if isinstance(data.get("ragsieve_trace"), dict) else data
    if isinstance(data.get("presentation"), dict) or isinstance(inner.get("presentation"), dict):
        return data
    return {**data, "presentation": present_answer(data).to_dict()}


def render_page(data: dict[str, Any] | None) -> str:
    """The page, with ``data`` (an answer, a trace or a search result) embedded when given."""
    html, css, js = _assets()
    payload = "null" if data is None else script_safe_json(with_presentation(data))
    # Substitute the data last, so text inside it is never mistaken for a placeholder.
    return html.replace("/*__CSS__*/", css).replace("/*__JS__*/", js).replace("__DATA__", payload)


def load_trace(path: str | Path) -> dict[str, Any]:
    """Read a trace file: ``ragsieve ask --json`` output, a bare trace, a search result or a
    chat completion with ``ragsieve_trace``."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"trace file {p} does not exist; write one with `ragsieve ask ... --json > {p.name}`")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{p} is not a JSON file ({exc}); pass the output of `ragsieve ask --json`") from exc
    if not isinstance(data, dict) or not any(k in data for k in ("trace", "events", "ragsieve_trace", "hits")):
        raise InputError(
            f"{p} holds no ragsieve trace (expected the object `ragsieve ask --json` prints, with a 'trace' field)"
        )
    return data
