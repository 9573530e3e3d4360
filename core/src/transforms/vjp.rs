//! Reverse-mode rules: each input's cotangent from the node's cotangent.

use super::jvp::{reshape_to, slice_spec};
use super::{Entry, rules};
use crate::{Array, NormOp, Primitive, ReduceOp, Result, ViewOp, ops as o};

/// The one `match` on the primitive for vjp. `want[i]`: input `i` needs a
/// cotangent (the others may get `None`).
pub(super) fn rule(e: &Entry, ct: &Array, want: &[bool]) -> Result<Vec<Option<Array>>> {
    let (y, x) = (&e.node, &e.inputs);
    if !y.dtype().is_inexact() {
        return Ok(vec![None; x.len()]);
    }
    Ok(match &e.prim {
        Primitive::Unary(op) => vec![rules::unary(*op, &x[0], y)?.apply(ct)?],
        Primitive::Binary(op) => {
            let ps = rules::binary(*op, &x[0], &x[1], y)?;
            let mut out = vec![];
            for (p, &w) in ps.iter().zip(want) {
                out.push(if w { p.apply(ct)? } else { None });
            }
            out
        }
        Primitive::Select => {
            let z = o::zeros_like(ct)?;
            vec![
                None,
                Some(o::where_(&x[0], ct, &z)?),
                Some(o::where_(&x[0], &z, ct)?),
            ]
        }
        Primitive::Copy => {
            let x0 = &x[0];
            if x0.dtype().is_float() {
                vec![Some(o::astype(&ct.to_device(x0.device())?, x0.dtype())?)]
            } else {
                vec![None]
            }
        }
        Primitive::Generate(_) => vec![],
        Primitive::Axpby { alpha, beta } => vec![
            Some(o::multiply(ct, &o::scalar_like(ct, *alpha)?)?),
            Some(o::multiply(ct, &o::scalar_like(ct, *beta)?)?),
        ],
        Primitive::Reduce { op, axes } => {
            let back = expand_back(ct, x[0].shape(), axes)?;
            vec![match op {
                ReduceOp::Sum => Some(back),
                ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min => {
                    Some(o::multiply(&back, &reduce_weights(*op, &x[0], y, axes)?)?)
                }
                ReduceOp::All | ReduceOp::Any => None,
            }]
        }
        Primitive::ArgReduce { .. } | Primitive::RandomBits | Primitive::ArgSort => vec![None],
        Primitive::Matmul { alpha, beta } => {
            // y = α a b + β c: da = α g bᵀ, db = α aᵀ g, dc = β g. An operand that is
            // a transposed view (x @ Wᵀ's W, q @ kᵀ's k) gets its gradient as the
            // transpose of a row-major product (db = (α gᵀ a)ᵀ): the same FLOPs,
            // and the source's gradient comes out row-major, so the optimizer and
            // concatenations read it in order.
            let (a, b) = (&x[0], &x[1]);
            let grad = |l: &Array, r: &Array, of: &Array| -> Result<Array> {
                if transposed(of) {
                    swap_last(&o::matmul_nd(
                        &swap_last(r)?,
                        &swap_last(l)?,
                        None,
                        *alpha,
                        0.0,
                    )?)
                } else {
                    o::matmul_nd(l, r, None, *alpha, 0.0)
                }
            };
            let mut out = vec![
                want[0].then(|| grad(ct, &swap_last(b)?, a)).transpose()?,
                want[1].then(|| grad(&swap_last(a)?, ct, b)).transpose()?,
            ];
            if x.len() > 2 {
                // β = 1 (a bias): the cotangent itself, no kernel.
                out.push(
                    want[2]
                        .then(|| {
                            if *beta == 1.0 {
                                Ok(ct.clone())
                            } else {
                                o::multiply(ct, &o::scalar_like(ct, *beta)?)
                            }
                        })
                        .transpose()?,
                );
            }
            out
        }
        Primitive::Normalize { op, eps } => match op {
            // With y the output: softmax y (g - Σ g y), log_softmax g - e^y Σ g.
            NormOp::Softmax => {
                let s = o::sum(&o::multiply(ct, y)?, Some(&[-1]), true)?;
                vec![Some(o::multiply(y, &o::subtract(ct, &s)?)?)]
            }
            NormOp::LogSoftmax => {
                let s = o::sum(ct, Some(&[-1]), true)?;
                vec![Some(o::subtract(ct, &o::multiply(&o::exp(y)?, &s)?)?)]
            }
            // The normalisations: one kernel (or, for f64, the composed op's vjp).
            NormOp::LayerNorm | NormOp::RmsNorm => o::norm_vjp(*op, *eps, x, ct, want)?,
        },
        Primitive::View(v) => vec![view_vjp(v, &x[0], ct)?],
        Primitive::SliceUpdate { starts, steps } => {
            let upd = &x[1];
            let base = match want[0] {
                true => Some(o::slice_update_region(
                    ct,
                    &o::zeros_like(upd)?,
                    starts,
                    steps,
                )?),
                false => None,
            };
            let update = want[1].then(|| o::slice_region(ct, starts, steps, upd.shape()));
            vec![base, update]
        }
        Primitive::Concatenate { axis } => {
            let mut at = 0;
            x.iter()
                .zip(want)
                .map(|(xi, &w)| {
                    let mut starts = vec![0; y.ndim()];
                    starts[*axis] = at;
                    at += xi.shape()[*axis];
                    w.then(|| o::slice_region(ct, &starts, &vec![1; y.ndim()], xi.shape()))
                })
                .collect()
        }
        Primitive::Scan {
            op,
            axis,
            reverse,
            inclusive,
        } => vec![Some(o::scan_vjp(
            *op, &x[0], y, ct, *axis, *reverse, *inclusive,
        )?)],
        // Each element's cotangent goes back to where the element came from.
        Primitive::Sort => vec![Some(o::scatter_node(
            crate::ScatterOp::Add,
            &o::zeros_like(&x[0])?,
            &o::argsort_node(&x[0])?,
            ct,
            x[0].ndim() - 1,
        )?)],
        Primitive::Gather { axis } => {
            let add = crate::ScatterOp::Add;
            let dx = match want[0] {
                true => Some(o::scatter_node(
                    add,
                    &o::zeros_like(&x[0])?,
                    &x[1],
                    ct,
                    *axis,
                )?),
                false => None,
            };
            vec![dx, None]
        }
        Primitive::Scatter { op, axis } => {
            let (idx, upd) = (&x[1], &x[2]);
            let base = match (want[0], op) {
                (false, _) => None,
                (true, crate::ScatterOp::Add) => Some(ct.clone()),
                (true, crate::ScatterOp::Set) => {
                    let zeros = o::zeros_like(upd)?;
                    Some(o::scatter_node(*op, ct, idx, &zeros, *axis)?)
                }
            };
            // Dropped (out-of-range) updates get a zero cotangent, not the fill.
            let update = match want[2] {
                true => {
                    let g = o::gather_node(ct, idx, *axis)?;
                    let ok = in_range(idx, y.shape()[*axis])?;
                    Some(o::where_(&ok, &g, &o::zeros_like(&g)?)?)
                }
                false => None,
            };
            vec![base, None, update]
        }
        Primitive::Custom(c) => {
            let g = c.vjp(x, y, ct)?;
            if g.len() != x.len() {
                return Err(crate::Error::Invalid {
                    op: "vjp",
                    msg: format!(
                        "custom primitive {}: vjp returned {} cotangents for {} inputs",
                        c.name(),
                        g.len(),
                        x.len()
                    ),
                });
            }
            g
        }
        Primitive::Fused(k) => {
            let (floats, f) = super::fused_fn(k, x);
            let primals: Vec<Array> = floats.iter().map(|&i| x[i].clone()).collect();
            let (_, g) = crate::vjp(f, &primals, std::slice::from_ref(ct))?;
            let mut out = vec![None; x.len()];
            for (j, &i) in floats.iter().enumerate() {
                out[i] = want[i].then(|| g[j].clone());
            }
            out
        }
    })
}

