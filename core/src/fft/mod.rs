//! Discrete Fourier transforms, numpy's `np.fft`: `fft`, `ifft`, `rfft`, `irfft`
//! and their 2-D and n-D forms, with numpy's `n`/`s`, `axes` and `norm`; the
//! helpers `fftfreq`, `rfftfreq`, `fftshift` and `ifftshift`.
//!
//! - **Dtypes.** Results are complex64 (real ones for `irfft*`); inputs of any
//!   real dtype are cast first (`rfft*` refuses complex input, as numpy).
//! - **Lengths.** Any length. On the CPU each transform runs in f64 (mixed radix
//!   2, 3, 4, 5, 7, direct sums for primes up to 64, Bluestein's algorithm
//!   beyond) and rounds once to f32. On a GPU a kernel transforms rows of a
//!   power of two up to 2048 in one workgroup (in workgroup memory: a radix-2
//!   step for an odd log2 n, radix-16 steps of 16 points an invocation in
//!   registers, a radix-4 step for the last two); longer powers of two are
//!   four-step transforms of those rows (twiddles applied by the kernel), other
//!   lengths Bluestein convolutions of powers of two, computed in f32. `rfft`
//!   and `irfft` of a power of two `n` are one complex transform of `n / 2`
//!   points there (the even and odd points as real and imaginary parts) and a
//!   step that splits or joins the halves, in the same pass up to `n = 4096`.
//! - **Normalization.** `Norm::Backward` (numpy's default: the inverse divides by
//!   `n`), `Ortho` (both by `sqrt(n)`), `Forward` (the forward divides by `n`).
//! - **Derivatives.** vjp, jvp and vmap of every function. Gradients of complex
//!   values follow MLX and PyTorch ([`crate::complex`]): for a real loss `L`,
//!   `grad` gives `dL/dx + i dL/dy`.
//! - **Bad input.** A length below 1, an axis out of range, repeated axes, or
//!   `s` and `axes` of different lengths are an `Err` when the op is made.

mod prim;
pub use prim::{FftPass, FftReal, MAX_ROW, TABLE, twiddles};

use crate::ops::complex::{as_complex, as_real};
use crate::{Array, CustomFunction, DType, Error, Result, Slice, layout::normalize_axis};

/// The scaling of a transform and its inverse (numpy's `norm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Norm {
    /// The forward transform is unscaled, the inverse divides by `n`.
    #[default]
    Backward,
    /// Both divide by `sqrt(n)` (unitary).
    Ortho,
    /// The forward transform divides by `n`, the inverse is unscaled.
    Forward,
}

impl Norm {
    /// numpy's name (`"backward"`, `"ortho"`, `"forward"`).
    pub fn from_name(name: &str) -> Result<Norm> {
        match name {
            "backward" => Ok(Norm::Backward),
            "ortho" => Ok(Norm::Ortho),
            "forward" => Ok(Norm::Forward),
            _ => Err(Error::invalid(
                "fft",
                format!("norm must be \"backward\", \"ortho\" or \"forward\", got {name:?}"),
            )),
        }
    }

    fn scale(self, n: usize, inverse: bool) -> f64 {
        match (self, inverse) {
            (Norm::Backward, false) | (Norm::Forward, true) => 1.0,
            (Norm::Ortho, _) => 1.0 / (n as f64).sqrt(),
            _ => 1.0 / n as f64,
        }
    }
}

/// The 1-D transform of `a` along `axis`, `n` points (`None`: the axis' length;
/// shorter crops, longer pads with zeros), numpy's `fft.fft`.
pub fn fft(a: &Array, n: Option<usize>, axis: isize, norm: Norm) -> Result<Array> {
    c2c("fft", a, &[n], &[axis], norm, false)
}

/// The inverse of [`fft`] (numpy's `fft.ifft`).
pub fn ifft(a: &Array, n: Option<usize>, axis: isize, norm: Norm) -> Result<Array> {
    c2c("ifft", a, &[n], &[axis], norm, true)
}

/// The transform of real input, the `n / 2 + 1` non-negative frequencies
/// (numpy's `fft.rfft`).
pub fn rfft(a: &Array, n: Option<usize>, axis: isize, norm: Norm) -> Result<Array> {
    r2c("rfft", a, &[n], &[axis], norm)
}

