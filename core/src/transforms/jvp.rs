//! Forward-mode rules: a node's tangent from its inputs' tangents (`None`: zero).

use super::{Entry, rules};
use crate::{Array, NormOp, Primitive, ReduceOp, Result, ViewOp, ops as o};

fn sum_opt(a: Option<Array>, b: Option<Array>) -> Result<Option<Array>> {
    Ok(match (a, b) {
        (Some(a), Some(b)) => Some(o::add(&a, &b)?),
        (a, None) => a,
        (None, b) => b,
    })
}

/// The one `match` on the primitive for jvp.
pub(super) fn rule(e: &Entry, t: &[Option<Array>]) -> Result<Option<Array>> {
    let (y, x) = (&e.node, &e.inputs);
    if t.iter().all(Option::is_none) || !y.dtype().is_inexact() {
        return Ok(None);
    }
    let t0 = || t[0].as_ref();
    Ok(match &e.prim {
        Primitive::Unary(op) => match t0() {
            Some(t0) => rules::unary(*op, &x[0], y)?.apply(t0)?,
            None => None,
        },
        Primitive::Binary(op) => {
            let [pa, pb] = rules::binary(*op, &x[0], &x[1], y)?;
            let da = t[0].as_ref().map(|t| pa.apply(t)).transpose()?.flatten();
            let db = t[1].as_ref().map(|t| pb.apply(t)).transpose()?.flatten();
            sum_opt(da, db)?
        }
        Primitive::Select => {
            let z = o::zeros_like(y)?;
            let tx = t[1].clone().unwrap_or_else(|| z.clone());
            let ty = t[2].clone().unwrap_or(z);
            Some(o::where_(&x[0], &tx, &ty)?)
        }
        Primitive::Copy => match t0() {
            Some(t0) => Some(o::astype(&t0.to_device(y.device())?, y.dtype())?),
            None => None,
        },
        Primitive::Generate(_)
        | Primitive::ArgReduce { .. }
        | Primitive::RandomBits
        | Primitive::ArgSort => None,
        Primitive::Matmul { alpha, beta } => {
            // α (ta b + a tb) + β tc, the second product fused with the first as its bias.
            let ab = t[0]
                .as_ref()
                .map(|ta| o::matmul_nd(ta, &x[1], None, *alpha, 0.0))
                .transpose()?;
            let both = match &t[1] {
                Some(tb) => Some(o::matmul_nd(&x[0], tb, ab.as_ref(), *alpha, 1.0)?),
                None => ab,
            };
            let tc = match t.get(2) {
                Some(Some(tc)) => Some(o::multiply(tc, &o::scalar_like(tc, *beta)?)?),
                _ => None,
            };
            sum_opt(both, tc)?
        }
        Primitive::Axpby { alpha, beta } => match (&t[0], &t[1]) {
            (Some(a), Some(b)) => Some(o::axpby(a, b, *alpha, *beta)?),
            (Some(a), None) => Some(o::multiply(a, &o::scalar_like(a, *alpha)?)?),
            (None, Some(b)) => Some(o::multiply(b, &o::scalar_like(b, *beta)?)?),
            (None, None) => None,
        },
        Primitive::Reduce { op, axes } => {
            let Some(t0) = t0() else { return Ok(None) };
            let ax: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
            match op {
                ReduceOp::Sum => Some(o::sum(t0, Some(&ax), false)?),
                ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min => {
                    // Linear in the input's tangent with the vjp's weights.
                    let w = super::vjp::reduce_weights(*op, &x[0], y, axes)?;
                    Some(o::sum(&o::multiply(t0, &w)?, Some(&ax), false)?)
                }
                ReduceOp::All | ReduceOp::Any => None,
            }
        }
        Primitive::Normalize { op, eps } => match op {
            NormOp::Softmax | NormOp::LogSoftmax => {
                let Some(t0) = t0() else { return Ok(None) };
                // softmax: y (t - Σ t y); log_softmax: t - Σ t e^y.
                let p = if *op == NormOp::Softmax {
                    y.clone()
                } else {
                    o::exp(y)?
                };
                let s = o::sum(&o::multiply(t0, &p)?, Some(&[-1]), true)?;
                let d = o::subtract(t0, &s)?;
                Some(if *op == NormOp::Softmax {
                    o::multiply(y, &d)?
                } else {
                    d
                })
            }
            NormOp::LayerNorm | NormOp::RmsNorm => {
                let (op, eps) = (*op, *eps);
                let ts: Vec<Array> = x
                    .iter()
                    .zip(t)
                    .map(|(xi, ti)| ti.clone().map_or_else(|| o::zeros_like(xi), Ok))
                    .collect::<Result<_>>()?;
                let f = |xs: &[Array]| Ok(vec![o::normalize_composed(op, &xs[0], &xs[1..], eps)?]);
                let (_, tan) = crate::transforms::jvp(f, x, &ts)?;
                tan.into_iter().next()
            }
        },
        Primitive::View(ViewOp::StopGradient) => None,
        Primitive::View(v) => match t0() {
            Some(t0) => Some(apply_view(v, t0, y)?),
            None => None,
        },
        Primitive::SliceUpdate { starts, steps } => {
            let base = t[0].clone().unwrap_or(o::zeros_like(&x[0])?);
            let upd = t[1].clone().unwrap_or(o::zeros_like(&x[1])?);
            Some(o::slice_update_region(&base, &upd, starts, steps)?)
        }
        Primitive::Concatenate { axis } => {
            let ts: Vec<Array> = t
                .iter()
                .zip(x)
                .map(|(t, x)| t.clone().map_or_else(|| o::zeros_like(x), Ok))
                .collect::<Result<_>>()?;
            Some(o::concat_node(ts, *axis, y.shape())?)
        }
        Primitive::Scan {
            op,
            axis,
            reverse,
            inclusive,
        } => match t0() {
            Some(t0) => Some(o::scan_jvp(*op, &x[0], y, t0, *axis, *reverse, *inclusive)?),
            None => None,
        },
        // The tangent moves with its element.
        Primitive::Sort => match t0() {
            Some(t0) => {
                let last = x[0].ndim() - 1;
                Some(o::gather_node(t0, &o::argsort_node(&x[0])?, last)?)
            }
            None => None,
        },
        Primitive::Gather { axis } => match t0() {
            Some(t0) => Some(o::gather_node(t0, &x[1], *axis)?),
            None => None,
        },
        Primitive::Scatter { op, axis } => {
            let base = t[0].clone().unwrap_or(o::zeros_like(&x[0])?);
            let upd = t[2].clone().unwrap_or(o::zeros_like(&x[2])?);
            Some(o::scatter_node(*op, &base, &x[1], &upd, *axis)?)
        }
        Primitive::Custom(c) => c.jvp(x, y, t)?,
        Primitive::Fused(k) => {
            let (floats, f) = super::fused_fn(k, x);
            let primals: Vec<Array> = floats.iter().map(|&i| x[i].clone()).collect();
            let tangents: Vec<Array> = floats
                .iter()
                .map(|&i| t[i].clone().map_or_else(|| o::zeros_like(&x[i]), Ok))
                .collect::<Result<_>>()?;
            let (_, ty) = crate::jvp(f, &primals, &tangents)?;
            ty.into_iter().next()
        }
    })
}