/// Whether `x`'s last two axes are a transposed row-major matrix (column-major:
/// the second-to-last axis is the contiguous one).
fn transposed(x: &Array) -> bool {
    let (shape, strides) = (x.shape(), &x.layout().strides);
    let n = shape.len();
    n >= 2 && shape[n - 2] > 1 && shape[n - 1] > 1 && strides[n - 2] == 1 && strides[n - 1] != 1
}

/// The matrix transpose of the last two axes (a view).
pub(super) fn swap_last(x: &Array) -> Result<Array> {
    let n = x.ndim() as isize;
    let mut perm: Vec<isize> = (0..n).collect();
    perm.swap((n - 2) as usize, (n - 1) as usize);
    o::transpose(x, Some(&perm))
}

/// A reduction's result (or cotangent) `r` broadcast back to the input's shape.
fn expand_back(r: &Array, in_shape: &[usize], axes: &[usize]) -> Result<Array> {
    let kept: Vec<usize> = (0..in_shape.len())
        .map(|i| if axes.contains(&i) { 1 } else { in_shape[i] })
        .collect();
    o::broadcast_to(&reshape_to(r, &kept)?, in_shape)
}

/// `d y / d x` elementwise for prod, max and min over `axes` (`x` the input, `y`
/// the output): max/min share it equally among the elements equal to the extreme;
/// prod is the product of the other elements, exact with zeros in the input.
pub(super) fn reduce_weights(op: ReduceOp, x: &Array, y: &Array, axes: &[usize]) -> Result<Array> {
    let ax: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
    let yb = expand_back(y, x.shape(), axes)?;
    let dt = x.dtype();
    match op {
        ReduceOp::Max | ReduceOp::Min => {
            let hit = o::astype(&o::equal(x, &yb)?, dt)?;
            let n = o::sum(&hit, Some(&ax), true)?;
            o::divide(&hit, &n)
        }
        ReduceOp::Prod => {
            // With no zero in a group: y / x. With one: the product of the others at
            // the zero, 0 elsewhere. With more: 0.
            let zero = o::scalar_like(x, 0.0)?;
            let is0 = o::equal(x, &zero)?;
            let nz = o::sum(&o::astype(&is0, dt)?, Some(&ax), true)?;
            let others = o::prod(
                &o::where_(&is0, &o::scalar_like(x, 1.0)?, x)?,
                Some(&ax),
                true,
            )?;
            let none = o::divide(&yb, x)?;
            let one = o::where_(&is0, &others, &zero)?;
            let w = o::where_(
                &o::equal(&nz, &o::scalar_like(&nz, 0.0)?)?,
                &none,
                &o::where_(&o::equal(&nz, &o::scalar_like(&nz, 1.0)?)?, &one, &zero)?,
            )?;
            Ok(w)
        }
        _ => unreachable!("only prod, max and min have weights"),
    }
}