/// The inverse of [`rfft`]: `n` real points (`None`: `2 (m - 1)` for `m` input
/// points) from the non-negative frequencies (numpy's `fft.irfft`; the imaginary
/// parts of the zero and, for even `n`, the Nyquist frequency are ignored).
pub fn irfft(a: &Array, n: Option<usize>, axis: isize, norm: Norm) -> Result<Array> {
    c2r("irfft", a, &[n], &[axis], norm)
}

/// The 2-D transform over `axes` (default the last two), numpy's `fft.fft2`.
pub fn fft2(a: &Array, s: Option<&[usize]>, axes: Option<&[isize]>, norm: Norm) -> Result<Array> {
    fftn(a, s, Some(axes.unwrap_or(&[-2, -1])), norm)
}

/// The inverse of [`fft2`].
pub fn ifft2(a: &Array, s: Option<&[usize]>, axes: Option<&[isize]>, norm: Norm) -> Result<Array> {
    ifftn(a, s, Some(axes.unwrap_or(&[-2, -1])), norm)
}

/// [`rfftn`] over two axes (default the last two).
pub fn rfft2(a: &Array, s: Option<&[usize]>, axes: Option<&[isize]>, norm: Norm) -> Result<Array> {
    rfftn(a, s, Some(axes.unwrap_or(&[-2, -1])), norm)
}

/// [`irfftn`] over two axes (default the last two).
pub fn irfft2(a: &Array, s: Option<&[usize]>, axes: Option<&[isize]>, norm: Norm) -> Result<Array> {
    irfftn(a, s, Some(axes.unwrap_or(&[-2, -1])), norm)
}

/// The n-D transform over `axes` (default: the last `s.len()` axes, or all),
/// `s` points along each (numpy's `fft.fftn`).
pub fn fftn(a: &Array, s: Option<&[usize]>, axes: Option<&[isize]>, norm: Norm) -> Result<Array> {
    let (s, axes) = plan_axes("fftn", a, s, axes)?;
    c2c("fftn", a, &s, &axes, norm, false)
}

/// The inverse of [`fftn`].
pub fn ifftn(a: &Array, s: Option<&[usize]>, axes: Option<&[isize]>, norm: Norm) -> Result<Array> {
    let (s, axes) = plan_axes("ifftn", a, s, axes)?;
    c2c("ifftn", a, &s, &axes, norm, true)
}

/// The n-D transform of real input: [`rfft`] along the last of `axes`, then
/// [`fft`] along the others (numpy's `fft.rfftn`).
pub fn rfftn(a: &Array, s: Option<&[usize]>, axes: Option<&[isize]>, norm: Norm) -> Result<Array> {
    let (s, axes) = plan_axes("rfftn", a, s, axes)?;
    r2c("rfftn", a, &s, &axes, norm)
}

/// The inverse of [`rfftn`]: [`ifft`] along all of `axes` but the last, then
/// [`irfft`] along it (`s` its output length: default `2 (m - 1)`).
pub fn irfftn(a: &Array, s: Option<&[usize]>, axes: Option<&[isize]>, norm: Norm) -> Result<Array> {
    let (s, axes) = plan_axes("irfftn", a, s, axes)?;
    c2r("irfftn", a, &s, &axes, norm)
}

/// The sample frequencies of an `n`-point transform with sample spacing `d`
/// (numpy's `fft.fftfreq`): `[0, 1, ..., (n - 1) / 2, -(n / 2), ..., -1] / (d n)`,
/// f32, on the default device.
pub fn fftfreq(n: usize, d: f64) -> Result<Array> {
    check_freq("fftfreq", n, d)?;
    let k = crate::arange(0.0, n as f64, 1.0, DType::F32)?;
    // k - n for k >= (n + 1) / 2: the negative frequencies.
    let wrap = crate::greater_equal(&k, &crate::scalar(n.div_ceil(2) as f64, DType::F32)?)?;
    let shifted = crate::where_(
        &wrap,
        &crate::subtract(&k, &crate::scalar(n as f64, DType::F32)?)?,
        &k,
    )?;
    crate::multiply(&shifted, &crate::scalar(1.0 / (d * n as f64), DType::F32)?)
}

