//! Shapes, strides and offsets: how an array's elements sit in its buffer.
//!
//! Views (transpose, broadcast, slice, reshape where possible) only rewrite a
//! [`Layout`]; contiguity classification and dimension collapsing live here once,
//! shared by every backend (MLX's `backend/common` idea).

use crate::{DType, Error, Result};

/// Where the elements of an array live in its buffer, in elements.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Extent of each dimension.
    pub shape: Vec<usize>,
    /// Step between neighbours along each dimension, in elements (0 = broadcast,
    /// negative = reversed).
    pub strides: Vec<isize>,
    /// Element index of `[0, 0, …]` in the buffer.
    pub offset: usize,
}

/// Number of elements of a shape. (A zero dimension first: the others may be huge,
/// their product past usize; every other shape passed [`checked_numel`].)
pub fn numel(shape: &[usize]) -> usize {
    if shape.contains(&0) {
        return 0;
    }
    shape.iter().product()
}

/// The element count of `shape`, or an `Err` naming it when the count, or its size
/// in bytes as `dtype`, exceeds `isize::MAX` (the most one allocation can hold,
/// and what strides and offsets can address). Every shape an array takes passes here.
pub fn checked_numel(op: &'static str, shape: &[usize], dtype: DType) -> Result<usize> {
    if shape.contains(&0) {
        return Ok(0);
    }
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let bytes = n.and_then(|n| n.checked_mul(dtype.size()));
    match (n, bytes) {
        (Some(n), Some(b)) if b <= isize::MAX as usize => Ok(n),
        _ => Err(Error::OutOfRange {
            op,
            msg: format!("shape {shape:?} of {dtype} holds more than isize::MAX bytes"),
        }),
    }
}

/// Row-major strides of a shape.
pub fn row_major_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for i in (0..shape.len()).rev() {
        strides[i] = acc;
        // Saturating: a shape with a zero dimension may have huge others (its
        // strides are never used); any other shape passed `checked_numel`.
        acc = acc.saturating_mul(shape[i].max(1) as isize);
    }
    strides
}

/// The shape both shapes broadcast to (numpy rules), or an error naming both.
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(Error::ShapeMismatch {
                    op,
                    lhs: a.to_vec(),
                    rhs: b.to_vec(),
                });
            }
        };
    }
    Ok(out)
}

/// The shape left after removing `axes` (the output shape of a reduction).
pub fn kept_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    (0..shape.len())
        .filter(|i| !axes.contains(i))
        .map(|i| shape[i])
        .collect()
}

/// Normalises a possibly negative axis.
pub fn normalize_axis(op: &'static str, axis: isize, ndim: usize) -> Result<usize> {
    let a = if axis < 0 { axis + ndim as isize } else { axis };
    if a < 0 || a >= ndim as isize {
        return Err(Error::BadAxis { op, axis, ndim });
    }
    Ok(a as usize)
}

/// Normalises, sorts and checks a set of axes for repeats.
pub fn normalize_axes(op: &'static str, axes: &[isize], ndim: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = normalize_axis(op, a, ndim)?;
        if out.contains(&n) {
            return Err(Error::invalid(
                op,
                format!("repeated axis {a} in axes {axes:?} of an array of {ndim} dimensions"),
            ));
        }
        out.push(n);
    }
    out.sort_unstable();
    Ok(out)
}

impl Layout {
    /// A fresh row-major layout at offset 0.
    pub fn contiguous(shape: &[usize]) -> Layout {
        Layout {
            shape: shape.to_vec(),
            strides: row_major_strides(shape),
            offset: 0,
        }
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    /// True when the elements are row-major and dense (size-1 dims ignored).
    pub fn is_row_contiguous(&self) -> bool {
        if self.shape.contains(&0) {
            return true; // no elements (the other dimensions may be huge)
        }
        let mut expected = 1isize;
        for i in (0..self.ndim()).rev() {
            if self.shape[i] == 1 {
                continue;
            }
            if self.strides[i] != expected {
                return false;
            }
            expected *= self.shape[i] as isize;
        }
        true
    }

    /// True when every element is the same memory (all strides 0 or extent 1).
    pub fn is_scalar_like(&self) -> bool {
        self.shape
            .iter()
            .zip(&self.strides)
            .all(|(&d, &s)| d == 1 || s == 0)
    }

    /// Smallest and one-past-largest element index touched (for bounds checks).
    pub fn span(&self) -> (isize, isize) {
        if self.numel() == 0 {
            return (self.offset as isize, self.offset as isize);
        }
        let (mut lo, mut hi) = (self.offset as isize, self.offset as isize);
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            let ext = (d as isize - 1) * s;
            if ext < 0 {
                lo += ext;
            } else {
                hi += ext;
            }
        }
        (lo, hi + 1)
    }

    /// Swaps dimensions by `perm` (already validated).
    pub fn permute(&self, perm: &[usize]) -> Layout {
        Layout {
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        }
    }

    /// Broadcasts to `shape` (validated by the caller) with zero strides.
    pub fn broadcast_to(&self, shape: &[usize]) -> Layout {
        let pad = shape.len() - self.ndim();
        let strides = (0..shape.len())
            .map(|i| {
                if i < pad || (self.shape[i - pad] == 1 && shape[i] != 1) {
                    0
                } else {
                    self.strides[i - pad]
                }
            })
            .collect();
        Layout {
            shape: shape.to_vec(),
            strides,
            offset: self.offset,
        }
    }

