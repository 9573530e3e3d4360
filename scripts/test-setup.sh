#!/usr/bin/env bash
# Runs every branch of scripts/setup.sh against stub commands (apt-get, sudo, curl,
# rustup, cargo, dpkg-query, id, ...) in a sandboxed PATH and checks the exact commands
# it runs: a bare machine as root and through sudo, a full machine (nothing to do),
# WMX_SETUP_ALL=1 on a full machine, and no sudo at all (a clear error). Installing
# through the apt-get stub makes the package's commands appear, as on a real machine.
# scripts/test.sh runs this; the real installs run in CI with WMX_SETUP_ALL=1.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

# One stub script per command; each appends a line to $STUB_LOG.
make_stubs() {
  local s="$work/stubs"
  mkdir -p "$s"
  cat > "$s/apt-get" <<'EOF'
#!/bin/sh
echo "apt-get[${DEBIAN_FRONTEND:-}] $*" >> "$STUB_LOG"
[ "$1" = install ] || exit 0
for p in "$@"; do
  case "$p" in -*|install) continue ;; esac
  echo "$p" >> "$STUB_PKGS"
  case "$p" in
    build-essential) c=cc ;; chromium-driver) c=chromedriver ;; openmpi-bin) c=mpirun ;;
    ca-certificates|mesa-vulkan-drivers|libvulkan1|libopenmpi-dev) c= ;; *) c=$p ;;
  esac
  # The installed command: its stub where the test has one (curl), else a no-op.
  if [ -f "$STUB_DIR/$c" ]; then cp "$STUB_DIR/$c" "$STUB_BIN/"
  elif [ -n "$c" ]; then cp "$STUB_DIR/plain" "$STUB_BIN/$c"; fi
done
exit 0
EOF
  cat > "$s/sudo" <<'EOF'
#!/bin/sh
echo "sudo $1" >> "$STUB_LOG"; exec "$@"
EOF
  cat > "$s/id" <<'EOF'
#!/bin/sh
echo "$STUB_UID"
EOF
  cat > "$s/dpkg-query" <<'EOF'
#!/bin/sh
for p; do :; done
grep -qx "$p" "$STUB_PKGS" 2>/dev/null && printf 'install ok installed' && exit 0
exit 1
EOF
  # curl serves a "rustup-init" that records its arguments and installs cargo and rustup.
  cat > "$s/curl" <<'EOF'
#!/bin/sh
echo "curl $*" >> "$STUB_LOG"
cat <<EOS
echo "rustup-init \$*" >> "\$STUB_LOG"
mkdir -p "\${CARGO_HOME:-\$HOME/.cargo}/bin"
cp "$STUB_DIR/rustup" "$STUB_DIR/cargo" "\${CARGO_HOME:-\$HOME/.cargo}/bin/"
EOS
EOF
  cat > "$s/rustup" <<'EOF'
#!/bin/sh
case "$*" in
  "target list --installed") cat "$STUB_TARGETS" 2>/dev/null; echo x86_64-unknown-linux-gnu ;;
  "target add "*) echo "rustup $*" >> "$STUB_LOG"; echo "$3" >> "$STUB_TARGETS" ;;
  *) echo "rustup $*" >> "$STUB_LOG" ;;
esac
EOF
  cat > "$s/cargo" <<'EOF'
#!/bin/sh
echo "cargo $*" >> "$STUB_LOG"
case "$*" in "install "*) cp "$STUB_DIR/wasm-bindgen" "$STUB_BIN/" ;; esac
EOF
  cat > "$s/wasm-bindgen" <<EOF
