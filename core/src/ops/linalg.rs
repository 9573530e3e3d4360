//! Matrix products: [`matmul`] and [`addmm`] (one primitive, `Primitive::Matmul`).

use super::{
    astype, broadcast_to, expand_dims, full, multiply, node, op_device, scalar_like, squeeze,
};
use crate::{Array, DType, Error, Primitive, Result, layout::broadcast_shapes};

/// The dtype a product of `a` and `b` is computed in: their promoted type, which
/// must be a float (integer products are refused rather than silently promoted:
/// cast first, e.g. `a.astype(DType::F32)`).
fn float_dtype(op: &'static str, a: &Array, b: &Array) -> Result<DType> {
    let d = DType::promote(a.dtype(), b.dtype());
    if !d.is_float() {
        return Err(Error::UnsupportedDType { op, dtype: d });
    }
    Ok(d)
}

/// Matrix product with numpy's rules: `a` `[..., M, K]` times `b` `[..., K, N]` is
/// `[..., M, N]`, the batch dims (`...`) broadcast against each other; a 1-D `a` is
/// a row vector and a 1-D `b` a column vector, their added axis removed from the
/// result. Inputs are promoted to a common float dtype (f32, f16 or bf16; 16-bit
/// products accumulate in f32); integer and bool inputs are an error. Transposed
/// and strided views are read in place (no copy for `a.t()`).
pub fn matmul(a: &Array, b: &Array) -> Result<Array> {
    product("matmul", a, b, None, 1.0, 0.0)
}

/// `alpha * (a @ b) + beta * c` in one pass (MLX's `addmm`): `a` and `b` as in
/// [`matmul`], `c` broadcast to the product's shape (a bias row `[N]` works). The
/// scale and the sum happen in f32 before the result is rounded once.
pub fn addmm(c: &Array, a: &Array, b: &Array, alpha: f64, beta: f64) -> Result<Array> {
    product("addmm", a, b, Some(c), alpha, beta)
}

fn product(
    op: &'static str,
    a: &Array,
    b: &Array,
    c: Option<&Array>,
    alpha: f64,
    beta: f64,
) -> Result<Array> {
    if a.ndim() == 0 || b.ndim() == 0 {
        return Err(Error::invalid(
            op,
            format!(
                "operands must have at least one dimension, got shapes {:?} and {:?}",
                a.shape(),
                b.shape()
            ),
        ));
    }
    let common = DType::promote(a.dtype(), b.dtype());
    if common.is_complex() || c.is_some_and(|c| c.dtype().is_complex()) {
        return super::complex::product(op, a, b, c, alpha, beta);
    }
    let mut d = float_dtype(op, a, b)?;
    if let Some(c) = c {
        d = DType::promote(d, c.dtype());
        if !d.is_float() {
            return Err(Error::UnsupportedDType { op, dtype: d });
        }
    }
    let (a, b) = (astype(a, d)?, astype(b, d)?);
    let (row, col) = (a.ndim() == 1, b.ndim() == 1);
    let a2 = if row { expand_dims(&a, 0)? } else { a };
    let b2 = if col { expand_dims(&b, -1)? } else { b };
    let (ka, kb) = (a2.shape()[a2.ndim() - 1], b2.shape()[b2.ndim() - 2]);
    if ka != kb {
        return Err(Error::ShapeMismatch {
            op,
            lhs: a2.shape().to_vec(),
            rhs: b2.shape().to_vec(),
        });
    }
    let shape = out_shape(op, &a2, &b2)?;
    // The result's shape once the added vector axes are removed again.
    let mut squeezed = shape.clone();
    if col {
        squeezed.pop();
    }
    if row {
        squeezed.remove(squeezed.len() - if col { 1 } else { 2 });
    }
    let c2 = match c {
        None => None,
        Some(c) => {
            let cb = broadcast_to(&astype(c, d)?, &squeezed).map_err(|_| Error::ShapeMismatch {
                op,
                lhs: c.shape().to_vec(),
                rhs: squeezed.clone(),
            })?;
            let mut cb = cb;
            if row {
                cb = expand_dims(&cb, cb.ndim() as isize - if col { 0 } else { 1 })?;
            }
            if col {
                cb = expand_dims(&cb, -1)?;
            }
            Some(cb)
        }
    };
    let y = matmul_nd(&a2, &b2, c2.as_ref(), alpha, beta)?;
    let mut axes = vec![];
    if row {
        axes.push(shape.len() as isize - 2);
    }
    if col {
        axes.push(shape.len() as isize - 1);
    }
    if axes.is_empty() {
        Ok(y)
    } else {
        squeeze(&y, Some(&axes))
    }
}

