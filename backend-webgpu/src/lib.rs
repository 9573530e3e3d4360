//! `wmx-webgpu`: the GPU [`wmx_core::Backend`] for every driver of the `wmx-kernels`
//! WGSL library ([`GpuBackend`]), so every core op runs on any wgpu adapter
//! (Vulkan, Metal, DX12, GL, the browser; [`WebGpuBackend`]) and on `wmx-metal`'s
//! native Metal driver.
//!
//! # Buffer states
//! ```text
//!   from_slice ──► HostOnly ──(first kernel reads it: one upload)──► Both
//!   kernel output ─────────► GpuOnly ──(someone reads it: one download)──► Both
//! ```
//! eval never downloads: results stay [`BufferState::GpuOnly`] ("evaluated on the
//! GPU, not downloaded") until `to_vec`/`item`/`Display` reads them; a second read
//! costs nothing. [`Stats`] counts uploads, downloads, dispatches, submits and memory.
//!
//! # Execution
//! Each family call records a dispatch into the backend's current batch; an eval
//! ends by submitting the batch or leaving it open for the next evals (`submit.rs`):
//! - while the GPU is busy, the batch stays open (each submit costs GPU time too:
//!   wgpu's Vulkan queue chains submits on a semaphore) until it is at least as long
//!   as the one running, so the next batch is queued before the GPU runs dry;
//! - when the GPU is idle, it is submitted unless the last submit ended less than
//!   three times that submit's CPU cost ago (at most 250 µs): a stream of small evals
//!   shares submits instead of paying 15–60 µs of CPU for each;
//! - a read, `synchronize`, `async_eval` or [`MAX_BATCH`] dispatches submit at once;
//! - on native targets a flusher thread submits a batch nobody picked up once evals
//!   have stopped for 200 µs and the GPU is idle, so work never waits for the next
//!   call.
//!
//! On wasm every eval submits (the browser schedules the GPU itself).
//! Output buffers come from a pool of size classes (no zero-fill, no allocation in
//! steady state).
//!
//! # Threads
//! The backend is `Send + Sync`; arrays may be built and evaluated from several
//! threads. Recording is serialised by one lock; two threads evaluating graphs that
//! share a pending node may both compute it (the first result is kept).

mod custom;
mod families;
mod fused;
mod kernel;
mod pieces;
mod pool;
mod profile;
mod segments;
mod split;
mod submit;

use futures::future::BoxFuture;
use pool::Shared;
use segments::Mem;
use std::sync::{Arc, Mutex};
use submit::Submitter;
use wmx_core::{
    ArgReduceOp, Array, Backend, BinaryOp, DType, Device, DeviceKind, Error, Generator, Layout,
    ReduceOp, Result, UnaryOp, View,
};
use wmx_kernels as k;
use wmx_kernels::{Driver, Wgpu};

pub use custom::{CustomEval, GpuInput, GpuOutput};
pub use k::{Caps, Kernels, RequestOptions, UserModule, UserPipeline};
pub use kernel::{Launch, Template, WgslKernel};
pub use pool::Stats;
pub use profile::{KernelTime, Profile, ShapeTime};

/// Dispatches recorded before a batch is submitted early.
pub const MAX_BATCH: usize = 4096;

/// Fills of at most this many bytes are made on the host and uploaded.
const HOST_FILL_BYTES: u64 = 16 << 10;

/// An f32 fill just past [`HOST_FILL_BYTES`]: one dispatch (tests use it to make
/// a batch).
#[cfg(test)]
const KERNEL_FILL_F32: usize = HOST_FILL_BYTES as usize / 4 + 1;

/// Where a buffer's data currently lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferState {
    /// Created from host data, not uploaded yet.
    HostOnly,
    /// Computed on the GPU, not downloaded.
    GpuOnly,
    /// On both (uploaded, or downloaded because someone read it).
    Both,
}

/// An array's storage on the WebGPU backend.
pub struct GpuBuffer<D: Driver = Wgpu> {
    shared: Arc<Shared<D>>,
    bytes: u64,
    data: Arc<Mutex<Data<D>>>,
}

struct Data<D: Driver> {
    gpu: Option<Mem<D::Buffer>>,
    host: Option<Arc<Vec<u8>>>,
}

impl<D: Driver> GpuBuffer<D> {
    /// Where the data is now.
    pub fn state(&self) -> BufferState {
        let d = self.data.lock().unwrap();
        match (&d.gpu, &d.host) {
            (Some(_), Some(_)) => BufferState::Both,
            (Some(_), None) => BufferState::GpuOnly,
            _ => BufferState::HostOnly,
        }
    }
    /// Logical size in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.bytes
    }
}

impl<D: Driver> std::fmt::Debug for GpuBuffer<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBuffer")
            .field("bytes", &self.bytes)
            .field("state", &self.state())
            .finish()
    }
}

impl<D: Driver> Drop for GpuBuffer<D> {
    fn drop(&mut self) {
        let gpu = self
            .data
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .gpu
            .take();
        for b in gpu.into_iter().flat_map(|m| m.parts) {
            self.shared.release(b);
        }
    }
}

/// The GPU backend on the kernel library, for any [`Driver`]: wgpu
/// ([`WebGpuBackend`]) or `wmx-metal`'s Metal driver.
pub struct GpuBackend<D: Driver = Wgpu> {
    kernels: Kernels<D>,
    shared: Arc<Shared<D>>,
    /// The batch being recorded and when it is submitted.
    sub: Arc<Submitter<D>>,
    name: String,
    /// The specs of fused kernels, kept between dispatches.
    specs: fused::Specs,
}

fn kerr(e: k::Error) -> Error {
    match e {
        k::Error::UnsupportedDType { dtype, reason } => Error::DeviceDType {
            device: "webgpu".into(),
            dtype: DType::from_name(dtype).unwrap_or(DType::F32),
            reason,
        },
        k::Error::BufferTooLarge { .. } => Error::OutOfRange {
            op: "webgpu buffer",
            msg: e.to_string(),
        },
        e => Error::Backend {
            backend: "webgpu".into(),
            msg: e.to_string(),
        },
    }
}

/// The WebGPU backend: [`GpuBackend`] on wgpu.
pub type WebGpuBackend = GpuBackend<Wgpu>;

