//! Primitives: the nodes of the lazy graph, grouped in families.
//!
//! Elementwise ops are data (an enum value per op) inside a family variant, so a
//! backend implements a family once. Each op's `name()` is the key every backend
//! uses (WGSL function names, kernel labels); completeness tests iterate `ALL`.

use crate::CustomPrimitive;
use std::sync::Arc;

pub use wmx_spec::{ArgReduceOp, BinaryOp, NormOp, OpKind, ReduceOp, ScatterOp, UnaryOp};

/// Values made from nothing: `full` and `arange`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Generator {
    /// Every element `value` (cast to the dtype).
    Fill(f64),
    /// `start + i * step`, computed in f64 and cast.
    Arange {
        /// First value.
        start: f64,
        /// Increment.
        step: f64,
    },
}

/// Which view a `View` node is (eval shares the input's buffer; the node's
/// layout already says where its elements are). Kept for transforms.
#[derive(Debug, Clone, PartialEq)]
pub enum ViewOp {
    /// Axes permuted.
    Transpose(Vec<usize>),
    /// Broadcast to the node's shape.
    Broadcast,
    /// Strided slice: start, stop, step per axis.
    Slice(Vec<(isize, isize, isize)>),
    /// Same elements, new shape (expand_dims, squeeze, reshape without copy).
    Reshape,
    /// The same array with a zero derivative ([`crate::stop_gradient`]).
    StopGradient,
    /// A complex64 array's (real, imaginary) f32 pairs, shape `[..., 2]`.
    AsReal,
    /// f32 pairs `[..., 2]` (each pair adjacent) as a complex64 array.
    AsComplex,
}

/// The computation that produces an array from its inputs.
#[derive(Debug, Clone)]
pub enum Primitive {
    /// One input, elementwise.
    Unary(UnaryOp),
    /// Two inputs of one dtype, broadcast to one shape.
    Binary(BinaryOp),
    /// `where(cond, x, y)`: cond bool, x and y of the output dtype.
    Select,
    /// Copy into a fresh row-major buffer, converting to the node's dtype.
    Copy,
    /// Fill or arange, no inputs.
    Generate(Generator),
    /// `alpha * x + beta * y` in one pass.
    Axpby {
        /// Scale of x.
        alpha: f64,
        /// Scale of y.
        beta: f64,
    },
    /// Reduce `axes` (sorted, unique) away.
    Reduce {
        /// The reduction.
        op: ReduceOp,
        /// Axes removed.
        axes: Vec<usize>,
    },
    /// Index of the extreme along one axis, which is removed.
    ArgReduce {
        /// argmax or argmin.
        op: ArgReduceOp,
        /// The axis.
        axis: usize,
    },
    /// `alpha * a @ b + beta * c` over matching batch dims: inputs `a` `[..., M, K]`,
    /// `b` `[..., K, N]` and, when `beta` is nonzero, `c` of the output's shape
    /// `[..., M, N]`; one float dtype, accumulated in f32.
    Matmul {
        /// Scale of the product.
        alpha: f64,
        /// Scale of `c` (0 when there is no third input).
        beta: f64,
    },
    /// A row operation over the last axis of input 0; the other inputs (weight,
    /// bias) have the shape `[L]` of that axis.
    Normalize {
        /// Which operation.
        op: NormOp,
        /// Added to the variance (layer_norm) or mean square (rms_norm).
        eps: f64,
    },
    /// A view of input 0: no computation, no copy.
    View(ViewOp),
    /// A row-major copy of input 0 (base) with input 1 (update) written over the
    /// strided region that starts at `starts` and steps by `steps` per axis (its
    /// extent is the update's shape).
    SliceUpdate {
        /// First index of the region on each axis.
        starts: Vec<usize>,
        /// Step of the region on each axis (nonzero; negative walks backwards).
        steps: Vec<isize>,
    },
    /// The inputs (one dtype, equal extents off `axis`) joined along `axis`.
    Concatenate {
        /// The joining axis.
        axis: usize,
    },
    /// `take_along_axis`: input 0 `x`, input 1 integer indices of `x`'s rank and
    /// equal extents off `axis`; `out[p] = x[p with p[axis] = idx[p]]` (negative
    /// indices count from the end; out of range gives the dtype's fill value,
    /// [`crate::gather_fill`]). The output has the indices' shape.
    Gather {
        /// The indexed axis.
        axis: usize,
    },
    /// `put_along_axis` / `scatter_add`: a row-major copy of input 0 (base, the
    /// output's shape) with input 2 (updates, of the indices' shape) combined by `op`
    /// at `p with p[axis] = idx[p]` for every position `p` of input 1 (integer
    /// indices, base's rank, equal extents to base off `axis`). Out-of-range
    /// indices are dropped.
    Scatter {
        /// Set or add.
        op: ScatterOp,
        /// The indexed axis.
        axis: usize,
    },
    /// Cumulative `op` (sum, prod, max, min) along `axis`; output dtype per
    /// [`ReduceOp::out_dtype`].
    Scan {
        /// The combining reduction.
        op: ReduceOp,
        /// The scanned axis.
        axis: usize,
        /// From the end of the axis.
        reverse: bool,
        /// Whether element `i` includes input `i` (else the identity comes first).
        inclusive: bool,
    },
    /// The u32 indices that sort input 0 along its last axis, stably (NaN last, -0
    /// equal to +0: numpy's order).
    ArgSort,
    /// Input 0 sorted along its last axis in [`Primitive::ArgSort`]'s order (its
    /// elements themselves, so -0 and +0 keep their order).
    Sort,
    /// Threefry-2x32 random bits, MLX's layout: input 0 holds row-major u32 keys
    /// `[..., 2]`; the output `[..., *shape]` gives each key a contiguous block
    /// ([`crate::random::bits`]). A u32 output holds the bits; a float output holds
    /// MLX's unit-interval value of each word, `min(f32(bits) * 2^-32, the largest
    /// value below 1 in the dtype)` rounded to the dtype (one pass for `uniform`).
    RandomBits,
    /// A primitive defined outside core.
    Custom(Arc<dyn CustomPrimitive>),
    /// An elementwise subgraph computed in one pass (made by [`crate::compile()`]):
    /// inputs of the output's shape, read in place.
    Fused(Arc<crate::FusedKernel>),
}
