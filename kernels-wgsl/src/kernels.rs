//! The kernel library on one device, generic over its [`Driver`]: views of
//! buffers, batches of dispatches, the pipeline cache, scratch buffers and the
//! checks every dispatch passes before it is recorded.

use crate::compose::{ModuleSpec, Target, compose};
use crate::driver::{Driver, DriverBuffer};
use crate::dtype::DType;
use crate::wgpu_driver::Wgpu;
use crate::{Error, Result};
use std::sync::{Arc, Mutex};

/// What the device can do, read once when it is opened.
#[derive(Clone, Debug)]
pub struct Caps {
    /// `SHADER_F16` is available (required for the `F16` dtype).
    pub f16: bool,
    /// `SHADER_F64` is available (required for the `F64` dtype).
    pub f64: bool,
    /// `SUBGROUP` is available (reductions use subgroup operations).
    pub subgroups: bool,
    /// Smallest subgroup size of the adapter, 0 without subgroups.
    pub subgroup_size: u32,
    /// `TIMESTAMP_QUERY` is available (and requested).
    pub timestamps: bool,
    /// Largest storage buffer binding in bytes (whole buffers are bound).
    pub max_storage_binding: u64,
    /// Largest buffer in bytes.
    pub max_buffer: u64,
    /// Workgroups per grid dimension.
    pub max_workgroups_per_dim: u32,
    /// Invocations per workgroup.
    pub max_invocations: u32,
    /// Storage buffers one kernel may bind (the parameters included).
    pub max_storage_buffers: u32,
    /// Bytes of workgroup memory one kernel may use.
    pub max_workgroup_storage: u32,
    /// Alignment of a bound range's start in bytes (`min_storage_buffer_offset_alignment`).
    pub offset_align: u32,
    /// Backend of the adapter (`Metal` for `wmx-metal`).
    pub backend: wgpu::Backend,
    /// Adapter name.
    pub adapter_name: String,
    /// Adapter type.
    pub device_type: wgpu::DeviceType,
}

/// A byte range of a buffer bound instead of the whole buffer: how arrays larger
/// than the device's storage-binding limit are computed in pieces. `start` is a
/// multiple of `min_storage_buffer_offset_alignment` (256 bytes on every adapter
/// wgpu knows), `len` a multiple of 4, and the range lies inside the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window {
    /// First byte bound.
    pub start: u64,
    /// Bytes bound.
    pub len: u64,
}

/// A buffer bound by one dispatch, whole or through a [`Window`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Binding<B> {
    /// The buffer.
    pub buffer: B,
    /// The part bound (`None`: all of it).
    pub window: Option<Window>,
}

impl<B> From<B> for Binding<B> {
    fn from(buffer: B) -> Binding<B> {
        Binding {
            buffer,
            window: None,
        }
    }
}

impl<B: Clone> From<&B> for Binding<B> {
    fn from(buffer: &B) -> Binding<B> {
        buffer.clone().into()
    }
}

impl<B: DriverBuffer> Binding<B> {
    /// Bytes the kernel sees.
    pub fn bound_bytes(&self) -> u64 {
        bound_len(&self.buffer, self.window)
    }
}

/// Bytes a kernel sees of `buffer` bound through `window`.
fn bound_len<B: DriverBuffer>(buffer: &B, window: Option<Window>) -> u64 {
    window.map_or_else(|| buffer.byte_size(), |w| w.len)
}

/// A strided input view: `shape` and `strides` in elements (0 broadcasts, negative
/// strides allowed), starting `offset` elements into `buffer` (into its window when
/// it has one). `B` is the driver's buffer type (wgpu's by default).
#[derive(Debug)]
pub struct Strided<'a, B = wgpu::Buffer> {
    /// The buffer.
    pub buffer: &'a B,
    /// The part of `buffer` bound (`None`: all of it); `offset` counts from its start.
    pub window: Option<Window>,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: &'a [usize],
    /// Strides in elements.
    pub strides: &'a [isize],
    /// Offset of element `[0, 0, ...]` in elements.
    pub offset: usize,
}

