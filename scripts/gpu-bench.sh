#!/usr/bin/env bash
# The GPU benchmark in one command, for a machine with a real GPU (it also runs on lavapipe,
# slowly): a release build, the correctness tests on this GPU (every kernel against its CPU
# reference, tiny random models against the CPU reference, and the default model against the
# reference logits, both kernel families), then `kiln speed` on the default model and on
# synthetic Llama-3.2-1B- and Llama-3-8B-shaped models (random f16 weights written by kiln's own
# model writer, 2.5 and 16 GB): decode tokens/s and the fraction of the bandwidth roofline at 1,
# 8, 32 and 64 sequences, prefill tokens/s at 512 and 4096 tokens, and the device time per
# operation (`--profile`) of the default model and the 8B shapes at 1 and 32 sequences; where
# the device offers cooperative matrices, the tiny models and the 8B shapes again with products
# of many rows on them (KILN_COOPERATIVE_MATRIX=1, `matmul_coop.wgsl`); then
# the 8B shapes kept quantized (KILN_SYNTHETIC_TYPES, default "q4_k q8_0", empty for none), and
# kernel variants set through the environment against the defaults (KILN_VARIANTS, `;`-separated, e.g.
# "KILN_MATVEC_WORKGROUP=64;KILN_WIDE_LOADS=;KILN_UNBOUNDED_LOOPS=" on the f16 8B). On an H200
# the whole run without variants took about 7 minutes (2026-12-04), each variant about 40 s;
# the cooperative-matrix runs add about 2 minutes (estimated), so to stay within a 10-minute
# call: KILN_SYNTHETIC=llama3-8b KILN_SYNTHETIC_TYPES= DIR/gpu-bench.sh
# Tables on stdout, JSON in target/gpu-bench/ (or $OUT where that is set).
#   scripts/gpu-bench.sh                       # everything, built here
#   KILN_SYNTHETIC=none scripts/gpu-bench.sh   # the default model only (what lavapipe can do)
#   scripts/gpu-bench.sh --pack DIR            # only build: the binaries and this script into DIR,
#                                              # for a GPU machine without Rust or a network
#   DIR/gpu-bench.sh                           # there: the packed binaries (no default-model
#                                              # test; its speed only if models/ is beside DIR)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"
synthetic="${KILN_SYNTHETIC:-llama3.2-1b llama3-8b}"
[ "$synthetic" = none ] && synthetic=""

build() { # the release binaries: kiln and the GPU test executables, printed as paths
  (cd "$here/.." &&
    cargo build --release --workspace --bin kiln >&2 &&
    cargo test --release --workspace --no-run --test kernels --test quant_kernels \
      --test tiny_model --test smollm2 2>&1 >&2 | tee /dev/stderr |
      sed -n 's/.*Executable tests\/\([a-z_0-9]*\)\(\/main\)\{0,1\}\.rs (\(.*\))/\1 \3/p')
}

if [ "${1:-}" = --pack ]; then
  dir="${2:?usage: gpu-bench.sh --pack DIR}"
  mkdir -p "$dir"
  cd "$here/.."
  export CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=true # small enough to carry
  build | while read -r name path; do cp "$path" "$dir/$name"; done
  cp target/release/kiln "$here/gpu-bench.sh" "$dir/"
  echo "packed into $dir: $(ls "$dir" | tr '\n' ' ')"
  exit 0
fi

if [ -x "$here/kiln" ]; then # packed: the binaries are beside this script
  bin="$here"
  cd "$here/.."
  out="${OUT:-gpu-bench}"
  tests=(kernels quant_kernels tiny_model) # smollm2 reads files at the build machine's paths
  run_test() { "$bin/$1" --test-threads 4 "${@:2}"; }
else
  cd "$here/.."
  scripts/fetch-model.sh
  bin=target/release
  out="${OUT:-target/gpu-bench}"
  build >/dev/null
  tests=(kernels quant_kernels tiny_model smollm2)
  run_test() { cargo test --release --workspace --test "$1" -- --test-threads 4 "${@:2}"; }
fi
mkdir -p "$out"
failed=()
for t in "${tests[@]}"; do # a failing suite is reported at the end; the timings still run
  echo "== test $t"
  run_test "$t" || failed+=("$t")
done
"$bin/kiln" info | tee "$out/adapter.txt"
# Where the device has cooperative matrices, the kernel tests above ran matmul_coop.wgsl
# already; the models run again with it taking every product of 2 rows or more.
coop=""
if grep -q 'matrices:  cooperative' "$out/adapter.txt"; then
  coop=1
  # (the reference tests: those comparing a batch with each request alone would see the f16
  # inputs of a batch's products against the f32 ones of a single row's)
  echo "== test tiny_model on cooperative matrices"
  KILN_COOPERATIVE_MATRIX=1 KILN_MATVEC_MAX_ROWS=1 run_test tiny_model reference:: ||
    failed+=("tiny_model (coop)")
fi
if [ -f models/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
  echo "== default model"
  "$bin/kiln" speed --json "$out/default.json" ${KILN_SPEED_ARGS:-}
  echo "== default model, where the device time goes"
  "$bin/kiln" speed --profile --concurrency 1,32 --prompt-lens 512 --json "$out/default-profile.json"
fi
# The synthetic models are written once to a folder each (`--synthetic-dir`) and read again.
tmp="${TMPDIR:-/tmp}"
speed() { # speed NAME SHAPES ARGS...: one `kiln speed` run, its JSON as $out/NAME.json
  local name="$1" shapes="$2"
  shift 2
  echo "== $name"
  "$bin/kiln" speed --synthetic "$shapes" --synthetic-dir "$tmp/kiln-synthetic-$shapes" \
    --json "$out/$name.json" "$@"
}
for s in $synthetic; do
  speed "$s" "$s" ${KILN_SPEED_ARGS:-}
done
if [[ " $synthetic " == *" llama3-8b "* ]]; then
  # Where the 8B step's device time goes, and the same shapes kept quantized (issue 9).
  speed llama3-8b-profile llama3-8b --profile --concurrency 1,32 --prompt-lens 512
  if [ -n "$coop" ]; then # prefill, and 32 sequences with and without the matvec kernel
    (export KILN_COOPERATIVE_MATRIX=1 &&
      speed llama3-8b-coop llama3-8b --concurrency 1,8,32,64 --prompt-lens 512,4096 &&
      KILN_MATVEC_MAX_ROWS=8 speed llama3-8b-coop-matvec8 llama3-8b --concurrency 32,64 \
        --prompt-lens 512 --decode-steps 16 &&
      speed llama3-8b-coop-profile llama3-8b --profile --concurrency 32 --prompt-lens 512 \
        --decode-steps 8) || failed+=("cooperative-matrix timings")
  fi
  for t in ${KILN_SYNTHETIC_TYPES-q4_k q8_0}; do
    speed "llama3-8b-$t" llama3-8b --synthetic-type "$t" --concurrency 1,8,32 --prompt-lens 512
  done
  # Kernel variants against the defaults, for tuning: VARIANT=env settings, `;`-separated.
  IFS=';' read -ra variants <<<"${KILN_VARIANTS:-}"
  for v in "${variants[@]}"; do
    name="llama3-8b-$(echo "$v" | tr -c 'A-Za-z0-9=_-' _)"
    (export $v && speed "$name" llama3-8b --concurrency 1,32 --prompt-lens 512 --decode-steps 16)
  done
fi
echo "gpu-bench: JSON in $out/"
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-bench: test suites FAILED on this device: ${failed[*]}"
  exit 1
fi
