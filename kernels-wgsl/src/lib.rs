//! `wmx-kernels`: WGSL compute kernels dispatched through wgpu, or through any
//! other [`Driver`] (`wmx-metal` drives Metal with the same plans, the modules
//! translated to MSL by naga). [`Kernels`] is generic over the driver, wgpu's
//! ([`Wgpu`]) by default.
//!
//! Kernel families — [`Kernels::unary`], [`Kernels::binary`], [`Kernels::select`],
//! [`Kernels::copy`] (strided copy and cast), [`Kernels::fill`], [`Kernels::arange`],
//! [`Kernels::axpby`], [`Kernels::reduce`], [`Kernels::arg_reduce`], [`Kernels::matmul`],
//! [`Kernels::normalize`], [`Kernels::concatenate`], [`Kernels::gather`] and
//! [`Kernels::scatter`] — take buffers,
//! a dtype, a shape and strides, and an op of the workspace's vocabulary
//! ([`UnaryOp`], [`BinaryOp`], [`ReduceOp`], [`ArgReduceOp`], [`NormOp`],
//! [`ScatterOp`] and [`DType`], all from `wmx-spec`). Calls record dispatches into a
//! [`Batch`]; [`Kernels::submit`] encodes a batch into one compute pass and one queue
//! submit.
//!
//! The numeric rules (integer wrap, floor division, NaN handling, casts, reduction
//! output dtypes) are those of the workspace's `docs/SEMANTICS.md`.
//!
//! Storage: every dtype is stored as little-endian bytes exactly as on the host; in the
//! kernels buffers are arrays of `u32` words: `bool`/`u8` four per word, `f16`/`bf16`
//! two per word. A kernel invocation writes whole words, so neighbouring elements
//! never race; the one exception, scatter, merges its elements into words with
//! atomic compare-exchange. The 64-bit dtypes are moved by these kernels as pairs
//! of words and computed by each family's 64-bit kernels (`<family>/wide.rs` over
//! the core in `wide/`): f64 (adapters with `SHADER_F64`) bound as `array<f64>`, i64/u64 as `array<vec2<u32>>` with its arithmetic written out
//! on the words (every adapter).
//!
//! The WGSL source of every kernel module can be produced without a GPU through
//! [`compose`] and a [`ModuleSpec`]; the tests validate all of them with naga.
//!
//! # Layers
//!
//! A module imports only from its own layer or those below, never in a circle
//! (`tests/layers.rs` checks the modules' `crate::` paths against this table):
//!
//! | layer | modules | what they hold |
//! |---|---|---|
//! | 0 | `dtype`, `driver` | how dtypes sit in words; what a GPU API must do ([`Driver`], [`Batch`], [`Caps`]) |
//! | 1 | `layout`, `ops`, `wgpu_driver` | views of buffers and their checks; WGSL op expressions; wgpu's driver |
//! | 2 | `compose` | module specs, the generic prelude, tree-shaking, naga validation |
//! | 3 | `kernels`, `wide` | the library on one device: pipeline cache, scratch buffers, recording; the 64-bit dtypes' kernel core (element types, preludes, f64 math, word arithmetic) |
//! | 4 | `elementwise`, `reduce`, `matmul`, `norm`, `index`, `random`, `rope`, `fft`, `im2col`, `attention`, `quant`, `linalg`, `sort`, `fused`, `user` | the kernel families, a folder each (with a `wide.rs` for its 64-bit kernels where it has them) |
//! | 5 | `wgpu_open` | opening a wgpu device and probing its hardware paths with kernels |
#![doc = include_str!("../README.md")]

mod attention;
mod compose;
mod driver;
mod dtype;
mod elementwise;
mod fft;
mod fused;
mod im2col;
mod index;
mod kernels;
mod layout;
mod linalg;
mod matmul;
mod norm;
mod ops;
mod quant;
mod random;
mod reduce;
mod rope;
mod sort;
mod user;
mod wgpu_driver;
mod wgpu_open;
mod wide;

pub use attention::FlashParams;
pub use compose::{
    Family, InputMode, ModuleSpec, Op, Target, Variant, check_specs, compose, validate_wgsl,
};
pub use fft::{FFT_MAX_ROW, FFT_TABLE, FftPass, FftReal};
pub use matmul::TILES;
pub use quant::{QUANT_BITS, QUANT_GROUPS, QuantParams};
pub use rope::RopeParams;

