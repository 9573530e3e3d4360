//! Indexing with integer arrays: `take`, `take_along_axis` (the `Gather` primitive),
//! `scatter`, `scatter_add`, `put_along_axis`, `add_along_axis` (the `Scatter`
//! primitive) and `one_hot`.
//!
//! Index rule, the same on every backend: an index `i` into an axis of length `n`
//! means `i + n` when `-n <= i < 0`. Any other index outside `0..n` reads
//! [`gather_fill`] of the dtype (NaN for floats: visible, as in JAX's `fill` mode)
//! and is dropped by the scatters. Nothing is ever read or written outside a buffer.

use super::{
    astype, broadcast_to, expand_dims, node, op_device, reshape_exact, resolve_axis as resolve,
};
use crate::{Array, BinaryOp, DType, Error, Generator, Primitive, Result, ScatterOp};

/// What a gather reads for an out-of-range index: NaN for float dtypes, the most
/// negative value for signed integers, the largest for unsigned ones, `true` for
/// bool (JAX's fill values).
pub fn gather_fill(dtype: DType) -> f64 {
    match dtype {
        DType::Bool => 1.0,
        DType::U8 => u8::MAX as f64,
        DType::U32 => u32::MAX as f64,
        DType::U64 => u64::MAX as f64,
        DType::I32 => i32::MIN as f64,
        DType::I64 => i64::MIN as f64,
        _ => f64::NAN,
    }
}

fn check_indices(op: &'static str, idx: &Array) -> Result<()> {
    if idx.dtype().is_int() {
        Ok(())
    } else {
        Err(Error::UnsupportedDType {
            op,
            dtype: idx.dtype(),
        })
    }
}

/// `indices` flattened to `T` entries and laid along `axis` of `like`'s shape (a
/// broadcast view, no copy): the take form as a gather or scatter sees it.
fn along(idx: &Array, like: &[usize], axis: usize) -> Result<Array> {
    let t = idx.size();
    let mut line = vec![1; like.len()];
    line[axis] = t;
    let mut shape = like.to_vec();
    shape[axis] = t;
    broadcast_to(&reshape_exact(idx, &line)?, &shape)
}

/// The shape `take` gives: `x`'s with `axis` replaced by the indices' shape.
fn take_shape(x: &[usize], idx: &[usize], axis: usize) -> Vec<usize> {
    let mut s = x[..axis].to_vec();
    s.extend_from_slice(idx);
    s.extend_from_slice(&x[axis + 1..]);
    s
}

/// Elements of `x` at integer `indices` along `axis` (numpy's `take`); `None`
/// indexes the flattened array. The result's shape is `x`'s with `axis` replaced by
/// the indices' shape. Index rules: `docs/SEMANTICS.md` (Indexing).
pub fn take(x: &Array, indices: &Array, axis: Option<isize>) -> Result<Array> {
    check_indices("take", indices)?;
    let (x, ax) = resolve("take", x, axis)?;
    let idx = along(indices, x.shape(), ax)?;
    let g = gather_node(&x, &idx, ax)?;
    reshape_exact(&g, &take_shape(x.shape(), indices.shape(), ax))
}

/// `out[p] = x[p with p[axis] = indices[p]]` (numpy's `take_along_axis`): `indices`
/// has `x`'s rank, and the two broadcast against each other off `axis`; `None`
/// indexes the flattened array with 1-D indices. Index rules: `docs/SEMANTICS.md`
/// (Indexing).
pub fn take_along_axis(x: &Array, indices: &Array, axis: Option<isize>) -> Result<Array> {
    check_indices("take_along_axis", indices)?;
    let (x, ax) = resolve("take_along_axis", x, axis)?;
    let (xb, ib) = align("take_along_axis", &x, indices, ax, false)?;
    gather_node(&xb, &ib, ax)
}

/// `x` and `indices` broadcast to common extents off `axis`, each keeping its own
/// length on `axis`; with `to_x`, the indices broadcast to `x`'s extents and `x`
/// stays as it is (scatters write `x`'s shape).
fn align(
    op: &'static str,
    x: &Array,
    idx: &Array,
    axis: usize,
    to_x: bool,
) -> Result<(Array, Array)> {
    let mismatch = || Error::ShapeMismatch {
        op,
        lhs: x.shape().to_vec(),
        rhs: idx.shape().to_vec(),
    };
    if idx.ndim() != x.ndim() {
        return Err(mismatch());
    }
    let mut common = x.shape().to_vec();
    for d in (0..x.ndim()).filter(|&d| d != axis) {
        let (a, b) = (x.shape()[d], idx.shape()[d]);
        common[d] = match (a, b) {
            _ if a == b => a,
            (_, 1) => a,
            (1, _) if !to_x => b,
            _ => return Err(mismatch()),
        };
    }
    let with = |n: usize| {
        let mut s = common.clone();
        s[axis] = n;
        s
    };
    let xb = broadcast_to(x, &with(x.shape()[axis]))?;
    let ib = broadcast_to(idx, &with(idx.shape()[axis]))?;
    Ok((xb, ib))
}

/// The primitive: `x` and `idx` of one rank and equal extents off `axis`.
pub(crate) fn gather_node(x: &Array, idx: &Array, axis: usize) -> Result<Array> {
    if x.dtype().is_complex() {
        let i = super::complex::pair_indices(idx)?;
        return super::complex::on_pairs(x, |r| gather_node(r, &i, axis));
    }
    let prim = Primitive::Gather { axis };
    let d = op_device(x);
    node(
        prim,
        vec![x.clone(), idx.clone()],
        idx.shape(),
        x.dtype(),
        d,
    )
}

