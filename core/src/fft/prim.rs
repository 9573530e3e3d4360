//! The FFT primitive: unnormalized transforms of the rows of f32 pairs, and the
//! f64 host code that computes them on the CPU (mixed radix, Bluestein beyond).

use crate::cpu::CpuBuffer;
use crate::{Array, CpuOutput, CustomPrimitive, DType, Error, Result, View};
use std::sync::Arc;

pub use wmx_spec::{FFT_MAX_ROW as MAX_ROW, FFT_TABLE as TABLE, FftPass, FftReal};

/// The GPU kernel's table: `W_4096^k` for `k < 4096`, then, for a twiddle of
/// `N > 4096`, `W_N^j` for `j < N / 4096` (a twiddle `W_N^t` is the product of
/// one of each), computed in f64 and rounded to f32 pairs.
pub fn twiddles(twiddle: Option<(usize, usize)>) -> Vec<f32> {
    let mut t = Vec::new();
    let mut push = |k: usize, n: usize| {
        let (s, c) = angle(k, n).sin_cos();
        t.extend([c as f32, -s as f32]);
    };
    (0..TABLE).for_each(|k| push(k, TABLE));
    if let Some((_, n)) = twiddle.filter(|t| t.1 > TABLE) {
        (0..n / TABLE).for_each(|j| push(j, n));
    }
    t
}

/// `2 pi k / n` for `k < n`, as an angle in `[-pi, pi)` (exact reduction first).
fn angle(k: usize, n: usize) -> f64 {
    let k = k % n;
    let k = if 2 * k >= n {
        k as f64 - n as f64
    } else {
        k as f64
    };
    std::f64::consts::TAU * k / n as f64
}

/// The pass `p` ([`FftPass`], the primitive: GPU input 1 is the f32 pairs of
/// [`twiddles`], the CPU computes its own in f64) on `x`.
pub(crate) fn apply(p: &FftPass, x: &Array) -> Result<Array> {
    let x = crate::contiguous(x)?;
    let mut shape = x.shape().to_vec();
    let table = match p.real_step() {
        // A folded real transform: rows along the last axis but the pairs'.
        Some(r) => {
            let k = shape.len().saturating_sub(2);
            shape[k] = p.widths().1;
            Some((0, r.n))
        }
        None => p.twiddle,
    };
    crate::custom(Arc::new(*p), &with_table(&x, table)?, &shape, DType::F32)
}

/// The real transform's pass `p` ([`FftReal`]) on the pairs `x` (`[.., m, 2]`
/// forward, `[.., m + 1, 2]` inverse, `m = p.n / 2`); GPU input 1 is the table of
/// [`twiddles`] with the twiddle `(0, n)`.
pub(crate) fn apply_real(p: &FftReal, x: &Array) -> Result<Array> {
    let x = crate::contiguous(x)?;
    let mut shape = x.shape().to_vec();
    let k = shape.len() - 2;
    shape[k] = if p.inverse {
        shape[k] - 1
    } else {
        shape[k] + 1
    };
    let inputs = with_table(&x, Some((0, p.n)))?;
    crate::custom(Arc::new(*p), &inputs, &shape, DType::F32)
}

/// `x`, and on a GPU the kernel's table of [`twiddles`] for `twiddle` (the CPU
/// computes its own in f64).
fn with_table(x: &Array, twiddle: Option<(usize, usize)>) -> Result<Vec<Array>> {
    let mut inputs = vec![x.clone()];
    if x.device().kind() != crate::DeviceKind::Cpu {
        inputs.push(table_on(twiddle, x.device())?);
    }
    Ok(inputs)
}

/// The tables already on a device, by the `N > TABLE` whose entries they add
/// (`None`: the first part alone), the newest last. A table is 4096 f64 sines and
/// cosines and an upload: made per call, most of a small transform's host time.
/// Only long-lived devices' tables are kept ([`crate::Device::is_long_lived`]):
/// a kept table would keep its device alive.
static TABLES: std::sync::Mutex<Vec<(crate::Device, Option<usize>, Array)>> =
    std::sync::Mutex::new(Vec::new());
/// Tables kept at most (a table of `N` holds `4096 + N / 4096` pairs).
const TABLES_KEPT: usize = 16;

/// The table of [`twiddles`] for `twiddle` on `device`: made once on a
/// long-lived device, else each call.
fn table_on(twiddle: Option<(usize, usize)>, device: &crate::Device) -> Result<Array> {
    let make = || {
        let t = twiddles(twiddle);
        Array::from_slice_on(&t, &[t.len() / 2, 2], device)
    };
    if !device.is_long_lived() {
        return make();
    }
    let key = twiddle.map(|t| t.1).filter(|&n| n > TABLE);
    let mut kept = TABLES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((.., a)) = kept.iter().find(|(d, k, _)| d == device && *k == key) {
        return Ok(a.clone());
    }
    let a = make()?;
    if kept.len() == TABLES_KEPT {
        kept.remove(0);
    }
    kept.push((device.clone(), key, a.clone()));
    Ok(a)
}

