//! Shape/stride helpers: bounds checks and dimension collapsing.

use crate::kernels::{Contig, Strided};
use crate::{Error, Result};

/// Row-major strides of a contiguous shape.
/// Whether `x` is row-major over its dims longer than 1 (any offset): kernels that
/// read rows in place take such inputs.
pub(crate) fn is_row_major<B>(x: &Strided<B>) -> bool {
    contiguous_strides(x.shape)
        .iter()
        .zip(x.strides)
        .zip(x.shape)
        .all(|((a, s), &d)| d == 1 || a == s)
}

pub(crate) fn contiguous_strides(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for i in (0..shape.len()).rev() {
        s[i] = acc;
        acc *= shape[i] as isize;
    }
    s
}

/// Checks the view's strides match its shape and that every element it addresses
/// lies inside its buffer (kernels are created without runtime bounds checks).
/// Returns the largest element offset.
pub(crate) fn check_view<B: crate::DriverBuffer>(x: &Strided<B>, what: &str) -> Result<u64> {
    if x.shape.len() != x.strides.len() {
        return Err(Error::Shape(format!(
            "{what}: shape {:?} has {} dims but strides {:?} have {}",
            x.shape,
            x.shape.len(),
            x.strides,
            x.strides.len()
        )));
    }
    let n = numel(x.shape);
    if n == 0 {
        return Ok(0);
    }
    let (mut lo, mut hi) = (x.offset as i128, x.offset as i128);
    for (&d, &s) in x.shape.iter().zip(x.strides) {
        let span = (d as i128 - 1) * s as i128;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    let end = (hi + 1) * x.dtype.size() as i128;
    if lo < 0 || end > x.bytes() as i128 || hi >= u32::MAX as i128 {
        return Err(Error::Shape(format!(
            "{what}: view (shape {:?}, strides {:?}, offset {}) of {} addresses elements {lo}..={hi}, \
             outside its {}-byte buffer",
            x.shape,
            x.strides,
            x.offset,
            x.dtype,
            x.bytes()
        )));
    }
    Ok(hi as u64)
}

/// Checks that a contiguous output of `n` elements fits its buffer.
pub(crate) fn check_out<B: crate::DriverBuffer>(out: &Contig<B>) -> Result<()> {
    let n = out.numel() as u64;
    let bytes = (n * out.dtype.size() as u64).div_ceil(4) * 4;
    if bytes > out.bytes() {
        return Err(Error::Shape(format!(
            "output of shape {:?} ({}) needs {bytes} bytes, buffer has {}",
            out.shape,
            out.dtype,
            out.bytes()
        )));
    }
    Ok(())
}

/// Removes size-1 dims and merges neighbouring dims that are contiguous with each
/// other in every one of `strides` (MLX's collapse_contiguous_dims). Returns the new
/// shape and one stride list per input.
pub(crate) fn collapse(shape: &[usize], strides: &[&[isize]]) -> (Vec<usize>, Vec<Vec<isize>>) {
    let mut sh: Vec<usize> = Vec::new();
    let mut st: Vec<Vec<isize>> = vec![Vec::new(); strides.len()];
    for d in 0..shape.len() {
        if shape[d] == 1 {
            continue;
        }
        let merge = !sh.is_empty()
            && strides
                .iter()
                .zip(&st)
                .all(|(s, out)| out[out.len() - 1] == s[d].wrapping_mul(shape[d] as isize));
        if merge {
            // Saturating: an empty view may have huge other dims (nothing is read).
            let last = sh.len() - 1;
            sh[last] = sh[last].saturating_mul(shape[d]);
            for (s, out) in strides.iter().zip(st.iter_mut()) {
                let l = out.len() - 1;
                out[l] = s[d];
            }
        } else {
            sh.push(shape[d]);
            for (s, out) in strides.iter().zip(st.iter_mut()) {
                out.push(s[d]);
            }
        }
    }
    (sh, st)
}

/// Elements of a shape, a zero dimension first (the others may then be huge).
pub(crate) fn numel(shape: &[usize]) -> usize {
    if shape.contains(&0) {
        0
    } else {
        shape.iter().product()
    }
}
