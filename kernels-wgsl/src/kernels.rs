//! The kernel library on one device, generic over its [`Driver`]: views of
//! buffers, batches of dispatches, the pipeline cache, scratch buffers and the
//! checks every dispatch passes before it is recorded.

use crate::compose::{ModuleSpec, Target, compose};
use crate::driver::{Batch, Binding, Bound, Caps, Dispatch, Driver, DriverBuffer, FxMap, Work};
use crate::dtype::DType;
use crate::wgpu_driver::Wgpu;
use crate::{Error, Result};
use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex};

/// Upper bound on launched workgroups; kernels grid-stride past it. 16384 groups of
/// 256 invocations: up to 2^24 f32 elements each thread handles one vec4, at 2^26
/// four (one vec4 per thread on a 65535 x 2 grid reached 0.89x PyTorch on an H100,
/// four per thread 0.97x in the shared measurement).
pub(crate) const MAX_GROUPS: u64 = 1 << 14;

pub(crate) struct Inner<D: Driver> {
    pub(crate) driver: D,
    pub(crate) caps: Caps,
    pub(crate) target: Target,
    pub(crate) pipelines: Mutex<PipeCache<D>>,
    /// Pipelines that families cache by keys of their own (users' modules, fused
    /// kernels): one map per key type, see [`Kernels::family_cache`].
    family_pipes: Mutex<FxMap<TypeId, Box<dyn Any + Send>>>,
    /// Pipelines of the f64 kernels, by entry point and prelude (see `f64.rs`).
    pub(crate) wide_pipes: Mutex<FxMap<String, Arc<D::Pipeline>>>,
    /// Scratch buffers kept between calls: 0 and 1 for multi-pass reductions (a
    /// dispatch cannot read and write one buffer, so a pass reading one writes the
    /// other), 2 and 3 for sorting's (key, index) pairs, 4 for products split
    /// along K (their partial products).
    /// Large allocations cost milliseconds on some drivers (dedicated Vulkan
    /// allocations) and wgpu clears each new buffer, more than a sort or a product.
    scratch: Mutex<[Option<D::Buffer>; 5]>,
    /// Bound in place of an input that aliases the output.
    pub(crate) dummy: D::Buffer,
    /// Whether dispatches are marked with their [`Work`] (while a profile runs:
    /// describing costs a string per dispatch).
    describe: std::sync::atomic::AtomicBool,
}

/// Compiled pipelines by spec, plus the last few used (compared before hashing:
/// consecutive dispatches mostly repeat a handful of specs).
pub(crate) struct PipeCache<D: Driver> {
    pub(crate) map: FxMap<ModuleSpec, Arc<D::Pipeline>>,
    recent: [Option<(ModuleSpec, Arc<D::Pipeline>)>; 4],
    next: usize,
}

impl<D: Driver> PipeCache<D> {
    fn new() -> Self {
        PipeCache {
            map: FxMap::default(),
            recent: Default::default(),
            next: 0,
        }
    }

    fn get(&mut self, spec: &ModuleSpec) -> Option<Arc<D::Pipeline>> {
        for (s, p) in self.recent.iter().flatten() {
            if s == spec {
                return Some(p.clone());
            }
        }
        let p = self.map.get(spec)?.clone();
        self.recent[self.next] = Some((spec.clone(), p.clone()));
        self.next = (self.next + 1) % self.recent.len();
        Some(p)
    }
}

/// The kernel library on one device, recording through driver `D` (wgpu by
/// default). Cheap to clone (shared inside).
pub struct Kernels<D: Driver = Wgpu> {
    pub(crate) inner: Arc<Inner<D>>,
}

impl<D: Driver> Clone for Kernels<D> {
    fn clone(&self) -> Self {
        Kernels {
            inner: self.inner.clone(),
        }
    }
}

impl<D: Driver> std::fmt::Debug for Kernels<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernels")
            .field("caps", &self.inner.caps)
            .finish()
    }
}

