#!/usr/bin/env bash
# The cooperative-matrix product (shaders/matmul_coop.wgsl) tested on a CPU: lavapipe from
# Mesa 26 offers VK_KHR_cooperative_matrix (8 x 8 x 8, f16 inputs, f32 accumulation), the
# system's Mesa 25 does not, so the test executables the main suite built run again on the
# newer lavapipe (scripts/fetch-lavapipe-coop.sh, run through its own glibc's loader):
# - the kernel suites, whose variants then include the kernel at 8 x 8 and 16 x 16
#   (KILN_EXPECT_COOPERATIVE_MATRIX makes them fail should the adapter not offer it);
# - the tiny models of every architecture against the CPU reference, and the default model
#   against the reference logits and greedy tokens, with the tiled family's products of 2 rows
#   or more on cooperative matrices (KILN_COOPERATIVE_MATRIX=1, KILN_MATVEC_MAX_ROWS=1).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(uname -m)" = x86_64 ] && command -v apt-get >/dev/null || {
  echo "test-cooperative: needs x86_64 Debian/Ubuntu (apt-get) to fetch Mesa 26; skipped" >&2
  exit 0
}
dir="$(scripts/fetch-lavapipe-coop.sh | tail -1)"
# The executables of the suites below, as the workspace's test build made them.
exes="$(cargo test --workspace --tests --no-run --message-format=json 2>/dev/null | python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        crate = os.path.basename(os.path.dirname(m["manifest_path"]))
        print(crate + "/" + m["target"]["name"], m["executable"])
')"
exe() {
  local e
  e="$(awk -v n="$1" '$1 == n { print $2 }' <<<"$exes")"
  [ -n "$e" ] || { echo "test-cooperative: no test executable $1" >&2; exit 1; }
  echo "$e"
}
on_mesa26() {
  VK_DRIVER_FILES="$dir/lvp_icd.json" WGPU_BACKEND=vulkan \
    "$dir/lib/ld-linux-x86-64.so.2" --library-path "$dir/lib" "$@"
}
for suite in kernels quant_kernels gated rotary; do
  echo "== $suite on cooperative matrices"
  KILN_EXPECT_COOPERATIVE_MATRIX=1 on_mesa26 "$(exe kiln-gpu/$suite)" --test-threads 1
done
echo "== tiny models and the default model on cooperative matrices"
export KILN_COOPERATIVE_MATRIX=1 KILN_MATVEC_MAX_ROWS=1
on_mesa26 "$(exe kiln-engine/tiny_model)" reference:: --test-threads 1
on_mesa26 "$(exe kiln-engine/smollm2)" last_logits_and_greedy_tokens_match_reference --test-threads 1 --nocapture
