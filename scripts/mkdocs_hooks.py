"""mkdocs hooks: the README and DEVELOPERS.md are the site's home and developer pages.

Both files stay where readers of the repository expect them; the hook reads them at build time
and rewrites their repository-relative links (``docs/results.md``) to site-relative ones, so the
text exists once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Site page -> repository file whose text it shows.
INCLUDED = {"index.md": "README.md", "developers.md": "DEVELOPERS.md"}


def _site_links(markdown: str) -> str:
    markdown = re.sub(r"\]\(docs/", "](", markdown)
    return markdown.replace("](DEVELOPERS.md)", "](developers.md)").replace("](README.md)", "](index.md)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    source = INCLUDED.get(page.file.src_uri)
    if source is None:
        return markdown
    return _site_links((ROOT / source).read_text(encoding="utf-8"))
