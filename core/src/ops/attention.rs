//! Scaled dot-product attention, composed of ops (matmuls and a softmax): the
//! path for every shape, differentiable and batched like any composite. A fused
//! flash-attention kernel (issue 37) will take the shapes it serves.

use crate::{Array, DType, Error, Result};

/// Which keys each query attends to in [`scaled_dot_product_attention`].
#[derive(Clone, Copy, Debug)]
pub enum AttentionMask<'a> {
    /// Every key.
    None,
    /// Keys up to the query's position, aligned to the end when there are fewer
    /// queries than keys (a decode step with a KV cache): query `i` attends key
    /// `j` when `j <= i + Lk - Lq`.
    Causal,
    /// Causal, and only the last `window` keys up to the query's position
    /// (`i + Lk - Lq - window < j <= i + Lk - Lq`).
    SlidingWindow(usize),
    /// A boolean array broadcastable to `[B, Hq, Lq, Lk]`: true where the query
    /// attends the key.
    Bool(&'a Array),
    /// An array broadcastable to `[B, Hq, Lq, Lk]` added to the scaled scores
    /// (`-inf` excludes a key).
    Additive(&'a Array),
}

/// `softmax(q kᵀ · scale + mask) v` over keys, for `q` `[B, Hq, Lq, D]` and `k`,
/// `v` `[B, Hkv, Lk, D]` / `[B, Hkv, Lk, Dv]` with `Hq` a multiple of `Hkv`
/// (grouped-query and multi-query attention: query head `h` reads key head
/// `h / (Hq / Hkv)`); `scale` defaults to `1/√D`. Float inputs of one dtype; the
/// scores and the softmax are computed in f32 for f16 and bf16 inputs.
///
/// A query whose keys are all masked gets zeros (PyTorch gives NaN there, MLX
/// leaves it unspecified), and no gradient.
pub fn scaled_dot_product_attention(
    q: &Array,
    k: &Array,
    v: &Array,
    scale: Option<f64>,
    mask: AttentionMask<'_>,
) -> Result<Array> {
    let op = "scaled_dot_product_attention";
    let bad = |msg: String| Err(Error::invalid(op, msg));
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    if qs.len() != 4 || ks.len() != 4 || vs.len() != 4 {
        return bad(format!(
            "q, k and v must be [B, H, L, D], got {qs:?}, {ks:?}, {vs:?}"
        ));
    }
    let (b, hq, lq, d) = (qs[0], qs[1], qs[2], qs[3]);
    let (hkv, lk) = (ks[1], ks[2]);
    if ks[0] != b || vs[0] != b || vs[1] != hkv || vs[2] != lk || ks[3] != d {
        return bad(format!(
            "k must be [B, Hkv, Lk, D] and v [B, Hkv, Lk, Dv] for q {qs:?}, got {ks:?} and {vs:?}"
        ));
    }
    if hkv == 0 || hq % hkv != 0 {
        return bad(format!(
            "the query heads ({hq}) must be a multiple of the key heads ({hkv})"
        ));
    }
    let dt = q.dtype();
    if !dt.is_float() || k.dtype() != dt || v.dtype() != dt {
        return bad(format!(
            "q, k and v must be float of one dtype, got {}, {} and {}",
            dt,
            k.dtype(),
            v.dtype()
        ));
    }
    let scale = scale.unwrap_or(1.0 / (d as f64).sqrt());
    if !scale.is_finite() {
        return bad(format!("scale must be finite, got {scale}"));
    }
    let g = hq / hkv;
    let i = |x: usize| x as isize;
    // Query heads grouped by their key head: one product per key head, no copy of
    // the keys.
    let qg = crate::reshape(q, &[i(b), i(hkv), i(g * lq), i(d)])?;
    let scores = crate::matmul(&qg, &crate::swapaxes(k, -1, -2)?)?;
    let work = if dt == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let scores = crate::multiply(
        &crate::astype(&scores, work)?,
        &crate::with_device(q.device(), || crate::scalar(scale, work))?,
    )?;
    let full = [b, hkv, g, lq, lk];
    let mut s = crate::reshape(&scores, &full.map(i))?;
    let on = |f: &dyn Fn() -> Result<Array>| crate::with_device(q.device(), f);
    // Positions: the queries are the last Lq of the Lk.
    let band = |window: Option<usize>| -> Result<Array> {
        let qi = on(&|| crate::arange(0.0, lq as f64, 1.0, DType::I32))?.reshape(&[i(lq), 1])?;
        let kj = on(&|| crate::arange(0.0, lk as f64, 1.0, DType::I32))?.reshape(&[1, i(lk)])?;
        let end = crate::add(
            &qi,
            &on(&|| crate::scalar(lk as f64 - lq as f64, DType::I32))?,
        )?;
        let mut keep = crate::less_equal(&kj, &end)?;
        if let Some(w) = window {
            let start = crate::subtract(&end, &on(&|| crate::scalar(w as f64, DType::I32))?)?;
            keep = crate::logical_and(&keep, &crate::greater(&kj, &start)?)?;
        }
        Ok(keep)
    };
    let to_groups = |m: &Array, what: &str| -> Result<Array> {
        let m = crate::broadcast_to(m, &[b, hq, lq, lk]).map_err(|_| {
            Error::invalid(
                op,
                format!(
                    "the {what} mask {:?} does not broadcast to [B, Hq, Lq, Lk] = {:?}",
                    m.shape(),
                    [b, hq, lq, lk]
                ),
            )
        })?;
        crate::reshape(&m, &full.map(i))
    };
    let keep = match mask {
        AttentionMask::None => None,
        AttentionMask::Causal => Some(band(None)?),
        AttentionMask::SlidingWindow(0) => return bad("a sliding window of 0 keys".into()),
        AttentionMask::SlidingWindow(w) => Some(band(Some(w))?),
        AttentionMask::Bool(m) => {
            if m.dtype() != DType::Bool {
                return bad(format!("a boolean mask must be bool, got {}", m.dtype()));
            }
            Some(to_groups(m, "boolean")?)
        }
        AttentionMask::Additive(m) => {
            if !m.dtype().is_float() {
                return bad(format!("an additive mask must be float, got {}", m.dtype()));
            }
            s = crate::add(&s, &to_groups(&crate::astype(m, work)?, "additive")?)?;
            None
        }
    };
    let ninf = on(&|| crate::scalar(f64::NEG_INFINITY, work))?;
    if let Some(keep) = &keep {
        s = crate::where_(keep, &s, &ninf)?;
    }
    // Rows with no key left: finite scores for the softmax, zero weights after.
    let empty = crate::equal(&crate::max(&s, Some(&[-1]), true)?, &ninf)?;
    let zero = crate::zeros_like(&ninf)?;
    let s = crate::where_(&empty, &zero, &s)?;
    let p = crate::where_(&empty, &zero, &crate::softmax(&s, &[-1])?)?;
    let p = crate::reshape(&crate::astype(&p, dt)?, &[i(b), i(hkv), i(g * lq), i(lk)])?;
    let out = crate::matmul(&p, v)?;
    crate::reshape(&out, &[i(b), i(hq), i(lq), i(vs[3])])
}