/// `[..., M, N]` for operands of at least two dims, batch dims broadcast.
fn out_shape(op: &'static str, a: &Array, b: &Array) -> Result<Vec<usize>> {
    let (an, bn) = (a.ndim(), b.ndim());
    // The batch dims' mismatch shows both operands whole.
    let batch = broadcast_shapes(op, &a.shape()[..an - 2], &b.shape()[..bn - 2]).map_err(|_| {
        Error::invalid(
            op,
            format!(
                "batch dims do not broadcast: shapes {:?} and {:?} (batch {:?} and {:?})",
                a.shape(),
                b.shape(),
                &a.shape()[..an - 2],
                &b.shape()[..bn - 2]
            ),
        )
    })?;
    let mut s = batch;
    s.extend([a.shape()[an - 2], b.shape()[bn - 1]]);
    Ok(s)
}

/// `[..., M, K] @ [K, N]` as one product of `B·M` rows (as PyTorch does) when
/// `a`'s batch dims fold into its rows without a copy (and `c`'s, broadcast to the
/// output, too): one larger product tiles the GPU better, and the vjp's weight
/// gradient is then one product over `K = B·M` rather than a product per batch
/// element and a sum.
fn fold_batch(
    a: &Array,
    b: &Array,
    c: Option<&Array>,
    alpha: f64,
    beta: f64,
    shape: &[usize],
) -> Result<Option<Array>> {
    let an = a.ndim();
    if b.ndim() != 2 || an < 3 || a.shape()[..an - 2] != shape[..shape.len() - 2] {
        return Ok(None);
    }
    let (k, n) = (a.shape()[an - 1], b.shape()[1]);
    let rows: usize = a.shape()[..an - 1].iter().product();
    if a.layout().reshape_strides(&[rows, k]).is_none() {
        return Ok(None);
    }
    let flat = [rows as isize, -1];
    let c2 = match c {
        Some(c) if beta != 0.0 => {
            let cb = broadcast_to(c, shape)?;
            if cb.layout().reshape_strides(&[rows, n]).is_none() {
                return Ok(None);
            }
            Some(cb.reshape(&flat)?)
        }
        _ => None,
    };
    let y = matmul_nd(&a.reshape(&flat)?, b, c2.as_ref(), alpha, beta)?;
    let shape: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    Ok(Some(y.reshape(&shape)?))
}

/// The product node of operands of at least two dims and one float dtype: batch
/// dims broadcast (views), `c` broadcast to the output. Used by the transforms.
pub(crate) fn matmul_nd(
    a: &Array,
    b: &Array,
    c: Option<&Array>,
    alpha: f64,
    beta: f64,
) -> Result<Array> {
    let op = "matmul";
    let d = float_dtype(op, a, b)?;
    let shape = out_shape(op, a, b)?;
    let (an, bn) = (a.ndim(), b.ndim());
    let (m, k, n) = (a.shape()[an - 2], a.shape()[an - 1], b.shape()[bn - 1]);
    if let Some(y) = fold_batch(a, b, c, alpha, beta, &shape)? {
        return Ok(y);
    }
    let mut sa = shape[..shape.len() - 2].to_vec();
    let mut sb = sa.clone();
    sa.extend([m, k]);
    sb.extend([k, n]);
    let (a, b) = (broadcast_to(a, &sa)?, broadcast_to(b, &sb)?);
    let c = c.map(|c| broadcast_to(c, &shape)).transpose()?;
    if k == 0 {
        // An empty sum: the product is zero, so only the bias remains.
        let z = super::with_dev(&a, || full(&shape, 0.0, d))?;
        return match c {
            Some(c) if beta != 0.0 => multiply(&c, &scalar_like(&c, beta)?),
            _ => Ok(z),
        };
    }
    let mut inputs = vec![a.clone(), b];
    let mut beta = beta;
    match c {
        Some(c) if beta != 0.0 => inputs.push(c),
        _ => beta = 0.0,
    }
    node(
        Primitive::Matmul { alpha, beta },
        inputs,
        &shape,
        d,
        op_device(&a),
    )
}
