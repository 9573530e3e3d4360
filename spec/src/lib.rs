//! `wmx-spec`: the vocabulary every layer of wmx speaks, stated once.
//!
//! - [`DType`]: element types, their sizes and promotion;
//! - the op families as enums ([`UnaryOp`], [`BinaryOp`], [`ReduceOp`],
//!   [`ArgReduceOp`], [`NormOp`], [`ScatterOp`]) with each op's name, dtype rule
//!   ([`OpKind`]) and the rules derived from it (where it is defined, its output
//!   and accumulator dtypes, how partial reductions combine);
//! - [`FusedOp`] and [`FusedStep`], the steps of a fused elementwise kernel;
//! - [`ConvGeometry`], which input element each tap of a convolution reads;
//! - [`LinalgBlock`], the small factorisations the linear algebra kernels run.
//!
//! `wmx-core` (arrays, graphs, the CPU backend) and `wmx-kernels` (the WGSL kernel
//! library, which knows nothing of arrays) both depend on this crate and on nothing
//! of each other, so what crosses between them is these types, never a name looked
//! up at run time.
#![warn(missing_docs)]

mod conv;
mod dtype;
mod fft;
mod fused;
mod linalg;
mod ops;

pub use conv::ConvGeometry;
pub use dtype::DType;
pub use fft::{FFT_MAX_ROW, FFT_TABLE, FftPass, FftReal};
pub use fused::{FusedOp, FusedStep};
pub use linalg::LinalgBlock;
pub use ops::{ArgReduceOp, BinaryOp, NormOp, OpKind, ReduceOp, ScatterOp, UnaryOp};
