#!/usr/bin/env bash
# Installs what wmx's tour and tests need on a fresh Debian machine, skipping what
# is already there. Sourced by tour.sh and test.sh; `--browser` adds the test-only
# tools (chromium, chromedriver, the wasm32, Apple and Windows targets, wasm-bindgen-cli).
set -euo pipefail

need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }
sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Rust toolchain.
if ! have cargo; then
  [ -x "$HOME/.cargo/bin/cargo" ] || {
    have curl || need_apt+=(curl ca-certificates)
    if [ ${#need_apt[@]} -gt 0 ]; then sudo_ apt-get update -qq; sudo_ apt-get install -y -qq "${need_apt[@]}"; need_apt=(); fi
    curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c clippy,rustfmt
  }
  export PATH="$HOME/.cargo/bin:$PATH"
fi
have cc || need_apt+=(build-essential)
have pkg-config || need_apt+=(pkg-config)

# Mesa lavapipe: a real Vulkan driver on the CPU, so GPU tests run without a GPU.
ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || need_apt+=(mesa-vulkan-drivers)
ldconfig -p 2>/dev/null | grep -q libvulkan.so.1 || need_apt+=(libvulkan1)

if [ "${1:-}" = "--browser" ]; then
  have chromium || need_apt+=(chromium)
  have chromedriver || need_apt+=(chromium-driver)
  have python3 || need_apt+=(python3)  # the demo page's end-to-end test
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}"
  # apt on these machines can lose its temporary folder: give it a private one.
  export TMPDIR; TMPDIR=$(mktemp -d)
  sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive sudo_ -E apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if [ "${1:-}" = "--browser" ]; then
  # Apple and Windows cannot run here; test.sh type-checks them (Metal, DX12 paths).
  for t in aarch64-apple-darwin x86_64-pc-windows-msvc; do
    rustup target list --installed 2>/dev/null | grep -q "$t" || rustup target add "$t"
  done
  rustup target list --installed 2>/dev/null | grep -q wasm32-unknown-unknown \
    || rustup target add wasm32-unknown-unknown
  # wasm-bindgen-cli must match the wasm-bindgen version in Cargo.lock.
  want=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/"/,"",$3); print $3; exit}' Cargo.lock)
  got=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
  if [ -n "$want" ] && [ "$want" != "$got" ]; then
    echo "setup: installing wasm-bindgen-cli $want (a few minutes)"
    cargo install -q wasm-bindgen-cli --version "$want"
  fi
fi
