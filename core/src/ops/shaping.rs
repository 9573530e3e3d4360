//! Joining, splitting and rearranging: `concatenate` (the one primitive here),
//! and `stack`, `split`, `pad`, `roll`, `tile`, `repeat`, `flatten`, `swapaxes`,
//! `moveaxis` built on it, on views and on `take`.

use super::{
    astype, broadcast_to, expand_dims, node, op_device, reshape, reshape_exact, slice_region,
    slice_update_region, take, transpose,
};
use crate::layout::{normalize_axis, numel};
use crate::{Array, DType, Error, Primitive, Result};

/// Joins arrays along an existing `axis` (numpy's `concatenate`). Every array has
/// the same rank (at least 1) and the same extents off `axis`; dtypes promote to a
/// common one. The result is a new array.
pub fn concatenate(xs: &[&Array], axis: isize) -> Result<Array> {
    let first = xs
        .first()
        .ok_or_else(|| Error::invalid("concatenate", "needs at least one array"))?;
    let nd = first.ndim();
    if nd == 0 {
        return Err(Error::invalid(
            "concatenate",
            "zero-dimensional arrays cannot be concatenated (stack them)",
        ));
    }
    let ax = normalize_axis("concatenate", axis, nd)?;
    let mut dtype = first.dtype();
    let mut len = 0usize;
    for x in xs {
        let same_off_axis =
            x.ndim() == nd && (0..nd).all(|d| d == ax || x.shape()[d] == first.shape()[d]);
        if !same_off_axis {
            return Err(Error::ShapeMismatch {
                op: "concatenate",
                lhs: first.shape().to_vec(),
                rhs: x.shape().to_vec(),
            });
        }
        dtype = DType::promote(dtype, x.dtype());
        len = len
            .checked_add(x.shape()[ax])
            .ok_or_else(|| Error::OutOfRange {
                op: "concatenate",
                msg: format!("axis {ax} of the result is longer than usize::MAX"),
            })?;
    }
    let inputs: Vec<Array> = xs.iter().map(|x| astype(x, dtype)).collect::<Result<_>>()?;
    let mut shape = first.shape().to_vec();
    shape[ax] = len;
    concat_node(inputs, ax, &shape)
}

/// The primitive on inputs already of one dtype and matching shapes.
pub(crate) fn concat_node(inputs: Vec<Array>, axis: usize, shape: &[usize]) -> Result<Array> {
    if inputs.len() == 1 {
        return Ok(inputs[0].clone());
    }
    if inputs[0].dtype().is_complex() {
        let pairs: Vec<Array> = inputs.iter().map(super::complex::as_real).collect();
        let mut shape = shape.to_vec();
        shape.push(2);
        return super::complex::as_complex(&concat_node(pairs, axis, &shape)?);
    }
    let d = op_device(&inputs[0]);
    let dtype = inputs[0].dtype();
    node(Primitive::Concatenate { axis }, inputs, shape, dtype, d)
}

/// Joins arrays of one shape along a new `axis` (numpy's `stack`).
pub fn stack(xs: &[&Array], axis: isize) -> Result<Array> {
    let first = xs
        .first()
        .ok_or_else(|| Error::invalid("stack", "needs at least one array"))?;
    if let Some(x) = xs.iter().find(|x| x.shape() != first.shape()) {
        return Err(Error::ShapeMismatch {
            op: "stack",
            lhs: first.shape().to_vec(),
            rhs: x.shape().to_vec(),
        });
    }
    let ax = normalize_axis("stack", axis, first.ndim() + 1)? as isize;
    let ex: Vec<Array> = xs
        .iter()
        .map(|x| expand_dims(x, ax))
        .collect::<Result<_>>()?;
    concatenate(&ex.iter().collect::<Vec<_>>(), ax)
}

/// The part of `x` from `start`, `count` long, on `axis` (a view).
fn axis_part(x: &Array, axis: usize, start: usize, count: usize) -> Array {
    let mut starts = vec![0; x.ndim()];
    starts[axis] = start;
    let mut counts = x.shape().to_vec();
    counts[axis] = count;
    slice_region(x, &starts, &vec![1; x.ndim()], &counts)
}

/// Splits `x` into `sections` equal parts along `axis` (numpy's `split` with a
/// number): an error unless the axis divides evenly. The parts are views.
pub fn split(x: &Array, sections: usize, axis: isize) -> Result<Vec<Array>> {
    let ax = normalize_axis("split", axis, x.ndim())?;
    let n = x.shape()[ax];
    if sections == 0 || !n.is_multiple_of(sections) {
        return Err(Error::invalid(
            "split",
            format!("axis {ax} of length {n} does not split into {sections} equal sections"),
        ));
    }
    let len = n / sections;
    Ok((0..sections)
        .map(|i| axis_part(x, ax, i * len, len))
        .collect())
}

