#!/usr/bin/env bash
# The main job: a tour of wmx doing real work on the best device found.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
source scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
# The Vulkan loader warns without it; nothing here draws to a screen.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
[ -x target/release/examples/tour ] || echo "tour: building in release (about 4 min the first time)"
cargo run -q --release --example tour "$@"
