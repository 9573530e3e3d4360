//! Fused row operations of neural networks: [`softmax`], [`log_softmax`],
//! [`layer_norm`], [`rms_norm`]. Each is one primitive (`Primitive::Normalize`) over
//! the last axis: one read and one write of the data, max-subtracted (softmax) in
//! f32 for every float dtype; layer_norm's variance is two-pass (the CPU in f64; the
//! GPU in f32, around the row's first element for rows it holds in registers, else
//! Welford-merged). Other axes are moved last first (a copy).

use super::{astype, broadcast_to, full_like, node, op_device, reshape, scalar_like, transpose};
use crate::{Array, DType, Error, Primitive, Result, layout::normalize_axes, primitive::NormOp};

/// Float inputs stay; others compute in f32.
fn float_input(x: &Array) -> Result<Array> {
    if x.dtype().is_float() {
        Ok(x.clone())
    } else {
        astype(x, DType::F32)
    }
}

/// The primitive over the last axis of `x` with per-column `params` (already of
/// shape `[L]` and `x`'s dtype).
pub(crate) fn normalize_last(op: NormOp, x: &Array, params: &[Array], eps: f64) -> Result<Array> {
    let mut inputs = vec![x.clone()];
    inputs.extend_from_slice(params);
    node(
        Primitive::Normalize { op, eps },
        inputs,
        x.shape(),
        x.dtype(),
        op_device(x),
    )
}

/// `op` over `axes` of `x`: moved last and flattened into one axis when they are
/// not already the last one.
fn over_axes(op: NormOp, name: &'static str, x: &Array, axes: &[isize]) -> Result<Array> {
    let x = float_input(x)?;
    if x.ndim() == 0 {
        return Err(Error::invalid(name, "needs at least one dimension"));
    }
    let ax = normalize_axes(name, axes, x.ndim())?;
    if ax.is_empty() {
        return Err(Error::invalid(name, "needs at least one axis"));
    }
    let nd = x.ndim();
    if ax == [nd - 1] {
        return normalize_last(op, &x, &[], 0.0);
    }
    let mut perm: Vec<isize> = (0..nd)
        .filter(|i| !ax.contains(i))
        .map(|i| i as isize)
        .collect();
    perm.extend(ax.iter().map(|&a| a as isize));
    let t = transpose(&x, Some(&perm))?;
    let keep = nd - ax.len();
    let mut flat: Vec<isize> = t.shape()[..keep].iter().map(|&d| d as isize).collect();
    flat.push(-1);
    let y = normalize_last(op, &reshape(&t, &flat)?, &[], 0.0)?;
    let shaped: Vec<isize> = t.shape().iter().map(|&d| d as isize).collect();
    let y = reshape(&y, &shaped)?;
    let mut inv = vec![0isize; nd];
    for (i, &p) in perm.iter().enumerate() {
        inv[p as usize] = i as isize;
    }
    transpose(&y, Some(&inv))
}

/// `exp(x - max) / sum(exp(x - max))` over `axes` (numpy-style negative axes). Ints
/// compute in f32. A row holding NaN is NaN; `-inf` entries get 0.
pub fn softmax(x: &Array, axes: &[isize]) -> Result<Array> {
    over_axes(NormOp::Softmax, "softmax", x, axes)
}

/// `x - max - log(sum(exp(x - max)))` over `axes`: the log of [`softmax`] without
/// its underflow.
pub fn log_softmax(x: &Array, axes: &[isize]) -> Result<Array> {
    over_axes(NormOp::LogSoftmax, "log_softmax", x, axes)
}

