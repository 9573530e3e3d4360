//! The CPU backend: the reference implementation of every op for every dtype.
//!
//! Elementwise families have a dense fast path over slices (vectorised by the
//! compiler) and a strided path with contiguous dims collapsed; broadcast inputs
//! are read through zero strides, never materialised.

pub(crate) mod alloc;
pub(crate) mod floats;
mod index;
mod matmul;
mod norm;
mod random;
pub use random::{below_one, threefry2x32};
mod reduce;
pub mod scalar;
pub mod strided;

use crate::{
    ArgReduceOp, Backend, BinaryOp, DType, DeviceKind, Generator, ReduceOp, Result, UnaryOp,
    backend::View, layout::Contiguity, layout::classify_binary,
};
use futures::future::BoxFuture;
use scalar::{Compute, Store, binary_fn, op_fns, unary_fn, with_store};
use std::sync::Arc;

/// The CPU backend.
#[derive(Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    /// A CPU backend (stateless; [`crate::Device::cpu`] shares one).
    pub fn new() -> CpuBackend {
        CpuBackend
    }

    /// Row-major f32 results of `shape` rounded once to `dtype` (the families that
    /// compute 16-bit dtypes in f32).
    fn round_from_f32(&self, f32s: CpuBuffer, shape: &[usize], dtype: DType) -> Result<CpuBuffer> {
        if dtype == DType::F32 {
            return Ok(f32s);
        }
        let layout = crate::Layout::contiguous(shape);
        let v = View {
            buffer: &f32s,
            dtype: DType::F32,
            layout: &layout,
        };
        self.copy(v, dtype)
    }
}

/// A host buffer, 8-byte aligned so any element type can be viewed in place.
pub struct CpuBuffer {
    words: Vec<u64>,
    len: usize,
}

impl CpuBuffer {
    /// A buffer of `len` bytes with unspecified contents, for outputs that are
    /// written in full (reuses freed buffers; see the `alloc` module).
    pub fn uninit(len: usize) -> CpuBuffer {
        CpuBuffer {
            words: alloc::take(len),
            len,
        }
    }
    /// A zeroed buffer of `len` bytes.
    pub fn zeroed(len: usize) -> CpuBuffer {
        let mut b = CpuBuffer::uninit(len);
        b.bytes_mut().fill(0);
        b
    }
    /// A buffer holding `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> CpuBuffer {
        let mut b = CpuBuffer::uninit(bytes.len());
        b.bytes_mut().copy_from_slice(bytes);
        b
    }
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }
    /// The bytes, mutable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
    /// The elements as `T` (the buffer's dtype must be `T`'s).
    pub fn as_slice<T: bytemuck::Pod>(&self) -> &[T] {
        bytemuck::cast_slice(self.bytes())
    }
    /// The elements as `T`, mutable.
    pub fn as_mut_slice<T: bytemuck::Pod>(&mut self) -> &mut [T] {
        bytemuck::cast_slice_mut(self.bytes_mut())
    }
}

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        alloc::give(std::mem::take(&mut self.words));
    }
}

/// Drops every cached free host buffer.
pub fn clear_cache() {
    alloc::clear();
}

/// A fresh output of `n` elements of `T`, every one written by `f`.
fn output<T: Store>(n: usize, f: impl FnOnce(&mut [T])) -> CpuBuffer {
    let mut b = CpuBuffer::uninit(n * std::mem::size_of::<T>());
    f(b.as_mut_slice::<T>());
    b
}

/// Elements per thread below which splitting an op does not pay for the threads.
const PAR_MIN: usize = 1 << 17;

/// Runs `f(start, chunk)` over `out` cut into one contiguous chunk per core
/// (`WMX_CPU_THREADS` overrides the count), on scoped threads; small outputs stay
/// on the calling thread. The CPU backend's own loops use it, and custom
/// primitives' CPU code can too.
pub fn par_chunks<O: Send>(out: &mut [O], f: impl Fn(usize, &mut [O]) + Sync) {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cores = *THREADS.get_or_init(|| {
        let env = std::env::var("WMX_CPU_THREADS")
            .ok()
            .and_then(|v| v.parse().ok());
        env.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    });
    let t = cores.min(out.len() / PAR_MIN).max(1);
    if t == 1 {
        return f(0, out);
    }
    let chunk = out.len().div_ceil(t);
    std::thread::scope(|s| {
        for (i, c) in out.chunks_mut(chunk).enumerate() {
            let f = &f;
            s.spawn(move || f(i * chunk, c));
        }
    });
}