/// The cotangent of a view's input.
fn view_vjp(v: &ViewOp, x: &Array, ct: &Array) -> Result<Option<Array>> {
    Ok(Some(match v {
        ViewOp::Transpose(perm) => {
            let mut inv = vec![0isize; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inv[p] = i as isize;
            }
            o::transpose(ct, Some(&inv))?
        }
        ViewOp::Broadcast => {
            let (xs, ys) = (x.shape(), ct.shape());
            let lead = ys.len() - xs.len();
            let axes: Vec<isize> = (0..ys.len())
                .filter(|&i| i < lead || (xs[i - lead] == 1 && ys[i] != 1))
                .map(|i| i as isize)
                .collect();
            let s = if axes.is_empty() {
                ct.clone()
            } else {
                o::sum(ct, Some(&axes), true)?
            };
            reshape_to(&s, xs)?
        }
        ViewOp::Slice(spec) => {
            let (starts, steps) = slice_spec(spec);
            o::slice_update_region(&o::zeros_like(x)?, ct, &starts, &steps)?
        }
        ViewOp::Reshape => reshape_to(ct, x.shape())?,
        ViewOp::StopGradient => return Ok(None),
        // The cotangent of z = x + iy is dL/dx + i dL/dy (ops::complex).
        ViewOp::AsReal => o::complex::as_complex(ct)?,
        ViewOp::AsComplex => o::complex::as_real(&o::astype(ct, crate::DType::C64)?),
    }))
}

/// Which integer indices address an axis of length `n` (`-n <= i < n`).
fn in_range(idx: &Array, n: usize) -> Result<Array> {
    let below = o::less(idx, &o::full_like(idx, n as f64)?)?;
    if !idx.dtype().is_signed_int() {
        return Ok(below);
    }
    let above = o::greater_equal(idx, &o::full_like(idx, -(n as f64))?)?;
    o::logical_and(&below, &above)
}