impl<D: Driver> Kernels<D> {
    /// The library on an opened `driver` whose device has `caps`, composing modules
    /// for `target`. `Err` if the device cannot bind the 5 storage buffers the
    /// library's kernels need.
    pub fn with_driver(driver: D, caps: Caps, target: Target) -> Result<Kernels<D>> {
        if caps.max_storage_buffers < 5 {
            return Err(Error::RequestDevice(format!(
                "need 5 storage buffers per stage, device allows {}",
                caps.max_storage_buffers
            )));
        }
        let dummy = driver.create_buffer(16, Some("wmx-kernels dummy"))?;
        Ok(Kernels {
            inner: Arc::new(Inner {
                driver,
                caps,
                target,
                pipelines: Mutex::new(PipeCache::new()),
                family_pipes: Mutex::new(FxMap::default()),
                wide_pipes: Mutex::new(FxMap::default()),
                scratch: Mutex::new(Default::default()),
                dummy,
                describe: Default::default(),
            }),
        })
    }

    /// The same library with its target changed by `f`; `Err` once the library
    /// is shared (clones exist).
    pub(crate) fn with_target(self, f: impl FnOnce(&mut Target)) -> Result<Kernels<D>> {
        let mut inner =
            Arc::try_unwrap(self.inner).map_err(|_| Error::RequestDevice("shared".into()))?;
        f(&mut inner.target);
        inner.pipelines.get_mut().unwrap().map.clear();
        Ok(Kernels {
            inner: Arc::new(inner),
        })
    }

    /// The same library planning with a smaller binding limit and buffer size (at
    /// most the device's; the binding at least 1 MiB, both multiples of 256): a
    /// testing aid that makes the paths for arrays past a binding and past one
    /// buffer run on small arrays. `Err` once the library is shared (clones exist).
    pub fn with_limits(self, max_binding: u64, max_buffer: u64) -> Result<Kernels<D>> {
        let mut inner =
            Arc::try_unwrap(self.inner).map_err(|_| Error::RequestDevice("shared".into()))?;
        let c = &mut inner.caps;
        c.max_storage_binding = c.max_storage_binding.min(max_binding.max(1 << 20) & !255);
        c.max_buffer = c
            .max_buffer
            .min(max_buffer & !255)
            .max(c.max_storage_binding);
        Ok(Kernels {
            inner: Arc::new(inner),
        })
    }

    /// The driver (for wgpu: the device and queue).
    pub fn driver(&self) -> &D {
        &self.inner.driver
    }
    /// Device capabilities.
    pub fn caps(&self) -> &Caps {
        &self.inner.caps
    }
    /// Code-generation target used for this device's modules.
    pub fn target(&self) -> Target {
        self.inner.target
    }

    /// Whether `dtype` can be used on this device (`F16` needs `SHADER_F16`, `F64`
    /// `SHADER_F64`; i64 is held as pairs of words everywhere).
    pub fn supports(&self, dtype: DType) -> bool {
        match dtype {
            DType::F16 => self.inner.caps.f16,
            DType::F64 => self.inner.caps.f64,
            _ => true,
        }
    }

    pub(crate) fn check_dtype(&self, dtype: DType) -> Result<()> {
        if self.supports(dtype) {
            Ok(())
        } else {
            Err(Error::UnsupportedDType {
                dtype: dtype.name(),
                reason: format!(
                    "adapter '{}' lacks the SHADER_{} feature",
                    self.inner.caps.adapter_name,
                    dtype.name().to_uppercase()
                ),
            })
        }
    }

    fn check_size(&self, bytes: u64) -> Result<()> {
        let c = &self.inner.caps;
        if bytes > c.max_buffer {
            return Err(Error::BufferTooLarge {
                bytes,
                limit: c.max_buffer,
                what: "max_buffer_size",
            });
        }
        Ok(())
    }

    /// The alignment of a [`crate::Window`]'s start (the device's
    /// `min_storage_buffer_offset_alignment`).
    pub fn window_align(&self) -> u64 {
        self.inner.caps.offset_align.max(16) as u64
    }

