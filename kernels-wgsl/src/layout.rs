//! Views of buffers ([`Strided`] inputs, [`Contig`] outputs) and shape/stride
//! helpers: bounds checks and dimension collapsing.

use crate::driver::{Binding, DriverBuffer, Window, bound_len};
use crate::dtype::DType;
use crate::{Error, Result};

/// A strided input view: `shape` and `strides` in elements (0 broadcasts, negative
/// strides allowed), starting `offset` elements into `buffer` (into its window when
/// it has one). `B` is the driver's buffer type (wgpu's by default).
#[derive(Debug)]
pub struct Strided<'a, B = wgpu::Buffer> {
    /// The buffer.
    pub buffer: &'a B,
    /// The part of `buffer` bound (`None`: all of it); `offset` counts from its start.
    pub window: Option<Window>,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: &'a [usize],
    /// Strides in elements.
    pub strides: &'a [isize],
    /// Offset of element `[0, 0, ...]` in elements.
    pub offset: usize,
}

/// A contiguous row-major output starting at element 0 of `buffer` (of its window
/// when it has one).
#[derive(Debug)]
pub struct Contig<'a, B = wgpu::Buffer> {
    /// The buffer (bytes past the output are left as they were).
    pub buffer: &'a B,
    /// The part of `buffer` bound (`None`: all of it).
    pub window: Option<Window>,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: &'a [usize],
}

// Copy without requiring `B: Copy` (the views hold references).
impl<B> Clone for Strided<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B> Copy for Strided<'_, B> {}
impl<B> Clone for Contig<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B> Copy for Contig<'_, B> {}

impl<B: PartialEq> Contig<'_, B> {
    pub(crate) fn numel(&self) -> usize {
        crate::layout::numel(self.shape)
    }
    /// Whether `x` is bound to the same bytes.
    pub(crate) fn same_binding(&self, x: &Strided<B>) -> bool {
        self.buffer == x.buffer && self.window == x.window
    }
}

/// `binding()` and `bytes()` of the view types: their buffer, through their window.
macro_rules! bound_views {
    ($($view:ident),*) => {$(
        impl<B: DriverBuffer> $view<'_, B> {
            /// What a dispatch binds for this view.
            pub(crate) fn binding(&self) -> Binding<B> {
                Binding {
                    buffer: self.buffer.clone(),
                    window: self.window,
                }
            }
            /// Bytes the kernel sees.
            pub(crate) fn bytes(&self) -> u64 {
                bound_len(self.buffer, self.window)
            }
        }
    )*};
}
bound_views!(Contig, Strided);

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

/// `Some(true)` if every stride over a dim longer than 1 is zero (a broadcast
/// scalar), `Some(false)` if the view is row-major contiguous over those dims, `None`
/// otherwise (the caller collapses dims).
pub(crate) fn dense_or_scalar(shape: &[usize], strides: &[isize]) -> Option<bool> {
    let (mut scalar, mut dense, mut expect) = (true, true, 1isize);
    for (&d, &s) in shape.iter().zip(strides).rev() {
        if d == 1 {
            continue;
        }
        scalar &= s == 0;
        dense &= s == expect;
        expect = expect.wrapping_mul(d as isize);
    }
    if scalar {
        Some(true)
    } else if dense {
        Some(false)
    } else {
        None
    }
}

/// A view of `x` (f64) as `u32` words: one more axis of two words.
pub(crate) struct Pairs {
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
}

impl Pairs {
    /// The words of f64 view `x`.
    pub(crate) fn of<B>(x: &Strided<B>) -> Pairs {
        let mut shape = x.shape.to_vec();
        shape.push(2);
        let mut strides: Vec<isize> = x.strides.iter().map(|s| 2 * s).collect();
        strides.push(1);
        Pairs {
            shape,
            strides,
            offset: 2 * x.offset,
        }
    }
    /// `x` (any dtype) repeated along a new last axis of 2 (for a view that pairs
    /// with words: a select's condition, a gather's indices).
    pub(crate) fn spread<B>(x: &Strided<B>) -> Pairs {
        let mut shape = x.shape.to_vec();
        shape.push(2);
        let mut strides = x.strides.to_vec();
        strides.push(0);
        Pairs {
            shape,
            strides,
            offset: x.offset,
        }
    }
    /// The view over `x`'s buffer (`U32` words for [`Pairs::of`], `x`'s dtype for
    /// [`Pairs::spread`]).
    pub(crate) fn view<'a, B>(&'a self, x: &Strided<'a, B>) -> Strided<'a, B> {
        Strided {
            buffer: x.buffer,
            window: x.window,
            dtype: if crate::dtype::is_wide(x.dtype) {
                DType::U32
            } else {
                x.dtype
            },
            shape: &self.shape,
            strides: &self.strides,
            offset: self.offset,
        }
    }
}

/// The shape of an f64 output's words.
pub(crate) fn pair_shape(shape: &[usize]) -> Vec<usize> {
    let mut s = shape.to_vec();
    s.push(2);
    s
}

/// `out`'s words, of shape `words` (from [`pair_shape`]).
pub(crate) fn pair_out<'a, B>(out: &Contig<'a, B>, words: &'a [usize]) -> Contig<'a, B> {
    Contig {
        buffer: out.buffer,
        window: out.window,
        dtype: DType::U32,
        shape: words,
    }
}
