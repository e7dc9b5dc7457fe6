#!/usr/bin/env bash
# The desktop app for the platforms this machine cannot run it on: `cargo check` for Windows
# (MSVC) and Apple Silicon macOS, and with --link-windows a linked Windows executable built
# with Debian's mingw-w64 in the `cross` profile (target/x86_64-pc-windows-gnu/cross/
# kiln-desktop.exe; Cargo.toml says why). A Mac build cannot be linked here (no Apple SDK).
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add x86_64-pc-windows-msvc aarch64-apple-darwin >/dev/null
# Both in one cargo run, which keeps two cores busier than one after the other.
echo "== cargo check -p kiln-desktop --target x86_64-pc-windows-msvc --target aarch64-apple-darwin"
cargo check -q -p kiln-desktop --target x86_64-pc-windows-msvc --target aarch64-apple-darwin
if [ "${1:-}" = --link-windows ]; then
  rustup target add x86_64-pc-windows-gnu >/dev/null
  command -v x86_64-w64-mingw32-gcc >/dev/null || {
    apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc-mingw-w64-x86-64-posix >/dev/null
  }
  echo "== cargo build -p kiln-desktop --target x86_64-pc-windows-gnu --profile cross"
  CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc \
    cargo build -q -p kiln-desktop --target x86_64-pc-windows-gnu --profile cross
  exe=target/x86_64-pc-windows-gnu/cross/kiln-desktop.exe
  file "$exe" 2>/dev/null || ls -la "$exe"
  head -c 2 "$exe" | grep -q MZ || { echo "$exe is not a Windows executable" >&2; exit 1; }
fi
