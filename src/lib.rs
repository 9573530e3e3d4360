//! # wmx
//!
//! MLX-style lazy arrays for Rust, on any GPU through WebGPU (Vulkan, Metal, DX12,
//! the browser), with a CPU backend as reference and fallback.
//!
//! ```
//! use wmx::{Array, DType};
//! # fn main() -> wmx::Result<()> {
//! let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let y = wmx::ones(&[2], DType::F32)?;          // broadcasts along rows
//! let z = wmx::axpby(&x, &y, 2.0, 0.5)?;         // one fused pass: 2x + 0.5y
//! let s = wmx::sum(&z, Some(&[1]), false)?;      // row sums, still lazy
//! assert_eq!(s.to_vec::<f32>()?, vec![7.0, 15.0]); // reading evaluates
//! # Ok(())
//! # }
//! ```
//!
//! Arrays go to [`default_device`]: the GPU when an adapter opens, else the CPU;
//! `WMX_DEVICE=cpu|gpu` forces one, [`with_device`] overrides it for a scope.
//! Every op returns [`Result`]; operators (`&a + &b`) panic with the shapes in
//! the message instead.

pub use wmx_core::*;

/// The WebGPU backend: buffer states, statistics, adapter information.
#[cfg(feature = "webgpu")]
pub use wmx_webgpu as webgpu;

#[cfg(all(feature = "webgpu", not(target_arch = "wasm32")))]
#[ctor::ctor(unsafe)]
fn register_webgpu() {
    // Only stores a function pointer: no allocation-order or I/O hazards before main.
    wmx_webgpu::register();
}
