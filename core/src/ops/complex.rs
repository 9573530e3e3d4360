//! complex64: its ops as composites on the f32 pairs of a view.
//!
//! A c64 array's buffer holds (real, imaginary) f32 pairs; [`as_real`] views it
//! as f32 `[..., 2]` and [`as_complex`] views such pairs as c64 again, both
//! without a copy. Every complex op is built from real ops on those views, so
//! backends never compute on c64 (`node` refuses it) and the complex ops
//! differentiate, vmap and fuse as their real parts do.
//!
//! Gradients follow MLX and PyTorch: the cotangent of a complex value `z = x + iy`
//! is `dL/dx + i dL/dy`, so `grad` of a real loss is its steepest-ascent direction
//! (JAX's `grad` gives the conjugate).

use super::{
    add, arctan2, astype, broadcast_shapes, broadcast_to, contiguous, cos, divide, equal, exp,
    expand_dims, hypot, isinf, isnan, log, logical_and, logical_or, multiply, negative, not_equal,
    sin, sqrt, squeeze, subtract, where_, zeros_like,
};
use crate::{Array, BinaryOp, DType, Error, Layout, Primitive, Result, UnaryOp, ViewOp};

/// The f32 pairs of a complex64 array: a view of its buffer, shape `[..., 2]`.
pub(crate) fn as_real(x: &Array) -> Array {
    debug_assert!(x.dtype().is_complex());
    let l = x.layout();
    let mut shape = l.shape.clone();
    shape.push(2);
    let mut strides: Vec<isize> = l.strides.iter().map(|s| s * 2).collect();
    strides.push(1);
    let layout = Layout {
        shape,
        strides,
        offset: l.offset * 2,
    };
    Array::from_op(
        Primitive::View(ViewOp::AsReal),
        vec![x.clone()],
        layout,
        DType::F32,
        x.device().clone(),
    )
}

/// The complex64 array of the pairs `p` (`[..., 2]`, cast to f32): a view where
/// each pair lies as one complex element, else a view of a row-major copy.
pub(crate) fn as_complex(p: &Array) -> Result<Array> {
    let n = p.ndim();
    if n == 0 || p.shape()[n - 1] != 2 {
        return Err(Error::invalid(
            "complex",
            format!("needs pairs [..., 2], got shape {:?}", p.shape()),
        ));
    }
    let p = astype(p, DType::F32)?;
    let l = p.layout();
    let paired = l.strides[n - 1] == 1
        && l.offset % 2 == 0
        && l.strides[..n - 1]
            .iter()
            .zip(&l.shape)
            .all(|(s, &d)| d == 1 || s % 2 == 0);
    let p = if paired || p.size() == 0 {
        p
    } else {
        contiguous(&p)?
    };
    let l = p.layout();
    let layout = Layout {
        shape: l.shape[..n - 1].to_vec(),
        strides: l.strides[..n - 1].iter().map(|s| s / 2).collect(),
        offset: l.offset / 2,
    };
    Ok(Array::from_op(
        Primitive::View(ViewOp::AsComplex),
        vec![p.clone()],
        layout,
        DType::C64,
        p.device().clone(),
    ))
}

/// Part `k` (0 real, 1 imaginary) of a complex array: a strided f32 view.
fn part(z: &Array, k: usize) -> Result<Array> {
    let r = as_real(z);
    let n = r.ndim();
    let mut starts = vec![0; n];
    starts[n - 1] = k;
    let mut counts = r.shape().to_vec();
    counts[n - 1] = 1;
    squeeze(
        &super::slice_region(&r, &starts, &vec![1; n], &counts),
        Some(&[-1]),
    )
}

/// `re + i * im` from two real arrays (broadcast together, computed in f32).
pub fn complex(re: &Array, im: &Array) -> Result<Array> {
    for x in [re, im] {
        if x.dtype().is_complex() {
            return Err(Error::invalid(
                "complex",
                "takes the real and imaginary parts as real arrays, got a complex one",
            ));
        }
    }
    let shape = broadcast_shapes("complex", re.shape(), im.shape())?;
    let parts = [re, im].map(|x| {
        astype(x, DType::F32)
            .and_then(|x| broadcast_to(&x, &shape))
            .and_then(|x| expand_dims(&x, -1))
    });
    let [re, im] = parts;
    as_complex(&super::concatenate(&[&re?, &im?], -1)?)
}

