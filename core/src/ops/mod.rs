//! The operations users call. Each builds graph nodes (nothing is computed until
//! [`crate::eval`] or a read) and returns `Result`: shapes, axes and dtypes are
//! checked here, when the op is made.
//!
//! The device an op runs on is the innermost [`crate::with_device`] scope's, else
//! its first input's; creation ops use [`crate::default_device`].

use crate::{
    ArgReduceOp, Array, BinaryOp, DType, Device, Error, Generator, Layout, OpKind, Primitive,
    ReduceOp, Result, UnaryOp, ViewOp,
    device::scoped_device,
    layout::{broadcast_shapes, kept_shape, normalize_axes, normalize_axis, numel},
};

mod attention;
pub(crate) mod complex;
mod contract;
mod conv;
mod im2col;
mod index;
mod linalg;
mod nn;
mod operators;
pub(crate) mod quantized;
pub(crate) mod rope;
mod scan;
mod shaping;
mod sort;
pub use attention::{AttentionMask, scaled_dot_product_attention, with_attention_recompute};
pub use complex::{angle, complex, conj, imag, real};
pub use contract::{
    EinsumOptimize, EinsumPath, TensorAxes, diag, diagonal, einsum, einsum_path, einsum_with,
    inner, kron, outer, tensordot, trace,
};
pub use conv::{
    ConvOptions, PoolOptions, adaptive_avg_pool, avg_pool, conv_general, conv_transpose_general,
    conv_transpose1d, conv_transpose2d, conv_transpose3d, conv_weight_from_torch, conv1d, conv2d,
    conv3d, max_pool, sliding_window_view, to_channels_first, to_channels_last,
};
pub use index::{
    add_along_axis, gather_fill, one_hot, put_along_axis, scatter, scatter_add, take,
    take_along_axis,
};
pub(crate) use index::{gather_node, scatter_node};
pub(crate) use linalg::matmul_nd;
pub use linalg::{addmm, matmul};
pub use nn::{layer_norm, log_softmax, rms_norm, softmax};
pub(crate) use nn::{norm_vjp, normalize_composed, normalize_last};
pub use quantized::{
    QUANT_BITS, QUANT_GROUP_SIZES, dequantize, gather_qmm, quantize, quantized_matmul,
};
pub use rope::rope;

/// The primitives of families built as custom primitives (their CPU code and
/// rules here, their GPU code in `wmx-webgpu`'s `families.rs`), public for the
/// backends that run them.
pub mod families {
    pub use super::attention::{Flash, FlashCombine};
    pub use super::im2col::{Depthwise, DepthwiseWgrad, Im2col};
    pub use super::nn::NormVjp;
    pub use super::quantized::{Dequantize, Quantize, QuantizedMatvec};
    pub use super::rope::Rope;
    pub use crate::fft::{FftPass, FftReal};
    pub use crate::linalg::Block;
}
pub use scan::{cummax, cummin, cumprod, cumsum, scan};
pub(crate) use scan::{scan_jvp, scan_node, scan_vjp};
pub(crate) use shaping::concat_node;
pub use shaping::{
    PadMode, concatenate, flatten, moveaxis, pad, repeat, roll, split, split_at, stack, swapaxes,
    tile,
};
pub use sort::{argpartition, argsort, partition, sort, topk};
pub(crate) use sort::{argsort_node, sort_node};

/// `x` flattened when `axis` is `None`, else `x` with the axis normalised (an error
/// for a zero-dimensional `x`): the `axis: Option` convention of numpy's `take`,
/// `sort`, `cumsum`.
fn resolve_axis(op: &'static str, x: &Array, axis: Option<isize>) -> Result<(Array, usize)> {
    match axis {
        None => Ok((reshape_exact(x, &[x.size()])?, 0)),
        Some(a) => {
            if x.ndim() == 0 {
                return Err(Error::invalid(op, "a zero-dimensional array has no axis"));
            }
            Ok((x.clone(), normalize_axis(op, a, x.ndim())?))
        }
    }
}

pub(crate) fn op_device(first: &Array) -> Device {
    scoped_device().unwrap_or_else(|| first.device().clone())
}

fn creation_device() -> Result<Device> {
    crate::default_device()
}

/// Makes a computed (row-major) node after checking the device holds every dtype.
pub(crate) fn node(
    prim: Primitive,
    inputs: Vec<Array>,
    shape: &[usize],
    dtype: DType,
    device: Device,
) -> Result<Array> {
    crate::layout::checked_numel(prim_name(&prim), shape, dtype)?;
    complex::check_node(prim_name(&prim), &inputs, dtype)?;
    // Strict devices: inputs on another device move only when asked, by `to_device`
    // (a copy node) or an op inside `with_device` (docs/SEMANTICS.md, "Devices").
    if !crate::device::implicit_moves_allowed()
        && !matches!(prim, Primitive::Copy)
        && crate::device::scoped_device().is_none()
    {
        if let Some(x) = inputs.iter().find(|x| x.device() != &device) {
            return Err(Error::invalid(
                prim_name(&prim),
                format!(
                    "inputs on two devices ({} and {}): move one with to_device, or run \
                     the op inside with_device",
                    device.name(),
                    x.device().name()
                ),
            ));
        }
    }
    device.check_dtype(dtype)?;
    for i in &inputs {
        if i.dtype() != dtype {
            device.check_dtype(i.dtype())?;
        }
    }
    crate::compile::made(Array::from_op(
        prim,
        inputs,
        Layout::contiguous(shape),
        dtype,
        device,
    ))
}

/// A short name of a primitive's family, for errors raised where its node is made.
fn prim_name(p: &Primitive) -> &'static str {
    match p {
        Primitive::Generate(_) => "creation",
        Primitive::Copy => "astype",
        Primitive::Unary(op) => op.name(),
        Primitive::Binary(op) => op.name(),
        Primitive::Reduce { op, .. } => op.name(),
        Primitive::ArgReduce { op, .. } => op.name(),
        Primitive::Scan { op, .. } => match op {
            ReduceOp::Sum => "cumsum",
            ReduceOp::Prod => "cumprod",
            ReduceOp::Max => "cummax",
            ReduceOp::Min => "cummin",
            _ => "scan",
        },
        Primitive::ArgSort => "argsort",
        Primitive::Sort => "sort",
        Primitive::Matmul { .. } => "matmul",
        Primitive::Normalize { op, .. } => op.name(),
        Primitive::Axpby { .. } => "axpby",
        Primitive::RandomBits => "random",
        Primitive::Custom(_) => "custom primitive",
        Primitive::Scatter { op, .. } => op.name(),
        Primitive::Gather { .. } => "take_along_axis",
        Primitive::Concatenate { .. } => "concatenate",
        Primitive::SliceUpdate { .. } => "slice_update",
        Primitive::Select => "where",
        _ => "op",
    }
}