#!/bin/sh
echo "wasm-bindgen $(awk '/^name = "wasm-bindgen"$/{getline; gsub(/"/,"",$3); print $3; exit}' Cargo.lock)"
EOF
  printf '#!/bin/sh\nexit 0\n' > "$s/plain"
  chmod +x "$s"/*
}

# A fresh sandbox: real basic tools, plus the stubs named in $1 ("full" = all present).
# $2 = uid the id stub reports.
sandbox() {
  local present=$2 uid=$3 box="$work/$1"
  mkdir -p "$box/bin" "$box/home"
  for t in bash sh env mktemp rm grep awk cat mkdir cp chmod dirname; do
    ln -s "$(command -v "$t")" "$box/bin/$t"
  done
  for t in id dpkg-query apt-get; do cp "$work/stubs/$t" "$box/bin/"; done
  : > "$box/log"; : > "$box/pkgs"; : > "$box/targets"
  if [ "$present" = full ]; then
    for t in sudo curl rustup cargo wasm-bindgen; do cp "$work/stubs/$t" "$box/bin/"; done
    # npm as nodesource installs it: a command, not Debian's package.
    for t in cc pkg-config chromium chromedriver shellcheck python3 mpirun clang npm; do cp "$work/stubs/plain" "$box/bin/$t"; done
    printf '%s\n' mesa-vulkan-drivers libvulkan1 libopenmpi-dev > "$box/pkgs"
    printf '%s\n' wasm32-unknown-unknown aarch64-apple-darwin x86_64-pc-windows-msvc > "$box/targets"
  elif [ "$present" = sudo ]; then
    cp "$work/stubs/sudo" "$box/bin/"
  fi
  export STUB_LOG="$box/log" STUB_PKGS="$box/pkgs" STUB_TARGETS="$box/targets" \
    STUB_BIN="$box/bin" STUB_DIR="$work/stubs" STUB_UID="$uid"
  BOX_PATH="$box/bin" BOX_HOME="$box/home"
}

# Runs setup.sh --test in the current sandbox; $1 = WMX_SETUP_ALL. Output to $box/out.
run_setup() {
  env -i PATH="$BOX_PATH" HOME="$BOX_HOME" WMX_SETUP_ALL="$1" \
    STUB_LOG="$STUB_LOG" STUB_PKGS="$STUB_PKGS" STUB_TARGETS="$STUB_TARGETS" \
    STUB_BIN="$STUB_BIN" STUB_DIR="$STUB_DIR" STUB_UID="$STUB_UID" \
    bash -c 'source scripts/setup.sh --test' > "$(dirname "$STUB_LOG")/out" 2>&1
}

run_ok() {  # $1 = WMX_SETUP_ALL, $2 = case name
  local rc=0; run_setup "$1" || rc=$?
  [ "$rc" = 0 ] || { fail=1; echo "FAILED: setup, $2: exit $rc"; }
}

expect() {  # $1 = case name; stdin = the exact expected log
  local want; want=$(cat)
  if [ "$want" = "$(cat "$STUB_LOG")" ]; then echo "ok: setup, $1"
  else
    fail=1; echo "FAILED: setup, $1: commands differ (want, then got):"
    printf '  want: %s\n' "${want//$'\n'/$'\n'  want: }"; sed 's/^/  got:  /' "$STUB_LOG"
    sed 's/^/  out:  /' "$(dirname "$STUB_LOG")/out"
  fi
}

lock_ver=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/"/,"",$3); print $3; exit}' Cargo.lock)
rustup_url=https://static.rust-lang.org/rustup/rustup-init.sh
all_pkgs="build-essential pkg-config mesa-vulkan-drivers libvulkan1 chromium chromium-driver shellcheck python3 openmpi-bin libopenmpi-dev clang npm"
bare_log() {  # $1 = the line sudo logs before each root command, or nothing (root)
  local p=${1:+$1$'\n'}
  cat <<EOF
${p}apt-get[] update -qq
${p}apt-get[noninteractive] install -y -qq --no-install-recommends curl ca-certificates
curl -sSf $rustup_url
rustup-init -y --no-modify-path --profile minimal -c clippy,rustfmt
${p}apt-get[] update -qq
${p}apt-get[noninteractive] install -y -qq --no-install-recommends $all_pkgs
rustup target add wasm32-unknown-unknown
rustup target add aarch64-apple-darwin
rustup target add x86_64-pc-windows-msvc
cargo install -q wasm-bindgen-cli --version $lock_ver
EOF
}

make_stubs

sandbox bare-root bare 0
run_ok 0 "bare machine as root"
bare_log "" | expect "bare machine as root"

sandbox bare-sudo sudo 1000
run_ok 0 "bare machine through sudo"
bare_log "sudo env" | expect "bare machine through sudo"

sandbox full full 1000
run_ok 0 "full machine"
expect "full machine: nothing to do" < /dev/null

sandbox all-root full 0
run_ok 1 "WMX_SETUP_ALL=1 as root"
expect "WMX_SETUP_ALL=1 runs every step as root" <<EOF
apt-get[] update -qq
apt-get[noninteractive] install -y -qq --no-install-recommends curl ca-certificates ${all_pkgs% npm}
curl -sSf $rustup_url
rustup-init -y --no-modify-path --profile minimal -c clippy,rustfmt --default-toolchain none -q
rustup target add wasm32-unknown-unknown
rustup target add aarch64-apple-darwin
rustup target add x86_64-pc-windows-msvc
cargo install -q wasm-bindgen-cli --version $lock_ver
EOF

sandbox nosudo none 1000
if run_setup 0; then fail=1; echo "FAILED: setup without root or sudo succeeded"
elif grep -q "need root or sudo to run: env" "$work/nosudo/out"; then echo "ok: setup, no root and no sudo: a clear error"
else fail=1; echo "FAILED: setup without root or sudo, unexpected output:"; cat "$work/nosudo/out"
fi

[ "$fail" = 0 ] || { echo "scripts/test-setup.sh: FAILED (setup.sh at $root)" >&2; exit 1; }