/// The non-negative sample frequencies of [`rfft`] (numpy's `fft.rfftfreq`):
/// `[0, 1, ..., n / 2] / (d n)`.
pub fn rfftfreq(n: usize, d: f64) -> Result<Array> {
    check_freq("rfftfreq", n, d)?;
    let k = crate::arange(0.0, (n / 2 + 1) as f64, 1.0, DType::F32)?;
    crate::multiply(&k, &crate::scalar(1.0 / (d * n as f64), DType::F32)?)
}

fn check_freq(op: &'static str, n: usize, d: f64) -> Result<()> {
    if n == 0 || !(d.is_finite() && d != 0.0) {
        return Err(Error::invalid(
            op,
            format!("needs n >= 1 and a finite, nonzero spacing d, got n={n}, d={d}"),
        ));
    }
    Ok(())
}

/// The zero frequency moved to the middle of `axes` (default all; numpy's
/// `fft.fftshift`): a roll by `n / 2` along each.
pub fn fftshift(x: &Array, axes: Option<&[isize]>) -> Result<Array> {
    shift_axes("fftshift", x, axes, false)
}

/// The inverse of [`fftshift`] (a roll by `-(n / 2)`; the same for even `n`).
pub fn ifftshift(x: &Array, axes: Option<&[isize]>) -> Result<Array> {
    shift_axes("ifftshift", x, axes, true)
}

fn shift_axes(op: &'static str, x: &Array, axes: Option<&[isize]>, back: bool) -> Result<Array> {
    let all: Vec<isize> = (0..x.ndim() as isize).collect();
    let mut y = x.clone();
    for &a in axes.unwrap_or(&all) {
        let ax = normalize_axis(op, a, x.ndim())?;
        let half = (x.shape()[ax] / 2) as isize;
        y = crate::roll(&y, if back { -half } else { half }, Some(ax as isize))?;
    }
    Ok(y)
}

/// numpy's rules for `s` and `axes` of the n-D functions.
fn plan_axes(
    op: &'static str,
    a: &Array,
    s: Option<&[usize]>,
    axes: Option<&[isize]>,
) -> Result<(Vec<Option<usize>>, Vec<isize>)> {
    let nd = a.ndim() as isize;
    let axes: Vec<isize> = match (s, axes) {
        (_, Some(ax)) => ax.to_vec(),
        (Some(s), None) => (nd - s.len() as isize..nd).collect(),
        (None, None) => (0..nd).collect(),
    };
    let s: Vec<Option<usize>> = match s {
        Some(s) if s.len() != axes.len() => {
            return Err(Error::invalid(
                op,
                format!("s {s:?} and axes {axes:?} have different lengths"),
            ));
        }
        Some(s) => s.iter().map(|&n| Some(n)).collect(),
        None => vec![None; axes.len()],
    };
    Ok((s, axes))
}

/// Normalized axes (each once) with their lengths (`None`: the axis' own).
fn resolve(
    op: &'static str,
    a: &Array,
    s: &[Option<usize>],
    axes: &[isize],
) -> Result<Vec<(usize, usize)>> {
    if axes.is_empty() {
        return Err(Error::invalid(op, "needs at least one axis"));
    }
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (&ax, &n) in axes.iter().zip(s) {
        let ax = normalize_axis(op, ax, a.ndim())?;
        if out.iter().any(|o| o.0 == ax) {
            return Err(Error::invalid(
                op,
                format!("axis {ax} repeated in {axes:?}"),
            ));
        }
        let n = n.unwrap_or(a.shape()[ax]);
        if n < 1 {
            return Err(Error::invalid(
                op,
                format!("invalid number of data points ({n}) along axis {ax}"),
            ));
        }
        out.push((ax, n));
    }
    Ok(out)
}

fn c2c(
    op: &'static str,
    a: &Array,
    s: &[Option<usize>],
    axes: &[isize],
    norm: Norm,
    inverse: bool,
) -> Result<Array> {
    let plan = resolve(op, a, s, axes)?;
    let mut z = a.astype(DType::C64)?;
    for &(ax, n) in plan.iter().rev() {
        z = along(&z, ax, n, norm, inverse)?;
    }
    Ok(z)
}

