#!/usr/bin/env bash
# The desktop app's Windows build, run: `cargo check` for Windows (MSVC) and macOS, then the
# x86_64-pc-windows-gnu executable linked with mingw-w64 (scripts/check-desktop-targets.sh),
# started under Wine on Xvfb, where wgpu's Vulkan backend reaches lavapipe through Wine's
# Vulkan. It runs the same scripted chat as scripts/test-desktop.sh (open the default model,
# send a message, greedy reply, screenshot) and its reply must equal the Linux build's, character
# for character. Not a Windows machine: the Win32 and Vulkan calls are Wine's. wgpu's DX12
# backend does not run under Wine 8 (its shader compiler, vkd3d's, refuses the shaders).
#   scripts/test-desktop-windows.sh      picture: target/desktop-window-windows.png
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/check-desktop-targets.sh --link-windows
command -v wine >/dev/null || {
  apt-get update -qq && apt-get install -y -qq --no-install-recommends wine wine64 >/dev/null
}
# Wine 8 has no bcryptprimitives.dll, whose ProcessPrng Rust's standard library imports on
# Windows: a stand-in DLL beside the executable forwards it to BCryptGenRandom. The prefix is
# made by the app's own first start, under Xvfb (a wine process started without a display
# leaves a desktop behind that later windows hang on).
export WINEPREFIX="$PWD/target/wine" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
wineserver -k 2>/dev/null || true
shim=target/wine-shim
mkdir -p "$shim"
cat > "$shim/bcryptprimitives.c" <<'C'
#include <windows.h>
#include <bcrypt.h>
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    return BCryptGenRandom(NULL, data, (ULONG)len, BCRYPT_USE_SYSTEM_PREFERRED_RNG) == 0;
}
C
# The build scripts/check-desktop-targets.sh has just linked.
build=target/x86_64-pc-windows-gnu/cross
x86_64-w64-mingw32-gcc -shared -O2 -o "$build/bcryptprimitives.dll" \
  "$shim/bcryptprimitives.c" -lbcrypt
# The Linux build's reply to compare with (scripts/test.sh has just made it).
native=target/desktop-window.reply.txt
[ -f "$native" ] || scripts/test-desktop.sh
out=target/desktop-window-windows.png
KILN_DESKTOP_EXE="wine $build/kiln-desktop.exe" KILN_DESKTOP_ANY_SIZE=1 \
  scripts/test-desktop.sh "$out"
if ! cmp -s "$native" "${out%.png}.reply.txt"; then
  echo "test-desktop-windows: the Windows build's reply differs from the Linux build's:" >&2
  diff "$native" "${out%.png}.reply.txt" >&2 || true
  exit 1
fi
echo "test-desktop-windows: the Windows build's greedy reply equals the Linux build's ($(wc -c <"$native") bytes)"
