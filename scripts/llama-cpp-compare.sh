#!/usr/bin/env bash
# kiln against llama.cpp on files made by llama.cpp's quantizer: Q4_K_M, Q5_K_M, Q6_K and Q8_0
# versions of the default model (requantized from its Q4_1 file), with llama.cpp itself (the
# PyPI package llama-cpp-python, built from source: about 15 minutes on 2 cores, once) as the
# reference. Greedy tokens must match for 16 tokens on every reference prompt, and the
# teacher-forced top-1 agreement over 64 positions must be at least 95%. Not part of
# scripts/test.sh (the llama.cpp build would double CI's time); the figures are in
# BENCHMARKS.md. Also a GGUF LoRA adapter (random, written by the `gguf` package) on an F32
# version of the model, kiln against llama.cpp through it (scripts/llama_cpp_lora.py).
# Files and JSON in target/llama-cpp/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-model.sh
venv="${KILN_CACHE:-$HOME/.cache/kiln}/llama-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import llama_cpp' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet numpy llama-cpp-python==0.3.16
fi
"$venv/bin/python" -c 'import gguf' 2>/dev/null || "$venv/bin/pip" install --quiet gguf
"$venv/bin/python" scripts/llama_cpp_reference.py models/SmolLM2-135M-Instruct.Q4_1.gguf \
  target/llama-cpp tests/reference/smollm2-135m-instruct.json
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}" KILN_LLAMA_CPP_DIR="$PWD/target/llama-cpp"
"$venv/bin/python" scripts/llama_cpp_lora.py models/SmolLM2-135M-Instruct.Q4_1.gguf \
  target/llama-cpp tests/reference/smollm2-135m-instruct.json
cargo test -p kiln-engine --test llama_cpp --test llama_cpp_lora -- --ignored --nocapture