/// A contiguous row-major output starting at element 0 of `buffer` (of its window
/// when it has one).
#[derive(Debug)]
pub struct Contig<'a, B = wgpu::Buffer> {
    /// The buffer (bytes past the output are left as they were).
    pub buffer: &'a B,
    /// The part of `buffer` bound (`None`: all of it).
    pub window: Option<Window>,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: &'a [usize],
}

// Copy without requiring `B: Copy` (the views hold references).
impl<B> Clone for Strided<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B> Copy for Strided<'_, B> {}
impl<B> Clone for Contig<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B> Copy for Contig<'_, B> {}

impl<B: PartialEq> Contig<'_, B> {
    pub(crate) fn numel(&self) -> usize {
        crate::layout::numel(self.shape)
    }
    /// Whether `x` is bound to the same bytes.
    pub(crate) fn same_binding(&self, x: &Strided<B>) -> bool {
        self.buffer == x.buffer && self.window == x.window
    }
}

/// `binding()` and `bytes()` of the view types: their buffer, through their window.
macro_rules! bound_views {
    ($($view:ident),*) => {$(
        impl<B: DriverBuffer> $view<'_, B> {
            /// What a dispatch binds for this view.
            pub(crate) fn binding(&self) -> Binding<B> {
                Binding {
                    buffer: self.buffer.clone(),
                    window: self.window,
                }
            }
            /// Bytes the kernel sees.
            pub(crate) fn bytes(&self) -> u64 {
                bound_len(self.buffer, self.window)
            }
        }
    )*};
}
bound_views!(Contig, Strided);

/// One recorded launch.
pub struct Dispatch<D: Driver> {
    /// The compiled kernel.
    pub pipe: Arc<D::Pipeline>,
    /// Bindings 1.. (outputs, then inputs); `None` past the last.
    pub buffers: Bound<D>,
    /// The parameter words (binding 0).
    pub params: Vec<u32>,
    /// Workgroups in x, y, z.
    pub groups: [u32; 3],
}

/// Buffers bound at 1.. by one dispatch: the library's kernels use up to 4, users'
/// kernels up to [`crate::MAX_USER_BUFFERS`].
pub type Bound<D> = [Option<Binding<<D as Driver>::Buffer>>; crate::MAX_USER_BUFFERS];

/// A timestamp written between dispatches: before dispatch `at` (or after the last).
pub struct Stamp<D: Driver> {
    /// Dispatches recorded before it.
    pub at: usize,
    /// Where it is written.
    pub set: D::Timestamps,
    /// Its index in `set`.
    pub index: u32,
}

/// Recorded dispatches (and timestamps between them); nothing runs until
/// [`Kernels::submit`] (or wgpu's [`Kernels::encode`]).
pub struct Batch<D: Driver = Wgpu> {
    /// The launches, in order.
    pub dispatches: Vec<Dispatch<D>>,
    /// Timestamps between them.
    pub stamps: Vec<Stamp<D>>,
}

impl<D: Driver> Default for Batch<D> {
    fn default() -> Self {
        Batch {
            dispatches: Vec::new(),
            stamps: Vec::new(),
        }
    }
}

impl<D: Driver> Batch<D> {
    /// New empty batch.
    pub fn new() -> Self {
        Self::default()
    }
    /// Number of recorded dispatches.
    pub fn len(&self) -> usize {
        self.dispatches.len()
    }
    /// True if nothing was recorded (no dispatch and no timestamp).
    pub fn is_empty(&self) -> bool {
        self.dispatches.is_empty() && self.stamps.is_empty()
    }
    /// Drops the dispatches recorded after the first `dispatches` (and the
    /// timestamps after them).
    pub fn truncate(&mut self, dispatches: usize) {
        self.dispatches.truncate(dispatches);
        self.stamps.retain(|s| s.at <= dispatches);
    }
    /// Writes GPU timestamp `index` of `set` after the dispatches recorded so far
    /// and before later ones, in the same submit: like a CUDA event, it measures the
    /// GPU work between two stamps without a round trip to the host. On wgpu it
    /// needs `Features::TIMESTAMP_QUERY_INSIDE_ENCODERS` (else the submit returns `Err`).
    pub fn write_timestamp(&mut self, set: &D::Timestamps, index: u32) {
        self.stamps.push(Stamp {
            at: self.dispatches.len(),
            set: set.clone(),
            index,
        });
    }
}