    /// A binding a dispatch may use: at most `max_storage_buffer_binding_size`
    /// bytes (a larger buffer is bound through a [`crate::Window`]), a window aligned and
    /// inside its buffer.
    fn check_binding(&self, b: &Binding<D::Buffer>) -> Result<()> {
        let size = b.buffer.byte_size();
        if let Some(w) = b.window {
            let end = w.start.checked_add(w.len);
            if !w.start.is_multiple_of(self.window_align())
                || !w.len.is_multiple_of(4)
                || w.len == 0
                || end.is_none_or(|e| e > size)
            {
                return Err(Error::Shape(format!(
                    "window {w:?} of a {size}-byte buffer: the start must be a multiple of {}, \
                     the length a nonzero multiple of 4, the range inside the buffer",
                    self.window_align()
                )));
            }
        }
        let limit = self.inner.caps.max_storage_binding;
        let len = b.bound_bytes();
        if len > limit {
            return Err(Error::BufferTooLarge {
                bytes: len,
                limit,
                what: "max_storage_buffer_binding_size (bind a Window of larger buffers)",
            });
        }
        Ok(())
    }

    /// Creates a storage buffer that may also be copied from and to. The size is
    /// rounded up to a multiple of 16 bytes (at least 16) so the vec4 kernels can
    /// read whole vectors; sizes over the device's buffer limit give
    /// [`Error::BufferTooLarge`] (a buffer larger than the binding limit is bound
    /// through [`crate::Window`]s). Natively an allocation the device refuses is
    /// [`Error::OutOfMemory`] here, never an invalid buffer handed on (in the
    /// browser the error arrives later).
    pub fn create_buffer(&self, bytes: u64, label: Option<&str>) -> Result<D::Buffer> {
        let size = bytes.max(16).div_ceil(16) * 16;
        self.check_size(size)?;
        self.inner.driver.create_buffer(size, label)
    }

    /// Creates a buffer holding `bytes` (host layout = device layout, no conversion).
    pub fn upload(&self, bytes: &[u8]) -> Result<D::Buffer> {
        let size = (bytes.len() as u64).max(16).div_ceil(16) * 16;
        self.check_size(size)?;
        self.inner.driver.upload(bytes, size)
    }

    /// Reads `byte_len` bytes at `byte_offset` (any alignment) once the work
    /// submitted so far has finished: reads the enclosing 4-byte-aligned range and
    /// slices. On native the device is polled; in the browser the map callback is
    /// awaited.
    pub async fn read(
        &self,
        buffer: &D::Buffer,
        byte_offset: u64,
        byte_len: u64,
    ) -> Result<Vec<u8>> {
        if byte_len == 0 {
            return Ok(Vec::new());
        }
        let end = read_end(buffer, byte_offset, byte_len)?;
        let start = byte_offset & !3;
        let end4 = end.div_ceil(4) * 4;
        let mut bytes = self.inner.driver.read(buffer, start, end4 - start).await?;
        let s = (byte_offset - start) as usize;
        bytes.truncate(s + byte_len as usize);
        bytes.drain(..s);
        Ok(bytes)
    }

    /// [`Kernels::read`] of `out.len()` bytes at `byte_offset` into `out`.
    pub async fn read_into(
        &self,
        buffer: &D::Buffer,
        byte_offset: u64,
        out: &mut [u8],
    ) -> Result<()> {
        let len = out.len() as u64;
        read_end(buffer, byte_offset, len)?;
        if len == 0 {
            return Ok(());
        }
        if !byte_offset.is_multiple_of(4) || !len.is_multiple_of(4) {
            let v = self.read(buffer, byte_offset, len).await?;
            out.copy_from_slice(&v);
            return Ok(());
        }
        self.inner.driver.read_into(buffer, byte_offset, out).await
    }

