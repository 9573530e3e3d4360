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
