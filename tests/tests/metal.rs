//! The conformance suite on `wmx-metal`, the native Metal backend: run on macOS
//! (the CI workflow's macos job). On other targets this file is empty: the
//! backend exists on Apple only, and the test command type-checks it for
//! `aarch64-apple-darwin`.
#![cfg(target_vendor = "apple")]

fn metal() -> Option<wmx_core::Device> {
    wmx_tests::gpu::device(wmx_metal::open)
}

wmx_tests::conformance_tests!(metal, metal());
