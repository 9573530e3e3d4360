//! Sorting: `argsort` and `sort` (the `ArgSort` and `Sort` primitives: stable, along
//! the last axis, entirely on the device), and `partition`, `argpartition`, `topk`
//! built on them.
//! Order as numpy's: NaN last, -0 equal to +0, equal elements keep their order.

use super::resolve_axis as resolve;
use super::{contiguous, moveaxis, node, op_device, slice_region, take_along_axis};
use crate::{Array, DType, Error, Primitive, Result};

/// The primitive on the last axis.
pub(crate) fn argsort_node(x: &Array) -> Result<Array> {
    super::check_u32_indices("argsort", x, x.ndim().saturating_sub(1))?;
    let d = op_device(x);
    node(
        Primitive::ArgSort,
        vec![x.clone()],
        x.shape(),
        DType::U32,
        d,
    )
}

/// The [`Primitive::Sort`] node on the last axis.
pub(crate) fn sort_node(x: &Array) -> Result<Array> {
    super::check_u32_indices("sort", x, x.ndim().saturating_sub(1))?;
    let d = op_device(x);
    node(Primitive::Sort, vec![x.clone()], x.shape(), x.dtype(), d)
}

/// The u32 indices that sort `x` along `axis` (`None`: the flattened array),
/// stably: equal elements keep their order, NaN sorts last, -0 equals +0.
pub fn argsort(x: &Array, axis: Option<isize>) -> Result<Array> {
    let (x, ax) = resolve("argsort", x, axis)?;
    let last = x.ndim() as isize - 1;
    let moved = contiguous(&moveaxis(&x, ax as isize, last)?)?;
    moveaxis(&argsort_node(&moved)?, last, ax as isize)
}

/// `x` sorted along `axis` (`None`: the flattened array), in [`argsort`]'s order.
pub fn sort(x: &Array, axis: Option<isize>) -> Result<Array> {
    let (x, ax) = resolve("sort", x, axis)?;
    let last = x.ndim() as isize - 1;
    let moved = contiguous(&moveaxis(&x, ax as isize, last)?)?;
    moveaxis(&sort_node(&moved)?, last, ax as isize)
}

fn check_kth(op: &'static str, x: &Array, ax: usize, kth: isize) -> Result<()> {
    let n = x.shape()[ax] as isize;
    if kth < -n || kth >= n {
        return Err(Error::OutOfRange {
            op,
            msg: format!("kth {kth} for an axis of length {n}"),
        });
    }
    Ok(())
}

/// Indices that put the `kth` element of `x` along `axis` where a sort would, the
/// smaller ones before and the larger ones after (numpy's `argpartition`). Done by
/// a full stable sort: the result is [`argsort`]'s.
pub fn argpartition(x: &Array, kth: isize, axis: Option<isize>) -> Result<Array> {
    let (x, ax) = resolve("argpartition", x, axis)?;
    check_kth("argpartition", &x, ax, kth)?;
    argsort(&x, Some(ax as isize))
}

/// `x` partitioned around its `kth` element along `axis` (numpy's `partition`); by a
/// full sort, so the result is [`sort`]'s.
pub fn partition(x: &Array, kth: isize, axis: Option<isize>) -> Result<Array> {
    let (x, ax) = resolve("partition", x, axis)?;
    check_kth("partition", &x, ax, kth)?;
    sort(&x, Some(ax as isize))
}

/// The `k` largest elements of `x` along `axis` (−1 for the last) and their u32
/// indices, largest first (NaN counts as largest, as in PyTorch's `topk`; among
/// equal elements the later one comes first).
pub fn topk(x: &Array, k: usize, axis: isize) -> Result<(Array, Array)> {
    let (x, ax) = resolve("topk", x, Some(axis))?;
    let n = x.shape()[ax];
    if k > n {
        return Err(Error::OutOfRange {
            op: "topk",
            msg: format!("k = {k} for an axis of length {n}"),
        });
    }
    let order = argsort(&x, Some(ax as isize))?;
    // The last k of the ascending order, reversed.
    let mut starts = vec![0; x.ndim()];
    starts[ax] = n.saturating_sub(1);
    let mut steps = vec![1; x.ndim()];
    steps[ax] = -1;
    let mut counts = x.shape().to_vec();
    counts[ax] = k;
    let idx = slice_region(&order, &starts, &steps, &counts);
    let vals = take_along_axis(&x, &idx, Some(ax as isize))?;
    Ok((vals, idx))
}
