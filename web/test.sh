#!/usr/bin/env bash
# The browser tests (scripts/test.sh runs them; `scripts/setup.sh --test`
# installs what they need):
#  1. clippy on the wasm32 code (native clippy does not see it);
#  2. wasm-bindgen-test tests in headless Chromium on its WebGPU adapter
#     (chromedriver, --enable-unsafe-webgpu from web/webdriver.json), checked
#     against f64 references;
#     and, as a negative control, the same test fails in a browser without WebGPU;
#  3. the demo page built by web/build.sh, served by a static file server and
#     checked through WebDriver, with a screenshot (target/web/demo.png) and the
#     negative control (no --enable-unsafe-webgpu: the page reports the CPU fallback).
#  4. the npm package (web/pack.sh): installed into a fresh project with npm, its
#     types checked by tsc on a TypeScript example (and a file of bad calls that
#     must fail), the example run in Chromium on WebGPU and on the CPU backend.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
CHROMEDRIVER="${CHROMEDRIVER:-$(command -v chromedriver || echo /usr/bin/chromedriver)}"
export CHROMEDRIVER
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-300}"
# Release everywhere, so the tests and the demo share one build of the dependencies.
echo "== web: clippy (wasm32; first run about 2 min) [$(date +%H:%M:%S)]"
cargo clippy --release --target wasm32-unknown-unknown -p wmx-web --all-targets -q -- -D warnings
echo "== web: wasm-bindgen tests in headless Chromium (WebGPU; about 4 min) [$(date +%H:%M:%S)]"
cargo test --release --target wasm32-unknown-unknown -p wmx-web
echo "== web: negative control: without --enable-unsafe-webgpu the WebGPU test must fail"
nogpu=$(mktemp -d)
echo '{"goog:chromeOptions": {"args": ["--no-sandbox", "--disable-dev-shm-usage"]}}' > "$nogpu/webdriver.json"
if WASM_BINDGEN_TEST_WEBDRIVER_JSON="$nogpu/webdriver.json" cargo test --release \
    --target wasm32-unknown-unknown -p wmx-web -- init_chooses_browser_webgpu > "$nogpu/log" 2>&1; then
  echo "the WebGPU test passed in a browser without WebGPU" >&2; exit 1
fi
grep -q "auto must pick WebGPU here" "$nogpu/log" \
  || { echo "the WebGPU test failed for another reason:" >&2; tail -30 "$nogpu/log" >&2; exit 1; }
echo "ok: it fails there (the CPU fallback was chosen)"
echo "== web: demo page end to end (about 2 min) [$(date +%H:%M:%S)]"
web/build.sh
mkdir -p target/web
python3 web/e2e/check_demo.py --screenshot target/web/demo.png
echo "== web: the npm package: packed, installed with npm, type-checked by tsc, run in Chromium (about 1 min) [$(date +%H:%M:%S)]"
WMX_SKIP_BUILD=1 web/pack.sh
python3 web/e2e/check_package.py
