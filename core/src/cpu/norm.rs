//! Row operations over the last axis (softmax, log_softmax, layer_norm, rms_norm),
//! computed in f64 per row from an f32 row-major copy, rounded once to the dtype
//! (f64 inputs are read and written as f64).

use super::{CpuBackend, CpuBuffer};
use crate::{Backend, DType, Error, NormOp, Result, backend::View};

pub(super) fn normalize(
    be: &CpuBackend,
    op: NormOp,
    x: View<'_, CpuBuffer>,
    params: &[View<'_, CpuBuffer>],
    eps: f64,
) -> Result<CpuBuffer> {
    let dtype = x.dtype;
    let shape = x.layout.shape.clone();
    let want = match op {
        NormOp::Softmax | NormOp::LogSoftmax => 0,
        NormOp::LayerNorm => 2,
        NormOp::RmsNorm => 1,
    };
    let l = shape.last().copied().unwrap_or(0);
    if !dtype.is_float()
        || shape.is_empty()
        || params.len() != want
        || params
            .iter()
            .any(|p| p.dtype != dtype || p.layout.shape != [l])
    {
        return Err(Error::invalid(
            op.name(),
            format!(
                "needs a float input of at least one dim and {want} parameters of shape [{l}], got {dtype} {shape:?} and {} parameters",
                params.len()
            ),
        ));
    }
    // Rows are read and written in `work`: f64 for f64, else f32.
    let work = if dtype == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    // Elements lo..hi of a row-major buffer of `work`, widened.
    let row = |b: &CpuBuffer, lo: usize, hi: usize| -> Vec<f64> {
        if work == DType::F64 {
            b.as_slice::<f64>()[lo..hi].to_vec()
        } else {
            b.as_slice::<f32>()[lo..hi]
                .iter()
                .map(|&v| v as f64)
                .collect()
        }
    };
    let xs = be.copy(x, work)?;
    let ps: Vec<Vec<f64>> = params
        .iter()
        .map(|p| be.copy(*p, work).map(|b| row(&b, 0, l)))
        .collect::<Result<_>>()?;
    let n = shape.iter().product::<usize>();
    let mut out = CpuBuffer::uninit(n * work.size());
    let mut y = vec![0.0f64; l];
    {
        let p = |k: usize, j: usize| ps[k][j];
        // One row at a time: read widened, computed in f64, written in `work`.
        for lo in (0..n).step_by(l.max(1)) {
            let r = &row(&xs, lo, lo + l)[..];
            match op {
                NormOp::Softmax | NormOp::LogSoftmax => {
                    let m = r.iter().copied().fold(f64::NEG_INFINITY, |a, b| {
                        if a.is_nan() || b.is_nan() {
                            f64::NAN
                        } else {
                            a.max(b)
                        }
                    });
                    let s: f64 = r.iter().map(|v| (v - m).exp()).sum();
                    for (yj, v) in y.iter_mut().zip(r) {
                        *yj = if op == NormOp::Softmax {
                            (v - m).exp() / s
                        } else {
                            v - m - s.ln()
                        };
                    }
                }
                NormOp::LayerNorm => {
                    let mean = r.iter().sum::<f64>() / l as f64;
                    let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / l as f64;
                    let inv = 1.0 / (var + eps).sqrt();
                    for (j, (yj, v)) in y.iter_mut().zip(r).enumerate() {
                        *yj = (v - mean) * inv * p(0, j) + p(1, j);
                    }
                }
                NormOp::RmsNorm => {
                    let ms = r.iter().map(|v| v * v).sum::<f64>() / l as f64;
                    let inv = 1.0 / (ms + eps).sqrt();
                    for (j, (yj, v)) in y.iter_mut().zip(r).enumerate() {
                        *yj = v * inv * p(0, j);
                    }
                }
            }
            if work == DType::F64 {
                out.as_mut_slice::<f64>()[lo..lo + l].copy_from_slice(&y);
            } else {
                let o = &mut out.as_mut_slice::<f32>()[lo..lo + l];
                o.iter_mut().zip(&y).for_each(|(o, &v)| *o = v as f32);
            }
        }
    }
    if work == DType::F64 {
        return Ok(out);
    }
    be.round_from_f32(out, &shape, dtype)
}
