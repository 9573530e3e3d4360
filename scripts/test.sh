#!/usr/bin/env bash
# Every test of the project: the set-up script's branches, shellcheck, formatting,
# lints, the unit and conformance suites on the CPU and on a real Vulkan driver (Mesa
# lavapipe when there is no GPU), docs, and the browser tests (wasm in headless
# Chromium on WebGPU, the demo page).
# A GPU test never skips: with no adapter it fails (set WMX_ALLOW_NO_GPU=1 to opt out).
# Times are for a first run on a 2-core machine; later runs reuse target/.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
source scripts/setup.sh --test
export PATH="$HOME/.cargo/bin:$PATH"
# The Vulkan loader warns without it; nothing here draws to a screen.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
export RUST_BACKTRACE=1
step() { echo "== $* [$(date +%H:%M:%S)]"; }

step "set-up script: every branch against stubs (seconds)"; scripts/test-setup.sh
step "shellcheck (seconds)"
mapfile -t scripts < <(git ls-files '*.sh' .ci/run 2>/dev/null || find . -name '*.sh' -not -path './target/*')
shellcheck -x "${scripts[@]}"
step "fmt";    cargo fmt --all -- --check
step "clippy (first run builds the workspace: about 3 min)"; cargo clippy --workspace --all-targets -q -- -D warnings
step "tests (first run: about 8 min, building included; the GPU ones on lavapipe)"; cargo test --workspace --all-targets
step "doctests"; cargo test --workspace --doc
step "rustdoc, warnings as errors"; RUSTDOCFLAGS="-D warnings" cargo doc -q --workspace --no-deps
step "example: logistic regression trained with value_and_grad, on the CPU and the GPU"
# Built with the workspace's features, as the tests were (a plain `cargo run --example`
# resolves the root package's features alone and rebuilds wgpu: 2.5 min).
cargo build -q --workspace --examples --bins
examples=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/examples
WMX_DEVICE=cpu "$examples/logistic_regression"
"$examples/logistic_regression"
step "examples: heat equation (compiled stencil), cross-entropy (grad, take_along_axis), column standardisation (files), least squares (matmul, grad), f16 on CPU and GPU, spectra (fft, convolution and its gradient); each against f64, on the CPU and the GPU"
for ex in heat cross_entropy standardize linear_regression f16_check spectrum; do
    WMX_DEVICE=cpu "$examples/$ex"
    "$examples/$ex"
done
step "example: an MLP on scikit-learn's digits with wmx::nn and AdamW (>= 97 % test accuracy), on the CPU and the GPU"
WMX_DEVICE=cpu "$examples/digits_mlp"
"$examples/digits_mlp"
step "example: the digits MLP trained data-parallel on 2 ranks (mpirun) equals one rank on the whole batches, on the CPU and the GPU"
# Open MPI refuses root unless told (CI runs as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WMX_DEVICE=cpu mpirun -n 2 --oversubscribe "$examples/digits_dp"
mpirun -n 2 --oversubscribe "$examples/digits_dp"
step "example: a CNN on the digits (two convolutions, max pooling; >= 98 % test accuracy), on the CPU and the GPU"
WMX_DEVICE=cpu "$examples/digits_cnn"
"$examples/digits_cnn"
step "example: a character-level transformer on Genesis (KJV, Debian's bible-kjv packages): trained on the CPU and saved, then resumed on the GPU"
examples/data/genesis.sh
ckpt=$(mktemp -d)
WMX_DEVICE=cpu "$examples/char_lm" --steps 40 --dims 64 --context 32 --batch 16 --checkpoint "$ckpt"
WMX_DEVICE=gpu "$examples/char_lm" --steps 10 --dims 64 --context 32 --batch 16 --checkpoint "$ckpt"
rm -rf "$ckpt"
step "example: text generation from a Llama checkpoint folder with its tokenizer.json, the text against mlx-lm's, on the CPU and the GPU"
for dev in cpu gpu; do
    got=$(WMX_DEVICE=$dev "$examples/generate" --model tests/goldens/llama_tiny \
        --prompt "the lazy fox reads the arrays" --max-tokens 40)
    if [ "$got" != "$(cat tests/goldens/llama_tiny/generate_expected.txt)" ]; then
        echo "generate on $dev printed: $got" >&2
        echo "mlx-lm's text:           $(cat tests/goldens/llama_tiny/generate_expected.txt)" >&2
        exit 1
    fi
done
step "example: the axpby extension's benchmark (custom vs composed), quick, on the CPU and the GPU"
"$examples/../axpby_bench" --quick
step "type-check for Apple (Metal) and Windows (DX12) (about 2 min)"
cargo check -q -p wmx --target aarch64-apple-darwin
# The native Metal backend's Apple-only code (objc2-metal): lints and its test.
cargo clippy -q -p wmx-metal -p wmx -p wmx-tests --all-targets --target aarch64-apple-darwin -- -D warnings
cargo check -q -p wmx --target x86_64-pc-windows-msvc
web/test.sh          # wasm + headless Chromium WebGPU, the demo page (about 9 min)
step "all tests passed"