    /// Blocking [`Kernels::read`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_blocking(
        &self,
        buffer: &D::Buffer,
        byte_offset: u64,
        byte_len: u64,
    ) -> Result<Vec<u8>> {
        pollster::block_on(self.read(buffer, byte_offset, byte_len))
    }

    /// Waits until all submitted work has finished.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn poll_wait(&self) {
        self.inner.driver.poll_wait();
    }

    /// The cached pipeline for `spec`, composing and compiling it on first use.
    pub(crate) fn pipeline(&self, spec: &ModuleSpec) -> Result<Arc<D::Pipeline>> {
        if let Some(p) = self.inner.pipelines.lock().unwrap().get(spec) {
            return Ok(p);
        }
        let src = compose(spec)?;
        let label = format!(
            "{:?}:{}:{:?}->{}:{:?}",
            spec.family, spec.op, spec.inputs, spec.output, spec.variant
        );
        let constants = spec.constants();
        // Trusted: every kernel bounds its accesses itself (loops stop at the element
        // counts, and the host checks each view's extreme element offsets against
        // the bound buffers before recording).
        let p = Arc::new(self.inner.driver.compile(
            &label,
            &src,
            spec.entry_point(),
            (1, spec.input_bindings()),
            &constants,
            true,
        )?);
        self.inner
            .pipelines
            .lock()
            .unwrap()
            .map
            .insert(spec.clone(), p.clone());
        Ok(p)
    }

    /// Validates (naga) and compiles a whole module binding the parameters, then
    /// `outputs` and `inputs` buffers, with override `constants`. `trusted`: the
    /// module bounds its own accesses (generated by the library), so runtime checks
    /// are off.
    pub(crate) fn compile_module(
        &self,
        label: &str,
        source: &str,
        entry: &str,
        buffers: (usize, usize),
        constants: &[(&str, f64)],
        trusted: bool,
    ) -> Result<D::Pipeline> {
        crate::compose::validate_wgsl(label, source, entry)?;
        self.inner
            .driver
            .compile(label, source, entry, buffers, constants, trusted)
    }

    /// Runs `f` on the family cache of key type `K` (made empty on first use).
    pub(crate) fn family_cache<K, V, R>(&self, f: impl FnOnce(&mut FxMap<K, V>) -> R) -> R
    where
        K: Send + 'static,
        V: Send + 'static,
    {
        let mut all = self.inner.family_pipes.lock().unwrap();
        let map = all
            .entry(TypeId::of::<FxMap<K, V>>())
            .or_insert_with(|| Box::new(FxMap::<K, V>::default()));
        f(map.downcast_mut().expect("one map type per TypeId"))
    }

    /// Number of cached pipelines.
    pub fn pipeline_count(&self) -> usize {
        self.inner.pipelines.lock().unwrap().map.len()
    }

    /// Scratch buffer `which` (0 to 4, see `Inner::scratch`) of at least `bytes` bytes.
    pub(crate) fn scratch(&self, which: usize, bytes: u64) -> Result<D::Buffer> {
        let mut s = self.inner.scratch.lock().unwrap();
        if let Some(b) = &s[which] {
            if b.byte_size() >= bytes {
                return Ok(b.clone());
            }
        }
        // Grow geometrically; earlier batches keep the old buffer alive.
        let size = bytes.max(1024).next_power_of_two().min(
            self.inner
                .caps
                .max_storage_binding
                .min(self.inner.caps.max_buffer),
        );
        if size < bytes {
            return Err(Error::BufferTooLarge {
                bytes,
                limit: size,
                what: "scratch buffer",
            });
        }
        let b = self.create_buffer(size, Some("wmx-kernels scratch"))?;
        s[which] = Some(b.clone());
        Ok(b)
    }

    /// Drops the scratch buffers kept for reductions and sorting (work already
    /// recorded keeps its own references) and the driver's staging buffer for reads.
    pub fn clear_scratch(&self) {
        *self.inner.scratch.lock().unwrap() = Default::default();
        self.clear_staging();
    }

    /// Drops the staging buffer the driver keeps between reads.
    pub fn clear_staging(&self) {
        self.inner.driver.clear_staging();
    }

    /// Drops state the driver keeps per bound buffer (wgpu's bind groups, which
    /// hold their buffers).
    pub fn clear_bind_groups(&self) {
        self.inner.driver.clear_bindings();
    }

    /// The dispatch for `groups` workgroups of a 1-D launch: `[gx, gy, 1]`, 2-D
    /// past the per-dimension limit (a kernel computes its index as
    /// `id.x + id.y * num_workgroups.x * workgroup size` and checks it against its
    /// count, since `gx * gy` may exceed `groups`). An `Err` past the limit squared.
    pub fn grid(&self, groups: u64) -> Result<[u32; 3]> {
        let m = self.inner.caps.max_workgroups_per_dim as u64;
        let groups = groups.max(1);
        let gx = groups.min(m);
        let gy = groups.div_ceil(gx);
        if gy > m {
            return Err(Error::Shape(format!(
                "{groups} workgroups exceed the device's {m} x {m}"
            )));
        }
        Ok([gx as u32, gy as u32, 1])
    }

    pub(crate) fn wg(&self) -> u32 {
        self.inner.target.workgroup_size
    }

    pub(crate) fn record(
        &self,
        b: &mut Batch<D>,
        spec: &ModuleSpec,
        buffers: impl IntoIterator<Item = impl Into<Binding<D::Buffer>>>,
        params: Vec<u32>,
        groups: u64,
    ) -> Result<()> {
        let pipe = self.pipeline(spec)?;
        self.record_pipe(b, pipe, buffers, params, groups)
    }

    /// Marks the dispatches recorded from now on with their [`Work`] (`true`), or
    /// stops (a profiler's switch).
    pub fn set_describe(&self, on: bool) {
        self.inner
            .describe
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether [`Kernels::set_describe`] is on.
    pub(crate) fn describing(&self) -> bool {
        self.inner
            .describe
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Marks the last dispatch of `b` with `work()` while [`Kernels::set_describe`]
    /// is on.
    pub(crate) fn describe(&self, b: &mut Batch<D>, work: impl FnOnce() -> Work) {
        if self.describing()
            && let Some(d) = b.dispatches.last_mut()
        {
            d.work = Some(work());
        }
    }

    /// Records `pipe` over `groups` workgroups (folded into a 2-D grid) with
    /// `buffers` bound from binding 1 (outputs, then inputs).
    pub(crate) fn record_pipe(
        &self,
        b: &mut Batch<D>,
        pipe: Arc<D::Pipeline>,
        buffers: impl IntoIterator<Item = impl Into<Binding<D::Buffer>>>,
        params: Vec<u32>,
        groups: u64,
    ) -> Result<()> {
        let groups = self.grid(groups)?;
        let mut bound: Bound<D> = Default::default();
        for (slot, buf) in bound.iter_mut().zip(buffers) {
            let buf = buf.into();
            self.check_binding(&buf)?;
            *slot = Some(buf);
        }
        b.dispatches.push(Dispatch {
            pipe,
            buffers: bound,
            params,
            groups,
            work: None,
        });
        Ok(())
    }

    /// Submits a batch: its dispatches run in order, each seeing what earlier ones
    /// wrote (on wgpu: one compute pass per run between timestamps, one submit).
    pub fn submit(&self, batch: Batch<D>) -> Result<()> {
        self.inner.driver.submit(batch)
    }
}

/// The end of a read of `len` bytes at `offset`, or an `Err` past the buffer's end.
fn read_end<B: crate::driver::DriverBuffer>(buffer: &B, offset: u64, len: u64) -> Result<u64> {
    let size = buffer.byte_size();
    offset
        .checked_add(len)
        .filter(|e| *e <= size)
        .ok_or_else(|| {
            Error::Shape(format!(
                "read of {len} bytes at {offset} past the end of a {size}-byte buffer"
            ))
        })
}
