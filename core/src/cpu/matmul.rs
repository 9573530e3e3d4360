//! Matrix products on the CPU: matrixmultiply's `sgemm` (f32, any strides, threaded
//! off wasm) once per batch element; 16-bit inputs are widened to f32 first, so every
//! dtype accumulates in f32 and the result is rounded once.

use super::{CpuBackend, CpuBuffer, strided};
use crate::{Backend, DType, Error, Layout, Result, backend::View};

/// `alpha * a @ b + beta * c` (see [`Backend::matmul`]).
pub(super) fn matmul(
    be: &CpuBackend,
    a: View<'_, CpuBuffer>,
    b: View<'_, CpuBuffer>,
    c: Option<View<'_, CpuBuffer>>,
    alpha: f64,
    beta: f64,
) -> Result<CpuBuffer> {
    let dtype = a.dtype;
    if !dtype.is_float() || b.dtype != dtype || c.is_some_and(|c| c.dtype != dtype) {
        return Err(Error::UnsupportedDType {
            op: "matmul",
            dtype,
        });
    }
    let (sa, sb) = (&a.layout.shape, &b.layout.shape);
    let nd = sa.len();
    if nd < 2 || sb.len() != nd || sa[..nd - 2] != sb[..nd - 2] || sa[nd - 1] != sb[nd - 2] {
        return Err(Error::ShapeMismatch {
            op: "matmul",
            lhs: sa.clone(),
            rhs: sb.clone(),
        });
    }
    let (m, k, n) = (sa[nd - 2], sa[nd - 1], sb[nd - 1]);
    let mut shape = sa[..nd - 2].to_vec();
    shape.extend([m, n]);
    let len: usize = shape.iter().product();
    // f32 operands: in place for f32 (any strides), widened row-major copies else.
    let widen = |x: View<'_, CpuBuffer>| -> Result<Option<CpuBuffer>> {
        Ok(match x.dtype {
            DType::F32 => None,
            _ => Some(be.copy(x, DType::F32)?),
        })
    };
    let (wa, wb) = (widen(a)?, widen(b)?);
    let la = wa.as_ref().map(|_| Layout::contiguous(sa));
    let lb = wb.as_ref().map(|_| Layout::contiguous(sb));
    let (la, lb) = (
        la.as_ref().unwrap_or(a.layout),
        lb.as_ref().unwrap_or(b.layout),
    );
    let da: &[f32] = wa.as_ref().unwrap_or(a.buffer).as_slice();
    let db: &[f32] = wb.as_ref().unwrap_or(b.buffer).as_slice();
    // The output starts as c (row-major f32) when it is read, else uninitialised.
    let (mut out, beta) = match c {
        Some(c) if beta != 0.0 => (be.copy(c, DType::F32)?, beta as f32),
        _ => (CpuBuffer::uninit(len * 4), 0.0),
    };
    {
        let o: &mut [f32] = out.as_mut_slice();
        if k == 0 {
            o.iter_mut().for_each(|v| *v *= beta);
        } else if m > 0 && n > 0 {
            let mut i = 0;
            let bshape = &sa[..nd - 2];
            strided::walk::<2>(
                bshape,
                [&la.strides[..nd - 2], &lb.strides[..nd - 2]],
                [la.offset, lb.offset],
                |[pa, pb]| {
                    // SAFETY: the layouts were checked against their buffers when the
                    // arrays were made, so every element (offset + index · stride) of
                    // each matrix lies inside its slice; `o` holds m·n f32 at i.
                    unsafe {
                        matrixmultiply::sgemm(
                            m,
                            k,
                            n,
                            alpha as f32,
                            da.as_ptr().add(pa),
                            la.strides[nd - 2],
                            la.strides[nd - 1],
                            db.as_ptr().add(pb),
                            lb.strides[nd - 2],
                            lb.strides[nd - 1],
                            beta,
                            o.as_mut_ptr().add(i),
                            n as isize,
                            1,
                        );
                    }
                    i += m * n;
                },
            );
        }
    }
    be.round_from_f32(out, &shape, dtype)
}
