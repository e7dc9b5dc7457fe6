#!/usr/bin/env bash
# kiln against llama.cpp's llama-server on this machine: the same model file (the default
# SmolLM2-135M-Instruct Q4_1 GGUF), the same client (`kiln bench`, greedy, streaming, over the
# OpenAI API) and the same three workloads on each server:
#   decode    one stream at a time, 64-word prompts, 128 tokens each: tokens/s = 1 / TPOT
#   prefill   one 512-word prompt at a time, 1 token out: prompt tokens / time to first token
#   8 streams 16 requests, 8 in flight (llama-server with 8 slots, -np 8), 64-word prompts,
#             128 tokens each: output tokens/s over the run
# Each workload's shapes run once untimed first. llama-server is built once, with its Vulkan
# backend, from the llama.cpp sources inside PyPI's llama-cpp-python 0.3.16 sdist (checksum
# verified), into ~/.cache/kiln/llama-server (about 12 minutes on 2 cores; needs cmake, glslc
# and libvulkan-dev from Debian, which this script installs with apt-get when missing).
# By default both servers run on the same Vulkan device (lavapipe here); --llama-cpu runs
# llama-server on its CPU backend instead. Not part of scripts/test.sh; the figures go in
# BENCHMARKS.md. JSON in bench-results/vs-llama-server/.
# Usage: scripts/bench-llama-server.sh [--kiln-only | --llama-only] [--llama-cpu]
set -euo pipefail
cd "$(dirname "$0")/.."
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"
run_kiln=1 run_llama=1 llama_name=llama-server llama_env=(GGML_VK_VISIBLE_DEVICES=0)
for arg in "$@"; do
  case "$arg" in
    --kiln-only) run_llama=0 ;;
    --llama-only) run_kiln=0 ;;
    # Without a named device llama.cpp's Vulkan backend passes over CPU devices such as
    # lavapipe, and runs on its CPU backend.
    --llama-cpu) llama_name=llama-server-cpu llama_env=() ;;
    *) echo "usage: $0 [--kiln-only | --llama-only] [--llama-cpu]" >&2; exit 2 ;;
  esac
done
CACHE="${KILN_CACHE:-$HOME/.cache/kiln}"
LLAMA="$CACHE/llama-server/llama-server"
SDIST=llama_cpp_python-0.3.16.tar.gz
SDIST_SHA=34ed0f9bd9431af045bb63d9324ae620ad0536653740e9bb163a2e1fcb973be6
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
OUT=bench-results/vs-llama-server
PORT=18432

scripts/fetch-model.sh
cargo build --release -q -p kiln-cli
KILN=target/release/kiln
mkdir -p "$OUT"

build_llama_server() {
  for tool in cmake glslc; do
    command -v "$tool" >/dev/null || apt-get install -y -q cmake glslc libvulkan-dev >/dev/null
  done
  [ -f /usr/include/vulkan/vulkan.h ] || apt-get install -y -q libvulkan-dev >/dev/null
  local src="$CACHE/llama-server-src"
  mkdir -p "$src"
  if [ ! -f "$src/$SDIST" ]; then
    local href
    href=$(curl -fsS https://pypi.org/simple/llama-cpp-python/ | grep -o "href=\"[^\"]*$SDIST[^\"]*\"" | head -1 | cut -d'"' -f2)
    curl -fsSL -o "$src/$SDIST" "$href"
  fi
  echo "$SDIST_SHA  $src/$SDIST" | sha256sum -c --quiet
  tar -xzf "$src/$SDIST" -C "$src"
  local tree="$src/${SDIST%.tar.gz}/vendor/llama.cpp"
  cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=Release -DGGML_VULKAN=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON >/dev/null
  cmake --build "$tree/build" --target llama-server -j"$(nproc)" >/dev/null
  mkdir -p "$(dirname "$LLAMA")"
  cp "$tree"/build/bin/llama-server "$tree"/build/bin/*.so* "$(dirname "$LLAMA")/" 2>/dev/null ||
    cp "$tree"/build/bin/llama-server "$(dirname "$LLAMA")/"
}

source scripts/server-lifecycle.sh

workloads() { # name
  local b=("$KILN" bench --base-url "http://127.0.0.1:$PORT")
  # Every workload's shapes once untimed: llama.cpp compiles its Vulkan pipelines on first use
  # (minutes for some on lavapipe; Mesa's shader cache keeps them for the next run).
  "${b[@]}" --num-prompts 1 --concurrency 1 --seed 1 --input-len 64 --output-len 4 >/dev/null
  "${b[@]}" --num-prompts 1 --concurrency 1 --seed 2 --input-len 512 --output-len 1 >/dev/null
  "${b[@]}" --num-prompts 8 --concurrency 8 --seed 3 --input-len 64 --output-len 4 >/dev/null
  "${b[@]}" --num-prompts 2 --concurrency 1 --seed 7 --input-len 64 --output-len 128 --json "$OUT/$1-decode.json"
  "${b[@]}" --num-prompts 2 --concurrency 1 --seed 7 --input-len 512 --output-len 1 --json "$OUT/$1-prefill.json"
  "${b[@]}" --num-prompts 16 --concurrency 8 --seed 7 --input-len 64 --output-len 128 --json "$OUT/$1-streams8.json"
}

if [ "$run_kiln" = 1 ]; then
  start_server "$OUT/kiln-server.log" "$PORT" "$KILN" serve --model "$MODEL" --port "$PORT"
  workloads kiln
  stop_server
fi
if [ "$run_llama" = 1 ]; then
  [ -x "$LLAMA" ] || build_llama_server
  start_server "$OUT/$llama_name-server.log" "$PORT" \
    env LD_LIBRARY_PATH="$(dirname "$LLAMA")" "${llama_env[@]}" \
    "$LLAMA" -m "$MODEL" -ngl 99 -np 8 -c 8192 --port "$PORT"
  workloads "$llama_name"
  stop_server
fi

python3 - "$OUT" <<'EOF'
import json, sys, os
out = sys.argv[1]
def load(name, w):
    p = f"{out}/{name}-{w}.json"
    return json.load(open(p)) if os.path.exists(p) else None
def figures(name):
    d, p, s = (load(name, w) for w in ("decode", "prefill", "streams8"))
    if not (d and p and s):
        return None
    # Prefill: the prompt's tokens as kiln counted them (the same words and tokenizer on both).
    kp = load("kiln", "prefill")
    tokens = (kp or p)["prompt_tokens"] / (kp or p)["succeeded"]
    return {
        "decode": 1e3 / d["tpot"]["mean_ms"],
        "prefill": tokens / (p["ttft"]["mean_ms"] / 1e3),
        "streams8": s["output_token_throughput"],
    }
k = figures("kiln")
for peer in ("llama-server", "llama-server-cpu"):
    l = figures(peer)
    if not l:
        continue
    print(f"{'tokens/s':<12}{'kiln':>10}{peer:>18}{'kiln / peer':>13}")
    for key in ("decode", "prefill", "streams8"):
        kv = k[key] if k else float("nan")
        print(f"{key:<12}{kv:>10.1f}{l[key]:>18.1f}{kv / l[key]:>13.2f}")
EOF
