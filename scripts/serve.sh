#!/usr/bin/env bash
# The main job on a fresh machine: set-up, the default model, then `kiln serve` on
# http://127.0.0.1:8000 (OpenAI-compatible). Extra arguments go to `kiln serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/fetch-model.sh
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"
exec cargo run --release -p kiln-cli --bin kiln -- serve "$@"