impl CustomPrimitive for FftReal {
    fn name(&self) -> &str {
        "fft_real"
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let x = &inputs[0];
        if x.dtype != DType::F32 {
            return Err(Error::invalid("fft", format!("rows of {}", x.dtype)));
        }
        let m = self.n / 2;
        let (width, in_width) = if self.inverse { (m, m + 1) } else { (m + 1, m) };
        let total: usize = out.shape.iter().product::<usize>() / 2;
        let rows = total / width.max(1);
        let src = &x.buffer.as_slice::<f32>()[x.layout.offset..][..2 * rows * in_width];
        let dst = out.buffer.as_mut_slice::<f32>();
        let s = self.scale as f64;
        for r in 0..rows {
            let row: Vec<C> = (0..in_width)
                .map(|j| {
                    let e = 2 * (r * in_width + j);
                    (src[e] as f64, src[e + 1] as f64)
                })
                .collect();
            for (k, y) in real_step(self, &row).into_iter().enumerate() {
                let e = 2 * (r * width + k);
                dst[e] = (s * y.0) as f32;
                dst[e + 1] = (s * y.1) as f32;
            }
        }
        Ok(())
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<FftReal>()
            .is_some_and(|o| o == self)
    }

    // Linear over the reals: the tangent goes through the same map. No vjp: rfft
    // and irfft differentiate whole transforms (their rules).
    fn jvp(&self, _: &[Array], _: &Array, t: &[Option<Array>]) -> Result<Option<Array>> {
        t[0].as_ref().map(|t| apply_real(self, t)).transpose()
    }

    fn vmap(&self, inputs: &[Array], batched: &[bool]) -> Result<Array> {
        if batched.get(1).copied().unwrap_or(false) {
            return Err(Error::invalid("fft", "the twiddle table is not batched"));
        }
        // A leading batch axis only adds rows.
        apply_real(self, &inputs[0])
    }
}

/// `p`'s step on one row, unscaled, in f64: forward from the `m` points of `Z`
/// to the `m + 1` of `X`, inverse from the `m + 1` of `X` to the `m` of `Z`
/// ([`FftReal`]).
fn real_step(p: &FftReal, row: &[C]) -> Vec<C> {
    let m = p.n / 2;
    let width = if p.inverse { m } else { m + 1 };
    (0..width)
        .map(|k| {
            let a = angle(k, p.n);
            if p.inverse {
                let (mut a0, mut b0) = (row[k], row[m - k]);
                if k == 0 {
                    (a0.1, b0.1) = (0.0, 0.0);
                }
                let b0 = (b0.0, -b0.1);
                // i conj(W^k) (a - b), conj(W^k) = exp(+i angle).
                let t = mul((-a.sin(), a.cos()), (a0.0 - b0.0, a0.1 - b0.1));
                (a0.0 + b0.0 + t.0, a0.1 + b0.1 + t.1)
            } else {
                let a0 = row[k % m];
                let b0 = row[(m - k) % m];
                let b0 = (b0.0, -b0.1);
                // i W^k (a - b), W^k = exp(-i angle).
                let t = mul((a.sin(), a.cos()), (a0.0 - b0.0, a0.1 - b0.1));
                (0.5 * (a0.0 + b0.0 - t.0), 0.5 * (a0.1 + b0.1 - t.1))
            }
        })
        .collect()
}

/// The three digits of row `r` of `p`.
fn digits(p: &FftPass, r: usize) -> [usize; 3] {
    let q = r / p.radix[0];
    [r % p.radix[0], q % p.radix[1], q / p.radix[1]]
}

impl CustomPrimitive for FftPass {
    fn name(&self) -> &str {
        "fft"
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let x = &inputs[0];
        if x.dtype != DType::F32 {
            return Err(Error::invalid("fft", format!("rows of {}", x.dtype)));
        }
        let n = self.n;
        let (in_width, width) = self.widths();
        let total: usize = out.shape.iter().product();
        let rows = total / 2 / width.max(1);
        let src = &x.buffer.as_slice::<f32>()[x.layout.offset..][..2 * rows * in_width];
        let dst = out.buffer.as_mut_slice::<f32>();
        if n == 0 {
            return Ok(());
        }
        let sign = if self.inverse { 1.0 } else { -1.0 };
        let real = self.real_step();
        let scale = real.map_or(1.0, |r| r.scale as f64);
        for r in 0..rows {
            let d = digits(self, r);
            let dot = |h: &[usize; 3]| d.iter().zip(h).map(|(a, b)| a * b).sum::<usize>();
            let (ib, ob) = (dot(&self.ih), dot(&self.oh));
            let mut row: Vec<C> = (0..in_width)
                .map(|j| {
                    let e = 2 * (ib + j * self.in_step);
                    (src[e] as f64, src[e + 1] as f64)
                })
                .collect();
            if let Some(p) = real.filter(|p| p.inverse) {
                row = real_step(&p, &row);
            }
            let mut y = dft(&row, sign);
            if let Some(p) = real.filter(|p| !p.inverse) {
                y = real_step(&p, &y);
            }
            for (k, v) in y.into_iter().enumerate() {
                let v = match self.twiddle {
                    Some((d, big)) => {
                        let a = sign * angle(digits(self, r)[d] * k % big, big);
                        mul(v, (a.cos(), a.sin()))
                    }
                    None => v,
                };
                let e = 2 * (ob + k * self.out_step);
                dst[e] = (scale * v.0) as f32;
                dst[e + 1] = (scale * v.1) as f32;
            }
        }
        Ok(())
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<FftPass>()
            .is_some_and(|o| o == self)
    }

