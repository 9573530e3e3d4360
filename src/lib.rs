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
//! `WMX_DEVICE=cpu|gpu` forces one (`metal` on Apple: `Device::metal()`, the
//! native Metal backend), [`with_device`] overrides it for a scope.
//! Every op returns [`Result`]; operators (`&a + &b`) panic with the shapes in
//! the message instead.
//!
//! The crate root is the user's API: arrays, dtypes, devices, every op, the
//! transforms, compile and the modes. Implementing a backend goes through
//! [`backend`]; extending wmx with your own primitives and kernels through [`ext`].
//!
//! ```compile_fail
//! use wmx::Backend; // not at the root: `wmx::backend::Backend`
//! ```
//! ```compile_fail
//! use wmx::CustomPrimitive; // not at the root: `wmx::ext::CustomPrimitive`
//! ```
//! ```
//! use wmx::{backend::Backend, ext::CustomPrimitive};
//! ```

/// Loading and saving `.npy`, `.npz` and safetensors files (feature `io`).
#[cfg(all(feature = "io", not(target_arch = "wasm32")))]
pub use wmx_core::io;
pub use wmx_core::ops::*;
pub use wmx_core::{
    ArgReduceOp, Array, BinaryOp, CompileReport, Compiled, Complex32, CustomFunction, DType,
    Device, DeviceKind, Element, Error, FusedReport, Mode, Moves, Nested, NormOp, ReadAs, ReduceOp,
    Result, ScatterOp, UnaryOp, array, async_eval, bf16, compile, default_device, eval, f16,
    fused_at_eval, grad, grad1, implicit_moves, jvp, mode, ops, prelude, random,
    set_default_device, set_implicit_moves, set_mode, synchronize, transforms, value_and_grad,
    value_and_grad1, vjp, vmap, vmap1, with_device, with_mode,
};

/// Collectives across processes started by `mpirun` (MLX's `mx.distributed`):
/// `all_sum`, `all_gather`, `send`/`recv`, ..., lazy and differentiable; a group
/// of one without a launcher or without the `mpi` feature.
pub use wmx_core::distributed;
/// Discrete Fourier transforms, numpy's `np.fft`: `fft`, `ifft`, `rfft`,
/// `irfft` and their 2-D and n-D forms, any length, differentiable.
pub use wmx_core::fft;
/// Linear algebra, numpy's `np.linalg`: decompositions, solves, inverses,
/// determinants and norms, batched and differentiable.
pub use wmx_core::linalg;
/// Language models that load Hugging Face checkpoints (the Llama family), and
/// generation with mlx-lm's samplers.
pub use wmx_core::models;
/// Neural-network layers, activations, initialisers and losses (MLX's `mlx.nn`).
pub use wmx_core::nn;
/// Optimizers, learning-rate schedules and gradient clipping (MLX's
/// `mlx.optimizers`).
pub use wmx_core::optim;

/// For backend implementers: the [`Backend`](backend::Backend) trait and its buffer
/// and view types, layouts, the CPU backend, and registering a GPU backend.
pub mod backend {
    pub use wmx_core::{
        Backend, Buffer, DynBackend, GpuFactory, Layout, View, cpu, gpu_backend_registered, layout,
        register_gpu_backend, register_metal_backend,
    };
}

/// For extending wmx: custom primitives with their own CPU and GPU code
/// ([`custom`](ext::custom), [`CustomPrimitive`](ext::CustomPrimitive); guide in
/// `docs/EXTENDING.md`), the CPU helpers they use, and the graph's primitives as
/// transforms and compile see them.
pub mod ext {
    pub use wmx_core::{
        CpuOutput, CustomPrimitive, FusedKernel, FusedOp, FusedStep, Generator, GpuContext, Layout,
        OpKind, Primitive, View, ViewOp, cpu, custom, layout,
    };
}

/// The WebGPU backend: buffer states, statistics, adapter information.
#[cfg(feature = "webgpu")]
pub use wmx_webgpu as webgpu;

#[cfg(all(feature = "webgpu", not(target_arch = "wasm32")))]
#[ctor::ctor(unsafe)]
fn register_webgpu() {
    // Only stores a function pointer: no allocation-order or I/O hazards before main.
    wmx_webgpu::register();
}

/// The native Metal backend (Apple only): `Device::metal()`, `WMX_DEVICE=metal`.
#[cfg(all(target_vendor = "apple", feature = "webgpu"))]
pub use wmx_metal as metal;

#[cfg(all(target_vendor = "apple", feature = "webgpu"))]
#[ctor::ctor(unsafe)]
fn register_metal() {
    // Only stores a function pointer, as above.
    wmx_metal::register();
}

/// The user guide's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/guide.md")]
pub struct GuideExamples;