/// A per-column parameter: broadcast to `[L]` in `x`'s dtype, or `fill` when absent.
fn column_param(
    name: &'static str,
    what: &str,
    p: Option<&Array>,
    x: &Array,
    fill: f64,
) -> Result<Array> {
    let l = x.shape()[x.ndim() - 1];
    match p {
        Some(p) => {
            let p = astype(p, x.dtype())?;
            broadcast_to(&p, &[l]).map_err(|_| {
                Error::invalid(
                    name,
                    format!(
                        "{what} of shape {:?} does not broadcast to the last axis ({l})",
                        p.shape()
                    ),
                )
            })
        }
        None => broadcast_to(&full_like(&scalar_like(x, 0.0)?, fill)?, &[l]),
    }
}

fn check_eps(name: &'static str, eps: f64) -> Result<()> {
    if eps.is_finite() && eps >= 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(
            name,
            format!("eps must be finite and >= 0, got {eps}"),
        ))
    }
}

/// `(x - mean) / sqrt(var + eps) * weight + bias` over the last axis (population
/// variance, computed so that constant rows give exactly `bias`). `weight`
/// and `bias` broadcast to the last axis; absent means 1 and 0.
pub fn layer_norm(
    x: &Array,
    weight: Option<&Array>,
    bias: Option<&Array>,
    eps: f64,
) -> Result<Array> {
    let name = "layer_norm";
    check_eps(name, eps)?;
    let x = float_input(x)?;
    if x.ndim() == 0 {
        return Err(Error::invalid(name, "needs at least one dimension"));
    }
    let w = column_param(name, "weight", weight, &x, 1.0)?;
    let b = column_param(name, "bias", bias, &x, 0.0)?;
    normalize_last(NormOp::LayerNorm, &x, &[w, b], eps)
}

/// `x / sqrt(mean(x²) + eps) * weight` over the last axis; `weight` broadcasts to
/// it (absent means 1).
pub fn rms_norm(x: &Array, weight: Option<&Array>, eps: f64) -> Result<Array> {
    let name = "rms_norm";
    check_eps(name, eps)?;
    let x = float_input(x)?;
    if x.ndim() == 0 {
        return Err(Error::invalid(name, "needs at least one dimension"));
    }
    let w = column_param(name, "weight", weight, &x, 1.0)?;
    normalize_last(NormOp::RmsNorm, &x, &[w], eps)
}

/// The op written with unfused ops (its derivative rules differentiate this).
pub(crate) fn normalize_composed(
    op: NormOp,
    x: &Array,
    params: &[Array],
    eps: f64,
) -> Result<Array> {
    use super::{add, divide, exp, log, max, mean, multiply, sqrt, square, subtract, sum};
    let ax = [-1isize];
    match op {
        NormOp::Softmax | NormOp::LogSoftmax => {
            let m = super::stop_gradient(&max(x, Some(&ax), true)?)?;
            let z = subtract(x, &m)?;
            let s = sum(&exp(&z)?, Some(&ax), true)?;
            if op == NormOp::Softmax {
                divide(&exp(&z)?, &s)
            } else {
                subtract(&z, &log(&s)?)
            }
        }
        NormOp::LayerNorm => {
            // In f32 the mean's scale goes before the sum, where a fusing backend
            // folds it into the reduction (a kernel less, forward and backward).
            let mu = match (x.dtype(), x.shape().last()) {
                (crate::DType::F32, Some(&n)) if n > 0 => sum(
                    &multiply(x, &scalar_like(x, 1.0 / n as f64)?)?,
                    Some(&ax),
                    true,
                )?,
                _ => mean(x, Some(&ax), true)?,
            };
            let d = subtract(x, &mu)?;
            let var = mean(&square(&d)?, Some(&ax), true)?;
            let r = sqrt(&add(&var, &scalar_like(&var, eps)?)?)?;
            add(&multiply(&divide(&d, &r)?, &params[0])?, &params[1])
        }
        NormOp::RmsNorm => {
            let ms = mean(&square(x)?, Some(&ax), true)?;
            let r = sqrt(&add(&ms, &scalar_like(&ms, eps)?)?)?;
            multiply(&divide(x, &r)?, &params[0])
        }
    }
}
