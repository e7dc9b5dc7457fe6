#!/usr/bin/env bash
# Time to first token on a decode server for a long prompt whose KV arrives from a prefill
# server (prefill/decode split), against prefilling it there. Two `kiln serve` processes with
# the default model (--kv-role producer and consumer) on loopback; each timing is one
# request with max_tokens 1 and a fresh prompt (no prefix-cache hits).
# Usage: scripts/bench-pd.sh [prompt tokens, default 2000] [kiln binary, default release]
set -euo pipefail
cd "$(dirname "$0")/.."
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"
N="${1:-2000}"
KILN="${2:-}"
if [ -z "$KILN" ]; then
  cargo build --release -q -p kiln-cli
  KILN=target/release/kiln
fi
OUT=bench-results
mkdir -p "$OUT"
P=18441
D=18442
PIDS=()
start() {
  local port=$1; shift
  "$KILN" serve --port "$port" --max-model-len 4096 --kv-memory $((256 << 20)) "$@" >"$OUT/pd-$port.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && return 0
    sleep 0.5
  done
  cat "$OUT/pd-$port.log"; exit 1
}
trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT
start $P --kv-role producer
start $D --kv-role consumer --cpu-kv-bytes $((256 << 20))
python3 - "$N" "$P" "$D" <<'PY'
import json, sys, time, urllib.request
n, p, d = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
        data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    t = time.time()
    with urllib.request.urlopen(req, timeout=3600) as r:
        out = json.load(r)
    return time.time() - t, out
def prompt(tag):  # token ids, different per tag so nothing is cached
    return [100 + (i * 7919 + tag * 104729) % 40000 for i in range(n)]
greedy = {"max_tokens": 1, "temperature": 0}
local, r = post(d, {"prompt": prompt(1), **greedy})
pre, r = post(p, {"prompt": prompt(2), **greedy, "kv_transfer_params": {"do_remote_decode": True}})
params = r["kv_transfer_params"]
moved, r = post(d, {"prompt": prompt(2), **greedy, "kv_transfer_params": params})
cached = r["usage"]["prompt_tokens_details"]["cached_tokens"]
print(f"prompt {n} tokens: prefilled on the decode server {local:.2f} s; "
      f"prefill server {pre:.2f} s, then decode server with the KV transferred {moved:.2f} s "
      f"({cached} tokens arrived, {n - cached} prefilled there): {100 * moved / local:.1f}% of prefilling there")
PY
