#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up, the default model, every Rust test (GPU
# tests run on whatever Vulkan device there is; lavapipe here), then the end-to-end suites.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/fetch-model.sh
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"
# lavapipe runs on the CPU: one GPU test at a time keeps each one fast.
cargo test --workspace --no-fail-fast -- --test-threads 1
for suite in scripts/test-openai.sh scripts/test-web.sh; do
  if [ -x "$suite" ]; then
    echo "== $suite"
    "$suite"
  fi
done