/// Splits `x` before each of `indices` along `axis` (numpy's `split` with indices:
/// `[2, 5]` gives `x[:2]`, `x[2:5]`, `x[5:]`). Negative indices count from the
/// end; indices past the end, or smaller than the one before, give empty parts as
/// in numpy. The parts are views.
pub fn split_at(x: &Array, indices: &[isize], axis: isize) -> Result<Vec<Array>> {
    let ax = normalize_axis("split_at", axis, x.ndim())?;
    let n = x.shape()[ax] as isize;
    let clamp = |i: isize| (if i < 0 { i + n } else { i }).clamp(0, n) as usize;
    let mut bounds: Vec<usize> = vec![0];
    bounds.extend(indices.iter().map(|&i| clamp(i)));
    bounds.push(n as usize);
    Ok(bounds
        .windows(2)
        .map(|w| axis_part(x, ax, w[0], w[1].saturating_sub(w[0])))
        .collect())
}

/// How [`pad`] fills the new elements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PadMode {
    /// A constant (cast to the array's dtype).
    Constant(f64),
    /// The nearest edge element repeated (numpy's `"edge"`).
    Edge,
    /// Mirrored without repeating the edge (numpy's `"reflect"`): `[1 2 3]` padded
    /// by 2 on each side is `[3 2 1 2 3 2 1]`.
    Reflect,
}

/// Pads each axis by `widths[axis] = (before, after)` elements (numpy's `pad`);
/// a single pair applies to every axis. The result is a new array.
pub fn pad(x: &Array, widths: &[(usize, usize)], mode: PadMode) -> Result<Array> {
    let nd = x.ndim();
    let widths: Vec<(usize, usize)> = match widths.len() {
        1 => vec![widths[0]; nd],
        n if n == nd => widths.to_vec(),
        n => {
            return Err(Error::invalid(
                "pad",
                format!("{n} (before, after) pairs for an array of {nd} dimensions"),
            ));
        }
    };
    let shape: Vec<usize> = (0..nd)
        .map(|d| {
            let s = x.shape()[d]
                .checked_add(widths[d].0)?
                .checked_add(widths[d].1)?;
            // Edge and reflect gather with i32 indices along each axis.
            (matches!(mode, PadMode::Constant(_)) || s <= i32::MAX as usize).then_some(s)
        })
        .collect::<Option<_>>()
        .ok_or_else(|| Error::OutOfRange {
            op: "pad",
            msg: format!("{:?} padded by {widths:?} overflows", x.shape()),
        })?;
    crate::layout::checked_numel("pad", &shape, x.dtype())?;
    match mode {
        PadMode::Constant(v) => {
            let starts: Vec<usize> = widths.iter().map(|w| w.0).collect();
            let scalar = super::filled(v, x.dtype(), op_device(x))?;
            let base = broadcast_to(&scalar, &shape)?;
            slice_update_region(&base, x, &starts, &vec![1; nd])
        }
        PadMode::Edge | PadMode::Reflect => {
            let mut y = x.clone();
            for (d, &(lo, hi)) in widths.iter().enumerate() {
                if lo == 0 && hi == 0 {
                    continue;
                }
                let n = x.shape()[d] as i64;
                if n == 0 || (mode == PadMode::Reflect && n == 1) {
                    return Err(Error::invalid(
                        "pad",
                        format!("{mode:?} padding of axis {d} of length {n}"),
                    ));
                }
                let idx: Vec<i32> = (-(lo as i64)..n + hi as i64)
                    .map(|i| match mode {
                        PadMode::Edge => i.clamp(0, n - 1) as i32,
                        _ => reflect(i, n) as i32,
                    })
                    .collect();
                let idx = Array::from_slice_on(&idx, &[idx.len()], x.device())?;
                y = take(&y, &idx, Some(d as isize))?;
            }
            Ok(y)
        }
    }
}

/// Index `i` of an axis of length `n >= 2` mirrored back into `0..n`.
fn reflect(i: i64, n: i64) -> i64 {
    let period = 2 * (n - 1);
    let m = i.rem_euclid(period);
    if m < n { m } else { period - m }
}

