#!/usr/bin/env bash
# Runs tests/openai_client.py and tests/anthropic_client.py (the official `openai` and
# `anthropic` Python clients) against `kiln serve` with
# the default model: makes a venv, builds kiln, starts the server on a free loopback port,
# waits for /health, runs pytest, and stops the server.
set -euo pipefail
cd "$(dirname "$0")/.."
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"

VENV="${KILN_VENV:-target/openai-venv}"
if [ ! -x "$VENV/bin/pytest" ] || ! "$VENV/bin/python" -c "import openai, anthropic" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  "$VENV/bin/pip" install --quiet openai anthropic pytest
fi

# scripts/test.sh sets KILN_BUILT (it has built the workspace's binaries already).
[ "${KILN_BUILT:-0}" = 1 ] || cargo build -p kiln-cli
PORT="$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
KEY="kiln-test-$RANDOM"
LOG="target/test-openai-server.log"
target/debug/kiln serve --host 127.0.0.1 --port "$PORT" --api-key "$KEY" --kv-memory $((64 << 20)) >"$LOG" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT

for _ in $(seq 1 300); do
  if curl -fs "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$SERVER" 2>/dev/null; then echo "kiln serve exited:"; cat "$LOG"; exit 1; fi
  sleep 1
done
curl -fs "http://127.0.0.1:$PORT/health" >/dev/null || { echo "kiln serve did not become healthy:"; cat "$LOG"; exit 1; }

KILN_BASE_URL="http://127.0.0.1:$PORT/v1" KILN_API_KEY="$KEY" "$VENV/bin/pytest" -q tests/openai_client.py tests/anthropic_client.py "$@" || {
  status=$?; echo "--- server log ---"; tail -50 "$LOG"; exit $status;
}
