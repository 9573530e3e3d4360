//! Initialisers (MLX's `nn.init`): f32 arrays of a shape drawn from a key. Fans
//! follow PyTorch: for a `[out, in, ...]` weight, `fan_in = in * receptive field`
//! and `fan_out = out * receptive field`.

use crate::{Array, DType, Error, Result, random};

fn fans(op: &'static str, shape: &[usize]) -> Result<(f64, f64)> {
    if shape.len() < 2 {
        return Err(Error::invalid(
            op,
            format!("fans need a weight of 2 or more dimensions, got {shape:?}"),
        ));
    }
    let field: usize = shape[2..].iter().product();
    Ok(((shape[1] * field) as f64, (shape[0] * field) as f64))
}

/// Every element `value`.
pub fn constant(shape: &[usize], value: f64) -> Result<Array> {
    crate::full(shape, value, DType::F32)
}

/// Normal with mean `mean` and standard deviation `std`.
pub fn normal(key: &Array, shape: &[usize], mean: f64, std: f64) -> Result<Array> {
    random::normal(key, shape, mean, std, DType::F32)
}

/// Uniform on `[low, high)`.
pub fn uniform(key: &Array, shape: &[usize], low: f64, high: f64) -> Result<Array> {
    random::uniform(key, shape, low, high, DType::F32)
}

/// Glorot (Xavier) normal: std `gain * sqrt(2 / (fan_in + fan_out))`.
pub fn glorot_normal(key: &Array, shape: &[usize], gain: f64) -> Result<Array> {
    let (i, o) = fans("glorot_normal", shape)?;
    normal(key, shape, 0.0, gain * (2.0 / (i + o)).sqrt())
}

/// Glorot (Xavier) uniform: bound `gain * sqrt(6 / (fan_in + fan_out))`.
pub fn glorot_uniform(key: &Array, shape: &[usize], gain: f64) -> Result<Array> {
    let (i, o) = fans("glorot_uniform", shape)?;
    let b = gain * (6.0 / (i + o)).sqrt();
    uniform(key, shape, -b, b)
}

/// He (Kaiming) normal for ReLU: std `gain / sqrt(fan)` with `gain = √2` for
/// ReLU, `fan` the fan-in (`fan_out = false`) or the fan-out.
pub fn he_normal(key: &Array, shape: &[usize], gain: f64, fan_out: bool) -> Result<Array> {
    let (i, o) = fans("he_normal", shape)?;
    normal(key, shape, 0.0, gain / if fan_out { o } else { i }.sqrt())
}

/// He (Kaiming) uniform: bound `gain * sqrt(3 / fan)`.
pub fn he_uniform(key: &Array, shape: &[usize], gain: f64, fan_out: bool) -> Result<Array> {
    let (i, o) = fans("he_uniform", shape)?;
    let b = gain * (3.0 / if fan_out { o } else { i }).sqrt();
    uniform(key, shape, -b, b)
}

/// A matrix `[rows, cols]` with orthonormal rows or columns, times `gain` (MLX's
/// `orthogonal`): the Q of the QR decomposition of an `n x n` standard normal
/// matrix (`n = max(rows, cols)`, drawn from `key`) with R's diagonal made
/// positive, cut to the shape. The decomposition runs on the host in f64
/// (Householder); the result is f32 on `key`'s device. A shape that is not 2-D
/// is an `Err`.
pub fn orthogonal(key: &Array, shape: &[usize], gain: f64) -> Result<Array> {
    let &[rows, cols] = shape else {
        return Err(Error::invalid(
            "orthogonal",
            format!("the shape must be [rows, cols], got {shape:?}"),
        ));
    };
    let n = rows.max(cols);
    let mut a = random::normal(key, &[n, n], 0.0, 1.0, DType::F32)?.to_vec_as::<f64>()?;
    let q = householder_q(&mut a, n);
    let out: Vec<f32> = (0..rows)
        .flat_map(|i| (0..cols).map(move |j| (i, j)))
        .map(|(i, j)| (gain * q[i * n + j]) as f32)
        .collect();
    Array::from_slice_on(&out, shape, key.device())
}

/// The Q of `a = QR` (`n x n`, row-major; `a` is overwritten) with R's diagonal
/// made non-negative, so Q is the unique one (for a full-rank `a`).
fn householder_q(a: &mut [f64], n: usize) -> Vec<f64> {
    let mut q = vec![0.0; n * n];
    for i in 0..n {
        q[i * n + i] = 1.0;
    }
    for k in 0..n.saturating_sub(1) {
        let norm = (k..n).map(|i| a[i * n + k].powi(2)).sum::<f64>().sqrt();
        if norm == 0.0 {
            continue;
        }
        // v = x + sign(x0) |x| e0, then H = I - 2 v v^T / (v^T v).
        let alpha = if a[k * n + k] >= 0.0 { -norm } else { norm };
        let mut v: Vec<f64> = (k..n).map(|i| a[i * n + k]).collect();
        v[0] -= alpha;
        let vv: f64 = v.iter().map(|x| x * x).sum();
        if vv == 0.0 {
            continue;
        }
        for j in 0..n {
            // A <- H A (columns), Q <- Q H (rows).
            let d: f64 = (k..n).map(|i| v[i - k] * a[i * n + j]).sum::<f64>() * 2.0 / vv;
            for i in k..n {
                a[i * n + j] -= d * v[i - k];
            }
            let e: f64 = (k..n).map(|i| q[j * n + i] * v[i - k]).sum::<f64>() * 2.0 / vv;
            for i in k..n {
                q[j * n + i] -= e * v[i - k];
            }
        }
    }
    // R = H_{n-1}..H_0 A is now in `a`: flip Q's columns where R's diagonal is
    // negative.
    for j in 0..n {
        if a[j * n + j] < 0.0 {
            for i in 0..n {
                q[i * n + j] = -q[i * n + j];
            }
        }
    }
    q
}