    /// Strides for viewing these elements as `shape` without a copy, if possible
    /// (numpy's `_attempt_nocopy_reshape`).
    pub fn reshape_strides(&self, shape: &[usize]) -> Option<Vec<isize>> {
        if self.numel() == 0 || self.is_row_contiguous() {
            return Some(row_major_strides(shape));
        }
        // Drop size-1 dims of the old layout; they never constrain strides.
        let old: Vec<(usize, isize)> = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(d, _)| **d != 1)
            .map(|(&d, &s)| (d, s))
            .collect();
        let mut new_strides = vec![0isize; shape.len()];
        let (mut oi, mut ni) = (0usize, 0usize);
        while ni < shape.len() && oi < old.len() {
            // Grow a group of old dims and new dims with equal element counts.
            let (mut np, mut op) = (shape[ni], old[oi].0);
            let (ns, os) = (ni, oi);
            ni += 1;
            oi += 1;
            while np != op {
                if np < op {
                    np *= shape[ni];
                    ni += 1;
                } else {
                    op *= old[oi].0;
                    oi += 1;
                }
            }
            // The old group must be contiguous in itself.
            for k in os..oi - 1 {
                if old[k].1 != old[k + 1].1 * old[k + 1].0 as isize {
                    return None;
                }
            }
            let mut acc = old[oi - 1].1;
            for k in (ns..ni).rev() {
                new_strides[k] = acc;
                acc *= shape[k] as isize;
            }
        }
        // Trailing size-1 dims of the new shape.
        for s in new_strides.iter_mut().skip(ni) {
            *s = 1;
        }
        Some(new_strides)
    }
}

/// Merges neighbouring dimensions that are contiguous with each other in *every*
/// one of `strides` (all over the same `shape`); drops size-1 dims. The result has
/// at least one dimension. MLX's `collapse_contiguous_dims`.
pub fn collapse_dims(shape: &[usize], strides: &[&[isize]]) -> (Vec<usize>, Vec<Vec<isize>>) {
    let mut out_shape: Vec<usize> = Vec::with_capacity(shape.len());
    let mut out_strides: Vec<Vec<isize>> = vec![Vec::with_capacity(shape.len()); strides.len()];
    for i in 0..shape.len() {
        if shape[i] == 1 {
            continue;
        }
        let merge = !out_shape.is_empty()
            && strides.iter().enumerate().all(|(k, s)| {
                let last = *out_strides[k].last().unwrap();
                last == s[i] * shape[i] as isize
            });
        if merge {
            let n = out_shape.len() - 1;
            out_shape[n] *= shape[i];
            for (k, s) in strides.iter().enumerate() {
                out_strides[k][n] = s[i];
            }
        } else {
            out_shape.push(shape[i]);
            for (k, s) in strides.iter().enumerate() {
                out_strides[k].push(s[i]);
            }
        }
    }
    if out_shape.is_empty() {
        out_shape.push(if numel(shape) == 0 { 0 } else { 1 });
        for s in &mut out_strides {
            s.push(1);
        }
    }
    (out_shape, out_strides)
}

/// How the inputs of an elementwise op sit in memory; chooses the kernel variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contiguity {
    /// Every input is one element repeated.
    ScalarScalar,
    /// First input a scalar, second dense.
    ScalarVector,
    /// First input dense, second a scalar.
    VectorScalar,
    /// All inputs dense row-major.
    VectorVector,
    /// Anything else: walk strides.
    General,
}

/// Classifies two inputs already broadcast to one shape.
pub fn classify_binary(a: &Layout, b: &Layout) -> Contiguity {
    let (sa, ca) = (a.is_scalar_like(), a.is_row_contiguous());
    let (sb, cb) = (b.is_scalar_like(), b.is_row_contiguous());
    match () {
        _ if sa && sb => Contiguity::ScalarScalar,
        _ if sa && cb => Contiguity::ScalarVector,
        _ if ca && sb => Contiguity::VectorScalar,
        _ if ca && cb => Contiguity::VectorVector,
        _ => Contiguity::General,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting() {
        assert_eq!(broadcast_shapes("t", &[3, 1], &[4]).unwrap(), vec![3, 4]);
        assert_eq!(broadcast_shapes("t", &[], &[2, 2]).unwrap(), vec![2, 2]);
        assert_eq!(broadcast_shapes("t", &[0], &[1]).unwrap(), vec![0]);
        let e = broadcast_shapes("add", &[3], &[4]).unwrap_err();
        assert_eq!(e.to_string(), "shape mismatch in add: [3] vs [4]");
    }

    #[test]
    fn collapse_merges_only_common_contiguity() {
        let (s, st) = collapse_dims(&[2, 3, 4], &[&[12, 4, 1], &[0, 4, 1]]);
        assert_eq!(s, vec![2, 12]);
        assert_eq!(st, vec![vec![12, 1], vec![0, 1]]);
        let (s, _) = collapse_dims(&[1, 1], &[&[1, 1]]);
        assert_eq!(s, vec![1]);
    }

    #[test]
    fn reshape_of_transposed_needs_copy() {
        let l = Layout::contiguous(&[2, 3]).permute(&[1, 0]);
        assert_eq!(l.reshape_strides(&[6]), None);
        assert_eq!(l.reshape_strides(&[3, 2, 1]), Some(vec![1, 3, 1]));
        let sliced = Layout {
            shape: vec![4, 6],
            strides: vec![12, 1],
            offset: 0,
        };
        assert_eq!(sliced.reshape_strides(&[4, 2, 3]), Some(vec![12, 3, 1]));
        assert_eq!(sliced.reshape_strides(&[24]), None);
    }
}