fn r2c(
    op: &'static str,
    a: &Array,
    s: &[Option<usize>],
    axes: &[isize],
    norm: Norm,
) -> Result<Array> {
    if a.dtype().is_complex() {
        return Err(Error::invalid(
            op,
            "takes real input (use fft for complex input)",
        ));
    }
    let plan = resolve(op, a, s, axes)?;
    let (last, rest) = plan.split_last().expect("one axis or more");
    let (ax, n) = *last;
    let mut z = if half_length(a, n) {
        let x = crate::moveaxis(&fit(&a.astype(DType::F32)?, ax, n)?, ax as isize, -1)?;
        crate::moveaxis(&rfft_last(&x, n, norm)?, -1, ax as isize)?
    } else {
        rfft_full(a, ax, n, norm)?
    };
    for &(ax, n) in rest.iter().rev() {
        z = along(&z, ax, n, norm, false)?;
    }
    Ok(z)
}

fn c2r(
    op: &'static str,
    a: &Array,
    s: &[Option<usize>],
    axes: &[isize],
    norm: Norm,
) -> Result<Array> {
    let mut z = a.astype(DType::C64)?;
    let (last_ax, last_n) = {
        let ax = normalize_axis(op, *axes.last().unwrap_or(&-1), a.ndim())?;
        let m = a.shape()[ax];
        let n = s
            .last()
            .copied()
            .flatten()
            .unwrap_or(2 * m.saturating_sub(1));
        (ax, n)
    };
    let mut s = s.to_vec();
    if let Some(l) = s.last_mut() {
        *l = Some(last_n);
    }
    let plan = resolve(op, a, &s, axes)?;
    for &(ax, n) in plan[..plan.len() - 1].iter().rev() {
        z = along(&z, ax, n, norm, true)?;
    }
    // The full Hermitian spectrum from its first n / 2 + 1 points: X[n - k] =
    // conj(X[k]); the real part of its inverse is numpy's irfft.
    let n = last_n;
    let half = fit(&z, last_ax, n / 2 + 1)?;
    if half_length(a, n) {
        let h = crate::moveaxis(&half, last_ax as isize, -1)?;
        return crate::moveaxis(&irfft_last(&h, n, norm)?, -1, last_ax as isize);
    }
    irfft_full(&half, last_ax, n, norm)
}

/// numpy's irfft along `last_ax` to `n` points from `half`, the spectrum's first
/// `n / 2 + 1` points, by the full inverse transform.
fn irfft_full(half: &Array, last_ax: usize, n: usize, norm: Norm) -> Result<Array> {
    let mirror = if n > n / 2 + 1 {
        let tail = slice_axis(
            half,
            last_ax,
            Slice::new(Some(1), Some((n - n / 2) as isize), 1),
        )?;
        let flipped = slice_axis(&tail, last_ax, Slice::reversed())?;
        Some(crate::conj(&flipped)?)
    } else {
        None
    };
    let full = match &mirror {
        Some(m) => crate::concatenate(&[half, m], last_ax as isize)?,
        None => crop(half, last_ax, n)?,
    };
    crate::real(&along(&full, last_ax, n, norm, true)?)
}

/// numpy's rfft of real `a` along `ax` with `n` points, by the full complex
/// transform.
fn rfft_full(a: &Array, ax: usize, n: usize, norm: Norm) -> Result<Array> {
    crop(
        &along(&a.astype(DType::C64)?, ax, n, norm, false)?,
        ax,
        n / 2 + 1,
    )
}

/// Whether rfft and irfft of `n` points on `a`'s device take the half-length
/// path: a complex transform of `n / 2` points and the [`FftReal`] pass (half the
/// transform's work and bytes). Powers of two on a GPU; the CPU's transforms are
/// in f64 and keep the full one.
fn half_length(a: &Array, n: usize) -> bool {
    n.is_power_of_two() && n >= 4 && a.device().kind() != crate::DeviceKind::Cpu
}

