//! Float views to f64 and f64 results back: the CPU code of families that compute
//! in f64 whatever their dtype (attention, quantization).

use crate::cpu::CpuBuffer;
use crate::{CpuOutput, DType, Error, Result, View};

/// A float view (f32, f16 or bf16, any strides) as row-major f64 values.
pub(crate) fn floats(op: &'static str, x: &View<'_, CpuBuffer>) -> Result<Vec<f64>> {
    let l = x.layout;
    let mut v = Vec::with_capacity(l.numel());
    macro_rules! read {
        ($t:ty, $f:expr) => {{
            let s = x.buffer.as_slice::<$t>();
            crate::cpu::strided::for_each_index(&l.shape, &l.strides, l.offset, |i| {
                v.push($f(s[i]))
            });
        }};
    }
    match x.dtype {
        DType::F32 => read!(f32, f64::from),
        DType::F16 => read!(half::f16, |h: half::f16| h.to_f64()),
        DType::BF16 => read!(half::bf16, |h: half::bf16| h.to_f64()),
        other => {
            return Err(Error::invalid(
                op,
                format!("takes f32, f16 or bf16, got {other}"),
            ));
        }
    }
    Ok(v)
}

/// f64 results into the output's dtype (f32, f16 or bf16).
pub(crate) fn store_floats(op: &'static str, out: &mut CpuOutput<'_>, res: &[f64]) -> Result<()> {
    let buf = &mut *out.buffer;
    match out.dtype {
        DType::F32 => buf
            .as_mut_slice::<f32>()
            .iter_mut()
            .zip(res)
            .for_each(|(o, &x)| *o = x as f32),
        DType::F16 => buf
            .as_mut_slice::<half::f16>()
            .iter_mut()
            .zip(res)
            .for_each(|(o, &x)| *o = half::f16::from_f64(x)),
        DType::BF16 => buf
            .as_mut_slice::<half::bf16>()
            .iter_mut()
            .zip(res)
            .for_each(|(o, &x)| *o = half::bf16::from_f64(x)),
        other => {
            return Err(Error::invalid(
                op,
                format!("takes f32, f16 or bf16, got {other}"),
            ));
        }
    }
    Ok(())
}
