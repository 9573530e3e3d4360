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
    let widened = |b: &CpuBuffer| -> Vec<f64> {
        if work == DType::F64 {
            b.as_slice::<f64>().to_vec()
        } else {
            b.as_slice::<f32>().iter().map(|&v| v as f64).collect()
        }
    };
    let xs = be.copy(x, work)?;
    let ps: Vec<Vec<f64>> = params
        .iter()
        .map(|p| be.copy(*p, work).map(|b| widened(&b)))
        .collect::<Result<_>>()?;
    let xv = widened(&xs);
    drop(xs);
    let n = xv.len();
    let mut o = vec![0.0f64; n];
    {
        let p = |k: usize, j: usize| ps[k][j];
        for (r, y) in xv.chunks(l.max(1)).zip(o.chunks_mut(l.max(1))) {
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
        }
    }
    if work == DType::F64 {
        return Ok(CpuBuffer::from_bytes(bytemuck::cast_slice(&o)));
    }
    let f32s: Vec<f32> = o.into_iter().map(|v| v as f32).collect();
    be.round_from_f32(
        CpuBuffer::from_bytes(bytemuck::cast_slice(&f32s)),
        &shape,
        dtype,
    )
}
