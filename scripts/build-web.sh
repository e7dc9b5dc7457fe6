#!/usr/bin/env bash
# Builds the browser demo: kiln-web for wasm32 plus its wasm-bindgen JS glue into web-demo/pkg/.
# Installs what is missing (the wasm32 target, wasm-bindgen-cli at the exact version in
# Cargo.lock). Usage: scripts/build-web.sh [--release]
set -euo pipefail
cd "$(dirname "$0")/.."

profile=debug
cargo_flags=()
if [[ "${1:-}" == "--release" ]]; then
  profile=release
  cargo_flags+=(--release)
fi

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi

# The CLI must match the wasm-bindgen crate exactly.
want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
if [[ -z "$want" ]]; then
  echo "build-web: no wasm-bindgen in Cargo.lock" >&2
  exit 1
fi
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [[ "$have" != "$want" ]]; then
  echo "build-web: installing wasm-bindgen-cli $want (found: ${have:-none})" >&2
  # Not --locked: its lock file pins crates (webpki-roots 1.0.11) some registries do not serve.
  cargo install wasm-bindgen-cli --version "$want"
fi

cargo build -p kiln-web --lib --target wasm32-unknown-unknown "${cargo_flags[@]}"

rm -rf web-demo/pkg
wasm-bindgen --target web --out-dir web-demo/pkg --no-typescript \
  "${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/$profile/kiln_web.wasm"

# The demo's default model URL (models/...) resolves to the repo's models/ folder.
if [[ ! -e web-demo/models ]]; then
  ln -s ../models web-demo/models
fi
echo "build-web: web-demo/pkg is ready; serve it with: python3 -m http.server -d web-demo 8080" >&2