/// Applies `f` elementwise over `x` into a fresh row-major buffer of `O`.
fn map1<I: Store, O: Store>(x: View<'_, CpuBuffer>, f: impl Fn(I::C) -> O + Sync) -> CpuBuffer {
    let src = x.buffer.as_slice::<I>();
    let l = x.layout;
    output::<O>(l.numel(), |out| {
        if l.is_row_contiguous() {
            let s = &src[l.offset..l.offset + out.len()];
            par_chunks(out, |k, out| {
                for (o, &v) in out.iter_mut().zip(&s[k..]) {
                    *o = f(v.load());
                }
            });
        } else {
            let mut k = 0;
            strided::for_each_index(&l.shape, &l.strides, l.offset, |i| {
                out[k] = f(src[i].load());
                k += 1;
            });
        }
    })
}

/// Applies `f` over two inputs broadcast to one shape; fast paths by contiguity.
fn map2<I: Store, O: Store>(
    a: View<'_, CpuBuffer>,
    b: View<'_, CpuBuffer>,
    f: impl Fn(I::C, I::C) -> O + Sync,
) -> CpuBuffer {
    let (sa, sb) = (a.buffer.as_slice::<I>(), b.buffer.as_slice::<I>());
    let (la, lb) = (a.layout, b.layout);
    let n = la.numel();
    output::<O>(n, |out| {
        if n == 0 {
            return;
        }
        match classify_binary(la, lb) {
            Contiguity::ScalarScalar => {
                let v = f(sa[la.offset].load(), sb[lb.offset].load());
                out.fill(v);
            }
            Contiguity::ScalarVector => {
                let x = sa[la.offset].load();
                let ys = &sb[lb.offset..lb.offset + n];
                par_chunks(out, |k, out| {
                    for (o, &y) in out.iter_mut().zip(&ys[k..]) {
                        *o = f(x, y.load());
                    }
                });
            }
            Contiguity::VectorScalar => {
                let y = sb[lb.offset].load();
                let xs = &sa[la.offset..la.offset + n];
                par_chunks(out, |k, out| {
                    for (o, &x) in out.iter_mut().zip(&xs[k..]) {
                        *o = f(x.load(), y);
                    }
                });
            }
            Contiguity::VectorVector => {
                let xs = &sa[la.offset..la.offset + n];
                let ys = &sb[lb.offset..lb.offset + n];
                par_chunks(out, |k, out| {
                    for ((o, &x), &y) in out.iter_mut().zip(&xs[k..]).zip(&ys[k..]) {
                        *o = f(x.load(), y.load());
                    }
                });
            }
            Contiguity::General => {
                let mut k = 0;
                strided::walk::<2>(
                    &la.shape,
                    [&la.strides, &lb.strides],
                    [la.offset, lb.offset],
                    |[i, j]| {
                        out[k] = f(sa[i].load(), sb[j].load());
                        k += 1;
                    },
                );
            }
        }
    })
}

/// Converts a compute value of an op whose output is bool into bool storage.
fn to_bool<C: Compute>(c: C) -> scalar::B8 {
    scalar::B8(c.nonzero() as u8)
}

impl Backend for CpuBackend {
    type Buffer = CpuBuffer;