/// The view `v` (which made `y`) applied to another array of its input's shape.
pub(super) fn apply_view(v: &ViewOp, t: &Array, y: &Array) -> Result<Array> {
    Ok(match v {
        ViewOp::Transpose(perm) => {
            let p: Vec<isize> = perm.iter().map(|&a| a as isize).collect();
            o::transpose(t, Some(&p))?
        }
        ViewOp::Broadcast => o::broadcast_to(t, y.shape())?,
        ViewOp::Slice(spec) => {
            let (starts, steps) = slice_spec(spec);
            o::slice_region(t, &starts, &steps, y.shape())
        }
        ViewOp::Reshape => reshape_to(t, y.shape())?,
        ViewOp::StopGradient => o::stop_gradient(t)?,
        ViewOp::AsReal => o::complex::as_real(t),
        ViewOp::AsComplex => o::complex::as_complex(t)?,
    })
}

/// Starts and steps of a slice view's spec (`(start, stop, step)` per axis).
pub(super) fn slice_spec(spec: &[(isize, isize, isize)]) -> (Vec<usize>, Vec<isize>) {
    let starts = spec
        .iter()
        .map(|&(a, b, _)| if a == b { 0 } else { a as usize })
        .collect();
    (starts, spec.iter().map(|s| s.2).collect())
}

pub(super) fn reshape_to(x: &Array, shape: &[usize]) -> Result<Array> {
    let s: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    o::reshape(x, &s)
}