/// The primitive: `idx` and `upd` of one shape, equal to `base`'s off `axis`;
/// `upd` of `base`'s dtype.
pub(crate) fn scatter_node(
    op: ScatterOp,
    base: &Array,
    idx: &Array,
    upd: &Array,
    axis: usize,
) -> Result<Array> {
    if op == ScatterOp::Add && base.dtype() == DType::Bool {
        return Err(Error::UnsupportedDType {
            op: op.name(),
            dtype: DType::Bool,
        });
    }
    if base.dtype().is_complex() {
        let i = super::complex::pair_indices(idx)?;
        let u = super::complex::as_real(upd);
        return super::complex::on_pairs(base, |r| scatter_node(op, r, &i, &u, axis));
    }
    let prim = Primitive::Scatter { op, axis };
    let d = op_device(base);
    let ins = vec![base.clone(), idx.clone(), upd.clone()];
    node(prim, ins, base.shape(), base.dtype(), d)
}

fn scatter_take_form(
    op: ScatterOp,
    x: &Array,
    indices: &Array,
    updates: &Array,
    axis: isize,
) -> Result<Array> {
    check_indices(op.name(), indices)?;
    let (_, ax) = resolve(op.name(), x, Some(axis))?;
    let idx = along(indices, x.shape(), ax)?;
    let want = take_shape(x.shape(), indices.shape(), ax);
    let u =
        broadcast_to(&astype(updates, x.dtype())?, &want).map_err(|_| Error::ShapeMismatch {
            op: op.name(),
            lhs: updates.shape().to_vec(),
            rhs: want.clone(),
        })?;
    let u = reshape_exact(&u, idx.shape())?;
    scatter_node(op, x, &idx, &u, ax)
}

/// A copy of `x` with `updates` written at integer `indices` along `axis`: the
/// inverse of [`take`] (`updates` has, or broadcasts to, the shape `take` would
/// give, and is cast to `x`'s dtype). With duplicate indices one of the updates
/// wins: the last on the CPU, an unspecified one on a GPU. Out-of-range indices
/// are dropped (index rules: `docs/SEMANTICS.md`, Indexing).
pub fn scatter(x: &Array, indices: &Array, updates: &Array, axis: isize) -> Result<Array> {
    scatter_take_form(ScatterOp::Set, x, indices, updates, axis)
}

/// A copy of `x` with `updates` added at integer `indices` along `axis` (the adjoint
/// of [`take`]; shapes as in [`scatter`]). Duplicate indices accumulate. Integer
/// sums are exact and deterministic; float sums are rounded to the dtype after
/// each addition, in index order on the CPU and in an unspecified order on a GPU
/// (so duplicate-heavy float sums may differ in the last bits between runs).
/// Not defined for bool.
pub fn scatter_add(x: &Array, indices: &Array, updates: &Array, axis: isize) -> Result<Array> {
    scatter_take_form(ScatterOp::Add, x, indices, updates, axis)
}

fn scatter_along(
    op: ScatterOp,
    x: &Array,
    indices: &Array,
    values: &Array,
    axis: isize,
) -> Result<Array> {
    check_indices(op.name(), indices)?;
    let (_, ax) = resolve(op.name(), x, Some(axis))?;
    let (_, idx) = align(op.name(), x, indices, ax, true)?;
    let v = broadcast_to(&astype(values, x.dtype())?, idx.shape()).map_err(|_| {
        Error::ShapeMismatch {
            op: op.name(),
            lhs: values.shape().to_vec(),
            rhs: idx.shape().to_vec(),
        }
    })?;
    scatter_node(op, x, &idx, &v, ax)
}

/// A copy of `x` with `values` written at `p with p[axis] = indices[p]` (numpy's
/// `put_along_axis`, functional): `indices` has `x`'s rank and broadcasts to `x`'s
/// extents off `axis`; `values` broadcasts to the indices' shape. Duplicates and
/// out-of-range indices as in [`scatter`].
pub fn put_along_axis(x: &Array, indices: &Array, values: &Array, axis: isize) -> Result<Array> {
    scatter_along(ScatterOp::Set, x, indices, values, axis)
}

/// As [`put_along_axis`], adding instead of writing (PyTorch's `scatter_add`);
/// duplicates accumulate as in [`scatter_add`].
pub fn add_along_axis(x: &Array, indices: &Array, values: &Array, axis: isize) -> Result<Array> {
    scatter_along(ScatterOp::Add, x, indices, values, axis)
}

/// `indices[..., None] == arange(depth)` as `dtype`: one-hot rows of length `depth`.
/// An index outside `0..depth` (negative ones included) gives a row of zeros.
pub fn one_hot(indices: &Array, depth: usize, dtype: DType) -> Result<Array> {
    check_indices("one_hot", indices)?;
    let d = op_device(indices);
    let range = Generator::Arange {
        start: 0.0,
        step: 1.0,
    };
    // u8 columns would wrap past 255.
    let col_dtype = match indices.dtype() {
        DType::U8 => DType::U32,
        t => t,
    };
    let cols = node(Primitive::Generate(range), vec![], &[depth], col_dtype, d)?;
    let hit = super::binary(BinaryOp::Equal, &expand_dims(indices, -1)?, &cols)?;
    astype(&hit, dtype)
}