/// A view node: same buffer as `x`, new layout.
fn view(x: &Array, op: ViewOp, layout: Layout) -> Array {
    Array::from_op(
        Primitive::View(op),
        vec![x.clone()],
        layout,
        x.dtype(),
        x.device().clone(),
    )
}

// ---------------------------------------------------------------- creation

/// An array of `shape` with every element `value` (cast to `dtype`).
pub fn full(shape: &[usize], value: f64, dtype: DType) -> Result<Array> {
    if dtype.is_complex() {
        return astype(&full(shape, value, DType::F32)?, dtype);
    }
    let d = creation_device()?;
    node(
        Primitive::Generate(Generator::Fill(value)),
        vec![],
        shape,
        dtype,
        d,
    )
}

/// Zeros.
pub fn zeros(shape: &[usize], dtype: DType) -> Result<Array> {
    full(shape, 0.0, dtype)
}

/// Ones.
pub fn ones(shape: &[usize], dtype: DType) -> Result<Array> {
    full(shape, 1.0, dtype)
}

/// A 0-d array holding `value` as `dtype`.
pub fn scalar(value: f64, dtype: DType) -> Result<Array> {
    full(&[], value, dtype)
}

/// `start, start+step, …` below `stop` (numpy's `arange`).
pub fn arange(start: f64, stop: f64, step: f64, dtype: DType) -> Result<Array> {
    if step == 0.0 || !step.is_finite() || !start.is_finite() || !stop.is_finite() {
        return Err(Error::invalid(
            "arange",
            format!("start={start}, stop={stop}, step={step}: need finite values and step != 0"),
        ));
    }
    if dtype.is_complex() {
        return astype(&arange(start, stop, step, DType::F32)?, dtype);
    }
    let n = ((stop - start) / step).ceil().max(0.0) as usize;
    let d = creation_device()?;
    node(
        Primitive::Generate(Generator::Arange { start, step }),
        vec![],
        &[n],
        dtype,
        d,
    )
}

/// `num` evenly spaced values from `start` to `stop` inclusive.
pub fn linspace(start: f64, stop: f64, num: usize, dtype: DType) -> Result<Array> {
    if dtype.is_complex() {
        return astype(&linspace(start, stop, num, DType::F32)?, dtype);
    }
    let step = if num > 1 {
        (stop - start) / (num - 1) as f64
    } else {
        0.0
    };
    let d = creation_device()?;
    node(
        Primitive::Generate(Generator::Arange { start, step }),
        vec![],
        &[num],
        dtype,
        d,
    )
}

/// The `n × n` identity matrix.
pub fn eye(n: usize, dtype: DType) -> Result<Array> {
    let i = arange(0.0, n as f64, 1.0, DType::I32)?;
    let rows = expand_dims(&i, 1)?;
    let cols = expand_dims(&i, 0)?;
    astype(&equal(&rows, &cols)?, dtype)
}

// ---------------------------------------------------------------- dtypes

/// Converts to `dtype` (rules in docs/SEMANTICS.md); returns `x` itself if equal.
pub fn astype(x: &Array, dtype: DType) -> Result<Array> {
    if x.dtype() == dtype {
        return Ok(x.clone());
    }
    if x.dtype().is_complex() {
        return Err(Error::invalid(
            "astype",
            format!(
                "c64 to {dtype} would drop the imaginary part: take real(), imag() or abs() \
                 explicitly"
            ),
        ));
    }
    if dtype.is_complex() {
        return complex(x, &zeros_like(x)?);
    }
    node(
        Primitive::Copy,
        vec![x.clone()],
        x.shape(),
        dtype,
        op_device(x),
    )
}

/// A row-major copy of `x` (a no-op for already row-major, offset-0 arrays).
pub fn contiguous(x: &Array) -> Result<Array> {
    if x.layout().is_row_contiguous() && x.layout().offset == 0 {
        return Ok(x.clone());
    }
    if x.dtype().is_complex() {
        return complex::on_pairs(x, contiguous);
    }
    node(
        Primitive::Copy,
        vec![x.clone()],
        x.shape(),
        x.dtype(),
        op_device(x),
    )
}

/// A row-major copy of `x` in a new buffer, even where `x` is row-major already.
pub(crate) fn fresh_copy(x: &Array) -> Result<Array> {
    if x.dtype().is_complex() {
        return complex::on_pairs(x, fresh_copy);
    }
    node(
        Primitive::Copy,
        vec![x.clone()],
        x.shape(),
        x.dtype(),
        x.device().clone(),
    )
}

// ---------------------------------------------------------------- elementwise

/// Applies a unary op (dtype rules of [`UnaryOp::kind`]).
pub fn unary(op: UnaryOp, x: &Array) -> Result<Array> {
    if x.dtype().is_complex() {
        return complex::unary(op, x);
    }
    let (input, out) = match op.kind() {
        OpKind::Arith => (x.dtype(), x.dtype()),
        OpKind::FloatMath => (x.dtype().to_float(), x.dtype().to_float()),
        OpKind::Logical | OpKind::Predicate | OpKind::Compare => (x.dtype(), DType::Bool),
        OpKind::Bitwise => unreachable!("no bitwise unary op"),
    };
    // On 0/1 every arithmetic unary op (negative, abs, sign, square, rounding) is
    // the identity (docs/SEMANTICS.md), so no backend needs bool kernels for them.
    if op.kind() == OpKind::Arith && input == DType::Bool {
        return Ok(x.clone());
    }
    let x = astype(x, input)?;
    let d = op_device(&x);
    node(Primitive::Unary(op), vec![x.clone()], x.shape(), out, d)
}

