#!/usr/bin/env bash
# Installs what kiln needs on a fresh Debian/Ubuntu machine: a Vulkan driver (Mesa's lavapipe,
# from bookworm-backports on Debian 12, where it runs compute about twice as fast as 22.3),
# the Vulkan loader and tools, Python's venv for the OpenAI-client tests, tmux for the
# terminal-chat test, and a CJK font with fontconfig for the desktop app's font-fallback test.
set -euo pipefail

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if command -v apt-get >/dev/null; then
  if grep -q 'VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null \
     && ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo 'deb http://deb.debian.org/debian bookworm-backports main' | $SUDO tee /etc/apt/sources.list.d/backports.list >/dev/null
  fi
  $SUDO apt-get update -qq
  if grep -q 'VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers libvulkan1 vulkan-tools >/dev/null
  else
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers libvulkan1 vulkan-tools >/dev/null
  fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv unzip tmux xvfb fontconfig fonts-droid-fallback >/dev/null || true
fi
command -v cargo >/dev/null || { echo "cargo not found: install Rust from https://rustup.rs" >&2; exit 1; }
echo "setup: Vulkan driver and tools installed"
