//! The `Backend` trait: one method per primitive family, on the backend's own
//! buffer type. [`DynBackend`] is its type-erased form that [`crate::Device`] holds.

use crate::{
    ArgReduceOp, BinaryOp, CustomPrimitive, DType, Error, FusedKernel, Generator, Layout, NormOp,
    Primitive, ReduceOp, Result, ScatterOp, UnaryOp,
};
use futures::future::BoxFuture;
use std::any::Any;
use std::sync::Arc;

/// An input of a kernel: a buffer, its dtype and where the elements are.
pub struct View<'a, B> {
    /// The buffer holding the elements.
    pub buffer: &'a B,
    /// Element type.
    pub dtype: DType,
    /// Shape, strides and offset (already broadcast to the output's shape for
    /// elementwise families).
    pub layout: &'a Layout,
}

// By hand: derive would require `B: Copy`, but only references are copied.
impl<B> Clone for View<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B> Copy for View<'_, B> {}

/// Whether a device computes on the host or an accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// The host CPU.
    Cpu,
    /// A GPU (or a GPU API on a software rasteriser such as lavapipe).
    Gpu,
}

/// A compute backend. Every method of a family has no default, so adding a family
/// makes the compiler list every backend to update. Outputs are fresh row-major
/// buffers of `numel(shape)` elements. Work may be recorded and run later; it must
/// be complete when [`Backend::read`] returns, and submitted by [`Backend::flush`].
pub trait Backend: Send + Sync + 'static {
    /// The backend's buffer type.
    type Buffer: Send + Sync + 'static;

    /// Human-readable name, e.g. `"cpu"` or `"webgpu: NVIDIA H100 (Vulkan)"`.
    fn name(&self) -> String;
    /// CPU or GPU.
    fn kind(&self) -> DeviceKind;
    /// `Ok` if this device can hold and compute `dtype`, else an error saying why.
    fn check_dtype(&self, dtype: DType) -> Result<()>;

    /// A buffer holding these host bytes (a GPU backend may upload lazily).
    #[allow(clippy::wrong_self_convention)] // `self` is the backend, not the source
    fn from_host(&self, bytes: Vec<u8>, dtype: DType) -> Result<Self::Buffer>;
    /// All bytes of a buffer, blocking until pending work is done.
    fn read(&self, buffer: &Self::Buffer) -> Result<Arc<Vec<u8>>>;
    /// All bytes of a buffer in a host buffer from the CPU backend's pool (reused
    /// host memory: no page faults), for code that runs on the host
    /// ([`CustomPrimitive::eval_on_host`]). The default copies [`Backend::read`]'s.
    fn read_host(&self, buffer: &Self::Buffer) -> Result<crate::cpu::CpuBuffer> {
        Ok(crate::cpu::CpuBuffer::from_bytes(&self.read(buffer)?))
    }
    /// A buffer holding a copy of `bytes`, made now (nothing of the caller's is
    /// kept). The default is [`Backend::from_host`] of a copy.
    fn upload(&self, bytes: &[u8], dtype: DType) -> Result<Self::Buffer> {
        self.from_host(bytes.to_vec(), dtype)
    }
    /// All bytes of a buffer, without blocking (works on wasm).
    fn read_async(&self, buffer: &Self::Buffer) -> BoxFuture<'static, Result<Arc<Vec<u8>>>>;
    /// Submits recorded work (the end of an eval).
    fn flush(&self) -> Result<()>;
    /// Submits recorded work and waits until the device has finished it (native;
    /// on wasm it only submits).
    fn synchronize(&self) -> Result<()>;
    /// Errors the device reported since the last check that no call has returned
    /// yet, e.g. raised by a custom primitive's own use of the device; eval calls it
    /// after every custom primitive so the error belongs to that op.
    fn check_errors(&self) -> Result<()>;
    /// Submits recorded work now, where [`Backend::flush`] may keep recording while
    /// the device is busy ([`crate::async_eval`]).
    fn commit(&self) -> Result<()> {
        self.flush()
    }

    /// Most distinct buffers one fused kernel may read; `None` when this backend
    /// does not run [`FusedKernel`]s (compile then replays plain ops).
    fn fusion_limit(&self) -> Option<usize> {
        None
    }
    /// Computes a fused kernel: `inputs` have the output's shape (views read in
    /// place); the output has the last step's dtype `out`.
    fn fused(
        &self,
        kernel: &FusedKernel,
        inputs: &[View<'_, Self::Buffer>],
        out: DType,
    ) -> Result<Self::Buffer> {
        let _ = (kernel, inputs, out);
        Err(Error::invalid(
            "fused",
            format!("{} does not run fused kernels", self.name()),
        ))
    }
    /// The source this backend generates for `kernel` on inputs of these dtypes
    /// and layouts (for [`crate::Compiled::report`]).
    fn fused_source(&self, kernel: &FusedKernel, inputs: &[(DType, Layout)]) -> Option<String> {
        let _ = (kernel, inputs);
        None
    }

    /// Runs a custom primitive's code for this backend (its `eval_cpu`,
    /// `eval_webgpu`, ...), producing the output of `shape` and `dtype`.
    fn custom(
        &self,
        prim: &dyn CustomPrimitive,
        inputs: &[View<'_, Self::Buffer>],
        shape: &[usize],
        dtype: DType,
    ) -> Result<Self::Buffer>;

    /// Elementwise op of one input; `out` is the output dtype.
    fn unary(&self, op: UnaryOp, x: View<'_, Self::Buffer>, out: DType) -> Result<Self::Buffer>;
    /// Elementwise op of two inputs of one dtype, broadcast to `a.layout.shape`.
    fn binary(
        &self,
        op: BinaryOp,
        a: View<'_, Self::Buffer>,
        b: View<'_, Self::Buffer>,
        out: DType,
    ) -> Result<Self::Buffer>;
    /// `cond ? x : y`, all broadcast to one shape; cond is bool.
    fn select(
        &self,
        cond: View<'_, Self::Buffer>,
        x: View<'_, Self::Buffer>,
        y: View<'_, Self::Buffer>,
    ) -> Result<Self::Buffer>;
    /// Strided to row-major copy with a cast to `out`.
    fn copy(&self, x: View<'_, Self::Buffer>, out: DType) -> Result<Self::Buffer>;
    /// Fill or arange of `len` elements.
    fn generate(&self, generator: Generator, dtype: DType, len: usize) -> Result<Self::Buffer>;
    /// `alpha * x + beta * y`, x and y of one float dtype, broadcast to one shape.
    fn axpby(
        &self,
        x: View<'_, Self::Buffer>,
        y: View<'_, Self::Buffer>,
        alpha: f64,
        beta: f64,
    ) -> Result<Self::Buffer>;
    /// Reduces `axes` (sorted, unique) away; output dtype per [`ReduceOp::out_dtype`].
    fn reduce(
        &self,
        op: ReduceOp,
        x: View<'_, Self::Buffer>,
        axes: &[usize],
    ) -> Result<Self::Buffer>;
    /// Index (u32) of the extreme along `axis`, which is removed.
    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: View<'_, Self::Buffer>,
        axis: usize,
    ) -> Result<Self::Buffer>;
    /// `alpha * a @ b + beta * c` over matching batch dims: `a` `[..., M, K]`, `b`
    /// `[..., K, N]`, `c` (when given) of the output's shape `[..., M, N]` (broadcast
    /// through zero strides); one float dtype, products accumulated in f32 and the
    /// result rounded once. Any strides; `K` may be 0.
    fn matmul(
        &self,
        a: View<'_, Self::Buffer>,
        b: View<'_, Self::Buffer>,
        c: Option<View<'_, Self::Buffer>>,
        alpha: f64,
        beta: f64,
    ) -> Result<Self::Buffer>;
    /// `op` over the last axis of `x` (at least 1-D, any strides); `params` are the
    /// op's per-column inputs (layer_norm: weight, bias; rms_norm: weight), each of
    /// shape `[L]` and `x`'s float dtype. Computed in f32, rounded once.
    fn normalize(
        &self,
        op: NormOp,
        x: View<'_, Self::Buffer>,
        params: &[View<'_, Self::Buffer>],
        eps: f64,
    ) -> Result<Self::Buffer>;
    /// A row-major copy of `base` with `update` (same dtype) written over the region
    /// of `update`'s shape starting at `starts` with `steps` per axis (in bounds).
    fn slice_update(
        &self,
        base: View<'_, Self::Buffer>,
        update: View<'_, Self::Buffer>,
        starts: &[usize],
        steps: &[isize],
    ) -> Result<Self::Buffer>;
    /// `inputs` (at least one, one dtype and rank, equal extents off `axis`, any
    /// strides) joined along `axis`; bits move unchanged.
    fn concatenate(&self, inputs: &[View<'_, Self::Buffer>], axis: usize) -> Result<Self::Buffer>;
    /// [`crate::Primitive::Gather`]: `x` at the integer `indices` along `axis` (both of
    /// one rank, equal extents off `axis`; output of the indices' shape). Negative
    /// indices count from the end; any other index outside `x` gives
    /// [`crate::gather_fill`] of the dtype.
    fn gather(
        &self,
        x: View<'_, Self::Buffer>,
        indices: View<'_, Self::Buffer>,
        axis: usize,
    ) -> Result<Self::Buffer>;
    /// [`crate::Primitive::Scatter`]: a row-major copy of `base` with `updates`
    /// combined by `op` at `indices` along `axis` (indices and updates of one shape,
    /// equal to base's off `axis`). Negative indices count from the end; others
    /// outside `base` are dropped.
    fn scatter(
        &self,
        op: ScatterOp,
        base: View<'_, Self::Buffer>,
        indices: View<'_, Self::Buffer>,
        updates: View<'_, Self::Buffer>,
        axis: usize,
    ) -> Result<Self::Buffer>;
    /// Cumulative `op` (sum, prod, max, min) of `x` (any strides) along `axis`,
    /// `inclusive` or exclusive, `reverse` or not; output dtype per
    /// [`ReduceOp::out_dtype`]; max/min propagate NaN.
    fn scan(
        &self,
        op: ReduceOp,
        x: View<'_, Self::Buffer>,
        axis: usize,
        reverse: bool,
        inclusive: bool,
    ) -> Result<Self::Buffer>;
    /// u32 indices sorting `x` (at least 1-D, any strides) along its last axis:
    /// stable, NaN last, -0 equal to +0.
    fn argsort(&self, x: View<'_, Self::Buffer>) -> Result<Self::Buffer>;
    /// [`crate::Primitive::Sort`]: `x` (at least 1-D, any strides) sorted along its
    /// last axis in [`Backend::argsort`]'s order, row-major. By default
    /// [`sort_by_argsort`].
    fn sort(&self, x: View<'_, Self::Buffer>) -> Result<Self::Buffer> {
        sort_by_argsort(self, x)
    }
    /// u32 threefry-2x32 bits of `len` elements from row-major u32 `keys` (an even
    /// number of elements, at least 2; `len` a multiple of the key count), laid out
    /// as MLX's `RandomBits` ([`crate::random`] has the layout).
    /// A float `dtype` gives each word's unit-interval value instead
    /// ([`crate::Primitive::RandomBits`]).
    fn random_bits(
        &self,
        keys: View<'_, Self::Buffer>,
        len: usize,
        dtype: DType,
    ) -> Result<Self::Buffer>;
}

/// A backend buffer with its type erased, shared by every array viewing it.
#[derive(Clone)]
pub struct Buffer(pub(crate) Arc<dyn Any + Send + Sync>, Option<u64>);

impl Buffer {
    /// Wraps a backend's buffer.
    pub fn new<T: Send + Sync + 'static>(b: T) -> Buffer {
        Buffer(Arc::new(b), None)
    }
    /// Wraps a backend's buffer holding `bytes` bytes of elements.
    pub fn with_len<T: Send + Sync + 'static>(b: T, bytes: u64) -> Buffer {
        Buffer(Arc::new(b), Some(bytes))
    }
    /// The backend's buffer, if it is of type `T`.
    pub fn downcast<T: 'static>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
    /// The bytes of elements it holds, where known.
    pub fn len_bytes(&self) -> Option<u64> {
        self.1
    }
}

/// An input of a family method with the buffer type erased.
pub struct DynView<'a> {
    /// The buffer.
    pub buffer: &'a Buffer,
    /// Element type.
    pub dtype: DType,
    /// Where the elements are.
    pub layout: &'a Layout,
}

/// Object-safe [`Backend`], implemented for every backend; [`crate::Device`] holds one.
/// The families are [`Backend`]'s methods alone: [`DynBackend::compute`] sends each
/// [`Primitive`] to its family, so adding a family edits `Backend` and one arm here.
#[allow(missing_docs)]
pub trait DynBackend: Send + Sync + 'static {
    fn name(&self) -> String;
    fn kind(&self) -> DeviceKind;
    fn check_dtype(&self, dtype: DType) -> Result<()>;
    fn as_any(&self) -> &dyn Any;
    #[allow(clippy::wrong_self_convention)]
    fn from_host(&self, bytes: Vec<u8>, dtype: DType) -> Result<Buffer>;
    fn read(&self, buffer: &Buffer) -> Result<Arc<Vec<u8>>>;
    fn read_async(&self, buffer: &Buffer) -> BoxFuture<'static, Result<Arc<Vec<u8>>>>;
    fn flush(&self) -> Result<()>;
    fn synchronize(&self) -> Result<()>;
    fn check_errors(&self) -> Result<()>;
    fn commit(&self) -> Result<()>;
    fn fusion_limit(&self) -> Option<usize>;
    fn fused_source(&self, kernel: &FusedKernel, inputs: &[(DType, Layout)]) -> Option<String>;
    /// The output (of `shape` and `dtype`, not empty) of `prim` on `inputs`, by the
    /// backend's family method. Views have no computation: an `Err`.
    fn compute(
        &self,
        prim: &Primitive,
        inputs: &[DynView<'_>],
        shape: &[usize],
        dtype: DType,
    ) -> Result<Buffer>;
}

fn foreign(name: String) -> Error {
    Error::Backend {
        backend: name,
        msg: "buffer belongs to another backend".into(),
    }
}

impl<B: Backend> DynBackend for B {
    fn name(&self) -> String {
        Backend::name(self)
    }
    fn kind(&self) -> DeviceKind {
        Backend::kind(self)
    }
    fn check_dtype(&self, dtype: DType) -> Result<()> {
        Backend::check_dtype(self, dtype)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn from_host(&self, bytes: Vec<u8>, dtype: DType) -> Result<Buffer> {
        let len = bytes.len() as u64;
        Ok(Buffer::with_len(
            Backend::from_host(self, bytes, dtype)?,
            len,
        ))
    }
    fn read(&self, buffer: &Buffer) -> Result<Arc<Vec<u8>>> {
        let b = buffer
            .downcast::<B::Buffer>()
            .ok_or_else(|| foreign(self.name()))?;
        Backend::read(self, b)
    }
    fn read_async(&self, buffer: &Buffer) -> BoxFuture<'static, Result<Arc<Vec<u8>>>> {
        match buffer.downcast::<B::Buffer>() {
            Some(b) => Backend::read_async(self, b),
            None => {
                let e = foreign(self.name());
                Box::pin(async move { Err(e) })
            }
        }
    }
    fn flush(&self) -> Result<()> {
        Backend::flush(self)
    }
    fn synchronize(&self) -> Result<()> {
        Backend::synchronize(self)
    }
    fn check_errors(&self) -> Result<()> {
        Backend::check_errors(self)
    }
    fn commit(&self) -> Result<()> {
        Backend::commit(self)
    }
    fn fusion_limit(&self) -> Option<usize> {
        Backend::fusion_limit(self)
    }
    fn fused_source(&self, kernel: &FusedKernel, inputs: &[(DType, Layout)]) -> Option<String> {
        Backend::fused_source(self, kernel, inputs)
    }

    fn compute(
        &self,
        prim: &Primitive,
        inputs: &[DynView<'_>],
        shape: &[usize],
        dtype: DType,
    ) -> Result<Buffer> {
        let ins: smallvec::SmallVec<[View<'_, B::Buffer>; 4]> = inputs
            .iter()
            .map(|v| typed::<B>(self, v))
            .collect::<Result<_>>()?;
        let v = |i: usize| ins[i];
        let out = match prim {
            Primitive::Unary(op) => self.unary(*op, v(0), dtype)?,
            Primitive::Binary(op) => self.binary(*op, v(0), v(1), dtype)?,
            Primitive::Select => self.select(v(0), v(1), v(2))?,
            Primitive::Copy => self.copy(v(0), dtype)?,
            Primitive::Generate(g) => self.generate(*g, dtype, crate::layout::numel(shape))?,
            Primitive::Axpby { alpha, beta } => self.axpby(v(0), v(1), *alpha, *beta)?,
            Primitive::Reduce { op, axes } => self.reduce(*op, v(0), axes)?,
            Primitive::ArgReduce { op, axis } => self.arg_reduce(*op, v(0), *axis)?,
            Primitive::Matmul { alpha, beta } => {
                let c = ins.get(2).copied();
                self.matmul(v(0), v(1), c, *alpha, *beta)?
            }
            Primitive::Normalize { op, eps } => self.normalize(*op, v(0), &ins[1..], *eps)?,
            Primitive::SliceUpdate { starts, steps } => {
                self.slice_update(v(0), v(1), starts, steps)?
            }
            Primitive::Concatenate { axis } => self.concatenate(&ins, *axis)?,
            Primitive::Gather { axis } => self.gather(v(0), v(1), *axis)?,
            Primitive::Scatter { op, axis } => self.scatter(*op, v(0), v(1), v(2), *axis)?,
            Primitive::Scan {
                op,
                axis,
                reverse,
                inclusive,
            } => self.scan(*op, v(0), *axis, *reverse, *inclusive)?,
            Primitive::ArgSort => self.argsort(v(0))?,
            Primitive::Sort => self.sort(v(0))?,
            Primitive::RandomBits => self.random_bits(v(0), crate::layout::numel(shape), dtype)?,
            Primitive::Fused(k) => self.fused(k, &ins, dtype)?,
            Primitive::Custom(c) => custom_caught(self, &**c, &ins, shape, dtype)?,
            Primitive::View(_) => {
                return Err(Error::invalid(
                    "eval",
                    "a view shares its input's buffer: nothing to compute",
                ));
            }
        };
        let len = (crate::layout::numel(shape) * dtype.size()) as u64;
        Ok(Buffer::with_len(out, len))
    }
}

/// [`Backend::custom`], with a panic in user code an `Err` at this op, and errors
/// the primitive's own device work raised belonging to it, not to the next op.
fn custom_caught<B: Backend>(
    be: &B,
    prim: &dyn CustomPrimitive,
    ins: &[View<'_, B::Buffer>],
    shape: &[usize],
    dtype: DType,
) -> Result<B::Buffer> {
    let run = std::panic::AssertUnwindSafe(|| {
        if prim.eval_on_host() && be.kind() != DeviceKind::Cpu {
            on_host(be, prim, ins, shape, dtype)
        } else {
            be.custom(prim, ins, shape, dtype)
        }
    });
    let out = quietly(|| std::panic::catch_unwind(run)).map_err(|p| Error::Backend {
        backend: be.name(),
        msg: format!(
            "custom primitive {} panicked: {}",
            prim.name(),
            panic_text(&*p)
        ),
    });
    let device_errors = be.check_errors().map_err(|e| Error::Backend {
        backend: be.name(),
        msg: format!("in custom primitive {}: {e}", prim.name()),
    });
    let out = out??;
    device_errors?;
    Ok(out)
}

/// [`CustomPrimitive::eval_on_host`]: the inputs read to the host, the CPU code,
/// the output uploaded.
fn on_host<B: Backend>(
    be: &B,
    prim: &dyn CustomPrimitive,
    ins: &[View<'_, B::Buffer>],
    shape: &[usize],
    dtype: DType,
) -> Result<B::Buffer> {
    let host = ins
        .iter()
        .map(|v| be.read_host(v.buffer))
        .collect::<Result<Vec<_>>>()?;
    let views: Vec<View<'_, crate::cpu::CpuBuffer>> = host
        .iter()
        .zip(ins)
        .map(|(b, v)| View {
            buffer: b,
            dtype: v.dtype,
            layout: v.layout,
        })
        .collect();
    let len = crate::layout::numel(shape) * dtype.size();
    let mut out = crate::cpu::CpuBuffer::zeroed(len);
    prim.eval_cpu(
        &views,
        &mut crate::CpuOutput {
            buffer: &mut out,
            shape,
            dtype,
        },
    )?;
    if out.bytes().len() != len {
        return Err(Error::invalid(
            "custom",
            format!(
                "{}: eval_cpu replaced its output buffer with one of another size",
                prim.name()
            ),
        ));
    }
    be.upload(out.bytes(), dtype)
}

thread_local! {
    /// Set while user code runs under [`quietly`].
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with the panic hook silent on this thread: a panic in a custom
/// primitive's code becomes that op's `Err` (with the panic's message), not a
/// backtrace on stderr as well. The hook installed before wmx's first custom op
/// (the default, or the program's own) still runs for every other panic.
fn quietly<T>(f: impl FnOnce() -> T) -> T {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(|q| q.get()) {
                previous(info)
            }
        }));
    });
    crate::scoped::with_cell(&QUIET, true, f)
}

/// The message of a panic payload.
fn panic_text(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

fn typed<'a, B: Backend>(be: &B, v: &DynView<'a>) -> Result<View<'a, B::Buffer>> {
    let buffer = v
        .buffer
        .downcast::<B::Buffer>()
        .ok_or_else(|| foreign(Backend::name(be)))?;
    Ok(View {
        buffer,
        dtype: v.dtype,
        layout: v.layout,
    })
}

/// The size class a buffer pool rounds a request of `bytes` up to: 8 classes per
/// power of two (at most 12.5 % waste), at least 256 bytes. Shared by the CPU
/// cache and the GPU pool.
pub fn size_class(bytes: u64) -> u64 {
    let b = bytes.max(256);
    let high_bit = 1u64 << (63 - b.leading_zeros());
    let step = (high_bit / 8).max(256);
    b.div_ceil(step) * step
}

/// `x` sorted along its last axis as [`Backend::sort`] promises: its elements at the
/// indices [`Backend::argsort`] gives, through [`Backend::gather`].
pub fn sort_by_argsort<B: Backend + ?Sized>(
    backend: &B,
    x: View<'_, B::Buffer>,
) -> Result<B::Buffer> {
    let indices = backend.argsort(x)?;
    let layout = Layout::contiguous(&x.layout.shape);
    let i = View {
        buffer: &indices,
        dtype: DType::U32,
        layout: &layout,
    };
    backend.gather(x, i, x.layout.ndim().saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_waste_little() {
        assert_eq!(size_class(1), 256);
        assert_eq!(size_class(256), 256);
        assert_eq!(size_class(257), 512);
        for b in [1000u64, 4099, 1 << 20, (1 << 20) + 3, 3 << 26] {
            let c = size_class(b);
            assert!(c >= b && c as f64 <= b as f64 * 1.125 + 256.0, "{b} -> {c}");
        }
    }
}