/// The kernel families, each defined in its folder: `ModuleSpec::family` is one of
/// these.
pub mod families {
    pub use crate::attention::ATTENTION;
    pub use crate::elementwise::{ARANGE, AXPBY, BINARY, COPY, FILL, SELECT, SLICE_UPDATE, UNARY};
    pub use crate::fft::FFT;
    pub use crate::im2col::{DEPTHWISE, IM2COL};
    pub use crate::index::{GATHER, PLACE, SCATTER};
    pub use crate::linalg::LINALG;
    pub use crate::matmul::{GEMV, MATMUL};
    pub use crate::norm::{NORM, NORM_VJP};
    pub use crate::quant::QUANT;
    pub use crate::random::RANDOM_BITS;
    pub use crate::reduce::{ARG_REDUCE, REDUCE};
    pub use crate::rope::ROPE;
    pub use crate::sort::SORT;
}

/// Every family, for [`module_specs`].
const FAMILIES: &[&Family] = {
    use families::*;
    &[
        &UNARY,
        &BINARY,
        &AXPBY,
        &SELECT,
        &COPY,
        &SLICE_UPDATE,
        &FILL,
        &ARANGE,
        &REDUCE,
        &ARG_REDUCE,
        &MATMUL,
        &GEMV,
        &NORM,
        &NORM_VJP,
        &PLACE,
        &GATHER,
        &SCATTER,
        &RANDOM_BITS,
        &SORT,
        &IM2COL,
        &DEPTHWISE,
        &ROPE,
        &FFT,
        &ATTENTION,
        &QUANT,
        &LINALG,
    ]
};

/// Every module of the 64-bit kernels (each family's `wide.rs`) the library can
/// launch, as `(label, WGSL source, entry point, whether it computes in f64)`, for
/// workgroups of `wg` invocations: for the naga tests.
pub fn wide_modules(wg: u32) -> Vec<(String, String, &'static str, bool)> {
    let listed = [
        elementwise::wide::listed(),
        reduce::wide::listed(),
        index::wide::listed(),
        sort::wide::listed(),
        norm::wide::listed(),
        matmul::wide::listed(),
        linalg::wide::listed(),
    ];
    wide::composed(listed.into_iter().flatten().collect(), wg)
}

/// Every module the library can build for `target`: each (family, op, dtype,
/// variant) combination that the op tables define. Used by the completeness tests.
pub fn module_specs(target: Target) -> Vec<ModuleSpec> {
    FAMILIES.iter().flat_map(|f| (f.specs)(target)).collect()
}
pub use driver::{
    Batch, Binding, Bound, Caps, Dispatch, Driver, DriverBuffer, MAX_USER_BUFFERS, Stamp, Window,
    Work,
};
pub use fused::{FusedSpec, InputRead, compose_module as compose_fused};
pub use index::gather_fill_bits;
pub use kernels::Kernels;
pub use layout::{Contig, Strided};
pub use user::{KernelArg, KernelSource, TemplateArg, UserModule, UserPipeline};
pub use wgpu_driver::{RequestOptions, Wgpu, WgpuPipeline};
pub use wmx_spec::{
    ArgReduceOp, BinaryOp, ConvGeometry, DType, FusedOp, FusedStep, LinalgBlock, NormOp, ReduceOp,
    ScatterOp, UnaryOp,
};

/// Errors returned by the kernel library. Display messages contain the offending values.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum Error {
    /// The dtype cannot be used on this adapter (for example `f16` without `SHADER_F16`).
    #[error("dtype {dtype} is not supported on this adapter: {reason}")]
    UnsupportedDType {
        /// The dtype's name.
        dtype: &'static str,
        /// Why it is unavailable.
        reason: String,
    },
    /// The op exists but is not defined for this dtype (e.g. `bitwise_and` on f32).
    #[error("op '{op}' is not defined for dtype {dtype}")]
    OpNotDefined {
        /// Op name.
        op: String,
        /// Dtype name.
        dtype: &'static str,
    },
    /// A buffer (or a binding of a whole buffer) exceeds the device's limits.
    #[error("buffer of {bytes} bytes exceeds the device limit of {limit} bytes ({what})")]
    BufferTooLarge {
        /// Requested size in bytes.
        bytes: u64,
        /// The limit in bytes.
        limit: u64,
        /// Which limit.
        what: &'static str,
    },
    /// Shapes, strides, dtypes or element counts do not fit together.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// No adapter matched the request.
    #[error("no GPU adapter found: {0}")]
    NoAdapter(String),
    /// `request_device` failed.
    #[error("device request failed: {0}")]
    RequestDevice(String),
    /// Mapping a buffer for readback failed.
    #[error("buffer readback failed: {0}")]
    Map(String),
    /// The device could not allocate a buffer.
    #[error("GPU out of memory: a buffer of {bytes} bytes could not be allocated")]
    OutOfMemory {
        /// The buffer's size.
        bytes: u64,
    },
    /// A module or a submit failed validation (naga's, wgpu's or the driver's).
    #[error("validation error: {0}")]
    Validation(String),
}

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;
