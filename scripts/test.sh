#!/usr/bin/env bash
# Every test of the project: formatting, lints, the unit and conformance suites on
# the CPU and on a real Vulkan driver (Mesa lavapipe when there is no GPU), docs,
# and the browser tests (wasm in headless Chromium on WebGPU, the demo page).
# A GPU test never skips: with no adapter it fails (set WMX_ALLOW_NO_GPU=1 to opt out).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh --browser
export PATH="$HOME/.cargo/bin:$PATH"
# The Vulkan loader warns without it; nothing here draws to a screen.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
export RUST_BACKTRACE=1

echo "== fmt";    cargo fmt --all -- --check
echo "== clippy"; cargo clippy --workspace --all-targets -q -- -D warnings
echo "== tests";  cargo test --workspace --all-targets
echo "== doctests"; cargo test --workspace --doc
echo "== type-check for Apple (Metal) and Windows (DX12)"
cargo check -q -p wmx --target aarch64-apple-darwin
cargo check -q -p wmx --target x86_64-pc-windows-msvc
web/test.sh          # wasm + headless Chromium WebGPU, the demo page
echo "== all tests passed"
