#!/usr/bin/env bash
# The GPU benchmark in one command, for a machine with a real GPU (it also runs on lavapipe,
# slowly): a release build, the end-to-end correctness tests on this GPU (tiny random models
# against the CPU reference and the default model against the reference logits, both kernel
# families), then `kiln speed` on the default model and on a synthetic Llama-3-8B-shaped model
# (random f16 weights written by kiln's own model writer, ~16 GB in a temporary folder): decode
# tokens/s and the fraction of the bandwidth roofline at 1, 8, 32 and 64 sequences, prefill
# tokens/s at 512 and 4096 tokens. Tables on stdout, JSON in target/gpu-bench/.
#   scripts/gpu-bench.sh                    # everything
#   KILN_SYNTHETIC=none scripts/gpu-bench.sh   # the default model only (what lavapipe can do)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-model.sh
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"
out=target/gpu-bench
mkdir -p "$out"
cargo build --release -p kiln-cli
cargo test --release -p kiln-engine --test tiny_model --test smollm2 -- --test-threads 1
target/release/kiln info | tee "$out/adapter.txt"
echo "== default model"
target/release/kiln speed --json "$out/default.json" ${KILN_SPEED_ARGS:-}
synthetic="${KILN_SYNTHETIC:-llama3-8b}"
if [ "$synthetic" != none ]; then
  echo "== synthetic $synthetic"
  target/release/kiln speed --synthetic "$synthetic" --json "$out/$synthetic.json" ${KILN_SPEED_ARGS:-}
fi
echo "gpu-bench: JSON in $out/"