/// Arithmetic on two bools computed on 0/1 and stored as `!= 0` is a logical op
/// (docs/SEMANTICS.md); rewriting here keeps bool kernels out of every backend.
fn bool_arith(op: BinaryOp, a: &Array, b: &Array) -> Result<Array> {
    use BinaryOp::*;
    match op {
        Add | Maximum => binary(LogicalOr, a, b),
        Multiply | Minimum | FloorDivide => binary(LogicalAnd, a, b),
        Subtract => binary(NotEqual, a, b),
        // x % 1 == x % 0 == 0
        Remainder => binary(
            NotEqual,
            &binary(LogicalOr, a, b)?,
            &binary(LogicalOr, a, b)?,
        ),
        // a ** 0 == 1, a ** 1 == a
        Power => binary(LogicalOr, a, &unary(UnaryOp::LogicalNot, b)?),
        _ => unreachable!("only arithmetic ops are rewritten"),
    }
}

/// Applies a binary op with numpy broadcasting and MLX promotion.
pub fn binary(op: BinaryOp, a: &Array, b: &Array) -> Result<Array> {
    let shape = broadcast_shapes(op.name(), a.shape(), b.shape())?;
    let common = DType::promote(a.dtype(), b.dtype());
    if common.is_complex() {
        return complex::binary(op, a, b);
    }
    let (input, out) = match op.kind() {
        OpKind::Arith => (common, common),
        OpKind::FloatMath => (common.to_float(), common.to_float()),
        OpKind::Compare | OpKind::Logical | OpKind::Predicate => (common, DType::Bool),
        OpKind::Bitwise => {
            if common.is_float() {
                return Err(Error::UnsupportedDType {
                    op: op.name(),
                    dtype: common,
                });
            }
            (common, common)
        }
    };
    if op.kind() == OpKind::Arith && input == DType::Bool {
        return bool_arith(op, a, b);
    }
    let a = broadcast_to(&astype(a, input)?, &shape)?;
    let b = broadcast_to(&astype(b, input)?, &shape)?;
    let d = op_device(&a);
    node(Primitive::Binary(op), vec![a, b], &shape, out, d)
}

