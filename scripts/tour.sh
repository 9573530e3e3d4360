#!/usr/bin/env bash
# The main job: a tour of wmx doing real work on the best device found.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo run --release --example tour "$@"