pub(crate) struct Inner<D: Driver> {
    pub(crate) driver: D,
    pub(crate) caps: Caps,
    pub(crate) target: Target,
    pub(crate) pipelines: Mutex<PipeCache<D>>,
    /// Pipelines of users' modules (see [`Kernels::user_pipeline`]).
    pub(crate) user_pipes: Mutex<FxMap<crate::user::UserKey, crate::user::UserEntry<D>>>,
    /// Pipelines of fused kernels (see [`Kernels::fused`]).
    pub(crate) fused_pipes: Mutex<FxMap<crate::fused::FusedKey, Arc<D::Pipeline>>>,
    /// Pipelines of the f64 kernels, by entry point and prelude (see `f64.rs`).
    pub(crate) f64_pipes: Mutex<FxMap<String, Arc<D::Pipeline>>>,
    /// Scratch buffers kept between calls: 0 and 1 for multi-pass reductions (a
    /// dispatch cannot read and write one buffer, so a pass reading one writes the
    /// other), 2 and 3 for sorting's (key, index) pairs. Large allocations cost
    /// milliseconds on some drivers (dedicated Vulkan allocations), more than a sort.
    scratch: Mutex<[Option<D::Buffer>; 4]>,
    /// Bound in place of an input that aliases the output.
    pub(crate) dummy: D::Buffer,
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

/// rustc's FxHash: the pipeline and bind-group lookups run per dispatch and their
/// keys are small; SipHash's DoS resistance buys nothing here.
pub(crate) type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;

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
                user_pipes: Mutex::new(FxMap::default()),
                fused_pipes: Mutex::new(FxMap::default()),
                f64_pipes: Mutex::new(FxMap::default()),
                scratch: Mutex::new(Default::default()),
                dummy,
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
    /// `SHADER_F64`).
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

    /// The alignment of a [`Window`]'s start (the device's
    /// `min_storage_buffer_offset_alignment`).
    pub fn window_align(&self) -> u64 {
        self.inner.caps.offset_align.max(16) as u64
    }

    /// A binding a dispatch may use: at most `max_storage_buffer_binding_size`
    /// bytes (a larger buffer is bound through a [`Window`]), a window aligned and
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
    /// through [`Window`]s). Natively an allocation the device refuses is
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
        let size = buffer.byte_size();
        let end = byte_offset
            .checked_add(byte_len)
            .filter(|e| *e <= size)
            .ok_or_else(|| {
                Error::Shape(format!(
                    "read of {byte_len} bytes at {byte_offset} past the end of a {size}-byte buffer"
                ))
            })?;
        let start = byte_offset & !3;
        let end4 = end.div_ceil(4) * 4;
        let mut bytes = self.inner.driver.read(buffer, start, end4 - start).await?;
        let s = (byte_offset - start) as usize;
        bytes.truncate(s + byte_len as usize);
        bytes.drain(..s);
        Ok(bytes)
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
        crate::user::validate_wgsl(label, source, entry)?;
        self.inner
            .driver
            .compile(label, source, entry, buffers, constants, trusted)
    }

    /// Number of cached pipelines.
    pub fn pipeline_count(&self) -> usize {
        self.inner.pipelines.lock().unwrap().map.len()
    }

    /// Scratch buffer `which` (0 to 3, see `Inner::scratch`) of at least `bytes` bytes.
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
    /// recorded keeps its own references).
    pub fn clear_scratch(&self) {
        *self.inner.scratch.lock().unwrap() = Default::default();
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
        });
        Ok(())
    }

    /// Submits a batch: its dispatches run in order, each seeing what earlier ones
    /// wrote (on wgpu: one compute pass per run between timestamps, one submit).
    pub fn submit(&self, batch: Batch<D>) -> Result<()> {
        self.inner.driver.submit(batch)
    }
}
