//! wmx: MLX-style lazy arrays for Rust, on any GPU through WebGPU, with a CPU backend.
pub use wmx_core::*;
