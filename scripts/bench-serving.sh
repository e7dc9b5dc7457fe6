#!/usr/bin/env bash
# The serving benchmark behind BENCHMARKS.md: `kiln serve` (release) with the default model,
# driven by `kiln bench` over the OpenAI API. Results land in bench-results/*.json.
# Usage: scripts/bench-serving.sh [quick]
set -euo pipefail
cd "$(dirname "$0")/.."
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"
cargo build --release -q -p kiln-cli
KILN=target/release/kiln
OUT=bench-results
mkdir -p "$OUT"
PORT=18431

source scripts/server-lifecycle.sh
start() {
  start_server "$OUT/serve.log" "$PORT" "$KILN" serve --port "$PORT" --kv-memory $((512 << 20)) \
    --cpu-kv-bytes $((256 << 20)) "$@"
}
stop() { stop_server; }
bench() { "$KILN" bench --base-url "http://127.0.0.1:$PORT" "$@"; }

# Continuous against static batching: prefix caching off and fresh prompts (a seed per run), so
# batching is all that differs.
start --no-prefix-caching
for c in 1 4 16; do
  bench --num-prompts $((c * 2)) --concurrency "$c" --input-len 64 --output-len 48 --output-len-min 4 --seed "$c" --json "$OUT/continuous-c$c.json"
  bench --num-prompts $((c * 2)) --concurrency "$c" --input-len 64 --output-len 48 --output-len-min 4 --seed "$c" --static-batch --json "$OUT/static-c$c.json"
done
stop
start
bench --workload agent --sessions 4 --turns 5 --tool-result-len 48 --output-len 16 --json "$OUT/agent-prefix-on.json"
stop
start --no-prefix-caching
bench --workload agent --sessions 4 --turns 5 --tool-result-len 48 --output-len 16 --json "$OUT/agent-prefix-off.json"
stop
echo "results in $OUT/"