    // Linear: the tangent goes through the same map. No vjp: `fft` differentiates
    // whole transforms (its rules), so a pass never gets a cotangent.
    fn jvp(&self, _: &[Array], _: &Array, t: &[Option<Array>]) -> Result<Option<Array>> {
        t[0].as_ref().map(|t| apply(self, t)).transpose()
    }

    fn vmap(&self, inputs: &[Array], batched: &[bool]) -> Result<Array> {
        if batched.get(1).copied().unwrap_or(false) {
            return Err(Error::invalid("fft", "the twiddle table is not batched"));
        }
        // A leading batch axis only adds rows to the last digit, whose stride is
        // one batch element's block in every plan.
        apply(self, &inputs[0])
    }
}

pub(crate) type C = (f64, f64);

fn mul(a: C, b: C) -> C {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

/// `sum_j x[j] exp(sign 2 pi i jk / n)` in f64: radix 2, 3, 4, 5 and 7 steps
/// (decimation in time), a direct sum for other primes up to 64, Bluestein's
/// chirp (a power-of-two convolution) beyond.
pub(crate) fn dft(x: &[C], sign: f64) -> Vec<C> {
    let n = x.len();
    if n <= 1 {
        return x.to_vec();
    }
    let p = [4, 2, 3, 5, 7]
        .into_iter()
        .find(|p| n.is_multiple_of(*p))
        .or_else(|| (11..=n.min(64)).find(|p| n.is_multiple_of(*p)));
    // W^k for every k < n: n sines and cosines a call (each point of a radix-p
    // step needs p of them).
    let table: Vec<C> = (0..n)
        .map(|k| {
            let a = sign * angle(k, n);
            (a.cos(), a.sin())
        })
        .collect();
    let w = |k: usize| table[k];
    match p {
        Some(p) if p < n => {
            let m = n / p;
            let subs: Vec<Vec<C>> = (0..p)
                .map(|r| dft(&(0..m).map(|j| x[j * p + r]).collect::<Vec<_>>(), sign))
                .collect();
            (0..n)
                .map(|k| {
                    (0..p).fold((0.0, 0.0), |s, r| {
                        let v = mul(subs[r][k % m], w(r * k % n));
                        (s.0 + v.0, s.1 + v.1)
                    })
                })
                .collect()
        }
        Some(_) => (0..n)
            .map(|k| {
                x.iter().enumerate().fold((0.0, 0.0), |s, (j, &v)| {
                    let v = mul(v, w(j * k % n));
                    (s.0 + v.0, s.1 + v.1)
                })
            })
            .collect(),
        None => bluestein(x, sign),
    }
}

/// A transform of any length as a convolution of power-of-two length `m`:
/// `X_k = c_k sum_j (x_j c_j) conj(c_{k-j})`, `c_k = exp(sign pi i k^2 / n)`.
fn bluestein(x: &[C], sign: f64) -> Vec<C> {
    let (chirp, filter) = chirp_filter(x.len(), sign);
    let mut a = vec![(0.0, 0.0); filter.len()];
    for (k, v) in a.iter_mut().zip(x).enumerate() {
        *v.0 = mul(*v.1, chirp[k]);
    }
    let prod: Vec<C> = dft(&a, -1.0)
        .iter()
        .zip(&filter)
        .map(|(&u, &v)| mul(u, v))
        .collect();
    let conv = dft(&prod, 1.0);
    (0..x.len()).map(|k| mul(conv[k], chirp[k])).collect()
}

/// Bluestein's constants for `n` points (the CPU's and the GPU's): the chirp
/// `c_k = exp(sign pi i k^2 / n)` (k^2 mod 2n keeps the angle exact for large k),
/// and the transform of the filter `conj(c)` wrapped to the convolution's
/// power-of-two length `m`, divided by `m` (the unnormalized inverse's scale).
pub(crate) fn chirp_filter(n: usize, sign: f64) -> (Vec<C>, Vec<C>) {
    let m = (2 * n - 1).next_power_of_two();
    let chirp: Vec<C> = (0..n)
        .map(|k| {
            let a = sign * std::f64::consts::PI * ((k * k) % (2 * n)) as f64 / n as f64;
            (a.cos(), a.sin())
        })
        .collect();
    let mut b = vec![(0.0, 0.0); m];
    for k in 0..n {
        b[k] = (chirp[k].0, -chirp[k].1);
        if k > 0 {
            b[m - k] = b[k];
        }
    }
    let filter = dft(&b, -1.0)
        .into_iter()
        .map(|(r, i)| (r / m as f64, i / m as f64))
        .collect();
    (chirp, filter)
}