// The elementwise functions and their `Array` methods, from the op tables of
// `wmx-spec` (one line an op there).
macro_rules! unary_fns {
    ($($(#[$m:meta])* $op:ident => $f:ident $(/ $js:literal)?, $kind:ident;)*) => {
        $(
            $(#[$m])*
            #[doc = concat!("\n\nElementwise, lazy ([`UnaryOp::", stringify!($op), "`]).")]
            pub fn $f(x: &Array) -> Result<Array> { unary(UnaryOp::$op, x) }
        )*
        impl Array {
            $(
                #[doc = concat!("See [`", stringify!($f), "()`].")]
                pub fn $f(&self) -> Result<Array> { unary(UnaryOp::$op, self) }
            )*
        }
    };
}
wmx_spec::for_each_unary_op!(unary_fns);

macro_rules! binary_fns {
    ($($(#[$m:meta])* $op:ident => $f:ident $(/ $js:literal)?, $kind:ident;)*) => {
        $(
            $(#[$m])*
            #[doc = concat!("\n\nElementwise with broadcasting, lazy ([`BinaryOp::", stringify!($op), "`]).")]
            pub fn $f(a: &Array, b: &Array) -> Result<Array> { binary(BinaryOp::$op, a, b) }
        )*
        impl Array {
            $(
                #[doc = concat!("See [`", stringify!($f), "()`].")]
                pub fn $f(&self, other: &Array) -> Result<Array> { binary(BinaryOp::$op, self, other) }
            )*
        }
    };
}
wmx_spec::for_each_binary_op!(binary_fns);

/// `cond ? x : y` elementwise, all three broadcast together; `cond` is converted to
/// bool (nonzero is true), `x` and `y` promoted to a common dtype.
pub fn where_(cond: &Array, x: &Array, y: &Array) -> Result<Array> {
    let shape = broadcast_shapes("where", cond.shape(), x.shape())?;
    let shape = broadcast_shapes("where", &shape, y.shape())?;
    let dt = DType::promote(x.dtype(), y.dtype());
    let c = broadcast_to(&astype(cond, DType::Bool)?, &shape)?;
    let x = broadcast_to(&astype(x, dt)?, &shape)?;
    let y = broadcast_to(&astype(y, dt)?, &shape)?;
    if dt.is_complex() {
        let c = complex::pair_indices(&c)?;
        return complex::on_pairs(&x, |x| where_(&c, x, &complex::as_real(&y)));
    }
    let d = op_device(&x);
    node(Primitive::Select, vec![c, x, y], &shape, dt, d)
}

/// Limits `x` to `[lo, hi]` (either bound optional), with broadcasting.
pub fn clip(x: &Array, lo: Option<&Array>, hi: Option<&Array>) -> Result<Array> {
    let mut r = x.clone();
    if let Some(lo) = lo {
        r = maximum(&r, lo)?;
    }
    if let Some(hi) = hi {
        r = minimum(&r, hi)?;
    }
    Ok(r)
}

/// Limits `x` to `[lo, hi]` given as numbers (PyTorch's `clamp`; either may be
/// infinite), in `x`'s dtype where the bounds fit it.
pub fn clamp(x: &Array, lo: f64, hi: f64) -> Result<Array> {
    if lo.is_nan() || hi.is_nan() || lo > hi {
        return Err(Error::invalid(
            "clamp",
            format!("bounds must be ordered numbers, got [{lo}, {hi}]"),
        ));
    }
    let lo = (lo != f64::NEG_INFINITY)
        .then(|| scalar_like(x, lo))
        .transpose()?;
    let hi = (hi != f64::INFINITY)
        .then(|| scalar_like(x, hi))
        .transpose()?;
    clip(x, lo.as_ref(), hi.as_ref())
}

/// The lower triangle of the last two axes: elements `(i, j)` with `j <= i + k`
/// kept, the others zero (numpy's `tril`; `k` above the diagonal when positive).
pub fn tril(x: &Array, k: isize) -> Result<Array> {
    triangle("tril", x, k, true)
}

/// The upper triangle of the last two axes: elements with `j >= i + k` kept
/// (numpy's `triu`).
pub fn triu(x: &Array, k: isize) -> Result<Array> {
    triangle("triu", x, k, false)
}

fn triangle(op: &'static str, x: &Array, k: isize, lower: bool) -> Result<Array> {
    let nd = x.ndim();
    if nd < 2 {
        return Err(Error::invalid(
            op,
            format!("needs 2 or more dimensions, got shape {:?}", x.shape()),
        ));
    }
    let (r, c) = (x.shape()[nd - 2], x.shape()[nd - 1]);
    let on = |f: &dyn Fn() -> Result<Array>| crate::with_device(x.device(), f);
    let i = on(&|| arange(0.0, r as f64, 1.0, DType::I32))?.reshape(&[r as isize, 1])?;
    let j = on(&|| arange(0.0, c as f64, 1.0, DType::I32))?.reshape(&[1, c as isize])?;
    let shifted = add(&i, &on(&|| scalar(k as f64, DType::I32))?)?;
    let keep = if lower {
        less_equal(&j, &shifted)?
    } else {
        greater_equal(&j, &shifted)?
    };
    where_(&keep, x, &zeros_like(x)?)
}

/// `alpha * x + beta * y` as one primitive (one pass over memory). Inputs are
/// promoted together, then to f32 if not float, and broadcast (MLX's `axpby`).
pub fn axpby(x: &Array, y: &Array, alpha: f64, beta: f64) -> Result<Array> {
    let shape = broadcast_shapes("axpby", x.shape(), y.shape())?;
    let dt = DType::promote(x.dtype(), y.dtype()).to_float();
    let x = broadcast_to(&astype(x, dt)?, &shape)?;
    let y = broadcast_to(&astype(y, dt)?, &shape)?;
    let d = op_device(&x);
    node(Primitive::Axpby { alpha, beta }, vec![x, y], &shape, dt, d)
}

/// A 0-d array of `v` typed to combine with `x` without changing `x`'s dtype where
/// the value fits (MLX's weak scalars): floats keep their dtype; integers keep
/// theirs for integral `v`, else f32; bool becomes i32 (or f32).
pub fn scalar_like(x: &Array, v: f64) -> Result<Array> {
    let integral = v.fract() == 0.0 && v.is_finite();
    let dt = match x.dtype() {
        d if d.is_float() => d,
        d if d.is_int() && integral => d,
        DType::Bool if integral => DType::I32,
        _ => DType::F32,
    };
    let d = op_device(x);
    node(Primitive::Generate(Generator::Fill(v)), vec![], &[], dt, d)
}

// ---------------------------------------------------------------- views

/// Permutes the axes (`None` reverses them). A view: no copy.
pub fn transpose(x: &Array, axes: Option<&[isize]>) -> Result<Array> {
    let nd = x.ndim();
    let perm: Vec<usize> = match axes {
        None => (0..nd).rev().collect(),
        Some(ax) => {
            if ax.len() != nd {
                return Err(Error::invalid(
                    "transpose",
                    format!("axes {ax:?} do not list {nd} dimensions"),
                ));
            }
            let perm: Vec<usize> = ax
                .iter()
                .map(|&a| normalize_axis("transpose", a, nd))
                .collect::<Result<_>>()?;
            let mut seen = vec![false; nd];
            for (&p, &a) in perm.iter().zip(ax) {
                if std::mem::replace(&mut seen[p], true) {
                    return Err(Error::invalid(
                        "transpose",
                        format!("repeated axis {a} in axes {ax:?} of an array of {nd} dimensions"),
                    ));
                }
            }
            perm
        }
    };
    Ok(view(
        x,
        ViewOp::Transpose(perm.clone()),
        x.layout().permute(&perm),
    ))
}

/// Broadcasts to `shape` (numpy rules). A view with zero strides: no copy.
pub fn broadcast_to(x: &Array, shape: &[usize]) -> Result<Array> {
    if x.shape() == shape {
        return Ok(x.clone());
    }
    let b = broadcast_shapes("broadcast_to", x.shape(), shape)?;
    crate::layout::checked_numel("broadcast_to", shape, x.dtype())?;
    if b != shape {
        return Err(Error::ShapeMismatch {
            op: "broadcast_to",
            lhs: x.shape().to_vec(),
            rhs: shape.to_vec(),
        });
    }
    Ok(view(x, ViewOp::Broadcast, x.layout().broadcast_to(shape)))
}

/// One axis of a [`slice()`]: Python's `start:stop:step` (negative indices count
/// from the end; out-of-range bounds are clamped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    /// First index (`None`: the beginning for positive steps, the end otherwise).
    pub start: Option<isize>,
    /// One past the last index (`None`: through the end in the step's direction).
    pub stop: Option<isize>,
    /// Step, nonzero.
    pub step: isize,
}

impl Slice {
    /// `::` — the whole axis.
    pub const ALL: Slice = Slice {
        start: None,
        stop: None,
        step: 1,
    };
    /// `start:stop`
    pub fn range(start: isize, stop: isize) -> Slice {
        Slice {
            start: Some(start),
            stop: Some(stop),
            step: 1,
        }
    }
    /// `start:stop:step`
    pub fn new(start: Option<isize>, stop: Option<isize>, step: isize) -> Slice {
        Slice { start, stop, step }
    }
    /// `::-1`
    pub fn reversed() -> Slice {
        Slice {
            start: None,
            stop: None,
            step: -1,
        }
    }

    /// (first index, count) over an axis of `len`, Python's `slice.indices`.
    fn resolve(&self, len: usize) -> (isize, usize) {
        // Past isize::MAX only in an empty array (another dimension is 0).
        let n = len.min(isize::MAX as usize) as isize;
        let step = self.step;
        let clamp = |v: isize, lo: isize, hi: isize| v.max(lo).min(hi);
        let norm = |v: isize| if v < 0 { v + n } else { v };
        let (start, stop) = if step > 0 {
            (
                self.start.map_or(0, |s| clamp(norm(s), 0, n)),
                self.stop.map_or(n, |s| clamp(norm(s), 0, n)),
            )
        } else {
            (
                self.start.map_or(n - 1, |s| clamp(norm(s), -1, n - 1)),
                self.stop.map_or(-1, |s| clamp(norm(s), -1, n - 1)),
            )
        };
        // Without `+ step - 1`, which overflows for steps near isize::MAX.
        let count = if step > 0 && stop > start {
            (stop - start - 1) as usize / step as usize + 1
        } else if step < 0 && start > stop {
            (start - stop - 1) as usize / step.unsigned_abs() + 1
        } else {
            0
        };
        (start, count)
    }
}

/// Strided slicing, one [`Slice`] per leading axis (missing axes are whole).
/// A view: no copy, negative steps included.
pub fn slice(x: &Array, slices: &[Slice]) -> Result<Array> {
    let (starts, steps, counts) = resolve_slices("slice", x, slices)?;
    Ok(slice_region(x, &starts, &steps, &counts))
}

/// Per axis of `x`: first index, step and count of `slices` (missing axes whole).
fn resolve_slices(
    op: &'static str,
    x: &Array,
    slices: &[Slice],
) -> Result<(Vec<usize>, Vec<isize>, Vec<usize>)> {
    if slices.len() > x.ndim() {
        return Err(Error::invalid(
            op,
            format!(
                "{} slices for an array of {} dimensions",
                slices.len(),
                x.ndim()
            ),
        ));
    }
    let (mut starts, mut steps, mut counts) = (vec![], vec![], vec![]);
    for (i, &len) in x.shape().iter().enumerate() {
        let s = slices.get(i).copied().unwrap_or(Slice::ALL);
        if s.step == 0 {
            return Err(Error::invalid(op, format!("step 0 on axis {i}")));
        }
        let (start, count) = s.resolve(len);
        // An empty region has no first element: any in-bounds start will do. With
        // at most one element the step is never taken: 1 keeps stride arithmetic
        // (stride * step) from overflowing for steps near isize::MAX.
        starts.push(if count > 0 { start as usize } else { 0 });
        steps.push(if count > 1 { s.step } else { 1 });
        counts.push(count);
    }
    Ok((starts, steps, counts))
}

/// The view of `x` at `starts`, stepping by `steps`, `counts` long per axis (every
/// axis given, the region inside `x`).
pub(crate) fn slice_region(
    x: &Array,
    starts: &[usize],
    steps: &[isize],
    counts: &[usize],
) -> Array {
    let l = x.layout();
    let mut out = l.clone();
    // Wrapping: exact for regions with elements (they lie inside `x`); an empty
    // array may have huge dims and strides, and its offset is reset below.
    for i in 0..x.ndim() {
        out.shape[i] = counts[i];
        out.strides[i] = l.strides[i].wrapping_mul(steps[i]);
        let step = (starts[i] as isize).wrapping_mul(l.strides[i]);
        out.offset = (out.offset as isize).wrapping_add(step) as usize;
    }
    if out.numel() == 0 {
        // No element is read: keep the offset inside any buffer (an empty input's
        // buffer has no element at `start`).
        out.offset = 0;
    }
    let spec = (0..x.ndim())
        .map(|i| {
            let a = starts[i] as isize;
            (
                a,
                a.wrapping_add((counts[i] as isize).wrapping_mul(steps[i])),
                steps[i],
            )
        })
        .collect();
    view(x, ViewOp::Slice(spec), out)
}

/// A copy of `x` with `update` written into `x[slices]`: functional slice
/// assignment (numpy's `x[slices] = update` without touching `x`; MLX's
/// `slice_update`). `update` broadcasts to the region's shape and is cast to
/// `x`'s dtype; the result is a new array of `x`'s shape.
pub fn slice_update(x: &Array, update: &Array, slices: &[Slice]) -> Result<Array> {
    let (starts, steps, counts) = resolve_slices("slice_update", x, slices)?;
    let u =
        broadcast_to(&astype(update, x.dtype())?, &counts).map_err(|_| Error::ShapeMismatch {
            op: "slice_update",
            lhs: update.shape().to_vec(),
            rhs: counts.clone(),
        })?;
    slice_update_region(x, &u, &starts, &steps)
}

/// [`slice_update`] of a region given exactly (`update` has its shape and `x`'s dtype).
pub(crate) fn slice_update_region(
    x: &Array,
    update: &Array,
    starts: &[usize],
    steps: &[isize],
) -> Result<Array> {
    if x.dtype().is_complex() {
        let (mut st, mut sp) = (starts.to_vec(), steps.to_vec());
        st.push(0);
        sp.push(1);
        let u = complex::as_real(update);
        return complex::on_pairs(x, |x| slice_update_region(x, &u, &st, &sp));
    }
    let d = op_device(x);
    let prim = Primitive::SliceUpdate {
        starts: starts.to_vec(),
        steps: steps.to_vec(),
    };
    node(
        prim,
        vec![x.clone(), update.clone()],
        x.shape(),
        x.dtype(),
        d,
    )
}

/// `x` itself, with a zero derivative: transforms treat it as a constant
/// (MLX's `stop_gradient`). A view: no copy.
pub fn stop_gradient(x: &Array) -> Result<Array> {
    Ok(view(x, ViewOp::StopGradient, x.layout().clone()))
}

/// Zeros of `x`'s shape and dtype on `x`'s device: a broadcast scalar, no memory.
pub fn zeros_like(x: &Array) -> Result<Array> {
    full_like(x, 0.0)
}

/// Ones of `x`'s shape and dtype on `x`'s device: a broadcast scalar, no memory.
pub fn ones_like(x: &Array) -> Result<Array> {
    full_like(x, 1.0)
}

/// `value` (cast to `x`'s dtype) in `x`'s shape on `x`'s device; a broadcast
/// scalar, no memory.
pub fn full_like(x: &Array, value: f64) -> Result<Array> {
    broadcast_to(&filled(value, x.dtype(), op_device(x))?, x.shape())
}

/// A 0-d array of `value` as `dtype` on `device`.
pub(crate) fn filled(value: f64, dtype: DType, device: Device) -> Result<Array> {
    if dtype.is_complex() {
        return astype(&filled(value, DType::F32, device)?, dtype);
    }
    node(
        Primitive::Generate(Generator::Fill(value)),
        vec![],
        &[],
        dtype,
        device,
    )
}

/// New shape with the same elements; one entry may be −1 (inferred). A view when
/// the strides allow it, else a copy first.
pub fn reshape(x: &Array, shape: &[isize]) -> Result<Array> {
    let n = x.size();
    let mut infer = None;
    let mut known = 1usize;
    for (i, &d) in shape.iter().enumerate() {
        match d {
            -1 if infer.is_none() => infer = Some(i),
            d if d >= 0 => known = known.saturating_mul(d as usize),
            _ => return Err(Error::invalid("reshape", format!("bad shape {shape:?}"))),
        }
    }
    let mut new: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    // The known dimensions' product must not wrap (it could then match `n`).
    let mut sized = new.clone();
    if let Some(i) = infer {
        sized[i] = 1;
    }
    crate::layout::checked_numel("reshape", &sized, x.dtype())?;
    if let Some(i) = infer {
        if known == 0 || !n.is_multiple_of(known) {
            return Err(Error::invalid(
                "reshape",
                format!("cannot reshape {:?} ({n} elements) to {shape:?}", x.shape()),
            ));
        }
        new[i] = n / known;
    }
    if numel(&new) != n {
        return Err(Error::invalid(
            "reshape",
            format!("cannot reshape {:?} ({n} elements) to {shape:?}", x.shape()),
        ));
    }
    reshape_exact(x, &new)
}

fn reshape_exact(x: &Array, new: &[usize]) -> Result<Array> {
    if x.shape() == new {
        return Ok(x.clone());
    }
    let src = match x.layout().reshape_strides(new) {
        Some(_) => x.clone(),
        None => contiguous(x)?,
    };
    let strides = src
        .layout()
        .reshape_strides(new)
        .expect("row-major reshapes always");
    let layout = Layout {
        shape: new.to_vec(),
        strides,
        offset: src.layout().offset,
    };
    Ok(view(&src, ViewOp::Reshape, layout))
}

/// Inserts a size-1 axis at `axis` (in the result's numbering). A view.
pub fn expand_dims(x: &Array, axis: isize) -> Result<Array> {
    let a = normalize_axis("expand_dims", axis, x.ndim() + 1)?;
    let mut l = x.layout().clone();
    l.shape.insert(a, 1);
    l.strides.insert(a, 1);
    Ok(view(x, ViewOp::Reshape, l))
}

/// Removes size-1 axes (`None`: all of them). A view.
pub fn squeeze(x: &Array, axes: Option<&[isize]>) -> Result<Array> {
    let l = x.layout();
    let axes: Vec<usize> = match axes {
        None => (0..x.ndim()).filter(|&i| l.shape[i] == 1).collect(),
        Some(ax) => {
            let ax = normalize_axes("squeeze", ax, x.ndim())?;
            if let Some(&bad) = ax.iter().find(|&&a| l.shape[a] != 1) {
                return Err(Error::invalid(
                    "squeeze",
                    format!("axis {bad} has size {}, not 1", l.shape[bad]),
                ));
            }
            ax
        }
    };
    let keep = |i: &usize| !axes.contains(i);
    let layout = Layout {
        shape: (0..x.ndim()).filter(keep).map(|i| l.shape[i]).collect(),
        strides: (0..x.ndim()).filter(keep).map(|i| l.strides[i]).collect(),
        offset: l.offset,
    };
    Ok(view(x, ViewOp::Reshape, layout))
}

// ---------------------------------------------------------------- reductions

fn resolve_axes(op: &'static str, x: &Array, axes: Option<&[isize]>) -> Result<Vec<usize>> {
    match axes {
        None => Ok((0..x.ndim()).collect()),
        Some(a) => normalize_axes(op, a, x.ndim()),
    }
}

fn keep_dims(r: Array, in_shape: &[usize], axes: &[usize], keepdims: bool) -> Result<Array> {
    if !keepdims {
        return Ok(r);
    }
    let shape: Vec<isize> = (0..in_shape.len())
        .map(|i| {
            if axes.contains(&i) {
                1
            } else {
                in_shape[i] as isize
            }
        })
        .collect();
    reshape(&r, &shape)
}

/// Reduces `axes` (`None`: all) with `op`; `keepdims` leaves them as size 1.
pub fn reduce(op: ReduceOp, x: &Array, axes: Option<&[isize]>, keepdims: bool) -> Result<Array> {
    let ax = resolve_axes(op.name(), x, axes)?;
    let out_shape = kept_shape(x.shape(), &ax);
    if matches!(op, ReduceOp::Max | ReduceOp::Min)
        && ax.iter().any(|&a| x.shape()[a] == 0)
        && numel(&out_shape) > 0
    {
        return Err(Error::invalid(
            op.name(),
            format!(
                "reduction over an empty axis of shape {:?} has no identity",
                x.shape()
            ),
        ));
    }
    let r = if x.dtype().is_complex() {
        if op != ReduceOp::Sum {
            return Err(complex::unsupported(op.name()));
        }
        let axes: Vec<isize> = ax.iter().map(|&a| a as isize).collect();
        complex::on_pairs(x, |r| sum(r, Some(&axes), false))?
    } else if ax.is_empty() {
        astype(x, op.out_dtype(x.dtype()))?
    } else {
        let d = op_device(x);
        node(
            Primitive::Reduce {
                op,
                axes: ax.clone(),
            },
            vec![x.clone()],
            &out_shape,
            op.out_dtype(x.dtype()),
            d,
        )?
    };
    keep_dims(r, x.shape(), &ax, keepdims)
}

macro_rules! reduce_fns {
    ($($f:ident => $op:ident),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($f), "` over `axes` (`None`: all); output dtype per [`ReduceOp::out_dtype`].")]
            pub fn $f(x: &Array, axes: Option<&[isize]>, keepdims: bool) -> Result<Array> {
                reduce(ReduceOp::$op, x, axes, keepdims)
            }
        )*
        impl Array {
            $(
                #[doc = concat!("See [`", stringify!($f), "()`].")]
                pub fn $f(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Array> {
                    reduce(ReduceOp::$op, self, axes, keepdims)
                }
            )*
        }
    };
}
reduce_fns!(sum => Sum, prod => Prod, max => Max, min => Min, all => All, any => Any);

/// Index (u32) of the largest element along `axis` (first NaN wins, then first max).
pub fn argmax(x: &Array, axis: isize, keepdims: bool) -> Result<Array> {
    arg_reduce(ArgReduceOp::ArgMax, x, axis, keepdims)
}

/// Index (u32) of the smallest element along `axis` (first NaN wins, then first min).
pub fn argmin(x: &Array, axis: isize, keepdims: bool) -> Result<Array> {
    arg_reduce(ArgReduceOp::ArgMin, x, axis, keepdims)
}

/// An `Err` when the u32 indices of `op` cannot count along `axis` of `x` (2^32
/// elements or more), rather than indices that wrap.
pub(crate) fn check_u32_indices(op: &'static str, x: &Array, axis: usize) -> Result<()> {
    let n = x.shape().get(axis).copied().unwrap_or(1);
    if x.size() > 0 && n as u64 > u32::MAX as u64 {
        return Err(Error::OutOfRange {
            op,
            msg: format!(
                "an axis of {n} elements (shape {:?}) is past what u32 indices count (2^32)",
                x.shape()
            ),
        });
    }
    Ok(())
}

fn arg_reduce(op: ArgReduceOp, x: &Array, axis: isize, keepdims: bool) -> Result<Array> {
    let a = normalize_axis(op.name(), axis, x.ndim())?;
    check_u32_indices(op.name(), x, a)?;
    let out_shape = kept_shape(x.shape(), &[a]);
    if x.shape()[a] == 0 && numel(&out_shape) > 0 {
        return Err(Error::invalid(
            op.name(),
            format!("empty axis {a} of shape {:?}", x.shape()),
        ));
    }
    let d = op_device(x);
    let r = node(
        Primitive::ArgReduce { op, axis: a },
        vec![x.clone()],
        &out_shape,
        DType::U32,
        d,
    )?;
    keep_dims(r, x.shape(), &[a], keepdims)
}

fn count(x: &Array, ax: &[usize]) -> usize {
    ax.iter().map(|&a| x.shape()[a]).product()
}

/// Mean over `axes`; integers give f32. An empty reduction gives NaN.
pub fn mean(x: &Array, axes: Option<&[isize]>, keepdims: bool) -> Result<Array> {
    let ax = resolve_axes("mean", x, axes)?;
    let xf = astype(x, x.dtype().to_float())?;
    let s = sum(&xf, axes, keepdims)?;
    let n = count(x, &ax) as f64;
    multiply(&s, &scalar_like(&s, 1.0 / n)?)
}

/// Variance over `axes` with `ddof` delta degrees of freedom (numpy's `var`).
pub fn var(x: &Array, axes: Option<&[isize]>, keepdims: bool, ddof: usize) -> Result<Array> {
    let ax = resolve_axes("var", x, axes)?;
    let xf = astype(x, x.dtype().to_float())?;
    let m = mean(&xf, axes, true)?;
    let d = subtract(&xf, &m)?;
    // numpy: the variance of complex values is the mean of |x - mean|^2 (real).
    let d = if d.dtype().is_complex() { abs(&d)? } else { d };
    let ss = sum(&square(&d)?, axes, keepdims)?;
    // numpy: n - ddof <= 0 divides by zero (inf, or NaN for a zero sum).
    let n = (count(x, &ax) as f64 - ddof as f64).max(0.0);
    multiply(&ss, &scalar_like(&ss, 1.0 / n)?)
}

/// Standard deviation over `axes`: the square root of [`var`] (numpy's `std`).
pub fn std(x: &Array, axes: Option<&[isize]>, keepdims: bool, ddof: usize) -> Result<Array> {
    sqrt(&var(x, axes, keepdims, ddof)?)
}

/// Elementwise `|a - b| <= atol + rtol * |b|` with broadcasting (numpy's
/// `isclose`); NaNs are equal when `equal_nan`. Integers compare as f32.
pub fn isclose(a: &Array, b: &Array, rtol: f64, atol: f64, equal_nan: bool) -> Result<Array> {
    let dt = DType::promote(a.dtype(), b.dtype()).to_float();
    let (a, b) = (astype(a, dt)?, astype(b, dt)?);
    let tol = add(
        &scalar_like(&b, atol)?,
        &multiply(&scalar_like(&b, rtol)?, &abs(&b)?)?,
    )?;
    // Equal values first: inf == inf is close although inf - inf is NaN.
    let close = logical_or(
        &equal(&a, &b)?,
        &less_equal(&abs(&subtract(&a, &b)?)?, &tol)?,
    )?;
    if equal_nan {
        logical_or(&close, &logical_and(&isnan(&a)?, &isnan(&b)?)?)
    } else {
        Ok(close)
    }
}

/// Whether every element is close ([`isclose`]); a 0-d bool array (lazy).
pub fn allclose(a: &Array, b: &Array, rtol: f64, atol: f64, equal_nan: bool) -> Result<Array> {
    all(&isclose(a, b, rtol, atol, equal_nan)?, None, false)
}

/// Whether `a` and `b` have one shape and equal elements (numpy's `array_equal`;
/// NaN is unequal): a 0-d bool array, false at once for different shapes.
pub fn array_equal(a: &Array, b: &Array) -> Result<Array> {
    if a.shape() != b.shape() {
        return with_dev(a, || scalar(0.0, DType::Bool));
    }
    all(&equal(a, b)?, None, false)
}

/// `log(sum(exp(x)))` over `axes`, computed stably (max subtracted first).
pub fn logsumexp(x: &Array, axes: Option<&[isize]>, keepdims: bool) -> Result<Array> {
    let ax = resolve_axes("logsumexp", x, axes)?;
    let xf = astype(x, x.dtype().to_float())?;
    if count(x, &ax) == 0 {
        let shape: Vec<usize> = (0..x.ndim())
            .map(|i| if ax.contains(&i) { 1 } else { x.shape()[i] })
            .collect();
        let r = with_dev(x, || full(&shape, f64::NEG_INFINITY, xf.dtype()))?;
        return if keepdims {
            Ok(r)
        } else {
            squeeze(
                &r,
                Some(&ax.iter().map(|&a| a as isize).collect::<Vec<_>>()),
            )
        };
    }
    let m = max(&xf, axes, true)?;
    // An infinite max would give inf - inf = NaN: shift by 0 there instead.
    let finite = logical_not(&isinf(&m)?)?;
    let shift = where_(&finite, &m, &scalar_like(&m, 0.0)?)?;
    let s = sum(&exp(&subtract(&xf, &shift)?)?, axes, true)?;
    let r = add(&log(&s)?, &shift)?;
    if keepdims {
        Ok(r)
    } else {
        squeeze(
            &r,
            Some(&ax.iter().map(|&a| a as isize).collect::<Vec<_>>()),
        )
    }
}

fn with_dev<R>(x: &Array, f: impl FnOnce() -> R) -> R {
    crate::with_device(&op_device(x), f)
}

// ---------------------------------------------------------------- methods

impl Array {
    /// See [`astype`].
    pub fn astype(&self, dtype: DType) -> Result<Array> {
        astype(self, dtype)
    }
    /// See [`reshape`].
    pub fn reshape(&self, shape: &[isize]) -> Result<Array> {
        reshape(self, shape)
    }
    /// See [`transpose`].
    pub fn transpose(&self, axes: Option<&[isize]>) -> Result<Array> {
        transpose(self, axes)
    }
    /// Reversed axes (matrix transpose for 2-D). A view.
    pub fn t(&self) -> Result<Array> {
        transpose(self, None)
    }
    /// See [`slice()`].
    pub fn slice(&self, slices: &[Slice]) -> Result<Array> {
        slice(self, slices)
    }
    /// See [`broadcast_to`].
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Array> {
        broadcast_to(self, shape)
    }
    /// See [`matmul`].
    pub fn matmul(&self, other: &Array) -> Result<Array> {
        matmul(self, other)
    }
    /// See [`mean`].
    pub fn mean(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Array> {
        mean(self, axes, keepdims)
    }
    /// See [`var`].
    pub fn var(&self, axes: Option<&[isize]>, keepdims: bool, ddof: usize) -> Result<Array> {
        var(self, axes, keepdims, ddof)
    }
    /// See [`std()`].
    pub fn std(&self, axes: Option<&[isize]>, keepdims: bool, ddof: usize) -> Result<Array> {
        std(self, axes, keepdims, ddof)
    }
    /// See [`logsumexp`].
    pub fn logsumexp(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Array> {
        logsumexp(self, axes, keepdims)
    }
    /// See [`argmax`].
    pub fn argmax(&self, axis: isize, keepdims: bool) -> Result<Array> {
        argmax(self, axis, keepdims)
    }
    /// See [`argmin`].
    pub fn argmin(&self, axis: isize, keepdims: bool) -> Result<Array> {
        argmin(self, axis, keepdims)
    }
    /// See [`contiguous`].
    pub fn contiguous(&self) -> Result<Array> {
        contiguous(self)
    }
    /// See [`zeros_like`].
    pub fn zeros_like(&self) -> Result<Array> {
        zeros_like(self)
    }
    /// See [`ones_like`].
    pub fn ones_like(&self) -> Result<Array> {
        ones_like(self)
    }
    /// See [`full_like`].
    pub fn full_like(&self, value: f64) -> Result<Array> {
        full_like(self, value)
    }
    /// See [`expand_dims`].
    pub fn expand_dims(&self, axis: isize) -> Result<Array> {
        expand_dims(self, axis)
    }
    /// See [`squeeze`].
    pub fn squeeze(&self, axes: Option<&[isize]>) -> Result<Array> {
        squeeze(self, axes)
    }
    /// See [`clamp`].
    pub fn clamp(&self, lo: f64, hi: f64) -> Result<Array> {
        clamp(self, lo, hi)
    }
    /// See [`tril`].
    pub fn tril(&self, k: isize) -> Result<Array> {
        tril(self, k)
    }
    /// See [`triu`].
    pub fn triu(&self, k: isize) -> Result<Array> {
        triu(self, k)
    }
    /// See [`softmax`].
    pub fn softmax(&self, axes: &[isize]) -> Result<Array> {
        softmax(self, axes)
    }
    /// See [`log_softmax`].
    pub fn log_softmax(&self, axes: &[isize]) -> Result<Array> {
        log_softmax(self, axes)
    }
    /// See [`take`].
    pub fn take(&self, indices: &Array, axis: Option<isize>) -> Result<Array> {
        take(self, indices, axis)
    }
    /// See [`take_along_axis`].
    pub fn take_along_axis(&self, indices: &Array, axis: Option<isize>) -> Result<Array> {
        take_along_axis(self, indices, axis)
    }
    /// See [`swapaxes`].
    pub fn swapaxes(&self, a: isize, b: isize) -> Result<Array> {
        swapaxes(self, a, b)
    }
    /// See [`moveaxis`].
    pub fn moveaxis(&self, from: isize, to: isize) -> Result<Array> {
        moveaxis(self, from, to)
    }
    /// See [`cumsum`].
    pub fn cumsum(&self, axis: Option<isize>, reverse: bool, inclusive: bool) -> Result<Array> {
        cumsum(self, axis, reverse, inclusive)
    }
    /// See [`cumprod`].
    pub fn cumprod(&self, axis: Option<isize>, reverse: bool, inclusive: bool) -> Result<Array> {
        cumprod(self, axis, reverse, inclusive)
    }
    /// See [`isclose`].
    pub fn isclose(&self, other: &Array, rtol: f64, atol: f64, equal_nan: bool) -> Result<Array> {
        isclose(self, other, rtol, atol, equal_nan)
    }
    /// See [`allclose`].
    pub fn allclose(&self, other: &Array, rtol: f64, atol: f64, equal_nan: bool) -> Result<Array> {
        allclose(self, other, rtol, atol, equal_nan)
    }
    /// See [`array_equal`].
    pub fn array_equal(&self, other: &Array) -> Result<Array> {
        array_equal(self, other)
    }
    /// This array computed on `device` (a copy node there; data moves at eval).
    pub fn to_device(&self, device: &Device) -> Result<Array> {
        if self.device() == device {
            return Ok(self.clone());
        }
        if self.dtype().is_complex() {
            return complex::on_pairs(self, |r| r.to_device(device));
        }
        node(
            Primitive::Copy,
            vec![self.clone()],
            self.shape(),
            self.dtype(),
            device.clone(),
        )
    }
}