/// rfft of the real f32 `x` along its last axis (`n` points, a power of two): its
/// pairs are `z[j] = x[2j] + i x[2j+1]`, transformed with `n / 2` points, then
/// the [`FftReal`] step (in the same pass where `n / 2` fits a workgroup).
/// Derivatives are the full transform's ([`rfft_full`]).
fn rfft_last(x: &Array, n: usize, norm: Norm) -> Result<Array> {
    let fast = move |x: &[Array]| -> Result<Vec<Array>> {
        let x = &x[0];
        let mut shape: Vec<isize> = x.shape()[..x.ndim() - 1]
            .iter()
            .map(|&d| d as isize)
            .collect();
        shape.extend([(n / 2) as isize, 2]);
        let pairs = crate::reshape(x, &shape)?;
        let pass = FftReal {
            n,
            inverse: false,
            scale: norm.scale(n, false) as f32,
        };
        let outer = pairs.size() / n.max(1);
        if let Some(one) = real_single(n / 2, outer, pass) {
            return Ok(vec![as_complex(&prim::apply(&one, &pairs)?)?]);
        }
        let y = rows(&pairs, pairs.ndim() - 2, false)?;
        Ok(vec![as_complex(&prim::apply_real(&pass, &y)?)?])
    };
    let reference = move |x: &[Array]| Ok(vec![rfft_full(&x[0], x[0].ndim() - 1, n, norm)?]);
    let f = CustomFunction::new(fast)
        .name("rfft")
        .rules_from(reference)
        // The batch axis comes first.
        .vmap(move |x, _| Ok(vec![rfft_last(&x[0], n, norm)?]));
    Ok(f.call(std::slice::from_ref(x))?.remove(0))
}

/// irfft along the last axis of `half` (c64, `n / 2 + 1` points) to `n` points (a
/// power of two): the [`FftReal`] step, then an inverse complex transform of
/// `n / 2` points whose pairs are the output's even and odd points (one pass
/// where `n / 2` fits a workgroup). Derivatives are the full transform's
/// ([`irfft_full`]).
fn irfft_last(half: &Array, n: usize, norm: Norm) -> Result<Array> {
    let fast = move |h: &[Array]| -> Result<Vec<Array>> {
        let pass = FftReal {
            n,
            inverse: true,
            scale: norm.scale(n, true) as f32,
        };
        let x = as_real(&h[0]);
        let outer = x.size() / (n + 2);
        let y = match real_single(n / 2, outer, pass) {
            Some(one) => prim::apply(&one, &x)?,
            None => rows(&prim::apply_real(&pass, &x)?, x.ndim() - 2, true)?,
        };
        let mut shape: Vec<isize> = y.shape()[..y.ndim() - 2]
            .iter()
            .map(|&d| d as isize)
            .collect();
        shape.push(n as isize);
        Ok(vec![crate::reshape(&y, &shape)?])
    };
    let reference = move |h: &[Array]| Ok(vec![irfft_full(&h[0], h[0].ndim() - 1, n, norm)?]);
    let f = CustomFunction::new(fast)
        .name("irfft")
        .rules_from(reference)
        // The batch axis comes first.
        .vmap(move |h, _| Ok(vec![irfft_last(&h[0], n, norm)?]));
    Ok(f.call(std::slice::from_ref(half))?.remove(0))
}

/// `z` (c64) transformed along `ax` with `n` points and the norm's scale.
fn along(z: &Array, ax: usize, n: usize, norm: Norm, inverse: bool) -> Result<Array> {
    let z = fit(z, ax, n)?;
    let y = transform(&z, ax, inverse)?;
    let scale = norm.scale(n, inverse);
    if scale == 1.0 {
        return Ok(y);
    }
    let pairs = as_real(&y);
    as_complex(&crate::multiply(
        &pairs,
        &crate::scalar_like(&pairs, scale)?,
    )?)
}

/// `z` cropped or zero-padded to `n` along `ax`.
fn fit(z: &Array, ax: usize, n: usize) -> Result<Array> {
    let m = z.shape()[ax];
    if n <= m {
        return crop(z, ax, n);
    }
    let mut widths = vec![(0, 0); z.ndim()];
    widths[ax] = (0, n - m);
    crate::pad(z, &widths, crate::PadMode::Constant(0.0))
}

fn crop(z: &Array, ax: usize, n: usize) -> Result<Array> {
    if z.shape()[ax] == n {
        return Ok(z.clone());
    }
    slice_axis(z, ax, Slice::range(0, n as isize))
}

fn slice_axis(z: &Array, ax: usize, s: Slice) -> Result<Array> {
    let mut sl = vec![Slice::ALL; z.ndim()];
    sl[ax] = s;
    crate::slice(z, &sl)
}

/// The unnormalized transform along axis `ax` of a c64 array, with its
/// derivative rules: the transpose of the DFT matrix is itself and its adjoint
/// the inverse's (unnormalized), so cotangents take the other direction.
fn transform(z: &Array, ax: usize, inverse: bool) -> Result<Array> {
    as_complex(&pairs(&as_real(z), ax, inverse)?)
}