impl<D: Driver> GpuBackend<D> {
    /// `x` sorted along its last axis: its indices (u32), or with `values` its
    /// elements ([`wmx_kernels::Kernels::sort_values`]). Rows stay whole; past a
    /// binding, pieces of whole rows, each with room for its scratch pairs in one
    /// binding (against the output's bytes).
    fn sort_rows(&self, x: View<'_, GpuBuffer<D>>, values: bool) -> Result<GpuBuffer<D>> {
        let mut dense = None;
        let x = self.row_major(x, &mut dense)?;
        let shape = x.layout.shape.clone();
        let cut = shape.len().saturating_sub(1);
        let n = shape.last().copied().unwrap_or(1).max(1);
        let out = if values { x.dtype } else { DType::U32 };
        let share = self
            .kernels
            .argsort_scratch_bytes(1, n)
            .div_ceil(out.size() as u64 * n as u64)
            .max(1);
        self.record_rows(&shape, cut, share, out, &[&x], |b, s, o, _| {
            if values {
                self.kernels.sort_values(b, &s[0], o)
            } else {
                self.kernels.argsort(b, &s[0], o)
            }
        })
    }

    /// Runs `f` with every dispatch it makes timed on the GPU: the [`Profile`] lists
    /// each kernel's time ([`Profile::table`], [`Profile::chrome_trace`]). Work
    /// recorded before is submitted first, unprofiled; `f`'s own work is submitted
    /// and waited for before this returns. Each dispatch runs in its own pass and
    /// each submit waits for its timestamps, so a profiled run is slower than a
    /// plain one. An `Err` where the device writes no timestamps between
    /// dispatches (WebGPU in the browser, Metal).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn profile<R>(&self, f: impl FnOnce() -> R) -> Result<(R, Profile)> {
        if self.kernels.driver().timestamps(1).is_none() {
            return Err(
                self.err("profile: this device writes no GPU timestamps between dispatches".into())
            );
        }
        wmx_core::Backend::synchronize(self)?;
        *self.sub.profile.lock().unwrap_or_else(|e| e.into_inner()) = Some(Profile::default());
        self.kernels.set_describe(true);
        let t = std::time::Instant::now();
        let r = f();
        let done = wmx_core::Backend::synchronize(self);
        self.kernels.set_describe(false);
        let mut p = self
            .sub
            .profile
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_default();
        done?;
        p.wall_ms = t.elapsed().as_secs_f64() * 1e3;
        Ok((r, p))
    }
}

impl GpuBackend<Wgpu> {
    /// Opens the best adapter (see [`RequestOptions`]; honours `WGPU_BACKEND` and
    /// `WGPU_ADAPTER_NAME`), blocking. Native only.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new() -> Result<WebGpuBackend> {
        pollster::block_on(WebGpuBackend::new_async(&RequestOptions::default()))
    }

    /// Opens an adapter without blocking (the only way on wasm).
    pub async fn new_async(opts: &RequestOptions) -> Result<WebGpuBackend> {
        let kernels = Kernels::request(opts).await.map_err(|e| match e {
            k::Error::NoAdapter(m) => Error::NoDevice(m),
            e => kerr(e),
        })?;
        Ok(WebGpuBackend::from_kernels(kernels))
    }

    /// Writes GPU timestamp `index` of `set` into the work being recorded, after
    /// every kernel of the arrays evaluated so far and before later ones: a CUDA
    /// event for profiling, with no round trip to the host. Resolve `set` after
    /// [`Device::synchronize`](wmx_core::Device::synchronize). `Err` if the device
    /// lacks `TIMESTAMP_QUERY_INSIDE_ENCODERS`.
    pub fn write_timestamp(&self, set: &wgpu::QuerySet, index: u32) -> Result<()> {
        self.check()?;
        let need =
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
        if !self.kernels.device().features().contains(need) {
            return Err(self.err(
                "timestamps need TIMESTAMP_QUERY_INSIDE_ENCODERS, which this device lacks".into(),
            ));
        }
        self.lock_batch().write_timestamp(set, index);
        Ok(())
    }
}

impl<D: Driver> GpuBackend<D> {
    /// A backend on an existing kernel library (and so an existing device).
    pub fn from_kernels(kernels: Kernels<D>) -> GpuBackend<D> {
        let caps = kernels.caps();
        let name = format!("{}: {} ({:?})", D::NAME, caps.adapter_name, caps.backend);
        let shared = Shared::new(kernels.clone());
        // Errors the driver does not return directly (validation inside submit, OOM,
        // device loss) are recorded and surface as Err from the next call.
        let (s, l) = (shared.clone(), shared.clone());
        kernels.driver().on_error(
            Box::new(move |e| s.set_error(e)),
            Box::new(move |e| l.set_lost(e)),
        );
        GpuBackend {
            sub: Submitter::new(kernels.clone(), shared.clone()),
            kernels,
            shared,
            name,
            specs: fused::Specs::default(),
        }
    }

    /// The kernel library (and through it the wgpu device and queue).
    pub fn kernels(&self) -> &Kernels<D> {
        &self.kernels
    }