    fn name(&self) -> String {
        "cpu".into()
    }
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cpu
    }
    fn check_dtype(&self, _dtype: DType) -> Result<()> {
        Ok(())
    }
    fn from_host(&self, bytes: Vec<u8>, _dtype: DType) -> Result<CpuBuffer> {
        Ok(CpuBuffer::from_bytes(&bytes))
    }
    fn read(&self, buffer: &CpuBuffer) -> Result<Arc<Vec<u8>>> {
        let b = buffer.bytes();
        let mut copy = Vec::new();
        copy.try_reserve_exact(b.len())
            .map_err(|_| crate::Error::Backend {
                backend: "cpu".into(),
                msg: format!("out of memory: {} bytes could not be allocated", b.len()),
            })?;
        copy.extend_from_slice(b);
        Ok(Arc::new(copy))
    }
    fn read_async(&self, buffer: &CpuBuffer) -> BoxFuture<'static, Result<Arc<Vec<u8>>>> {
        let r = self.read(buffer);
        Box::pin(async move { r })
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
    fn check_errors(&self) -> Result<()> {
        Ok(()) // every CPU error is returned by the call that made it
    }

    fn unary(&self, op: UnaryOp, x: View<'_, CpuBuffer>, out: DType) -> Result<CpuBuffer> {
        Ok(with_store!(x.dtype, T => unary_fn!(op, f => {
            if out == DType::Bool && x.dtype != DType::Bool {
                map1::<T, scalar::B8>(x, |v| to_bool(f(v)))
            } else {
                map1::<T, T>(x, |v| T::store(f(v)))
            }
        })))
    }

    fn binary(
        &self,
        op: BinaryOp,
        a: View<'_, CpuBuffer>,
        b: View<'_, CpuBuffer>,
        out: DType,
    ) -> Result<CpuBuffer> {
        Ok(with_store!(a.dtype, T => binary_fn!(op, f => {
            if out == DType::Bool && a.dtype != DType::Bool {
                map2::<T, scalar::B8>(a, b, |x, y| to_bool(f(x, y)))
            } else {
                map2::<T, T>(a, b, |x, y| T::store(f(x, y)))
            }
        })))
    }

    fn select(
        &self,
        cond: View<'_, CpuBuffer>,
        x: View<'_, CpuBuffer>,
        y: View<'_, CpuBuffer>,
    ) -> Result<CpuBuffer> {
        let c = cond.buffer.as_slice::<u8>();
        let lc = cond.layout;
        Ok(with_store!(x.dtype, T => {
            let (sx, sy) = (x.buffer.as_slice::<T>(), y.buffer.as_slice::<T>());
            output::<T>(lc.numel(), |out| {
                let mut k = 0;
                strided::walk::<3>(
                    &lc.shape,
                    [&lc.strides, &x.layout.strides, &y.layout.strides],
                    [lc.offset, x.layout.offset, y.layout.offset],
                    |[i, j, m]| {
                        out[k] = if c[i] != 0 { sx[j] } else { sy[m] };
                        k += 1;
                    },
                );
            })
        }))
    }

    fn copy(&self, x: View<'_, CpuBuffer>, out: DType) -> Result<CpuBuffer> {
        Ok(with_store!(x.dtype, I => with_store!(out, O => {
            map1::<I, O>(x, |v| O::from_wide(I::store(v).wide()))
        })))
    }

    fn generate(&self, g: Generator, dtype: DType, len: usize) -> Result<CpuBuffer> {
        Ok(with_store!(dtype, T => output::<T>(len, |out| match g {
            Generator::Fill(v) => out.fill(T::from_const(v)),
            Generator::Arange { start, step } => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = T::from_const(start + i as f64 * step);
                }
            }
        })))
    }

    fn custom(
        &self,
        prim: &dyn crate::CustomPrimitive,
        inputs: &[View<'_, CpuBuffer>],
        shape: &[usize],
        dtype: DType,
    ) -> Result<CpuBuffer> {
        let bytes = crate::layout::numel(shape) * dtype.size();
        // Large outputs are zeroed on every core (one thread's fill costs as much
        // as the op); small ones on this thread (spawning costs more than filling).
        let mut buffer = CpuBuffer::uninit(bytes);
        if bytes >= 8 << 20 {
            par_chunks(buffer.bytes_mut(), |_, c| c.fill(0));
        } else {
            buffer.bytes_mut().fill(0);
        }
        let mut out = crate::CpuOutput {
            buffer: &mut buffer,
            shape,
            dtype,
        };
        prim.eval_cpu(inputs, &mut out)?;
        if buffer.bytes().len() != bytes {
            return Err(crate::Error::Invalid {
                op: "custom",
                msg: format!(
                    "custom primitive {} left a buffer of {} bytes; its output {shape:?} {dtype} takes {bytes}",
                    prim.name(),
                    buffer.bytes().len()
                ),
            });
        }
        Ok(buffer)
    }
    fn axpby(
        &self,
        x: View<'_, CpuBuffer>,
        y: View<'_, CpuBuffer>,
        alpha: f64,
        beta: f64,
    ) -> Result<CpuBuffer> {
        let (a, b) = (alpha as f32, beta as f32);
        with_store!(x.dtype, T => {
            if !x.dtype.is_float() {
                return Err(crate::Error::UnsupportedDType { op: "axpby", dtype: x.dtype });
            }
            Ok(map2::<T, T>(x, y, |u, v| {
                let (u, v) = (u.to_f64() as f32, v.to_f64() as f32);
                T::store(<T as Store>::C::from_f64((a * u + b * v) as f64))
            }))
        })
    }

    fn reduce(&self, op: ReduceOp, x: View<'_, CpuBuffer>, axes: &[usize]) -> Result<CpuBuffer> {
        reduce::reduce(op, x, axes)
    }

    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: View<'_, CpuBuffer>,
        axis: usize,
    ) -> Result<CpuBuffer> {
        reduce::arg_reduce(op, x, axis)
    }

    fn matmul(
        &self,
        a: View<'_, CpuBuffer>,
        b: View<'_, CpuBuffer>,
        c: Option<View<'_, CpuBuffer>>,
        alpha: f64,
        beta: f64,
    ) -> Result<CpuBuffer> {
        matmul::matmul(self, a, b, c, alpha, beta)
    }

    fn normalize(
        &self,
        op: crate::NormOp,
        x: View<'_, CpuBuffer>,
        params: &[View<'_, CpuBuffer>],
        eps: f64,
    ) -> Result<CpuBuffer> {
        norm::normalize(self, op, x, params, eps)
    }

    fn concatenate(&self, inputs: &[View<'_, CpuBuffer>], axis: usize) -> Result<CpuBuffer> {
        index::concatenate(inputs, axis)
    }

    fn scan(
        &self,
        op: ReduceOp,
        x: View<'_, CpuBuffer>,
        axis: usize,
        reverse: bool,
        inclusive: bool,
    ) -> Result<CpuBuffer> {
        reduce::scan(op, x, axis, reverse, inclusive)
    }

    fn argsort(&self, x: View<'_, CpuBuffer>) -> Result<CpuBuffer> {
        index::argsort(x)
    }

    fn random_bits(
        &self,
        keys: View<'_, CpuBuffer>,
        len: usize,
        dtype: DType,
    ) -> Result<CpuBuffer> {
        random::random_bits(keys, len, dtype)
    }

    fn gather(
        &self,
        x: View<'_, CpuBuffer>,
        indices: View<'_, CpuBuffer>,
        axis: usize,
    ) -> Result<CpuBuffer> {
        index::gather(x, indices, axis)
    }

    fn scatter(
        &self,
        op: crate::ScatterOp,
        base: View<'_, CpuBuffer>,
        indices: View<'_, CpuBuffer>,
        updates: View<'_, CpuBuffer>,
        axis: usize,
    ) -> Result<CpuBuffer> {
        index::scatter(self, op, base, indices, updates, axis)
    }

    fn slice_update(
        &self,
        base: View<'_, CpuBuffer>,
        update: View<'_, CpuBuffer>,
        starts: &[usize],
        steps: &[isize],
    ) -> Result<CpuBuffer> {
        let (dtype, shape) = (base.dtype, base.layout.shape.clone());
        let mut out = self.copy(base, dtype)?;
        // The region as a strided view of the row-major output.
        let rm = crate::layout::row_major_strides(&shape);
        let strides: Vec<isize> = rm.iter().zip(steps).map(|(s, t)| s * t).collect();
        let offset: isize = rm.iter().zip(starts).map(|(s, &a)| s * a as isize).sum();
        let ul = update.layout;
        with_store!(dtype, T => {
            let (o, u) = (out.as_mut_slice::<T>(), update.buffer.as_slice::<T>());
            strided::walk::<2>(&ul.shape, [&strides, &ul.strides], [offset as usize, ul.offset],
                |[i, j]| o[i] = u[j]);
        });
        Ok(out)
    }
}
