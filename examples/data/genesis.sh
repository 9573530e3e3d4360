#!/usr/bin/env bash
# The Book of Genesis (King James Version, public domain) for examples/char_lm.rs,
# from Debian's packages bible-kjv-text (the text, in its reader's compressed
# format) and bible-kjv (the reader): fetched with `apt-get download` and unpacked
# with `dpkg -x` under target/data/bible (no root, nothing installed), then the
# reader writes Genesis 1:1-50:26 with its verse numbers removed to
# target/data/genesis.txt (about 200 KB). Usage: examples/data/genesis.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-target/data}
if [ -s "$out/genesis.txt" ]; then
  echo "$out/genesis.txt is there"
  exit 0
fi
mkdir -p "$out/bible"
if ! (cd "$out/bible" && apt-get download bible-kjv-text bible-kjv >/dev/null); then
  echo "genesis.sh: apt-get download failed; are the package lists there? (sudo apt-get update)" >&2
  exit 1
fi
for d in "$out"/bible/*.deb; do dpkg -x "$d" "$out/bible/root"; done
"$out/bible/root/usr/bin/bible" -p "$out/bible/root/usr/lib" "Genesis 1:1-50:26" \
  | sed -E 's/^ +[0-9]+ //' > "$out/genesis.txt.part"
mv "$out/genesis.txt.part" "$out/genesis.txt"
echo "wrote $out/genesis.txt ($(wc -c < "$out/genesis.txt") bytes)"