/// [`rows`] with its rules. The rules call `pairs` again, never `rows`, so
/// every transform in a derived graph (a gradient of a vmap, a vjp of a jvp)
/// carries the rules too, and the passes of a plan are never differentiated.
fn pairs(p: &Array, ax: usize, inverse: bool) -> Result<Array> {
    let f = CustomFunction::new(move |x: &[Array]| Ok(vec![rows(&x[0], ax, inverse)?]))
        .name(if inverse { "ifft" } else { "fft" })
        .vjp(move |_, _, ct| Ok(vec![Some(pairs(&ct[0], ax, !inverse)?)]))
        .jvp(move |_, t| {
            let t = t[0].as_ref().expect("one tangent");
            Ok(vec![pairs(t, ax, inverse)?])
        })
        // The batch axis comes first.
        .vmap(move |x, _| Ok(vec![pairs(&x[0], ax + 1, inverse)?]));
    Ok(f.call(std::slice::from_ref(p))?.remove(0))
}

/// The unnormalized transform along axis `ax` of f32 pairs `p` (`[..., 2]`):
/// one pass on the CPU; on a GPU the kernel's passes for powers of two
/// ([`plan`]), Bluestein's convolution for other lengths.
fn rows(p: &Array, ax: usize, inverse: bool) -> Result<Array> {
    let shape = p.shape().to_vec();
    let nd = shape.len();
    let n = shape[ax];
    if n <= 1 || p.size() == 0 {
        return Ok(p.clone());
    }
    let outer: usize = shape[..ax].iter().product();
    let inner: usize = shape[ax + 1..nd - 1].iter().product();
    if p.device().kind() == crate::DeviceKind::Cpu {
        return prim::apply(&single(n, outer, inner, inverse), p);
    }
    if n.is_power_of_two() {
        if let Some(passes) = plan(n, outer, inner, inverse) {
            let mut y = crate::contiguous(p)?;
            for pass in passes {
                y = prim::apply(&pass, &y)?;
            }
            return Ok(y);
        }
    }
    // Bluestein (or a power of two too long for a plan along an inner axis):
    // along the last axis but the pairs'.
    if ax != nd - 2 {
        let moved = crate::contiguous(&crate::swapaxes(p, ax as isize, -2)?)?;
        return crate::swapaxes(&rows(&moved, nd - 2, inverse)?, ax as isize, -2);
    }
    if n.is_power_of_two() {
        return Err(Error::invalid("fft", format!("no plan for {n} points")));
    }
    bluestein(p, n, inverse)
}

/// One pass over `outer * inner` rows of `n` points, point stride `inner`.
fn single(n: usize, outer: usize, inner: usize, inverse: bool) -> FftPass {
    let block = n * inner;
    FftPass {
        n,
        inverse,
        cols: cols(n, outer * inner),
        radix: [inner, outer],
        ih: [1, block, outer * block],
        in_step: inner,
        oh: [1, block, outer * block],
        out_step: inner,
        twiddle: None,
        real: None,
    }
}

/// rfft or irfft of `2m` points along the last axis of `outer` rows as one pass
/// ([`FftPass::real`]), where `m` fits a workgroup: the data read and written
/// once, not twice.
fn real_single(m: usize, outer: usize, real: FftReal) -> Option<FftPass> {
    if m > MAX_ROW || 2 * m != real.n {
        return None;
    }
    let mut p = single(m, outer, 1, real.inverse);
    p.real = Some(real.scale.to_bits());
    let (in_width, width) = p.widths();
    p.ih = [1, in_width, outer * in_width];
    p.oh = [1, width, outer * width];
    Some(p)
}

/// Rows per workgroup: as many as fit beside `n` points (at most 64 and `rows`).
fn cols(n: usize, rows: usize) -> usize {
    let mut c = (MAX_ROW / n).min(64);
    while c > 1 && c / 2 >= rows {
        c /= 2;
    }
    c
}

