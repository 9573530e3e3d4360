#!/usr/bin/env bash
# Builds the browser package: wmx-web for wasm32 (release), then wasm-bindgen
# --target web into web/www/pkg/. Serve web/www/ with any static file server.
# Needs the wasm32 target and wasm-bindgen-cli at Cargo.lock's wasm-bindgen
# version (`scripts/setup.sh --test` installs both).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
want=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/"/,"",$3); print $3; exit}' Cargo.lock)
got=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$want" != "$got" ]; then
  echo "web/build.sh: need wasm-bindgen-cli $want (found '${got:-none}'); run scripts/setup.sh --test" >&2
  exit 1
fi
cargo build --target wasm32-unknown-unknown --release -p wmx-web
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
rm -rf web/www/pkg
wasm-bindgen --target web --out-dir web/www/pkg \
  "$target_dir/wasm32-unknown-unknown/release/wmx_web.wasm"
# The language-model demo's tiny checkpoint (the one the native tests use).
rm -rf web/www/models
mkdir -p web/www/models/llama_tiny
cp tests/goldens/llama_tiny/{config.json,model.safetensors,tokenizer.json} web/www/models/llama_tiny/
echo "built web/www/pkg ($(du -h web/www/pkg/wmx_web_bg.wasm | cut -f1) of wasm); serve web/www, e.g. web/serve.sh"
