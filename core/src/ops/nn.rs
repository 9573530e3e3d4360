//! Fused row operations of neural networks: [`softmax`], [`log_softmax`],
//! [`layer_norm`], [`rms_norm`]. Each is one primitive (`Primitive::Normalize`) over
//! the last axis: one read and one write of the data, max-subtracted (softmax) in
//! f32 for every float dtype; layer_norm's variance is two-pass (the CPU in f64; the
//! GPU in f32, around the row's first element for rows it holds in registers, else
//! Welford-merged). Other axes are moved last first (a copy). The vjp of
//! layer_norm and rms_norm is one kernel too ([`NormVjp`]: dx, and the weight's
//! gradient before its sum over rows) in f32, f16 and bf16.

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

/// The vjp of layer_norm or rms_norm (`x`'s node inputs: x, the weight `[L]` and,
/// for layer_norm, the bias) given the output cotangent `ct`: f32, f16 and bf16
/// take one [`NormVjp`] kernel (dx, and dy times the normalised x for the
/// weight's gradient), whose own derivatives differentiate [`norm_vjp_composed`];
/// f64 differentiates the composed op.
pub(crate) fn norm_vjp(
    op: NormOp,
    eps: f64,
    x: &[Array],
    ct: &Array,
    want: &[bool],
) -> Result<Vec<Option<Array>>> {
    use super::sum;
    if !matches!(x[0].dtype(), DType::F32 | DType::F16 | DType::BF16) || x[0].ndim() == 0 {
        let f = |xs: &[Array]| Ok(vec![normalize_composed(op, &xs[0], &xs[1..], eps)?]);
        let (_, g) = crate::transforms::vjp(f, x, std::slice::from_ref(ct))?;
        return Ok(g.into_iter().map(Some).collect());
    }
    let outputs = if want[1] { 2 } else { 1 };
    let fwd = move |a: &[Array]| -> Result<Vec<Array>> {
        let c = |a: &Array| super::stop_gradient(a);
        let prim = NormVjp { op, eps, outputs };
        let y = NormVjp::run(&prim, &c(&a[0])?, &c(&a[1])?, &c(&a[2])?)?;
        (0..outputs).map(|i| NormVjp::part(&y, i)).collect()
    };
    let reference = move |a: &[Array]| -> Result<Vec<Array>> {
        let mut r = norm_vjp_composed(op, eps, &a[0], &a[1], &a[2])?;
        r.truncate(outputs);
        Ok(r)
    };
    let f = crate::CustomFunction::new(fwd)
        .name("norm_vjp")
        .rules_from(reference);
    let y = f.call(&[x[0].clone(), x[1].clone(), ct.clone()])?;
    // The parameters' gradients: sums over every row.
    let rows: Vec<isize> = (0..x[0].ndim() as isize - 1).collect();
    let over_rows = |a: &Array| sum(a, Some(&rows), false);
    let mut g = vec![want[0].then(|| y[0].clone())];
    g.push(want[1].then(|| over_rows(&y[1])).transpose()?);
    if x.len() > 2 {
        g.push(want[2].then(|| over_rows(ct)).transpose()?);
    }
    Ok(g)
}

/// [`NormVjp`]'s outputs written with unfused ops: `[dx, dy * xhat]`.
pub(crate) fn norm_vjp_composed(
    op: NormOp,
    eps: f64,
    x: &Array,
    w: &Array,
    dy: &Array,
) -> Result<Vec<Array>> {
    use super::{add, mean, multiply, rsqrt, square, subtract};
    let ax = [-1isize];
    let (d, ms) = match op {
        NormOp::LayerNorm => {
            let d = subtract(x, &mean(x, Some(&ax), true)?)?;
            let v = mean(&square(&d)?, Some(&ax), true)?;
            (d, v)
        }
        _ => (x.clone(), mean(&square(x)?, Some(&ax), true)?),
    };
    let r = rsqrt(&add(&ms, &scalar_like(&ms, eps)?)?)?;
    let xh = multiply(&d, &r)?;
    let g = multiply(dy, w)?;
    let mut inner = subtract(
        &g,
        &multiply(&xh, &mean(&multiply(&g, &xh)?, Some(&ax), true)?)?,
    )?;
    if op == NormOp::LayerNorm {
        inner = subtract(&inner, &mean(&g, Some(&ax), true)?)?;
    }
    Ok(vec![multiply(&r, &inner)?, multiply(dy, &xh)?])
}