/// The GPU passes of a transform of `n` points (a power of two) along an axis
/// with `outer` blocks before it and `inner` points after it (`[outer, n, inner]`
/// pairs, row-major): one pass up to [`MAX_ROW`]; else `n = n1 n2 (n3)`, a pass
/// over each digit but the last along its column (read and written in place,
/// twiddled: four-step), then one over the last digit, written in digit-reversed
/// order, which is the natural order of the result. Columns' digits stay at or
/// below 256 so that each workgroup reads 8 or more neighbouring columns. `None`
/// past three digits with `inner > 1` (the caller moves the axis last).
pub(crate) fn plan(n: usize, outer: usize, inner: usize, inverse: bool) -> Option<Vec<FftPass>> {
    if n <= MAX_ROW {
        return Some(vec![single(n, outer, inner, inverse)]);
    }
    let lg = n.trailing_zeros() as usize;
    let digits: Vec<usize> = if lg <= 16 || (inner > 1 && lg <= 19) {
        let l2 = (lg - lg / 2).min(11);
        vec![lg - l2, l2]
    } else if inner == 1 {
        let l1 = lg / 3;
        let l2 = (lg - l1) / 2;
        vec![l1, l2, lg - l1 - l2]
    } else {
        return None;
    };
    let d: Vec<usize> = digits.iter().map(|&l| 1 << l).collect();
    let mut passes = Vec::new();
    for t in 0..d.len() - 1 {
        let (a, nt, s) = (
            d[..t].iter().product::<usize>(),
            d[t],
            d[t + 1..].iter().product::<usize>(),
        );
        let rows = outer * a * s * inner;
        passes.push(FftPass {
            n: nt,
            inverse,
            cols: cols(nt, rows),
            radix: [inner, s],
            ih: [1, inner, nt * s * inner],
            in_step: s * inner,
            oh: [1, inner, nt * s * inner],
            out_step: s * inner,
            twiddle: Some((1, nt * s)),
            real: None,
        });
    }
    let last = *d.last().expect("two digits or more");
    let rows = outer * inner * (n / last);
    passes.push(if d.len() == 2 {
        let (n1, n2) = (d[0], d[1]);
        FftPass {
            n: n2,
            inverse,
            cols: cols(n2, rows),
            radix: [inner, n1],
            ih: [1, n2 * inner, n * inner],
            in_step: inner,
            oh: [1, inner, n * inner],
            out_step: n1 * inner,
            twiddle: None,
            real: None,
        }
    } else {
        let (n1, n2, n3) = (d[0], d[1], d[2]);
        FftPass {
            n: n3,
            inverse,
            cols: cols(n3, rows),
            radix: [n1, n2],
            ih: [n2 * n3, n3, n],
            in_step: 1,
            oh: [1, n1, n],
            out_step: n1 * n2,
            twiddle: None,
            real: None,
        }
    });
    Some(passes)
}

