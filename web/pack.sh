#!/usr/bin/env bash
# Builds the npm package of wmx for JavaScript and TypeScript: web/build.sh's
# wasm-bindgen output (--target web: an ES module that loads its .wasm through
# `new URL(..., import.meta.url)`, so plain pages and bundlers such as Vite,
# webpack 5 and Parcel 2 both find it), wmx.js with its types, package.json (the
# workspace's version) and the README, packed by `npm pack` into
# target/npm/wmx-<version>.tgz. Install it with `npm i <that file>`.
# Needs what web/build.sh needs, and npm (`scripts/setup.sh --test`).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${WMX_SKIP_BUILD:-0}" = 1 ] || web/build.sh
stage=target/npm/wmx
rm -rf "$stage"
mkdir -p "$stage/pkg"
cp web/www/wmx.js web/www/wmx.d.ts web/npm/README.md "$stage/"
cp web/www/pkg/wmx_web.js web/www/pkg/wmx_web.d.ts web/www/pkg/wmx_web_bg.wasm \
  web/www/pkg/wmx_web_bg.wasm.d.ts "$stage/pkg/"
version=$(cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "wmx-web"))')
python3 - "$version" web/npm/package.json "$stage/package.json" <<'PY'
import json, sys
version, src, dst = sys.argv[1:]
d = json.load(open(src))
d = {"name": d.pop("name"), "version": version, **d}
json.dump(d, open(dst, "w"), indent=2)
open(dst, "a").write("\n")
PY
tgz=$(cd target/npm && npm pack ./wmx --silent | tail -1)
echo "packed target/npm/$tgz ($(du -h "target/npm/$tgz" | cut -f1))"
