#!/usr/bin/env bash
# kiln against llama.cpp on files made by llama.cpp's quantizer: Q4_K_M, Q5_K_M, Q6_K, Q8_0,
# Q3_K_M, Q2_K, IQ4_XS and IQ4_NL versions of the default model (requantized from its Q4_1
# file; and an MXFP4 one by the `gguf` package's quantizer), with llama.cpp itself (the
# PyPI package llama-cpp-python, built from source: about 15 minutes on 2 cores, once) as the
# reference. Not part of scripts/test.sh (the llama.cpp build would double CI's time); the
# figures are in BENCHMARKS.md. Also a GGUF LoRA adapter (random, written by the `gguf`
# package) on an F32 version of the model, kiln against llama.cpp through it
# (scripts/llama_cpp_lora.py). Files and JSON in target/llama-cpp/.
#
# `--vulkan`: llama.cpp built with its Vulkan backend (needs cmake, glslc and the Vulkan
# headers: Debian's cmake, glslc and libvulkan-dev; about 25 minutes on 2 cores), run on the
# first Vulkan device (lavapipe here) in f32, with an f32 KV cache: arithmetic that computes
# what the files hold, against which kiln must meet issue 9's bar (greedy tokens equal for 16
# tokens on every reference prompt, teacher-forced top-1 agreement of 95% over 64 positions).
# Files and JSON in target/llama-cpp-vulkan/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-model.sh
cache="${KILN_CACHE:-$HOME/.cache/kiln}"
if [ "${1:-}" = --vulkan ]; then
  backend=vulkan-f32 venv="$cache/llama-vk-venv" out=target/llama-cpp-vulkan
  export CMAKE_ARGS="-DGGML_VULKAN=on"
else
  backend=cpu venv="$cache/llama-venv" out=target/llama-cpp
fi
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import llama_cpp' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --no-cache-dir numpy llama-cpp-python==0.3.16
fi
"$venv/bin/python" -c 'import gguf' 2>/dev/null || "$venv/bin/pip" install --quiet gguf
"$venv/bin/python" scripts/llama_cpp_reference.py models/SmolLM2-135M-Instruct.Q4_1.gguf \
  "$out" tests/reference/smollm2-135m-instruct.json "$backend"
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}" KILN_LLAMA_CPP_DIR="$PWD/$out"
tests=(--test llama_cpp)
if [ "$backend" = cpu ]; then
  "$venv/bin/python" scripts/llama_cpp_lora.py models/SmolLM2-135M-Instruct.Q4_1.gguf \
    "$out" tests/reference/smollm2-135m-instruct.json
  tests+=(--test llama_cpp_lora)
fi
cargo test -p kiln-engine "${tests[@]}" -- --ignored --nocapture