/// Any length as a power-of-two convolution along the last axis but the pairs'
/// (see the CPU's `bluestein`): the chirp and the transformed filter are host
/// constants in f64.
fn bluestein(p: &Array, n: usize, inverse: bool) -> Result<Array> {
    let (chirp, filter) = prim::chirp_filter(n, if inverse { 1.0 } else { -1.0 });
    let m = filter.len();
    let fb: Vec<f32> = filter
        .iter()
        .flat_map(|&(r, i)| [r as f32, i as f32])
        .collect();
    let ch: Vec<f32> = chirp
        .iter()
        .flat_map(|&(r, i)| [r as f32, i as f32])
        .collect();
    let dev = p.device();
    let chirp = as_complex(&Array::from_slice_on(&ch, &[n, 2], dev)?)?;
    let filt = as_complex(&Array::from_slice_on(&fb, &[m, 2], dev)?)?;
    let x = as_complex(p)?;
    let last = x.ndim() - 1;
    let a = fit(&crate::multiply(&x, &chirp)?, last, m)?;
    let fa = as_complex(&rows(&as_real(&a), last, false)?)?;
    let conv = as_complex(&rows(&as_real(&crate::multiply(&fa, &filt)?), last, true)?)?;
    let y = crate::multiply(&crop(&conv, last, n)?, &chirp)?;
    Ok(as_real(&y))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GPU's plans run pass by pass through the CPU's f64 pass (the kernel's
    /// `FftPass` semantics), against the f64 transform of each line; each pass
    /// within the kernel's limits.
    #[test]
    fn gpu_plans_transform_every_line() {
        let cpu = crate::Device::cpu();
        for (n, outer, inner) in [
            (4096, 2, 1),
            (4096, 1, 3),
            (2048, 1, 5),
            (64, 3, 7),
            (8192, 1, 1),
            (8192, 2, 2),
            (1 << 18, 1, 1),
        ] {
            let total = outer * n * inner;
            let x: Vec<f32> = (0..2 * total)
                .map(|i| ((i * 7919 % 1013) as f32 / 1013.0) - 0.5)
                .collect();
            let a = Array::from_slice_on(&x, &[outer, n, inner, 2], &cpu).unwrap();
            let what = format!("{n} points, [{outer}, n, {inner}]");
            let passes = plan(n, outer, inner, false).expect(&what);
            for p in &passes {
                assert!(p.cols * p.n <= MAX_ROW && p.cols >= 1, "{what}: {p:?}");
            }
            let mut y = a;
            for p in &passes {
                y = prim::apply(p, &y).unwrap();
            }
            let got = y.to_vec::<f32>().unwrap();
            for (o, i) in [(0, 0), (outer - 1, inner - 1), (outer / 2, inner / 2)] {
                let line: Vec<prim::C> = (0..n)
                    .map(|j| {
                        let e = 2 * ((o * n + j) * inner + i);
                        (x[e] as f64, x[e + 1] as f64)
                    })
                    .collect();
                let want = prim::dft(&line, -1.0);
                let norm = line
                    .iter()
                    .map(|v| v.0 * v.0 + v.1 * v.1)
                    .sum::<f64>()
                    .sqrt();
                for (k, w) in want.iter().enumerate() {
                    let e = 2 * ((o * n + k) * inner + i);
                    let err =
                        ((got[e] as f64 - w.0).powi(2) + (got[e + 1] as f64 - w.1).powi(2)).sqrt();
                    assert!(
                        err <= 1e-5 * norm,
                        "{what}: line ({o}, {i}) output {k}: {err}"
                    );
                }
            }
        }
    }

    /// A real transform folded into one pass (the GPU's rfft and irfft up to
    /// 4096 points) runs through the CPU's f64 pass as the unfolded pair of
    /// passes does: forward against the f64 transform of each real row, inverse
    /// back to the row.
    #[test]
    fn folded_real_passes() {
        let cpu = crate::Device::cpu();
        for (n, rows) in [(4, 3), (64, 2), (4096, 2)] {
            let m = n / 2;
            let x: Vec<f32> = (0..rows * n)
                .map(|i| ((i * 7919 % 1013) as f32 / 1013.0) - 0.5)
                .collect();
            let pairs = Array::from_slice_on(&x, &[rows, m, 2], &cpu).unwrap();
            let scale = 0.5f32;
            let fwd = FftReal {
                n,
                inverse: false,
                scale,
            };
            let one = real_single(m, rows, fwd).expect("one pass");
            assert_eq!(one.widths(), (m, m + 1));
            let spec = prim::apply(&one, &pairs).unwrap();
            assert_eq!(spec.shape(), &[rows, m + 1, 2]);
            let got = spec.to_vec::<f32>().unwrap();
            for r in 0..rows {
                let line: Vec<prim::C> = x[r * n..(r + 1) * n]
                    .iter()
                    .map(|&v| (v as f64, 0.0))
                    .collect();
                let want = prim::dft(&line, -1.0);
                for (k, w) in want.iter().enumerate().take(m + 1) {
                    let e = 2 * (r * (m + 1) + k);
                    let err =
                        (got[e] as f64 - 0.5 * w.0).abs() + (got[e + 1] as f64 - 0.5 * w.1).abs();
                    assert!(
                        err <= 1e-5 * n as f64,
                        "rfft of {n}, row {r}, output {k}: {err}"
                    );
                }
            }
            // The inverse with 1 / n (the forward's 0.5 undone by 2 / n).
            let inv = FftReal {
                n,
                inverse: true,
                scale: 2.0 / n as f32,
            };
            let back = prim::apply(&real_single(m, rows, inv).unwrap(), &spec).unwrap();
            assert_eq!(back.shape(), &[rows, m, 2]);
            for (i, (g, w)) in back.to_vec::<f32>().unwrap().iter().zip(&x).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-5,
                    "irfft of {n}, element {i}: {g} vs {w}"
                );
            }
        }
        let big = FftReal {
            n: 2 * MAX_ROW + 2,
            inverse: false,
            scale: 1.0,
        };
        assert!(
            real_single(MAX_ROW + 1, 1, big).is_none(),
            "past a workgroup"
        );
    }
}
