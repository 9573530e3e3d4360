//! Matrix products on the CPU: matrixmultiply's `sgemm` (f32, any strides, threaded
//! off wasm) once per batch element; 16-bit inputs are widened to f32 first, so every
//! dtype accumulates in f32 and the result is rounded once. f64 runs `dgemm`.

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
    if dtype == DType::F64 {
        let out = products::<f64>(be, [a, b], c, [m, k, n], &shape, alpha, beta)?;
        return Ok(out);
    }
    let out = products::<f32>(be, [a, b], c, [m, k, n], &shape, alpha, beta)?;
    be.round_from_f32(out, &shape, dtype)
}

/// matrixmultiply's `sgemm`/`dgemm`: `(m, k, n, alpha, a, rsa, csa, b, rsb, csb,
/// beta, c, rsc, csc)`, unsafe as theirs (every element the sizes and strides reach
/// must lie in its matrix).
type GemmFn<T> = unsafe fn(
    usize,
    usize,
    usize,
    T,
    *const T,
    isize,
    isize,
    *const T,
    isize,
    isize,
    T,
    *mut T,
    isize,
    isize,
);

/// An element type matrixmultiply multiplies.
trait Gemm: bytemuck::Pod + std::ops::MulAssign {
    const DTYPE: DType;
    const GEMM: GemmFn<Self>;
    fn of(v: f64) -> Self;
}

impl Gemm for f32 {
    const DTYPE: DType = DType::F32;
    const GEMM: GemmFn<f32> = matrixmultiply::sgemm;
    fn of(v: f64) -> Self {
        v as f32
    }
}

impl Gemm for f64 {
    const DTYPE: DType = DType::F64;
    const GEMM: GemmFn<f64> = matrixmultiply::dgemm;
    fn of(v: f64) -> Self {
        v
    }
}

/// The products in `T`, row-major: operands of dtype `T` are read in place (any
/// strides), others through widened row-major copies.
fn products<T: Gemm>(
    be: &CpuBackend,
    [a, b]: [View<'_, CpuBuffer>; 2],
    c: Option<View<'_, CpuBuffer>>,
    [m, k, n]: [usize; 3],
    shape: &[usize],
    alpha: f64,
    beta: f64,
) -> Result<CpuBuffer> {
    let (sa, sb) = (&a.layout.shape, &b.layout.shape);
    let nd = sa.len();
    let len: usize = shape.iter().product();
    let widen = |x: View<'_, CpuBuffer>| -> Result<Option<CpuBuffer>> {
        Ok(if x.dtype == T::DTYPE {
            None
        } else {
            Some(be.copy(x, T::DTYPE)?)
        })
    };
    let (wa, wb) = (widen(a)?, widen(b)?);
    let la = wa.as_ref().map(|_| Layout::contiguous(sa));
    let lb = wb.as_ref().map(|_| Layout::contiguous(sb));
    let (la, lb) = (
        la.as_ref().unwrap_or(a.layout),
        lb.as_ref().unwrap_or(b.layout),
    );
    let da: &[T] = wa.as_ref().unwrap_or(a.buffer).as_slice();
    let db: &[T] = wb.as_ref().unwrap_or(b.buffer).as_slice();
    // The output starts as c (row-major) when it is read, else uninitialised.
    let (mut out, beta) = match c {
        Some(c) if beta != 0.0 => (be.copy(c, T::DTYPE)?, T::of(beta)),
        _ => (CpuBuffer::uninit(len * T::DTYPE.size()), T::of(0.0)),
    };
    {
        let o: &mut [T] = out.as_mut_slice();
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
                    // each matrix lies inside its slice; `o` holds m·n elements at i.
                    unsafe {
                        (T::GEMM)(
                            m,
                            k,
                            n,
                            T::of(alpha),
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
    Ok(out)
}
