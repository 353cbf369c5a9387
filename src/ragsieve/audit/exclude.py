"""Leave documents out: a new index generation without the chosen documents.

By default the new generation is written into the audited index folder, beside the live one,
and *staged*: the live generation stays live (a running service keeps serving it) until the user
switches with ``ragsieve index use GENERATION`` (or at once with ``--switch``); the generation
live before a switch is kept, so ``ragsieve index use`` switches back. The kept passages keep
their stored vectors (nothing is re-embedded), and the new generation's manifest lists the
excluded documents, which a re-ingest keeps out. With ``--out DIR`` a separate new index is
built in ``DIR`` instead. Either way the ingested files and the generations already written are
only read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragsieve.errors import InputError

if TYPE_CHECKING:
    from ragsieve.index import Index


def documents_to_exclude(findings_file: Path) -> list[str]:
    """The union of the ``exclude`` lists of every finding in ``findings_file`` (an audit
    report written by ``ragsieve audit --json``, with the findings the user does not want
    acted on deleted), or of its top-level ``exclude`` list when it has one."""
    try:
        data: Any = json.loads(findings_file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(
            f"cannot read {findings_file} ({exc.strerror}); pass the JSON `ragsieve audit --json` wrote"
        ) from exc
    except ValueError as exc:
        raise InputError(f"{findings_file} is not JSON ({exc}); pass the JSON `ragsieve audit --json` wrote") from exc
    if isinstance(data, dict) and isinstance(data.get("exclude"), list):
        docs = data["exclude"]
    elif isinstance(data, dict) and isinstance(data.get("findings"), list):
        docs = [d for f in data["findings"] if isinstance(f, dict) for d in f.get("exclude", [])]
    else:
        raise InputError(f"{findings_file} has neither a 'findings' nor an 'exclude' list; "
                         "pass the JSON `ragsieve audit --json` wrote")
    if not all(isinstance(d, str) for d in docs):
        raise InputError(f"{findings_file}: every excluded document must be a document id (a string)")
    return list(dict.fromkeys(docs))


def stage_without(index: Index, documents: list[str], findings_file: Path, *, switch: bool = False) -> Index:
    """Write a generation of ``index`` without ``documents`` beside its live one (staged; live
    at once when ``switch``) and return it opened (:meth:`ragsieve.index.Index.without_documents`)."""
    reason = f"audit --exclude {findings_file.name}: {len(documents)} documents left out"
    return index.without_documents(documents, reason, switch=switch)


def write_without(index: Index, documents: list[str], out: Path) -> Index:
    """Build a new index at ``out`` with every passage of ``index`` except those of ``documents``."""
    from ragsieve.index import Index as IndexClass

    known = {c.doc_id for c in index.chunks}
    unknown = [d for d in documents if d not in known]
    if unknown:
        raise InputError(f"documents {unknown[:3]} are not in the index at {index.dir}; "
                         "was the findings file written for another index?")
    if out.exists() and any(out.iterdir()):
        raise InputError(f"--out {out} exists and is not empty; pass a new folder for the new index")
    if out.resolve() == Path(index.dir).resolve() or out.resolve().is_relative_to(Path(index.dir).resolve()):
        raise InputError(f"--out {out} is the audited index or inside it; pass a new folder beside it")
    drop = set(documents)
    rows = [i for i, c in enumerate(index.chunks) if c.doc_id not in drop]
    if not rows:
        raise InputError("excluding these documents leaves no passage; nothing to index")
    chunks = [index.chunks[i] for i in rows]
    vectors = index.embeddings[rows]
    return IndexClass.from_chunks(chunks, out, embedder=index.embedder, embeddings=vectors,
                                  corpus=index.corpus_root)
