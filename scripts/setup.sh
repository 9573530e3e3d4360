#!/usr/bin/env bash
# Installs what wmx's tour and tests need on a fresh Debian machine, skipping what is
# already there, using sudo when not root. Sourced by tour.sh and test.sh.
#   --test            also the test-only tools: chromium, chromedriver, shellcheck, npm,
#                     python3, the wasm32/Apple/Windows std targets, wasm-bindgen-cli
#   WMX_SETUP_ALL=1   run every install step for the full list even when everything is
#                     present (CI does, so that a broken install line fails CI; installing
#                     what is installed is a no-op). scripts/test-setup.sh checks the
#                     command lines of every branch, root and non-root, against stubs.
set -euo pipefail

setup_test=0
[ "${1:-}" = "--test" ] && setup_test=1
setup_all="${WMX_SETUP_ALL:-0}"
need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }
# A Debian package counts as present only when dpkg has it fully installed.
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
want_cmd() { { [ "$setup_all" = 1 ] || ! have "$1"; } && need_apt+=("$2"); return 0; }
want_pkg() { { [ "$setup_all" = 1 ] || ! have_pkg "$1"; } && need_apt+=("$1"); return 0; }
say() { echo "setup: $*"; }
# Root runs the command itself; anyone else through sudo. Every argument is a command
# word, so environment settings go through `env` (works the same either way).
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif have sudo; then sudo "$@"
  else echo "setup: need root or sudo to run: $*" >&2; return 1
  fi
}
apt_install() {
  say "installing ${*} with apt (about 1-3 min on a fresh machine)"
  # apt on these machines can lose its temporary folder: give it a private one.
  local tmp; tmp=$(mktemp -d)
  as_root env TMPDIR="$tmp" apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive TMPDIR="$tmp" \
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  rm -rf "$tmp"
}

# Rust toolchain, by rustup (the installer sh.rustup.rs serves, from its source URL).
install_rust() {
  curl -sSf https://static.rust-lang.org/rustup/rustup-init.sh \
    | sh -s -- -y --no-modify-path --profile minimal -c clippy,rustfmt "$@"
}
if ! have cargo && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  have curl || apt_install curl ca-certificates
  say "installing Rust with rustup (about 1 min)"
  install_rust
fi
export PATH="$HOME/.cargo/bin:$PATH"

# WMX_SETUP_ALL also checks the Rust installer below, which needs curl.
if [ "$setup_all" = 1 ]; then need_apt+=(curl ca-certificates); fi
want_cmd cc build-essential
want_cmd pkg-config pkg-config
# Mesa lavapipe: a real Vulkan driver on the CPU, so GPU code runs without a GPU.
want_pkg mesa-vulkan-drivers
want_pkg libvulkan1
if [ "$setup_test" = 1 ]; then
  want_cmd chromium chromium
  want_cmd chromedriver chromium-driver
  want_cmd shellcheck shellcheck
  want_cmd python3 python3  # the demo page's end-to-end test
  # wmx::distributed's tests run under mpirun: Open MPI, and clang for the MPI
  # binding's generated bindings (libclang and its headers).
  want_cmd mpirun openmpi-bin
  want_pkg libopenmpi-dev
  want_cmd clang clang
  # npm: the JS package's test (npm install; TypeScript from the npm registry). A
  # Node.js that brings its own npm (nodesource's conflicts with Debian's npm
  # package) counts as present, even with WMX_SETUP_ALL.
  if ! have npm || { [ "$setup_all" = 1 ] && have_pkg npm; }; then need_apt+=(npm); fi
fi
if [ ${#need_apt[@]} -gt 0 ]; then apt_install "${need_apt[@]}"; fi
if [ "$setup_all" = 1 ]; then
  # The installer above, into a throw-away home and without a toolchain.
  say "checking the Rust installer (WMX_SETUP_ALL=1)"
  rust_tmp=$(mktemp -d)
  CARGO_HOME="$rust_tmp/cargo" RUSTUP_HOME="$rust_tmp/rustup" \
    install_rust --default-toolchain none -q >/dev/null
  rm -rf "$rust_tmp"
fi

if [ "$setup_test" = 1 ]; then
  # Apple and Windows cannot run here; test.sh type-checks them (Metal, DX12 paths).
  # Read the list first: `rustup … | grep -q` can fail under pipefail (SIGPIPE).
  installed=$(rustup target list --installed 2>/dev/null || true)
  for t in wasm32-unknown-unknown aarch64-apple-darwin x86_64-pc-windows-msvc; do
    if [ "$setup_all" = 1 ] || ! grep -qx "$t" <<<"$installed"; then
      say "adding the Rust std for $t (about 20 s)"
      rustup target add "$t"
    fi
  done
  # wasm-bindgen-cli must match the wasm-bindgen version in Cargo.lock.
  want=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/"/,"",$3); print $3; exit}' Cargo.lock)
  got=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
  if [ -z "$want" ]; then
    echo "setup: no wasm-bindgen version in Cargo.lock" >&2; exit 1
  elif [ "$want" != "$got" ]; then
    say "building wasm-bindgen-cli $want from source (about 3-6 min, once)"
    cargo install -q wasm-bindgen-cli --version "$want"
  elif [ "$setup_all" = 1 ]; then
    say "checking the wasm-bindgen-cli install line (WMX_SETUP_ALL=1)"
    cargo install -q wasm-bindgen-cli --version "$want"
  fi
fi
say "ready"
