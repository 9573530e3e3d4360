#!/usr/bin/env bash
# Builds the demo and serves it: open http://127.0.0.1:${PORT:-8000}/ in a browser
# with WebGPU (Chrome/Edge; Chromium on Linux: --enable-unsafe-webgpu). Without
# WebGPU the page falls back to wmx's CPU backend and says so.
set -euo pipefail
cd "$(dirname "$0")"
./build.sh
echo "serving web/www at http://127.0.0.1:${PORT:-8000}/ (Ctrl-C stops)"
exec python3 -m http.server "${PORT:-8000}" --bind 127.0.0.1 --directory www