    /// The batch being recorded. A panic while it was held (a bug, or user code)
    /// leaves it usable: later ops must not all fail on a poisoned lock.
    fn lock_batch(&self) -> std::sync::MutexGuard<'_, k::Batch<D>> {
        self.sub.lock_batch()
    }

    /// Counters and memory figures.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Drops every cached (free) buffer of the pool and the kernels' scratch buffers.
    pub fn clear_cache(&self) {
        self.shared.pool().clear();
        self.kernels.clear_bind_groups();
        self.kernels.clear_scratch();
    }

    /// Caps the bytes kept in the pool's cache. The default (native) is the
    /// larger of 1 GiB and twice the most bytes live arrays have held at once, so the
    /// large buffers of a repeated step are reused rather than created and zeroed
    /// again each call (a failed allocation empties the cache and tries again);
    /// 1 GiB in the browser.
    pub fn set_cache_limit(&self, bytes: u64) {
        self.shared.pool().set_limit(bytes);
    }

    /// An error of this backend with `msg`.
    fn err(&self, msg: String) -> Error {
        Error::Backend {
            backend: self.name.clone(),
            msg,
        }
    }

    fn check(&self) -> Result<()> {
        self.shared.check().map_err(|msg| self.err(msg))
    }

    /// A fresh output buffer of `n` elements of `dtype`.
    fn output(&self, n: usize, dtype: DType) -> Result<(GpuBuffer<D>, D::Buffer)> {
        new_output(&self.shared, n, dtype)
    }

    /// Fresh memory for `n` elements of `dtype`: one buffer, or segments.
    fn output_mem(&self, n: usize, dtype: DType) -> Result<(GpuBuffer<D>, Mem<D::Buffer>)> {
        new_output_mem(&self.shared, n, dtype)
    }

    /// Records one kernel producing a fresh output of `shape`/`dtype`.
    fn record(
        &self,
        shape: &[usize],
        dtype: DType,
        f: impl FnOnce(&mut k::Batch<D>, &k::Contig<D::Buffer>) -> k::Result<()>,
    ) -> Result<GpuBuffer<D>> {
        self.check()?;
        let kd = dtype;
        let n = wmx_core::layout::numel(shape);
        let lim = self.limits();
        let bytes = (n as u64).saturating_mul(kd.size() as u64);
        if n as u64 > split::MAX_ELEMS || bytes.div_ceil(16) * 16 > lim.bytes {
            return Err(self.too_large("an output", shape, dtype, lim));
        }
        let (out, g) = self.output(n, dtype)?;
        let mut batch = self.lock_batch();
        if n > 0 {
            let c = k::Contig {
                buffer: &g,
                window: None,
                dtype: kd,
                shape,
            };
            f(&mut batch, &c).map_err(kerr)?;
        }
        if batch.len() >= MAX_BATCH {
            self.submit(&mut batch)?;
        }
        Ok(out)
    }

    fn submit(&self, batch: &mut k::Batch<D>) -> Result<()> {
        self.sub.submit(batch).map_err(|msg| self.err(msg))?;
        self.check()
    }

    fn flush_now(&self) -> Result<()> {
        self.submit(&mut self.lock_batch())
    }
}

/// A kernel input: the GPU buffer (bound whole or through a window) plus the
/// view's dtype and layout (offset from the window's start).
pub(crate) struct In<'a, B> {
    buf: B,
    dtype: k::DType,
    layout: &'a Layout,
    strides: split::Dims<isize>,
    offset: usize,
    window: Option<k::Window>,
}

impl<B> In<'_, B> {
    fn strided(&self) -> k::Strided<'_, B> {
        k::Strided {
            buffer: &self.buf,
            window: self.window,
            dtype: self.dtype,
            shape: &self.layout.shape,
            strides: &self.strides,
            offset: self.offset,
        }
    }
}

impl<D: Driver> GpuBackend<D> {
    /// `x` itself when row-major, else a row-major copy held in `hold` (for kernels
    /// that read rows in place).
    fn row_major<'a>(
        &self,
        x: View<'a, GpuBuffer<D>>,
        hold: &'a mut Option<(GpuBuffer<D>, Layout)>,
    ) -> Result<View<'a, GpuBuffer<D>>> {
        if x.layout.is_row_contiguous() {
            return Ok(x);
        }
        let copy = Backend::copy(self, x, x.dtype)?;
        let (buffer, layout) = hold.insert((copy, Layout::contiguous(&x.layout.shape)));
        Ok(View {
            buffer,
            dtype: x.dtype,
            layout,
        })
    }

    /// `v` as one kernel input: its buffer bound whole, or through a window when
    /// the buffer is larger than a binding (or held in segments) but the view fits
    /// one. `Err` when the view itself does not fit (ops that split such views do
    /// not come here).
    fn input<'a>(&self, v: &View<'a, GpuBuffer<D>>) -> Result<In<'a, D::Buffer>> {
        let l = v.layout;
        let mem = self.mem(v.buffer)?;
        let dtype = v.dtype;
        let x = split::Operand {
            strides: &l.strides,
            offset: l.offset,
            size: dtype.size() as u64,
            buffer: mem.byte_size(),
            seg: mem.seg,
        };
        let lim = self.limits();
        let piece = split::plan(&l.shape, &[x], 0, split::Out::Unchecked, lim)
            .map_err(|_| self.too_large("an input", &l.shape, v.dtype, lim))?
            .pop();
        let (strides, offset, window) = match piece {
            Some(p) => {
                let part = p.ins.into_iter().next().expect("one operand");
                (part.strides, part.offset, part.window)
            }
            None => (smallvec::smallvec![0; l.shape.len()], 0, None), // empty: nothing is read
        };
        // A view of an array held in segments: the one segment holding it (or a
        // copy of its window where it spans two).
        let (buf, window) = self.bind_view(&mem, window)?;
        Ok(In {
            buf,
            dtype,
            layout: v.layout,
            strides,
            offset,
            window,
        })
    }

    /// Whether an output of `shape`/`dtype` fits one binding and one piece's
    /// element count (else the ops that can compute in pieces do).
    fn fits_one(&self, shape: &[usize], dtype: DType) -> bool {
        let n = wmx_core::layout::numel(shape) as u64;
        let bytes = n.saturating_mul(dtype.size() as u64);
        n <= split::MAX_ELEMS && bytes.div_ceil(16) * 16 <= self.limits().bytes
    }

    /// A fused kernel of several outputs (`[outputs, ...]`): one dispatch where
    /// its inputs and output each fit a binding, else each output on its own
    /// (through the pieces of the one-output path) and then stacked.
    fn fused_outputs(
        &self,
        kernel: &wmx_core::FusedKernel,
        spec: &Arc<k::FusedSpec>,
        inputs: &[View<'_, GpuBuffer<D>>],
        out: DType,
    ) -> Result<GpuBuffer<D>> {
        let Some(first) = inputs.first() else {
            return Err(Error::invalid("fused", "a kernel without inputs"));
        };
        let mut shape = first.layout.shape.clone();
        shape.insert(0, kernel.outputs.len());
        let ins: Option<Vec<In<'_, D::Buffer>>> =
            inputs.iter().map(|v| self.input(v).ok()).collect();
        // Narrow outputs are stored in whole words of each value.
        let whole = (first.layout.numel() * out.size()).is_multiple_of(4);
        if let (Some(ins), true, true) = (ins, whole, self.fits_one(&shape, out)) {
            return self.record(&shape, out, |b, o| {
                let strided: Vec<k::Strided<'_, D::Buffer>> = ins.iter().map(In::strided).collect();
                let refs: Vec<&k::Strided<'_, D::Buffer>> = strided.iter().collect();
                self.kernels.fused(b, spec, &refs, o)
            });
        }
        let mut one = shape.clone();
        one[0] = 1;
        let layout = Layout::contiguous(&one);
        let parts = kernel
            .outputs
            .iter()
            .map(|&v| {
                let single = wmx_core::FusedKernel {
                    outputs: vec![v],
                    ..kernel.clone()
                };
                Backend::fused(self, &single, inputs, out)
            })
            .collect::<Result<Vec<_>>>()?;
        self.join(&parts, out, &layout, 0)
    }

    /// Buffers of one `layout` and `dtype` joined along `axis`.
    pub(crate) fn join(
        &self,
        parts: &[GpuBuffer<D>],
        dtype: DType,
        layout: &Layout,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        let views: Vec<View<'_, GpuBuffer<D>>> = parts
            .iter()
            .map(|buffer| View {
                buffer,
                dtype,
                layout,
            })
            .collect();
        Backend::concatenate(self, &views, axis)
    }

    /// What one binding may hold on this device.
    fn limits(&self) -> split::Limits {
        split::Limits {
            bytes: self.kernels.caps().max_storage_binding,
            align: self.kernels.window_align(),
        }
    }

    /// The error of an op that computes in one piece given a view or output past
    /// one binding or 2^30 elements.
    fn too_large(&self, what: &str, shape: &[usize], dtype: DType, lim: split::Limits) -> Error {
        Error::OutOfRange {
            op: "webgpu",
            msg: format!(
                "{what} of shape {shape:?} ({dtype}) is larger than one binding of this device \
                 ({} bytes) or 2^30 elements; elementwise ops, copies, random draws, \
                 concatenation, scans, sorts, row ops, matmul's A or transposed B, gathers' indices or tables, slice updates' \
                 and scatters' base, and reductions compute such arrays in pieces, this op does not here (compute it in parts, or on the CPU)",
                lim.bytes
            ),
        }
    }
}

