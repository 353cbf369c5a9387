"""Write the README's ``ragsieve demo`` transcript from a fresh run.

Builds the demo index (the bundled corpus, the bundled MiniLM embedder), asks the demo's two
questions through the sieve exactly as ``ragsieve demo`` does, and prints what the command prints
at 80 columns. The answers come from :class:`FixedLLM`, a deterministic stand-in that answers with
the first sentence of the first evidence passage and cites it (the bundled model's own wording
varies with the machine's threads; the stand-in makes the transcript reproducible, so a test can
check that the README shows today's output). Everything else, the index, the routing, every
check, the layout, is the real code.

    python scripts/demo_transcript.py            # print the transcript
    python scripts/demo_transcript.py --write    # replace it in README.md (between its markers)

``tests/test_docs_examples.py`` runs it and compares with README.md, with the wall-clock figures
(seconds, milliseconds) and the index's path masked.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
START = "<!-- demo-transcript:start (scripts/demo_transcript.py --write) -->"
END = "<!-- demo-transcript:end -->"
WIDTH = 80


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16)


class FixedLLM:
    """A deterministic LLM: the first sentence of evidence ``[1]`` cited as ``[1]``, or "I don't
    know." without evidence; log-probabilities from a hash of their inputs (so every check that
    scores with the LLM runs its real code)."""

    model_name = "fixed-extractive"

    def warm_up(self) -> None:
        pass

    @staticmethod
    def _text(prompt: Any) -> str:
        if isinstance(prompt, str):
            return prompt
        return "\n".join(m["content"] if isinstance(m, dict) else m.content for m in prompt)

    def generate(self, prompt: Any, *, max_tokens: int = 256, temperature: float = 0.0,
                 stop: Any = None, seed: Any = None) -> Any:
        from ragsieve.llm.base import Generation

        text = self._text(prompt)
        found = re.search(r"^\[1\] (.+)$", text, re.MULTILINE)
        if not found:
            return Generation("I don't know.", len(text.split()), 3, "stop")
        first = re.split(r"(?<=[.!?])\s", found.group(1).strip(), maxsplit=1)[0]
        reply = " ".join(first.split()).rstrip(".") + " [1]."
        return Generation(reply, len(text.split()), len(reply.split()), "stop")

    def generate_json(self, prompt: Any, schema: Any, *, max_tokens: int = 256) -> Any:
        raise NotImplementedError("the demo's sieve asks for no JSON")

    def continuation_logprobs(self, prompt: Any, continuations: Any) -> list[Any]:
        from ragsieve.llm.base import ContinuationScore

        base = self._text(prompt)
        return [ContinuationScore(-(_digest(base + c) % 1000) / 500.0, max(1, len(c.split()))) for c in continuations]

    def next_token_logprobs(self, prompt: Any, candidates: Any) -> list[float]:
        base = self._text(prompt)
        return [-(_digest(base + c) % 1000) / 250.0 for c in candidates]

    def perplexity(self, prompt: Any, answer: str) -> float:
        return 1.0 + (_digest(self._text(prompt) + answer) % 100) / 10.0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "fixed-extractive"}


def transcript(index_dir: Path) -> str:
    """What ``ragsieve demo --index INDEX_DIR`` prints at 80 columns, with :class:`FixedLLM`."""
    from rich.console import Console

    import ragsieve.cli as cli
    from ragsieve.config import PipelineConfig
    from ragsieve.demo import DEMO_SHOWCASE, demo_corpus_dir
    from ragsieve.index import BuildReport, Index
    from ragsieve.sieve.pipeline import Pipeline

    cfg = PipelineConfig(index_dir=str(index_dir))
    report = BuildReport()
    built = Index.build(demo_corpus_dir(), index_dir, config=cfg, report=report)
    out = io.StringIO()
    recorder = Console(file=out, width=WIDTH, no_color=True, highlight=False, force_terminal=False)
    saved, cli.console = cli.console, recorder
    try:
        recorder.print(cli.demo_header(report, built, index_dir, cfg.pipeline), markup=False, highlight=False)
        pipe = Pipeline(cfg, index=built, llm=FixedLLM())
        for q in DEMO_SHOWCASE:
            recorder.print()
            cli._print_answer(pipe.ask(q), None)
    finally:
        cli.console = saved
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"


def readme_transcript(readme: str) -> str:
    """The transcript README.md shows (between its markers, inside the ``text`` block)."""
    start, end = readme.index(START), readme.index(END)
    block = readme[start + len(START) : end]
    return block.split("```text\n", 1)[1].rsplit("```", 1)[0]


def write_readme(text: str, path: Path = README) -> None:
    readme = path.read_text(encoding="utf-8")
    start, end = readme.index(START), readme.index(END)
    path.write_text(readme[: start + len(START)] + "\n```text\n" + text + "```\n" + readme[end:], encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, default=None,
                        help="where to build the demo index (default: the one `ragsieve demo` builds)")
    parser.add_argument("--write", action="store_true", help="replace the transcript in README.md")
    args = parser.parse_args(argv)
    from ragsieve.console import default_demo_index

    text = transcript(args.index or default_demo_index())
    if args.write:
        write_readme(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