/// Shifts elements by `shift` along `axis`, wrapping around (numpy's `roll`);
/// `None` rolls the flattened array and keeps the shape. A new array.
pub fn roll(x: &Array, shift: isize, axis: Option<isize>) -> Result<Array> {
    let Some(axis) = axis else {
        let flat = reshape(x, &[-1])?;
        let shape: Vec<isize> = x.shape().iter().map(|&d| d as isize).collect();
        return reshape(&roll(&flat, shift, Some(0))?, &shape);
    };
    let ax = normalize_axis("roll", axis, x.ndim())?;
    let n = x.shape()[ax];
    if n == 0 {
        return Ok(x.clone());
    }
    let s = shift.rem_euclid(n as isize) as usize;
    let (tail, head) = (axis_part(x, ax, n - s, s), axis_part(x, ax, 0, n - s));
    concat_node(vec![tail, head], ax, x.shape())
}

/// `x` repeated `reps[d]` times along each axis (numpy's `tile`): when `reps` is
/// longer than the rank, `x` gains leading axes of length 1; when shorter, `reps`
/// gains leading 1s. A new array.
pub fn tile(x: &Array, reps: &[usize]) -> Result<Array> {
    let nd = x.ndim().max(reps.len());
    let pad1 = |v: &[usize]| {
        let mut p = vec![1; nd - v.len()];
        p.extend_from_slice(v);
        p
    };
    let (shape, reps) = (pad1(x.shape()), pad1(reps));
    // [1, n0, 1, n1, ...] broadcast to [r0, n0, r1, n1, ...], then merged.
    let inter: Vec<usize> = (0..nd).flat_map(|d| [1, shape[d]]).collect();
    let wide: Vec<usize> = (0..nd).flat_map(|d| [reps[d], shape[d]]).collect();
    let out: Vec<usize> = (0..nd).map(|d| reps[d] * shape[d]).collect();
    let y = broadcast_to(&reshape_exact(x, &inter)?, &wide)?;
    reshape_exact(&y, &out)
}

/// Each element repeated `repeats` times along `axis` (numpy's `repeat` with one
/// count); `None` repeats the flattened array. A new array.
pub fn repeat(x: &Array, repeats: usize, axis: Option<isize>) -> Result<Array> {
    let Some(axis) = axis else {
        return repeat(&reshape(x, &[-1])?, repeats, Some(0));
    };
    let ax = normalize_axis("repeat", axis, x.ndim())?;
    let mut wide = x.shape().to_vec();
    wide.insert(ax + 1, repeats);
    let mut out = x.shape().to_vec();
    out[ax] *= repeats;
    let y = broadcast_to(&expand_dims(x, ax as isize + 1)?, &wide)?;
    reshape_exact(&y, &out)
}

/// Merges axes `start..=end` into one (MLX's `flatten`; `(0, -1)` gives 1-D). A view
/// when the strides allow it. A scalar becomes a 1-element 1-D array.
pub fn flatten(x: &Array, start: isize, end: isize) -> Result<Array> {
    if x.ndim() == 0 {
        return reshape_exact(x, &[1]);
    }
    let (s, e) = (
        normalize_axis("flatten", start, x.ndim())?,
        normalize_axis("flatten", end, x.ndim())?,
    );
    if s > e {
        return Err(Error::invalid(
            "flatten",
            format!("start axis {s} is after end axis {e}"),
        ));
    }
    let sh = x.shape();
    let mut shape = sh[..s].to_vec();
    shape.push(numel(&sh[s..=e]));
    shape.extend_from_slice(&sh[e + 1..]);
    reshape_exact(x, &shape)
}

/// Exchanges two axes. A view.
pub fn swapaxes(x: &Array, a: isize, b: isize) -> Result<Array> {
    let nd = x.ndim();
    let (a, b) = (
        normalize_axis("swapaxes", a, nd)?,
        normalize_axis("swapaxes", b, nd)?,
    );
    let mut perm: Vec<isize> = (0..nd as isize).collect();
    perm.swap(a, b);
    transpose(x, Some(&perm))
}

/// Moves axis `source` to position `destination`, the others keeping their order.
/// A view.
pub fn moveaxis(x: &Array, source: isize, destination: isize) -> Result<Array> {
    let nd = x.ndim();
    let (s, d) = (
        normalize_axis("moveaxis", source, nd)?,
        normalize_axis("moveaxis", destination, nd)?,
    );
    let mut perm: Vec<isize> = (0..nd as isize).filter(|&i| i != s as isize).collect();
    perm.insert(d, s as isize);
    transpose(x, Some(&perm))
}