impl<D: Driver> Backend for GpuBackend<D> {
    type Buffer = GpuBuffer<D>;

    fn name(&self) -> String {
        self.name.clone()
    }
    fn kind(&self) -> DeviceKind {
        DeviceKind::Gpu
    }
    fn check_dtype(&self, dtype: DType) -> Result<()> {
        let kd = dtype;
        if !self.kernels.supports(kd) {
            let reason = if dtype == DType::F64 {
                "the adapter lacks SHADER_F64 (browsers and Metal have no f64: compute on \
                 the CPU, or astype(f32) first)"
            } else {
                "the adapter lacks SHADER_F16"
            };
            return Err(Error::DeviceDType {
                device: self.name.clone(),
                dtype,
                reason: reason.into(),
            });
        }
        Ok(())
    }

    fn custom(
        &self,
        prim: &dyn wmx_core::CustomPrimitive,
        inputs: &[View<'_, GpuBuffer<D>>],
        shape: &[usize],
        dtype: DType,
    ) -> Result<GpuBuffer<D>> {
        self.run_custom(prim, inputs, shape, dtype)
    }

    fn from_host(&self, bytes: Vec<u8>, _dtype: DType) -> Result<GpuBuffer<D>> {
        Ok(GpuBuffer {
            shared: self.shared.clone(),
            bytes: bytes.len() as u64,
            data: Arc::new(Mutex::new(Data {
                gpu: None,
                host: Some(Arc::new(bytes)),
            })),
        })
    }

    fn read_host(&self, b: &GpuBuffer<D>) -> Result<wmx_core::cpu::CpuBuffer> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let g = match self.cached_or_gpu(b)? {
                Ok(host) => return Ok(wmx_core::cpu::CpuBuffer::from_bytes(&host)),
                Err(g) => g,
            };
            let mut out = wmx_core::cpu::CpuBuffer::uninit(b.bytes as usize);
            pollster::block_on(read_mem_into(&self.kernels, &g, out.bytes_mut()))?;
            self.check()?;
            self.shared.count_download(b.bytes);
            Ok(out)
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = b;
            Err(self.err("blocking reads are impossible in the browser".into()))
        }
    }

    fn upload(&self, bytes: &[u8], _dtype: DType) -> Result<GpuBuffer<D>> {
        let mem = self.upload_mem(bytes)?;
        Ok(GpuBuffer {
            shared: self.shared.clone(),
            bytes: bytes.len() as u64,
            data: Arc::new(Mutex::new(Data {
                gpu: Some(mem),
                host: None,
            })),
        })
    }

    fn read(&self, b: &GpuBuffer<D>) -> Result<Arc<Vec<u8>>> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            // Bytes on the host were uploaded, or downloaded past the check below:
            // they stay readable (even after a device loss).
            let g = match self.cached_or_gpu(b)? {
                Ok(host) => return Ok(host),
                Err(g) => g,
            };
            let bytes = pollster::block_on(read_mem(&self.kernels, &g, b.bytes))?;
            // An error raised by the work behind these bytes: do not hand them out.
            self.check()?;
            Ok(self.store_download(b, bytes))
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = b;
            Err(self.err("blocking reads are impossible in the browser: use to_vec_async".into()))
        }
    }

    fn read_async(&self, b: &GpuBuffer<D>) -> BoxFuture<'static, Result<Arc<Vec<u8>>>> {
        let g = match self.cached_or_gpu(b) {
            Ok(Ok(host)) => return Box::pin(async move { Ok(host) }),
            Ok(Err(g)) => g,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let kernels = self.kernels.clone();
        let len = b.bytes;
        let shared = self.shared.clone();
        let data = b.data.clone();
        let name = self.name.clone();
        Box::pin(async move {
            let bytes = read_mem(&kernels, &g, len).await?;
            // In the browser validation errors arrive asynchronously (no blocking
            // error scopes): one raised by the work behind this read has been
            // delivered by the time the map completes. Do not hand out its bytes.
            shared
                .check()
                .map_err(|msg| Error::Backend { backend: name, msg })?;
            shared.count_download(len);
            let host = Arc::new(bytes);
            data.lock().unwrap().host = Some(host.clone());
            Ok(host)
        })
    }

    fn flush(&self) -> Result<()> {
        // Submitted now or left open for later evals (see `submit.rs`); an empty
        // batch still checks for errors of work done outside it (custom primitives).
        self.sub.end_of_eval().map_err(|msg| self.err(msg))?;
        self.check()
    }
    fn check_errors(&self) -> Result<()> {
        // Native validation errors arrive synchronously; in the browser they arrive
        // later and are reported by the next check (at the latest the read's).
        self.check()
    }
    fn commit(&self) -> Result<()> {
        self.flush_now()
    }
    fn fusion_limit(&self) -> Option<usize> {
        // The output takes one of the bindings a kernel may have.
        Some(self.kernels.max_user_buffers().saturating_sub(1).max(1))
    }
    fn fused(
        &self,
        kernel: &wmx_core::FusedKernel,
        inputs: &[View<'_, GpuBuffer<D>>],
        out: DType,
    ) -> Result<GpuBuffer<D>> {
        let spec = self.specs.of(kernel);
        if kernel.outputs.len() > 1 {
            return self.fused_outputs(kernel, &spec, inputs, out);
        }
        if kernel.reduce.is_none() {
            let Some(first) = inputs.first() else {
                return Err(Error::invalid("fused", "a kernel without inputs"));
            };
            let views: Vec<&View<'_, GpuBuffer<D>>> = inputs.iter().collect();
            return self.record_pieces(&first.layout.shape, out, &views, |b, s, o, _| {
                let refs: Vec<&k::Strided<'_, D::Buffer>> = s.iter().collect();
                self.kernels.fused(b, &spec, &refs, o)
            });
        }
        let Some(first) = inputs.first() else {
            return Err(Error::invalid("fused", "a kernel without inputs"));
        };
        let ins: Vec<In<'_, D::Buffer>> = match inputs.iter().map(|v| self.input(v)).collect() {
            Ok(ins) => ins,
            // An input past a binding or one buffer: the elementwise part in pieces,
            // then the reduction in pieces.
            Err(_) => {
                let (Some(last), Some((op, axes))) = (kernel.steps.last(), &kernel.reduce) else {
                    return Err(Error::invalid("fused", "a kernel without steps"));
                };
                let elementwise = wmx_core::FusedKernel {
                    reduce: None,
                    ..kernel.clone()
                };
                let values = self.fused(&elementwise, inputs, last.dtype)?;
                let layout = Layout::contiguous(&first.layout.shape);
                let view = View {
                    buffer: &values,
                    dtype: last.dtype,
                    layout: &layout,
                };
                return Backend::reduce(self, *op, view, axes);
            }
        };
        let shape = &first.layout.shape;
        let out_shape: Vec<usize> = match &kernel.reduce {
            None => shape.clone(),
            Some((_, axes)) => (0..shape.len())
                .filter(|d| !axes.contains(d))
                .map(|d| shape[d])
                .collect(),
        };
        self.record(&out_shape, out, |b, o| {
            let strided: Vec<k::Strided<'_, D::Buffer>> = ins.iter().map(In::strided).collect();
            let refs: Vec<&k::Strided<'_, D::Buffer>> = strided.iter().collect();
            match &kernel.reduce {
                None => self.kernels.fused(b, &spec, &refs, o),
                Some((op, axes)) => self.kernels.fused_reduce(b, *op, &spec, &refs, axes, o),
            }
        })
    }
    fn fused_source(
        &self,
        kernel: &wmx_core::FusedKernel,
        inputs: &[(DType, Layout)],
    ) -> Option<String> {
        let spec = self.specs.of(kernel);
        let layouts: Vec<(&[usize], &[isize])> = inputs
            .iter()
            .map(|(_, l)| (&l.shape[..], &l.strides[..]))
            .collect();
        let src = self.kernels.fused_wgsl(&spec, &layouts).ok()?;
        Some(match &kernel.reduce {
            None => src,
            Some((op, axes)) => format!(
                "// Reduced ({op} over axes {axes:?}): the reduction's first pass calls \
                 `value(i)` below for each element it reads; the elementwise result is \
                 never stored.\n{src}"
            ),
        })
    }
    fn synchronize(&self) -> Result<()> {
        self.flush_now()?;
        #[cfg(not(target_arch = "wasm32"))]
        self.kernels.poll_wait();
        self.check()
    }

    fn unary(&self, op: UnaryOp, x: View<'_, GpuBuffer<D>>, out: DType) -> Result<GpuBuffer<D>> {
        self.record_pieces(&x.layout.shape, out, &[&x], |b, s, o, _| {
            self.kernels.unary(b, op, &s[0], o)
        })
    }

    fn binary(
        &self,
        op: BinaryOp,
        a: View<'_, GpuBuffer<D>>,
        bv: View<'_, GpuBuffer<D>>,
        out: DType,
    ) -> Result<GpuBuffer<D>> {
        self.record_pieces(&a.layout.shape, out, &[&a, &bv], |b, s, o, _| {
            self.kernels.binary(b, op, &s[0], &s[1], o)
        })
    }

    fn select(
        &self,
        c: View<'_, GpuBuffer<D>>,
        x: View<'_, GpuBuffer<D>>,
        y: View<'_, GpuBuffer<D>>,
    ) -> Result<GpuBuffer<D>> {
        self.record_pieces(&c.layout.shape, x.dtype, &[&c, &x, &y], |b, s, o, _| {
            self.kernels.select(b, &s[0], &s[1], &s[2], o)
        })
    }

    fn copy(&self, x: View<'_, GpuBuffer<D>>, out: DType) -> Result<GpuBuffer<D>> {
        self.record_pieces(&x.layout.shape, out, &[&x], |b, s, o, _| {
            self.kernels.copy(b, &s[0], o)
        })
    }

    fn generate(&self, g: Generator, dtype: DType, len: usize) -> Result<GpuBuffer<D>> {
        // The kernel's integer arange steps in wrapping integers; a fractional start
        // or step (linspace into i32, arange(0, 1, 0.1) into bool) and u8/bool,
        // which must saturate (docs/SEMANTICS.md), go through f32 and a cast.
        if let Generator::Arange { start, step } = g
            && !dtype.is_float()
            && (start.fract() != 0.0
                || step.fract() != 0.0
                || matches!(dtype, DType::U8 | DType::Bool))
        {
            let tmp = self.generate(g, DType::F32, len)?;
            let layout = Layout::contiguous(&[len]);
            let view = View {
                buffer: &tmp,
                dtype: DType::F32,
                layout: &layout,
            };
            return self.copy(view, dtype);
        }
        // A small fill (a scalar operand, a short constant) is made on the host and
        // uploaded with the batch: no dispatch and no bind group (lazy steps made
        // ~20 a step). The CPU backend is the reference for its values.
        if let Generator::Fill(_) = g
            && !dtype.is_complex()
            && (len * dtype.size()) as u64 <= HOST_FILL_BYTES
        {
            let host = wmx_core::cpu::CpuBackend::new().generate(g, dtype, len)?;
            return self.from_host(host.bytes().to_vec(), dtype);
        }
        // Pieces of an arange start where they fall (`start + first * step`).
        self.record_pieces(&[len], dtype, &[], |b, _, o, first| match g {
            Generator::Fill(v) => self.kernels.fill(b, o, v),
            Generator::Arange { start, step } => {
                self.kernels.arange(b, o, start + first as f64 * step, step)
            }
        })
    }

    fn axpby(
        &self,
        x: View<'_, GpuBuffer<D>>,
        y: View<'_, GpuBuffer<D>>,
        alpha: f64,
        beta: f64,
    ) -> Result<GpuBuffer<D>> {
        self.record_pieces(&x.layout.shape, x.dtype, &[&x, &y], |b, s, o, _| {
            self.kernels.axpby(b, &s[0], &s[1], alpha, beta, o)
        })
    }

    fn reduce(
        &self,
        op: ReduceOp,
        x: View<'_, GpuBuffer<D>>,
        axes: &[usize],
    ) -> Result<GpuBuffer<D>> {
        if wmx_core::layout::numel(&x.layout.shape) > 0 {
            return self.reduce_pieces(op, &x, axes);
        }
        // Nothing is read: the kernel fills the output with the op's identity.
        let out_dtype = op.out_dtype(x.dtype);
        let x = self.input(&x)?;
        let shape = wmx_core::layout::kept_shape(&x.layout.shape, axes);
        self.record(&shape, out_dtype, |b, o| {
            self.kernels.reduce(b, op, &x.strided(), axes, o)
        })
    }

    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: View<'_, GpuBuffer<D>>,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        if wmx_core::layout::numel(&x.layout.shape) > 0 {
            return self.arg_reduce_pieces(op, &x, axis);
        }
        let x = self.input(&x)?;
        let shape = wmx_core::layout::kept_shape(&x.layout.shape, &[axis]);
        self.record(&shape, DType::U32, |b, o| {
            self.kernels.arg_reduce(b, op, &x.strided(), axis, o)
        })
    }

    fn slice_update(
        &self,
        base: View<'_, GpuBuffer<D>>,
        update: View<'_, GpuBuffer<D>>,
        starts: &[usize],
        steps: &[isize],
    ) -> Result<GpuBuffer<D>> {
        let dtype = base.dtype;
        let x = match self.input(&base) {
            Ok(x) if self.fits_one(&base.layout.shape, dtype) => x,
            // The base past a binding: pieces of it, each with its part of the update.
            _ => return self.slice_update_pieces(base, update, starts, steps),
        };
        let u = self.input(&update)?;
        self.record(&x.layout.shape, dtype, |b, o| {
            self.kernels
                .slice_update(b, &x.strided(), &u.strided(), starts, steps, o)
        })
    }

    fn concatenate(&self, inputs: &[View<'_, GpuBuffer<D>>], axis: usize) -> Result<GpuBuffer<D>> {
        let first = inputs.first().ok_or_else(|| wmx_core::Error::Invalid {
            op: "concatenate",
            msg: "no inputs".into(),
        })?;
        let mut shape = first.layout.shape.clone();
        if axis < shape.len() {
            shape[axis] = inputs.iter().map(|x| x.layout.shape[axis]).sum();
        }
        let ins = inputs
            .iter()
            .map(|x| self.input(x))
            .collect::<Result<Vec<_>>>();
        let ins = match ins {
            Ok(ins) if self.fits_one(&shape, first.dtype) => ins,
            // Past a binding: placed in pieces.
            _ if axis < shape.len() && !shape.contains(&0) => {
                return self.concatenate_pieces(inputs, axis, &shape);
            }
            Err(e) => return Err(e),
            Ok(ins) => ins,
        };
        self.record(&shape, inputs[0].dtype, |b, o| {
            let views: Vec<_> = ins.iter().map(|x| x.strided()).collect();
            self.kernels.concatenate(b, &views, axis, o)
        })
    }

    fn scan(
        &self,
        op: ReduceOp,
        x: View<'_, GpuBuffer<D>>,
        axis: usize,
        reverse: bool,
        inclusive: bool,
    ) -> Result<GpuBuffer<D>> {
        let mut dense = None;
        let x = self.row_major(x, &mut dense)?;
        let out_dtype = op.out_dtype(x.dtype);
        // Lines along `axis` stay whole; past a binding, pieces of the dims before it.
        let shape = x.layout.shape.clone();
        if !self.line_fits(&shape, axis, x.dtype.size().max(out_dtype.size())) {
            return self.scan_blocked(op, x, axis, reverse, inclusive);
        }
        self.record_rows(&shape, axis, 1, out_dtype, &[&x], |b, s, o, _| {
            self.kernels.scan(b, op, &s[0], axis, reverse, inclusive, o)
        })
    }

    fn argsort(&self, x: View<'_, GpuBuffer<D>>) -> Result<GpuBuffer<D>> {
        self.sort_rows(x, false)
    }

    fn sort(&self, x: View<'_, GpuBuffer<D>>) -> Result<GpuBuffer<D>> {
        let n = x.layout.shape.last().copied().unwrap_or(0);
        if !self.kernels.sorts_values(x.dtype, n) {
            return wmx_core::backend::sort_by_argsort(self, x);
        }
        // The radix sort carrying the elements: no indices, no gather.
        self.sort_rows(x, true)
    }

    fn random_bits(
        &self,
        keys: View<'_, GpuBuffer<D>>,
        len: usize,
        dtype: DType,
    ) -> Result<GpuBuffer<D>> {
        let k = self.input(&keys)?;
        let cap = wmx_core::cpu::below_one(dtype);
        let word = if dtype == DType::U32 {
            dtype
        } else {
            DType::F32
        };
        // In parts when the draws are larger than a binding (each part through a
        // window of the one output).
        let words = self.record_pieces(&[len], word, &[], |b, _, o, start| {
            let start = start as usize;
            self.kernels
                .random_bits_part(b, &k.strided(), cap, len, start, o)
        })?;
        if word == dtype {
            return Ok(words);
        }
        // 16-bit draws: the f32 values rounded (the pair of words a hash writes is
        // not one packed word).
        let layout = Layout::contiguous(&[len]);
        let v = View {
            buffer: &words,
            dtype: word,
            layout: &layout,
        };
        Backend::copy(self, v, dtype)
    }

    fn gather(
        &self,
        x: View<'_, GpuBuffer<D>>,
        indices: View<'_, GpuBuffer<D>>,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        let dtype = x.dtype;
        // x and the indices of one shape (a sort): pieces of whole lines of both.
        let lines = x.layout.shape == indices.layout.shape;
        // Once: binding a view across segments records a copy.
        let xi = self.input(&x);
        let i = match self.input(&indices) {
            Ok(i) if self.fits_one(&indices.layout.shape, dtype) => i,
            // The indices or the output past a binding: pieces of them (x whole).
            _ => {
                return match xi {
                    Ok(xi) => self.gather_pieces(xi, dtype, indices, axis),
                    Err(_) if lines => self.gather_lines(x, indices, axis),
                    Err(e) => Err(e),
                };
            }
        };
        let x = match xi {
            Ok(x) => x,
            Err(_) if lines => return self.gather_lines(x, indices, axis),
            // x past a binding: parts of it along `axis`.
            Err(_) => return self.gather_parts(x, indices, axis),
        };
        self.record(&i.layout.shape, dtype, |b, o| {
            self.kernels.gather(b, &x.strided(), &i.strided(), axis, o)
        })
    }

    fn scatter(
        &self,
        op: wmx_core::ScatterOp,
        base: View<'_, GpuBuffer<D>>,
        indices: View<'_, GpuBuffer<D>>,
        updates: View<'_, GpuBuffer<D>>,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        let dtype = base.dtype;
        let x = match self.input(&base) {
            Ok(x) if self.fits_one(&base.layout.shape, dtype) => x,
            // The base past a binding: pieces of its dims before `axis`.
            _ => return self.scatter_pieces(op, base, indices, updates, axis),
        };
        let (i, u) = (self.input(&indices)?, self.input(&updates)?);
        self.record(&x.layout.shape, dtype, |b, o| {
            self.kernels
                .scatter(b, op, &x.strided(), &i.strided(), &u.strided(), axis, o)
        })
    }

    fn matmul(
        &self,
        a: View<'_, GpuBuffer<D>>,
        b: View<'_, GpuBuffer<D>>,
        c: Option<View<'_, GpuBuffer<D>>>,
        alpha: f64,
        beta: f64,
    ) -> Result<GpuBuffer<D>> {
        let nd = a.layout.shape.len();
        let mut shape = a.layout.shape.clone();
        shape[nd - 1] = b.layout.shape[nd - 1];
        let x = match self.input(&a) {
            Ok(x) if self.fits_one(&shape, a.dtype) => x,
            // A or the output past a binding: rows of A in pieces (B whole).
            _ => return self.matmul_pieces(a, b, c, alpha, beta, &shape),
        };
        let y = match self.input(&b) {
            Ok(y) => y,
            // B past a binding: parts of its columns, placed side by side, else
            // (a row-major B) partial products over parts of K, summed.
            Err(_) => {
                return match self.matmul_b_parts(a, b, c, alpha, beta, &shape) {
                    Err(Error::OutOfRange { .. }) => {
                        self.matmul_k_parts(a, b, c, alpha, beta, &shape)
                    }
                    r => r,
                };
            }
        };
        let z = c.map(|c| self.input(&c)).transpose()?;
        self.record(&shape, a.dtype, |bt, o| {
            let zs = z.as_ref().map(|z| z.strided());
            self.kernels
                .matmul(bt, &x.strided(), &y.strided(), zs.as_ref(), alpha, beta, o)
        })
    }

    fn normalize(
        &self,
        op: wmx_core::NormOp,
        x: View<'_, GpuBuffer<D>>,
        params: &[View<'_, GpuBuffer<D>>],
        eps: f64,
    ) -> Result<GpuBuffer<D>> {
        // Views are read in place; past a binding, x is made row-major first (a
        // copy, itself in pieces) so that whole rows can be cut.
        let mut dense = None;
        let x = if self.fits_one(&x.layout.shape, x.dtype) {
            x
        } else {
            self.row_major(x, &mut dense)?
        };
        // Rows stay whole; past a binding, pieces of whole rows. The per-column
        // parameters go in as broadcasts over the rows, so each piece binds them
        // whole, and come out of the piece as their `[L]` views again.
        let shape = x.layout.shape.clone();
        let cut = shape.len().saturating_sub(1);
        let layouts: Vec<Layout> = params
            .iter()
            .map(|p| {
                let mut strides = vec![0; cut];
                strides.extend(p.layout.strides.last().copied());
                Layout {
                    shape: shape.clone(),
                    strides,
                    offset: p.layout.offset,
                }
            })
            .collect();
        let wide: Vec<View<'_, GpuBuffer<D>>> = params
            .iter()
            .zip(&layouts)
            .map(|(p, layout)| View { layout, ..*p })
            .collect();
        let mut views = vec![&x];
        views.extend(wide.iter());
        self.record_rows(&shape, cut, 1, x.dtype, &views, |b, s, o, _| {
            let ps: Vec<k::Strided<'_, D::Buffer>> = s[1..]
                .iter()
                .map(|p| k::Strided {
                    shape: &p.shape[cut..],
                    strides: &p.strides[cut..],
                    ..*p
                })
                .collect();
            let refs: Vec<_> = ps.iter().collect();
            self.kernels.normalize(b, op, &s[0], &refs, eps, o)
        })
    }
}

impl<D: Driver> GpuBackend<D> {
    /// The host copy if there is one, else the GPU memory after submitting pending
    /// work (so the download sees it).
    #[allow(clippy::type_complexity)] // one of two named things, used twice
    fn cached_or_gpu(
        &self,
        b: &GpuBuffer<D>,
    ) -> Result<std::result::Result<Arc<Vec<u8>>, Mem<D::Buffer>>> {
        if let Some(h) = &b.data.lock().unwrap().host {
            return Ok(Ok(h.clone()));
        }
        self.flush_now()?;
        let g = b
            .data
            .lock()
            .unwrap()
            .gpu
            .clone()
            .expect("no host data means GPU data");
        Ok(Err(g))
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn store_download(&self, b: &GpuBuffer<D>, bytes: Vec<u8>) -> Arc<Vec<u8>> {
        self.shared.count_download(b.bytes);
        let host = Arc::new(bytes);
        b.data.lock().unwrap().host = Some(host.clone());
        host
    }
}

/// A fresh buffer of `n` elements of `dtype` from the pool (not zeroed); `Err`
/// past one buffer (see [`new_output_mem`]).
pub(crate) fn new_output<D: Driver>(
    shared: &Arc<Shared<D>>,
    n: usize,
    dtype: DType,
) -> Result<(GpuBuffer<D>, D::Buffer)> {
    let bytes = (n as u64).saturating_mul(dtype.size() as u64);
    let max = shared.max_buffer();
    if bytes.div_ceil(16) * 16 > max {
        return Err(Error::OutOfRange {
            op: "webgpu",
            msg: format!(
                "an output of {n} {dtype} elements ({bytes} bytes) is larger than one \
                 buffer of this device ({max} bytes), which this op needs"
            ),
        });
    }
    let (out, mem) = new_output_mem(shared, n, dtype)?;
    let g = mem.parts[0].clone();
    Ok((out, g))
}

/// Fresh GPU memory for `n` elements of `dtype` from the pool (not zeroed): one
/// buffer, or segments past one buffer's limit.
pub(crate) fn new_output_mem<D: Driver>(
    shared: &Arc<Shared<D>>,
    n: usize,
    dtype: DType,
) -> Result<(GpuBuffer<D>, Mem<D::Buffer>)> {
    let bytes = (n as u64).saturating_mul(dtype.size() as u64);
    let mem = segments::alloc(shared, bytes, true)?;
    Ok((
        GpuBuffer {
            shared: shared.clone(),
            bytes,
            data: Arc::new(Mutex::new(Data {
                gpu: Some(mem.clone()),
                host: None,
            })),
        },
        mem,
    ))
}

/// The first `bytes` of `mem`, segment by segment.
async fn read_mem<D: Driver>(
    kernels: &Kernels<D>,
    mem: &Mem<D::Buffer>,
    bytes: u64,
) -> Result<Vec<u8>> {
    if mem.is_one() {
        return kernels.read(&mem.parts[0], 0, bytes).await.map_err(kerr);
    }
    let mut all = Vec::new();
    all.try_reserve_exact(bytes as usize)
        .map_err(|_| Error::Backend {
            backend: D::NAME.into(),
            msg: format!("out of memory: {bytes} bytes of host memory for a read"),
        })?;
    for (part, start, end) in mem.ranges(bytes) {
        if start < end {
            all.extend(kernels.read(part, 0, end - start).await.map_err(kerr)?);
        }
    }
    Ok(all)
}

/// The first `out.len()` bytes of `mem` into `out`, segment by segment.
#[cfg(not(target_arch = "wasm32"))]
async fn read_mem_into<D: Driver>(
    kernels: &Kernels<D>,
    mem: &Mem<D::Buffer>,
    out: &mut [u8],
) -> Result<()> {
    for (part, start, end) in mem.ranges(out.len() as u64) {
        if start < end {
            kernels
                .read_into(part, 0, &mut out[start as usize..end as usize])
                .await
                .map_err(kerr)?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- public helpers

/// The WebGPU backend behind `device`, if it is one.
pub fn backend(device: &Device) -> Option<&WebGpuBackend> {
    device.backend_any().downcast_ref::<WebGpuBackend>()
}

/// Where an evaluated array's data lives, if it is on a WebGPU device
/// (`None` for pending arrays and other backends).
pub fn buffer_state(a: &Array) -> Option<BufferState> {
    let buf = a.buffer()?;
    buf.downcast::<GpuBuffer>().map(GpuBuffer::state)
}

/// Opens the default adapter as a [`Device`] (native; blocking).
#[cfg(not(target_arch = "wasm32"))]
pub fn open() -> Result<Device> {
    Ok(Device::new(Arc::new(WebGpuBackend::new()?)))
}

/// Makes [`Device::gpu`] open this backend. The `wmx` facade calls it for you.
#[cfg(not(target_arch = "wasm32"))]
pub fn register() {
    wmx_core::register_gpu_backend(open);
}

/// Small fills are made on the host and uploaded (no dispatch), large ones by the
/// kernel; both give the CPU backend's bytes.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod host_fill {
    use wmx_core::{Backend, DType, Generator};

    #[test]
    fn small_fills_take_no_dispatch_and_both_paths_match_the_cpu() {
        let Some(be) = wmx_reference::gpu::opened(crate::WebGpuBackend::new()) else {
            return;
        };
        let cpu = wmx_core::cpu::CpuBackend::new();
        for d in DType::REAL {
            if be.check_dtype(d).is_err() {
                continue;
            }
            let large = crate::HOST_FILL_BYTES as usize / d.size() + 5;
            for v in [1.5, -0.0, f64::NAN, f64::INFINITY, 300.7, -3.0, 0.1] {
                for (len, host) in [(3, true), (large, false)] {
                    let before = be.stats().dispatches;
                    let g = be.generate(Generator::Fill(v), d, len).unwrap();
                    be.synchronize().unwrap();
                    let dispatched = be.stats().dispatches - before;
                    assert_eq!(dispatched == 0, host, "fill {v} of {len} {d}");
                    let want = cpu.generate(Generator::Fill(v), d, len).unwrap();
                    let got = be.read(&g).unwrap();
                    assert_eq!(&got[..], want.bytes(), "fill {v} of {len} {d}");
                }
            }
        }
    }
}
