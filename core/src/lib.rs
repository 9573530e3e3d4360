//! wmx-core: the heart of wmx, an MLX-style array library.
//!
//! - [`DType`]s with MLX/numpy promotion, [`Layout`]s (views are stride rewrites);
//! - lazy [`Array`]s: ops build a graph, [`eval`] computes it;
//! - [`Primitive`]s in families, dispatched in one place (`eval`), with
//!   [`CustomPrimitive`] as the open extension point;
//! - the [`Backend`] trait (one method per family) and the [`cpu`] backend;
//! - composable transforms ([`grad`], [`vjp`], [`jvp`], [`vmap`]) in [`transforms`];
//! - [`Device`] selection: [`default_device`], [`with_device`], `WMX_DEVICE`.
//!
//! Numeric rules (integer overflow, division by zero, NaN) are in
//! `docs/SEMANTICS.md` and hold on every backend.
#![warn(missing_docs)]

mod array;
pub mod backend;
pub mod compile;
pub mod cpu;
mod custom;
mod device;
pub mod distributed;
mod dtype;
mod error;
mod eval;
pub mod fft;
#[cfg(all(feature = "io", not(target_arch = "wasm32")))]
pub mod io;
pub mod layout;
pub mod linalg;
pub mod models;
#[cfg(feature = "ndarray")]
mod ndarray_interop;
mod nested;
pub mod nn;
pub mod ops;
pub mod optim;
mod primitive;
pub mod random;
mod scoped;
pub mod transforms;

pub use array::{Array, ReadAs};
pub use backend::{Backend, Buffer, DeviceKind, DynBackend, View};
pub use compile::{
    CompileReport, Compiled, FusedKernel, FusedOp, FusedReport, FusedStep, Mode, async_eval,
    compile, fused_at_eval, mode, set_mode, synchronize, with_mode,
};
pub use custom::{CpuOutput, CustomPrimitive, GpuContext, custom};
pub use device::{
    Device, GpuFactory, Moves, default_device, gpu_backend_registered, implicit_moves,
    register_gpu_backend, register_metal_backend, set_default_device, set_implicit_moves,
    with_device,
};
pub use dtype::{Complex32, DType, Element};
pub use error::{Error, Result};
pub use eval::eval;
pub use half::{bf16, f16};
pub use layout::Layout;
pub use nested::{Nested, array};
pub use ops::families;
pub use ops::*;
pub use primitive::{
    ArgReduceOp, BinaryOp, Generator, NormOp, OpKind, Primitive, ReduceOp, ScatterOp, UnaryOp,
    ViewOp,
};
pub use transforms::{
    CustomFunction, grad, grad1, jvp, value_and_grad, value_and_grad1, vjp, vmap, vmap1,
};
pub use wmx_spec::ConvGeometry;

/// What most programs need, in one import: `use wmx::prelude::*;` brings the array
/// type, dtypes, devices, errors, slicing, transforms, compile and the modes.
///
/// ```
/// # use wmx_core as wmx;
/// use wmx::prelude::*;
/// let x = Array::from_slice(&[1.0f32, 2.0], &[2])?;
/// let double = compile(|a: &[Array]| Ok(vec![&a[0] * 2.0]));
/// assert_eq!(double.call1(&x)?.to_vec::<f32>()?, vec![2.0, 4.0]);
/// let g = grad(|a: &[Array]| Ok(vec![(&a[0] * &a[0]).sum(None, false)?]), &[0])(&[x])?;
/// assert_eq!(g[0].to_vec::<f32>()?, vec![2.0, 4.0]);
/// # Ok::<(), Error>(())
/// ```
pub mod prelude {
    pub use crate::ops::{PadMode, Slice};
    pub use crate::{
        Array, Compiled, DType, Device, Error, Mode, Result, async_eval, bf16, compile,
        default_device, eval, f16, grad, jvp, random, synchronize, value_and_grad, vjp, vmap,
        with_device, with_mode,
    };
}