/// The real part (numpy's `real`; a real array is returned as it is). A view.
pub fn real(x: &Array) -> Result<Array> {
    if x.dtype().is_complex() {
        part(x, 0)
    } else {
        Ok(x.clone())
    }
}

/// The imaginary part (numpy's `imag`; zeros for a real array). A view.
pub fn imag(x: &Array) -> Result<Array> {
    if x.dtype().is_complex() {
        part(x, 1)
    } else {
        zeros_like(x)
    }
}

/// The complex conjugate (numpy's `conj`; a real array is returned as it is).
pub fn conj(x: &Array) -> Result<Array> {
    if !x.dtype().is_complex() {
        return Ok(x.clone());
    }
    complex(&part(x, 0)?, &negative(&part(x, 1)?)?)
}

/// The argument of each element, in `(-pi, pi]` (numpy's `angle`): f32 for
/// complex64, and `arctan2(0, x)` (0 or pi) for a real `x`, in its float dtype.
pub fn angle(x: &Array) -> Result<Array> {
    if x.dtype().is_complex() {
        arctan2(&part(x, 1)?, &part(x, 0)?)
    } else {
        let xf = astype(x, x.dtype().to_float())?;
        arctan2(&zeros_like(&xf)?, &xf)
    }
}

/// The error for an op that has no complex form.
pub(crate) fn unsupported(op: &'static str) -> Error {
    Error::UnsupportedDType {
        op,
        dtype: DType::C64,
    }
}

/// A unary op of a complex64 array (the caller checked the dtype).
pub(crate) fn unary(op: UnaryOp, z: &Array) -> Result<Array> {
    use UnaryOp::*;
    let (re, im) = (part(z, 0)?, part(z, 1)?);
    match op {
        Negative => as_complex(&negative(&as_real(z))?),
        Abs => hypot(&re, &im),
        // numpy 2's sign: z / |z|, and 0 at 0.
        Sign => {
            let r = hypot(&re, &im)?;
            let zero = equal(&r, &super::scalar_like(&r, 0.0)?)?;
            let safe = where_(&zero, &super::scalar_like(&r, 1.0)?, &r)?;
            complex(&divide(&re, &safe)?, &divide(&im, &safe)?)
        }
        Square => binary(BinaryOp::Multiply, z, z),
        Exp => {
            let m = exp(&re)?;
            complex(&multiply(&m, &cos(&im)?)?, &multiply(&m, &sin(&im)?)?)
        }
        Log => complex(&log(&hypot(&re, &im)?)?, &arctan2(&im, &re)?),
        // The principal root: sqrt((|z| + x) / 2) + i sign(y) sqrt((|z| - x) / 2),
        // with sign(-0) = -1 as numpy's csqrt (the branch cut's lower side).
        Sqrt => {
            let r = hypot(&re, &im)?;
            let half = super::scalar_like(&re, 0.5)?;
            let a = sqrt(&multiply(&add(&r, &re)?, &half)?)?;
            let b = sqrt(&multiply(&subtract(&r, &re)?, &half)?)?;
            // Below zero, -0 included (1 / -0 = -inf); -inf itself by the first test.
            let zero = super::scalar_like(&re, 0.0)?;
            let recip = divide(&super::scalar_like(&re, 1.0)?, &im)?;
            let neg = logical_or(&super::less(&im, &zero)?, &super::less(&recip, &zero)?)?;
            let signed = where_(&neg, &negative(&b)?, &b)?;
            complex(&a, &signed)
        }
        IsNan => logical_or(&isnan(&re)?, &isnan(&im)?),
        IsInf => logical_or(&isinf(&re)?, &isinf(&im)?),
        LogicalNot => logical_and(
            &equal(&re, &super::scalar_like(&re, 0.0)?)?,
            &equal(&im, &super::scalar_like(&re, 0.0)?)?,
        ),
        _ => Err(unsupported(op.name())),
    }
}