/// The vjp of layer_norm or rms_norm over the last axis in one kernel: inputs x,
/// the weight `[L]` and the output's cotangent dy (one float dtype); output
/// `[outputs, ..x]`: dx, then (with `outputs` 2) dy times the normalised x, whose
/// sum over the rows is the weight's gradient. Public for the GPU backends, which
/// run it through `wmx_kernels::Kernels::normalize_vjp`.
#[derive(Debug, Clone, PartialEq)]
pub struct NormVjp {
    /// `NormOp::LayerNorm` or `NormOp::RmsNorm`.
    pub op: NormOp,
    /// The forward's epsilon.
    pub eps: f64,
    /// 1 (dx) or 2 (dx, then dy times the normalised x).
    pub outputs: usize,
}

impl NormVjp {
    fn run(&self, x: &Array, w: &Array, dy: &Array) -> Result<Array> {
        let mut shape = vec![self.outputs];
        shape.extend(x.shape());
        crate::custom(
            std::sync::Arc::new(self.clone()),
            &[x.clone(), w.clone(), dy.clone()],
            &shape,
            x.dtype(),
        )
    }

    /// Output `i` of `y` (`[outputs, ..]`), a view.
    fn part(y: &Array, i: usize) -> Result<Array> {
        let s: Vec<isize> = y.shape()[1..].iter().map(|&d| d as isize).collect();
        let at = i as isize;
        reshape(&y.slice(&[crate::Slice::range(at, at + 1)])?, &s)
    }
}

impl crate::CustomPrimitive for NormVjp {
    fn name(&self) -> &str {
        "norm_vjp"
    }

    fn eval_cpu(
        &self,
        inputs: &[crate::View<'_, crate::cpu::CpuBuffer>],
        out: &mut crate::CpuOutput<'_>,
    ) -> Result<()> {
        use crate::cpu::floats::{floats, store_floats};
        let name = "norm_vjp";
        let (x, w, dy) = (
            floats(name, &inputs[0])?,
            floats(name, &inputs[1])?,
            floats(name, &inputs[2])?,
        );
        let l = w.len();
        let n = x.len();
        let mut res = vec![0.0; self.outputs * n];
        if l > 0 {
            let lf = l as f64;
            for (row, start) in (0..n).step_by(l).enumerate() {
                let xs = &x[start..start + l];
                let ds = &dy[start..start + l];
                let mean = if self.op == NormOp::LayerNorm {
                    xs.iter().sum::<f64>() / lf
                } else {
                    0.0
                };
                let ms = xs.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / lf;
                let r = 1.0 / (ms + self.eps).sqrt();
                let xh = |j: usize| (xs[j] - mean) * r;
                let g = |j: usize| ds[j] * w[j];
                let mg = if self.op == NormOp::LayerNorm {
                    (0..l).map(g).sum::<f64>() / lf
                } else {
                    0.0
                };
                let mgx = (0..l).map(|j| g(j) * xh(j)).sum::<f64>() / lf;
                for j in 0..l {
                    res[row * l + j] = r * (g(j) - mg - xh(j) * mgx);
                    if self.outputs == 2 {
                        res[n + row * l + j] = ds[j] * xh(j);
                    }
                }
            }
        }
        store_floats(name, out, &res)
    }

    fn is_equivalent(&self, other: &dyn crate::CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<NormVjp>()
            .is_some_and(|o| o == self)
    }

    fn vmap(&self, inputs: &[Array], batched: &[bool]) -> Result<Array> {
        let v = inputs
            .iter()
            .zip(batched)
            .find(|(_, b)| **b)
            .map_or(1, |(a, _)| a.shape()[0]);
        let lead = |a: &Array, b: bool| -> Result<Array> {
            if b {
                return Ok(a.clone());
            }
            let mut s = vec![v];
            s.extend(a.shape());
            broadcast_to(a, &s)
        };
        let (x, dy) = (lead(&inputs[0], batched[0])?, lead(&inputs[2], batched[2])?);
        if !batched[1] {
            // One weight: the mapped axis is more rows. [k, V, ..] -> [V, k, ..].
            return super::moveaxis(&self.run(&x, &inputs[1], &dy)?, 0, 1);
        }
        // A weight per index: the composed form, the weight broadcast over the rows.
        let mut ws: Vec<isize> = vec![v as isize];
        ws.extend(std::iter::repeat_n(1, x.ndim() - 2));
        ws.push(-1);
        let w = reshape(&inputs[1], &ws)?;
        let parts = norm_vjp_composed(self.op, self.eps, &x, &w, &dy)?;
        let parts: Vec<&Array> = parts[..self.outputs].iter().collect();
        super::stack(&parts, 1)
    }
}
