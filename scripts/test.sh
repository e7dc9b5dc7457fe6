#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up, the default model, every Rust test (GPU
# tests run on whatever Vulkan device there is; lavapipe here), then the cooperative-matrix
# kernel on a newer lavapipe that has them (fetched, not installed), the end-to-end suites:
# the official OpenAI Python client against `kiln serve`, and the browser demo in headless
# Chromium against the native engine; the desktop app (its window under Xvfb, `cargo check`
# for Windows and macOS, and the linked Windows build's window under Wine); and the
# Kubernetes files under deploy/, offline.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's seconds, printed at the end (the CI budget: README's test section).
times=()
timed() {
  local start=$SECONDS
  "$@"
  times+=("$(( SECONDS - start )) s  $*")
}
timed scripts/setup.sh
timed scripts/fetch-model.sh
timed scripts/fetch-model.sh gemma3
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"
mkdir -p target
# Every binary and example the suites below run, built once with the features the tests
# resolve: a `cargo build -p` of one package resolves its dependencies' features differently
# and would build much of the tree again (KILN_BUILT tells the suites not to).
timed cargo build --workspace --bins --examples
export KILN_BUILT=1
# lavapipe runs on the CPU: one GPU test at a time keeps each one fast.
start=$SECONDS
cargo test --workspace --no-fail-fast --lib --bins --tests -- --test-threads 1 2>&1 | tee target/cargo-test.log
times+=("$(( SECONDS - start )) s  cargo test --workspace")
read -r passed failed < <(awk '/^test result:/ { p += $4; f += $6 } END { print p + 0, f + 0 }' target/cargo-test.log)
for suite in scripts/test-cooperative.sh scripts/test-openai.sh scripts/test-web.sh scripts/test-desktop.sh scripts/test-desktop-windows.sh scripts/check-deploy.sh; do
  echo "== $suite"
  timed "$suite"
done
printf '%s\n' "== seconds per phase" "${times[@]}"
echo "kiln: $passed passed, $failed failed; target/ holds $(du -sh target | cut -f1)"