/// A binary op on complex64 (either input complex; both are promoted).
pub(crate) fn binary(op: BinaryOp, a: &Array, b: &Array) -> Result<Array> {
    use BinaryOp::*;
    let shape = broadcast_shapes(op.name(), a.shape(), b.shape())?;
    let [a, b] = [a, b].map(|x| astype(x, DType::C64).and_then(|x| broadcast_to(&x, &shape)));
    let (a, b) = (a?, b?);
    let (ar, ai, br, bi) = (part(&a, 0)?, part(&a, 1)?, part(&b, 0)?, part(&b, 1)?);
    match op {
        Add => as_complex(&add(&as_real(&a), &as_real(&b))?),
        Subtract => as_complex(&subtract(&as_real(&a), &as_real(&b))?),
        Multiply => complex(
            &subtract(&multiply(&ar, &br)?, &multiply(&ai, &bi)?)?,
            &add(&multiply(&ar, &bi)?, &multiply(&ai, &br)?)?,
        ),
        // Smith's algorithm (numpy's): scaled by the larger part of the divisor,
        // so |b|^2 never overflows or underflows on its own.
        Divide => {
            let wide = super::greater_equal(&super::abs(&br)?, &super::abs(&bi)?)?;
            // r = small / large; den = large + small * r
            let (large, small) = (where_(&wide, &br, &bi)?, where_(&wide, &bi, &br)?);
            let r = divide(&small, &large)?;
            let den = add(&large, &multiply(&small, &r)?)?;
            // wide: ((ar + ai r) + i (ai - ar r)) / den
            // else: ((ar r + ai) + i (ai r - ar)) / den
            let re_w = add(&ar, &multiply(&ai, &r)?)?;
            let im_w = subtract(&ai, &multiply(&ar, &r)?)?;
            let re_t = add(&multiply(&ar, &r)?, &ai)?;
            let im_t = subtract(&multiply(&ai, &r)?, &ar)?;
            complex(
                &divide(&where_(&wide, &re_w, &re_t)?, &den)?,
                &divide(&where_(&wide, &im_w, &im_t)?, &den)?,
            )
        }
        Equal => logical_and(&equal(&ar, &br)?, &equal(&ai, &bi)?),
        NotEqual => logical_or(&not_equal(&ar, &br)?, &not_equal(&ai, &bi)?),
        _ => Err(unsupported(op.name())),
    }
}

/// `a @ b` (and `alpha * a @ b + beta * c`) for complex64 operands, from four real
/// products of the parts; shapes as [`super::matmul`].
pub(crate) fn product(
    op: &'static str,
    a: &Array,
    b: &Array,
    c: Option<&Array>,
    alpha: f64,
    beta: f64,
) -> Result<Array> {
    let [a, b] = [a, b].map(|x| astype(x, DType::C64));
    let (a, b) = (a?, b?);
    let (ar, ai, br, bi) = (part(&a, 0)?, part(&a, 1)?, part(&b, 0)?, part(&b, 1)?);
    let mm = super::matmul;
    let re = subtract(&mm(&ar, &br)?, &mm(&ai, &bi)?)?;
    let im = add(&mm(&ar, &bi)?, &mm(&ai, &br)?)?;
    let p = complex(&re, &im)?;
    match c {
        None if alpha == 1.0 => Ok(p),
        None => binary(BinaryOp::Multiply, &p, &super::scalar_like(&re, alpha)?),
        Some(c) => {
            let s = |x: &Array, v: f64| binary(BinaryOp::Multiply, x, &super::scalar_like(&re, v)?);
            let out = binary(BinaryOp::Add, &s(&p, alpha)?, &s(c, beta)?)?;
            if out.shape() != p.shape() {
                return Err(Error::ShapeMismatch {
                    op,
                    lhs: c.shape().to_vec(),
                    rhs: p.shape().to_vec(),
                });
            }
            Ok(out)
        }
    }
}

/// Copies of complex64 data by the real op `f` on the pairs (views, joins,
/// gathers): the pair axis rides along last.
pub(crate) fn on_pairs(z: &Array, f: impl FnOnce(&Array) -> Result<Array>) -> Result<Array> {
    as_complex(&f(&as_real(z))?)
}

/// Integer indices `[...]` repeated for both parts: `[..., 2]`.
pub(crate) fn pair_indices(idx: &Array) -> Result<Array> {
    let mut shape = idx.shape().to_vec();
    shape.push(2);
    broadcast_to(&expand_dims(idx, -1)?, &shape)
}

/// A complex64 node's guard: only views reach a backend with c64 (an op without a
/// complex form names itself here).
pub(crate) fn check_node(op: &'static str, inputs: &[Array], dtype: DType) -> Result<()> {
    if dtype.is_complex() || inputs.iter().any(|x| x.dtype().is_complex()) {
        return Err(unsupported(op));
    }
    Ok(())
}
