//! Device setup, buffers, readback, the pipeline cache and batch submission.

use crate::compose::{ModuleSpec, Target, compose};
use crate::dtype::DType;
use crate::{Error, Result};
use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};

/// What the device can do, read once from the adapter.
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
    /// Backend of the adapter.
    pub backend: wgpu::Backend,
    /// Adapter name.
    pub adapter_name: String,
    /// Adapter type.
    pub device_type: wgpu::DeviceType,
}

/// How [`Kernels::request`] picks and opens an adapter.
#[derive(Clone, Debug)]
pub struct RequestOptions {
    /// Power preference (discrete vs integrated GPU).
    pub power: wgpu::PowerPreference,
    /// Backends to consider; default from `WGPU_BACKEND`, else all.
    pub backends: wgpu::Backends,
    /// Substring of the adapter name to require (case-insensitive); default from
    /// `WGPU_ADAPTER_NAME`.
    pub adapter_name: Option<String>,
    /// Use the workgroup-memory reductions even when subgroups are available (to test
    /// the path browsers take).
    pub force_fallback_reductions: bool,
    /// Convert f16 in software even where the hardware conversions would do (the
    /// path browsers take); default from `WMX_SOFTWARE_F16=1`.
    pub software_f16: bool,
    /// Use cooperative matrices (tensor cores) for f16 matmul where the adapter has
    /// them (wgpu's experimental feature, probed at open); default on, off with
    /// `WMX_COOPERATIVE_MATRIX=0`.
    pub cooperative_matrix: bool,
}

impl Default for RequestOptions {
    fn default() -> Self {
        RequestOptions {
            power: wgpu::PowerPreference::HighPerformance,
            backends: wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all()),
            adapter_name: std::env::var("WGPU_ADAPTER_NAME")
                .ok()
                .filter(|s| !s.is_empty()),
            force_fallback_reductions: false,
            software_f16: std::env::var("WMX_SOFTWARE_F16").as_deref() == Ok("1"),
            cooperative_matrix: std::env::var("WMX_COOPERATIVE_MATRIX").as_deref() != Ok("0"),
        }
    }
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
pub(crate) struct Binding {
    pub(crate) buffer: wgpu::Buffer,
    pub(crate) window: Option<Window>,
}

impl Binding {
    /// Bytes the kernel sees.
    pub(crate) fn len(&self) -> u64 {
        bound_len(&self.buffer, self.window)
    }
}

/// Bytes a kernel sees of `buffer` bound through `window`.
fn bound_len(buffer: &wgpu::Buffer, window: Option<Window>) -> u64 {
    window.map_or(buffer.size(), |w| w.len)
}

impl From<wgpu::Buffer> for Binding {
    fn from(buffer: wgpu::Buffer) -> Binding {
        Binding {
            buffer,
            window: None,
        }
    }
}

impl From<&wgpu::Buffer> for Binding {
    fn from(buffer: &wgpu::Buffer) -> Binding {
        buffer.clone().into()
    }
}

/// A strided input view: `shape` and `strides` in elements (0 broadcasts, negative
/// strides allowed), starting `offset` elements into `buffer` (into its window when
/// it has one).
#[derive(Clone, Copy, Debug)]
pub struct Strided<'a> {
    /// The buffer.
    pub buffer: &'a wgpu::Buffer,
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
#[derive(Clone, Copy, Debug)]
pub struct Contig<'a> {
    /// The buffer (bytes past the output are left as they were).
    pub buffer: &'a wgpu::Buffer,
    /// The part of `buffer` bound (`None`: all of it).
    pub window: Option<Window>,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: &'a [usize],
}

impl Contig<'_> {
    pub(crate) fn numel(&self) -> usize {
        crate::layout::numel(self.shape)
    }
    /// Whether `x` is bound to the same bytes.
    pub(crate) fn same_binding(&self, x: &Strided) -> bool {
        self.buffer == x.buffer && self.window == x.window
    }
}

/// `binding()` and `bytes()` of the view types: their buffer, through their window.
macro_rules! bound_views {
    ($($view:ident),*) => {$(
        impl $view<'_> {
            /// What a dispatch binds for this view.
            pub(crate) fn binding(&self) -> Binding {
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

pub(crate) struct Pipe {
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) layout: wgpu::BindGroupLayout,
}

pub(crate) struct Dispatch {
    pub(crate) pipe: Arc<Pipe>,
    /// Bindings 1.. (outputs, then inputs); `None` past the last.
    pub(crate) buffers: Bound,
    pub(crate) params: Vec<u32>,
    pub(crate) groups: [u32; 3],
}

/// Buffers bound at 1.. by one dispatch: the library's kernels use up to 4, users'
/// kernels up to [`crate::MAX_USER_BUFFERS`].
pub(crate) type Bound = [Option<Binding>; crate::MAX_USER_BUFFERS];

/// A timestamp written between dispatches: before dispatch `at` (or after the last).
struct Stamp {
    at: usize,
    set: wgpu::QuerySet,
    index: u32,
}

/// Recorded dispatches (and timestamps between them); nothing runs until
/// [`Kernels::submit`] or [`Kernels::encode`].
#[derive(Default)]
pub struct Batch {
    pub(crate) dispatches: Vec<Dispatch>,
    stamps: Vec<Stamp>,
}

impl Batch {
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
    /// GPU work between two stamps without a round trip to the host. Needs
    /// `Features::TIMESTAMP_QUERY_INSIDE_ENCODERS` (else the submit returns `Err`).
    pub fn write_timestamp(&mut self, set: &wgpu::QuerySet, index: u32) {
        self.stamps.push(Stamp {
            at: self.dispatches.len(),
            set: set.clone(),
            index,
        });
    }
    /// Records the batch into `enc`: one compute pass per run of dispatches between
    /// timestamps; `bind(i)` gives dispatch `i`'s bind group and parameter offset.
    fn encode_passes<'b>(
        &self,
        enc: &mut wgpu::CommandEncoder,
        mut bind: impl FnMut(usize) -> (&'b wgpu::BindGroup, u32),
    ) {
        let n = self.dispatches.len();
        let mut stamps = self.stamps.iter().peekable();
        let mut i = 0;
        loop {
            while let Some(s) = stamps.next_if(|s| s.at <= i) {
                enc.write_timestamp(&s.set, s.index);
            }
            if i == n {
                break;
            }
            let end = stamps.peek().map_or(n, |s| s.at);
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("wmx-kernels"),
                timestamp_writes: None,
            });
            // Pipeline and bind group are set only when they change (repeated launches
            // of one op on the same buffers bind once).
            let mut last_pipe: Option<&Arc<Pipe>> = None;
            let mut last_bind: Option<(&wgpu::BindGroup, u32)> = None;
            for (j, d) in self.dispatches[i..end].iter().enumerate() {
                let (bg, off) = bind(i + j);
                if !last_pipe.is_some_and(|p| Arc::ptr_eq(p, &d.pipe)) {
                    pass.set_pipeline(&d.pipe.pipeline);
                    last_pipe = Some(&d.pipe);
                    last_bind = None;
                }
                if last_bind != Some((bg, off)) {
                    pass.set_bind_group(0, bg, &[off]);
                    last_bind = Some((bg, off));
                }
                pass.dispatch_workgroups(d.groups[0], d.groups[1], d.groups[2]);
            }
            i = end;
        }
    }
}

pub(crate) struct Inner {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) caps: Caps,
    pub(crate) limits: wgpu::Limits,
    pub(crate) target: Target,
    pipelines: Mutex<PipeCache>,
    /// Bind group layouts by (outputs, inputs).
    layouts: Mutex<HashMap<(usize, usize), wgpu::BindGroupLayout>>,
    /// Pipelines of users' modules (see [`Kernels::user_pipeline`]).
    pub(crate) user_pipes: Mutex<FxMap<crate::user::UserKey, crate::user::UserEntry>>,
    /// Pipelines of fused kernels (see [`Kernels::fused`]).
    pub(crate) fused_pipes: Mutex<FxMap<crate::fused::FusedKey, Arc<Pipe>>>,
    /// Pipelines of the f64 kernels, by entry point and prelude (see `f64.rs`).
    pub(crate) f64_pipes: Mutex<FxMap<String, Arc<Pipe>>>,
    /// Scratch buffers kept between calls: 0 and 1 for multi-pass reductions (a
    /// dispatch cannot read and write one buffer, so a pass reading one writes the
    /// other), 2 and 3 for sorting's (key, index) pairs. Large allocations cost
    /// milliseconds on some drivers (dedicated Vulkan allocations), more than a sort.
    scratch: Mutex<[Option<wgpu::Buffer>; 4]>,
    /// Bound in place of an input that aliases the output.
    pub(crate) dummy: wgpu::Buffer,
    /// Parameters buffer and bind groups reused by [`Kernels::submit`].
    submit: Mutex<SubmitState>,
}

/// Bind groups kept by [`Kernels::submit`] (dropped wholesale past this many).
const BIND_GROUP_CACHE: usize = 2048;
/// Smallest parameter binding (bytes); larger parameter lists bind the next power of two.
const PARAM_BINDING: usize = 256;

/// A bind group is fixed by its layout, the parameter binding's size (the offset is
/// dynamic) and the buffers bound 1.. (output, inputs).
#[derive(Clone, PartialEq, Eq, Hash)]
struct BindKey {
    layout: wgpu::BindGroupLayout,
    params_size: u32,
    buffers: Bound,
}

/// State of the submit path. Parameter lists live in one buffer, each written once
/// and found again by content (repeated launches of the same ops write nothing, so
/// their submits carry no copy); new lists are appended and written with one
/// `Queue::write_buffer` per submit, which wgpu orders after the work of earlier
/// submits and before this one. When the buffer is full it starts over from offset
/// 0 (or grows). Bind groups point into it with a dynamic offset, so they depend
/// only on the bound buffers.
#[derive(Default)]
struct SubmitState {
    params: Option<wgpu::Buffer>,
    /// Byte offset of each parameter list written into `params`.
    slots: FxMap<Vec<u32>, u32>,
    /// Bytes of `params` in use.
    used: usize,
    bind_groups: FxMap<BindKey, wgpu::BindGroup>,
    /// Bytes to write this submit (from offset `used` at its start).
    bytes: Vec<u8>,
    offsets: Vec<u32>,
}

/// Compiled pipelines by spec, plus the last few used (compared before hashing:
/// consecutive dispatches mostly repeat a handful of specs).
#[derive(Default)]
struct PipeCache {
    map: FxMap<ModuleSpec, Arc<Pipe>>,
    recent: [Option<(ModuleSpec, Arc<Pipe>)>; 4],
    next: usize,
}

impl PipeCache {
    fn get(&mut self, spec: &ModuleSpec) -> Option<Arc<Pipe>> {
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

/// The kernel library on one device. Cheap to clone (shared inside).
#[derive(Clone)]
pub struct Kernels {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernels")
            .field("caps", &self.inner.caps)
            .finish()
    }
}

const WANTED_FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::SHADER_F64)
    .union(wgpu::Features::SUBGROUP)
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);

impl Kernels {
    /// Picks an adapter and opens a device with the adapter's own limits and the
    /// features `SHADER_F16`, `SUBGROUP`, `TIMESTAMP_QUERY(+_INSIDE_ENCODERS)` where
    /// available.
    pub async fn request(opts: &RequestOptions) -> Result<Kernels> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: opts.backends,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapter = Self::pick_adapter(&instance, opts).await?;
        let mut features = adapter.features() & WANTED_FEATURES;
        let coop = coop_subgroup(&adapter, opts.cooperative_matrix) > 0;
        if coop {
            features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("wmx-kernels"),
                required_features: features,
                required_limits: adapter.limits(),
                // SAFETY: the experimental feature is requested only where the
                // adapter lists the one configuration the kernel uses, and `open`
                // keeps it only if a probe product comes out exact.
                experimental_features: if coop {
                    unsafe { wgpu::ExperimentalFeatures::enabled() }
                } else {
                    wgpu::ExperimentalFeatures::disabled()
                },
                ..Default::default()
            })
            .await
            .map_err(|e| Error::RequestDevice(e.to_string()))?;
        let k = Self::open(&adapter, device, queue, !opts.software_f16)?;
        if opts.force_fallback_reductions {
            // Only reachable before the Arc is shared.
            let mut inner =
                Arc::try_unwrap(k.inner).map_err(|_| Error::RequestDevice("shared".into()))?;
            inner.target.subgroups = false;
            return Ok(Kernels {
                inner: Arc::new(inner),
            });
        }
        Ok(k)
    }

    #[cfg(not(target_arch = "wasm32"))]
    async fn pick_adapter(
        instance: &wgpu::Instance,
        opts: &RequestOptions,
    ) -> Result<wgpu::Adapter> {
        let mut adapters = instance.enumerate_adapters(opts.backends).await;
        let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
        if let Some(want) = &opts.adapter_name {
            let want = want.to_lowercase();
            adapters.retain(|a| a.get_info().name.to_lowercase().contains(&want));
        }
        let rank = |a: &wgpu::Adapter| {
            use wgpu::DeviceType::*;
            let t = a.get_info().device_type;
            let order: [wgpu::DeviceType; 5] = match opts.power {
                wgpu::PowerPreference::LowPower => {
                    [IntegratedGpu, DiscreteGpu, VirtualGpu, Other, Cpu]
                }
                _ => [DiscreteGpu, IntegratedGpu, VirtualGpu, Other, Cpu],
            };
            order.iter().position(|x| *x == t).unwrap_or(5)
        };
        adapters.sort_by_key(rank);
        adapters.into_iter().next().ok_or_else(|| {
            Error::NoAdapter(format!(
                "backends {:?}, name filter {:?}; adapters seen: {:?}",
                opts.backends, opts.adapter_name, names
            ))
        })
    }

    #[cfg(target_arch = "wasm32")]
    async fn pick_adapter(
        instance: &wgpu::Instance,
        opts: &RequestOptions,
    ) -> Result<wgpu::Adapter> {
        instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: opts.power,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(|e| Error::NoAdapter(e.to_string()))
    }

    /// Wraps a device the caller opened. Capabilities are read from the device's
    /// features and limits (what was actually granted) and the adapter's info.
    /// Where the device has `SHADER_F16` (native, not the browser), f16 values are
    /// converted by the hardware if a probe finds its conversions exact (see
    /// [`Target::f16`]); `WMX_SOFTWARE_F16=1` keeps the software conversions.
    pub fn from_device(
        adapter: &wgpu::Adapter,
        device: wgpu::Device,
        queue: wgpu::Queue,
    ) -> Result<Kernels> {
        let probe = std::env::var("WMX_SOFTWARE_F16").as_deref() != Ok("1");
        Self::open(adapter, device, queue, probe)
    }

    fn open(
        adapter: &wgpu::Adapter,
        device: wgpu::Device,
        queue: wgpu::Queue,
        probe_f16: bool,
    ) -> Result<Kernels> {
        let info = adapter.get_info();
        let features = device.features();
        let limits = device.limits();
        let subgroups = features.contains(wgpu::Features::SUBGROUP);
        let caps = Caps {
            f16: features.contains(wgpu::Features::SHADER_F16),
            f64: features.contains(wgpu::Features::SHADER_F64),
            subgroups,
            subgroup_size: if subgroups { info.subgroup_min_size } else { 0 },
            timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            max_storage_binding: limits.max_storage_buffer_binding_size,
            max_buffer: limits.max_buffer_size,
            max_workgroups_per_dim: limits.max_compute_workgroups_per_dimension,
            max_invocations: limits.max_compute_invocations_per_workgroup,
            backend: info.backend,
            adapter_name: info.name.clone(),
            device_type: info.device_type,
        };
        let max_wg = limits
            .max_compute_invocations_per_workgroup
            .min(limits.max_compute_workgroup_size_x)
            .min(256);
        // Largest power of two not above the limit (the tree reductions halve it).
        let wg = 1u32 << (31 - max_wg.max(32).leading_zeros());
        if limits.max_storage_buffers_per_shader_stage < 5 {
            return Err(Error::RequestDevice(format!(
                "need 5 storage buffers per stage, device allows {}",
                limits.max_storage_buffers_per_shader_stage
            )));
        }
        let target = Target {
            subgroups,
            subgroup_directive: info.backend == wgpu::Backend::BrowserWebGpu,
            workgroup_size: wg,
            f16: false,
            coop: 0,
        };
        let coop_sg = if features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) {
            coop_subgroup(adapter, true)
        } else {
            0
        };
        let dummy = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wmx-kernels dummy"),
            size: 16,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let caps_f16 = caps.f16;
        let backend = caps.backend;
        let k = Kernels {
            inner: Arc::new(Inner {
                device,
                queue,
                caps,
                limits,
                target,
                pipelines: Mutex::new(PipeCache::default()),
                layouts: Mutex::new(HashMap::new()),
                user_pipes: Mutex::new(FxMap::default()),
                fused_pipes: Mutex::new(FxMap::default()),
                f64_pipes: Mutex::new(FxMap::default()),
                scratch: Mutex::new([None, None, None, None]),
                dummy,
                submit: Mutex::new(SubmitState::default()),
            }),
        };
        #[cfg(not(target_arch = "wasm32"))]
        {
            let f16_hw =
                probe_f16 && caps_f16 && backend != wgpu::Backend::BrowserWebGpu && k.probe_f16();
            let with = |k: Kernels, f: &dyn Fn(&mut Target)| -> Result<Kernels> {
                let mut inner =
                    Arc::try_unwrap(k.inner).map_err(|_| Error::RequestDevice("shared".into()))?;
                f(&mut inner.target);
                Ok(Kernels {
                    inner: Arc::new(inner),
                })
            };
            let mut k = with(k, &|t| t.f16 = f16_hw)?;
            if coop_sg > 0 {
                k = with(k, &|t| t.coop = coop_sg)?;
                if !k.probe_coop() {
                    k.inner.pipelines.lock().unwrap().map.clear();
                    k = with(k, &|t| t.coop = 0)?;
                }
            }
            Ok(k)
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = (probe_f16, caps_f16, backend, coop_sg);
            Ok(k)
        }
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.inner.device
    }
    /// The queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.inner.queue
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
        self.inner
            .limits
            .min_storage_buffer_offset_alignment
            .max(16) as u64
    }

    /// A binding a dispatch may use: at most `max_storage_buffer_binding_size`
    /// bytes (a larger buffer is bound through a [`Window`]), a window aligned and
    /// inside its buffer.
    fn check_binding(&self, b: &Binding) -> Result<()> {
        if let Some(w) = b.window {
            let end = w.start.checked_add(w.len);
            if !w.start.is_multiple_of(self.window_align())
                || !w.len.is_multiple_of(4)
                || w.len == 0
                || end.is_none_or(|e| e > b.buffer.size())
            {
                return Err(Error::Shape(format!(
                    "window {w:?} of a {}-byte buffer: the start must be a multiple of {}, \
                     the length a nonzero multiple of 4, the range inside the buffer",
                    b.buffer.size(),
                    self.window_align()
                )));
            }
        }
        let limit = self.inner.caps.max_storage_binding;
        if b.len() > limit {
            return Err(Error::BufferTooLarge {
                bytes: b.len(),
                limit,
                what: "max_storage_buffer_binding_size (bind a Window of larger buffers)",
            });
        }
        Ok(())
    }

    /// Creates a `STORAGE | COPY_SRC | COPY_DST` buffer. The size is rounded up to a
    /// multiple of 16 bytes (at least 16) so the vec4 kernels can read whole vectors;
    /// sizes over the device's buffer limit give [`Error::BufferTooLarge`] (a buffer
    /// larger than the binding limit is bound through [`Window`]s).
    /// Natively an allocation the device refuses is [`Error::OutOfMemory`] here,
    /// never an invalid buffer handed on (in the browser the error arrives later).
    pub fn create_buffer(&self, bytes: u64, label: Option<&str>) -> Result<wgpu::Buffer> {
        let size = bytes.max(16).div_ceil(16) * 16;
        self.check_size(size)?;
        #[cfg(not(target_arch = "wasm32"))]
        let scope = self
            .inner
            .device
            .push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let b = self.inner.device.create_buffer(&wgpu::BufferDescriptor {
            label,
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        #[cfg(not(target_arch = "wasm32"))]
        if pollster::block_on(scope.pop()).is_some() {
            b.destroy();
            return Err(Error::OutOfMemory { bytes: size });
        }
        Ok(b)
    }

    /// Creates a buffer holding `bytes` (host layout = device layout, no conversion).
    pub fn upload(&self, bytes: &[u8]) -> Result<wgpu::Buffer> {
        let size = (bytes.len() as u64).max(16).div_ceil(16) * 16;
        self.check_size(size)?;
        let buf = self.inner.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wmx-kernels upload"),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: true,
        });
        {
            let mut view = buf
                .slice(..)
                .get_mapped_range_mut()
                .map_err(|e| Error::Map(e.to_string()))?;
            view.slice(..bytes.len()).copy_from_slice(bytes);
        }
        buf.unmap();
        Ok(buf)
    }

    /// Reads `byte_len` bytes at `byte_offset` (any alignment): copies the enclosing
    /// 4-byte-aligned range into a staging buffer, maps it and slices. On native the
    /// device is polled; in the browser the map callback is awaited.
    pub async fn read(
        &self,
        buffer: &wgpu::Buffer,
        byte_offset: u64,
        byte_len: u64,
    ) -> Result<Vec<u8>> {
        if byte_len == 0 {
            return Ok(Vec::new());
        }
        let end = byte_offset
            .checked_add(byte_len)
            .filter(|e| *e <= buffer.size())
            .ok_or_else(|| {
                Error::Shape(format!(
                    "read of {byte_len} bytes at {byte_offset} past the end of a {}-byte buffer",
                    buffer.size()
                ))
            })?;
        let start = byte_offset & !3;
        let end4 = end.div_ceil(4) * 4;
        let size = end4 - start;
        let dev = &self.inner.device;
        let staging = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wmx-kernels readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("wmx-kernels read"),
        });
        enc.copy_buffer_to_buffer(buffer, start, &staging, 0, size);
        self.inner.queue.submit([enc.finish()]);
        let (tx, rx) = futures::channel::oneshot::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        #[cfg(not(target_arch = "wasm32"))]
        dev.poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Map(e.to_string()))?;
        rx.await
            .map_err(|_| Error::Map("map callback dropped".into()))?
            .map_err(|e| Error::Map(e.to_string()))?;
        let out = {
            let view = staging
                .slice(..)
                .get_mapped_range()
                .map_err(|e| Error::Map(e.to_string()))?;
            let s = (byte_offset - start) as usize;
            view[s..s + byte_len as usize].to_vec()
        };
        staging.unmap();
        Ok(out)
    }

    /// Blocking [`Kernels::read`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_blocking(
        &self,
        buffer: &wgpu::Buffer,
        byte_offset: u64,
        byte_len: u64,
    ) -> Result<Vec<u8>> {
        pollster::block_on(self.read(buffer, byte_offset, byte_len))
    }

    /// Waits until all submitted work has finished.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn poll_wait(&self) {
        let _ = self.inner.device.poll(wgpu::PollType::wait_indefinitely());
    }

    /// Binding 0 the parameters, then `outputs` writable buffers, then `inputs`
    /// read-only ones.
    pub(crate) fn layout(&self, outputs: usize, inputs: usize) -> wgpu::BindGroupLayout {
        let mut layouts = self.inner.layouts.lock().unwrap();
        layouts
            .entry((outputs, inputs))
            .or_insert_with(|| {
                // Binding 0 (the parameters) takes a dynamic offset, so one bind group
                // serves every dispatch with the same buffers.
                let entry = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
                    binding,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Storage { read_only },
                        has_dynamic_offset: binding == 0,
                        min_binding_size: None,
                    },
                    count: None,
                };
                let mut entries = vec![entry(0, true)];
                for i in 0..outputs + inputs {
                    entries.push(entry(1 + i as u32, i >= outputs));
                }
                self.inner
                    .device
                    .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: Some("wmx-kernels"),
                        entries: &entries,
                    })
            })
            .clone()
    }

    /// The cached pipeline for `spec`, composing and compiling it on first use.
    pub(crate) fn pipeline(&self, spec: &ModuleSpec) -> Result<Arc<Pipe>> {
        if let Some(p) = self.inner.pipelines.lock().unwrap().get(spec) {
            return Ok(p);
        }
        let src = compose(spec)?;
        let dev = &self.inner.device;
        let label = format!(
            "{:?}:{}:{:?}->{}:{:?}",
            spec.family, spec.op, spec.inputs, spec.output, spec.variant
        );
        #[cfg(not(target_arch = "wasm32"))]
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        // SAFETY: every kernel bounds its accesses itself: loops stop at the element
        // counts, and the host checks (check_view / check_out) that each view's
        // extreme element offsets lie inside the bound buffers before recording.
        let module = unsafe {
            dev.create_shader_module_trusted(
                wgpu::ShaderModuleDescriptor {
                    label: Some(&label),
                    source: wgpu::ShaderSource::Wgsl(src.into()),
                },
                wgpu::ShaderRuntimeChecks::unchecked(),
            )
        };
        let layout = self.layout(1, spec.input_bindings());
        let pl = dev.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(&label),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let constants = spec.constants();
        let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&label),
            layout: Some(&pl),
            module: &module,
            entry_point: Some(spec.entry_point()),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &constants,
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Validation(format!("{label}: {e}")));
        }
        let p = Arc::new(Pipe { pipeline, layout });
        self.inner
            .pipelines
            .lock()
            .unwrap()
            .map
            .insert(spec.clone(), p.clone());
        Ok(p)
    }

    /// Number of cached pipelines.
    pub fn pipeline_count(&self) -> usize {
        self.inner.pipelines.lock().unwrap().map.len()
    }

    /// Scratch buffer `which` (0 to 3, see `Inner::scratch`) of at least `bytes` bytes.
    pub(crate) fn scratch(&self, which: usize, bytes: u64) -> Result<wgpu::Buffer> {
        let mut s = self.inner.scratch.lock().unwrap();
        if let Some(b) = &s[which] {
            if b.size() >= bytes {
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
        b: &mut Batch,
        spec: &ModuleSpec,
        buffers: impl IntoIterator<Item = impl Into<Binding>>,
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
        b: &mut Batch,
        pipe: Arc<Pipe>,
        buffers: impl IntoIterator<Item = impl Into<Binding>>,
        params: Vec<u32>,
        groups: u64,
    ) -> Result<()> {
        let groups = self.grid(groups)?;
        let mut bound: Bound = Default::default();
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

    /// Encodes and submits a batch: one compute pass, one submit. Parameter lists
    /// already in the parameters buffer are reused (see `SubmitState`), and bind
    /// groups are reused while the same buffers are bound (the parameters' offset is
    /// dynamic); [`Kernels::clear_bind_groups`] drops them.
    pub fn submit(&self, batch: Batch) -> Result<wgpu::SubmissionIndex> {
        let dev = &self.inner.device;
        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("wmx-kernels"),
        });
        #[cfg(not(target_arch = "wasm32"))]
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        // Held until the submit: a second thread's parameters must not overwrite ours
        // before our commands are queued.
        let mut st = self.inner.submit.lock().unwrap();
        let st = &mut *st;
        if !batch.dispatches.is_empty() {
            let start = self.place_params(st, &batch)?;
            let params = st.params.clone().expect("placed above");
            if !st.bytes.is_empty() {
                self.inner
                    .queue
                    .write_buffer(&params, start as u64, &st.bytes);
            }
            if st.bind_groups.len() > BIND_GROUP_CACHE {
                st.bind_groups.clear();
            }
            // Bind groups first (cached by layout and buffers), then the passes.
            let groups: Vec<wgpu::BindGroup> = batch
                .dispatches
                .iter()
                .map(|d| {
                    let key = BindKey {
                        layout: d.pipe.layout.clone(),
                        params_size: params_binding(d.params.len()) as u32,
                        buffers: d.buffers.clone(),
                    };
                    st.bind_groups
                        .entry(key)
                        .or_insert_with(|| self.bind_group(d, &params))
                        .clone()
                })
                .collect();
            let offsets = &st.offsets;
            batch.encode_passes(&mut enc, |i| (&groups[i], offsets[i]));
        } else {
            batch.encode_passes(&mut enc, |_| unreachable!("no dispatches"));
        }
        let idx = self.inner.queue.submit([enc.finish()]);
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Validation(e.to_string()));
        }
        Ok(idx)
    }

    /// Finds or places every parameter list of `batch` in the parameters buffer:
    /// fills `st.offsets` and `st.bytes` (the new lists, to be written at the
    /// returned byte offset).
    fn place_params(&self, st: &mut SubmitState, batch: &Batch) -> Result<usize> {
        let align = self.inner.limits.min_storage_buffer_offset_alignment.max(4) as usize;
        let cap = st.params.as_ref().map_or(0, |b| b.size() as usize);
        for attempt in 0..2 {
            st.offsets.clear();
            st.bytes.clear();
            let start = st.used;
            let mut end = start;
            let mut fits = true;
            for d in &batch.dispatches {
                if let Some(off) = st.slots.get(d.params.as_slice()) {
                    st.offsets.push(*off);
                    continue;
                }
                let off = end;
                if off + params_binding(d.params.len()) > cap {
                    fits = false;
                    break;
                }
                st.slots.insert(d.params.clone(), off as u32);
                st.offsets.push(off as u32);
                st.bytes.extend_from_slice(bytemuck::cast_slice(&d.params));
                end = (start + st.bytes.len()).div_ceil(align) * align;
                st.bytes.resize(end - start, 0);
            }
            if fits {
                st.used = end;
                return Ok(start);
            }
            // Start over from offset 0: earlier submits' lists may be overwritten (the
            // write runs after their work); this batch's are all rewritten.
            st.slots.clear();
            st.used = 0;
            if attempt == 0 {
                // Does the whole batch fit an empty buffer?
                let need: usize = batch
                    .dispatches
                    .iter()
                    .map(|d| (d.params.len() * 4).div_ceil(align) * align)
                    .sum::<usize>()
                    + 2 * PARAM_BINDING.max(
                        batch
                            .dispatches
                            .iter()
                            .map(|d| params_binding(d.params.len()))
                            .max()
                            .unwrap_or(0),
                    );
                if need <= cap {
                    continue;
                }
                let size = need.next_power_of_two().max(256 * 1024) as u64;
                if size > self.inner.caps.max_storage_binding {
                    return Err(Error::BufferTooLarge {
                        bytes: size,
                        limit: self.inner.caps.max_storage_binding,
                        what: "kernel parameters of one batch",
                    });
                }
                st.params = Some(self.inner.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("wmx-kernels params"),
                    size,
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                }));
                // Bind groups point at the old buffer.
                st.bind_groups.clear();
                return self.place_params(st, batch);
            }
        }
        unreachable!("a batch fits the buffer sized for it")
    }

    /// Drops the bind groups kept by [`Kernels::submit`] (they hold their buffers).
    pub fn clear_bind_groups(&self) {
        self.inner.submit.lock().unwrap().bind_groups.clear();
    }

    /// Drops the scratch buffers kept for reductions and sorting (work already
    /// recorded keeps its own references).
    pub fn clear_scratch(&self) {
        *self.inner.scratch.lock().unwrap() = Default::default();
    }

    /// Parameter offsets (aligned for dynamic offsets) and bytes of a batch; returns
    /// the buffer size needed (0 for an empty batch).
    fn layout_params(&self, batch: &Batch, offsets: &mut Vec<u32>, bytes: &mut Vec<u8>) -> u64 {
        offsets.clear();
        bytes.clear();
        if batch.dispatches.is_empty() {
            return 0;
        }
        let align = self.inner.limits.min_storage_buffer_offset_alignment.max(4) as usize;
        let mut end = 0usize;
        for d in &batch.dispatches {
            let off = bytes.len();
            offsets.push(off as u32);
            bytes.extend_from_slice(bytemuck::cast_slice(&d.params));
            end = end.max(off + params_binding(d.params.len()));
            bytes.resize(bytes.len().div_ceil(align) * align, 0);
        }
        bytes.resize(bytes.len().max(4), 0);
        end.max(bytes.len()) as u64
    }

    fn bind_group(&self, d: &Dispatch, params: &wgpu::Buffer) -> wgpu::BindGroup {
        let mut entries = Vec::with_capacity(5);
        entries.push(wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: params,
                offset: 0,
                size: NonZeroU64::new(params_binding(d.params.len()) as u64),
            }),
        });
        for (i, buf) in d.buffers.iter().flatten().enumerate() {
            let resource = match buf.window {
                None => buf.buffer.as_entire_binding(),
                Some(w) => wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &buf.buffer,
                    offset: w.start,
                    size: NonZeroU64::new(w.len),
                }),
            };
            entries.push(wgpu::BindGroupEntry {
                binding: 1 + i as u32,
                resource,
            });
        }
        self.inner
            .device
            .create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &d.pipe.layout,
                entries: &entries,
            })
    }

    /// Encodes a batch into `encoder` (one compute pass) without submitting, for
    /// callers that add timestamp queries or other commands. The parameters go into a
    /// fresh buffer (the caller decides when the commands run).
    pub fn encode(&self, batch: Batch, encoder: &mut wgpu::CommandEncoder) -> Result<()> {
        let mut offsets = Vec::new();
        let mut bytes = Vec::new();
        let total = self.layout_params(&batch, &mut offsets, &mut bytes);
        if total == 0 {
            batch.encode_passes(encoder, |_| unreachable!("no dispatches"));
            return Ok(());
        }
        let params = self.inner.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wmx-kernels params"),
            size: total.div_ceil(4) * 4,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: true,
        });
        {
            let mut view = params
                .slice(..)
                .get_mapped_range_mut()
                .map_err(|e| Error::Map(e.to_string()))?;
            view.slice(..bytes.len()).copy_from_slice(&bytes);
        }
        params.unmap();
        let groups: Vec<wgpu::BindGroup> = batch
            .dispatches
            .iter()
            .map(|d| self.bind_group(d, &params))
            .collect();
        batch.encode_passes(encoder, |i| (&groups[i], offsets[i]));
        Ok(())
    }

    /// Multiplies small integer f16 matrices (every product and sum exact) with the
    /// cooperative-matrix kernel, plain and through transposed and broadcast views,
    /// and compares with the host; false on any difference or error (an adapter may
    /// accept a configuration and write zeros).
    #[cfg(not(target_arch = "wasm32"))]
    fn probe_coop(&self) -> bool {
        let (m, k, n) = (70usize, 40usize, 72usize);
        let h = |i: usize, salt: usize| ((i * 7 + salt * 3) % 5) as f32 - 2.0;
        let a: Vec<f32> = (0..m * k).map(|i| h(i, 1)).collect();
        let b: Vec<f32> = (0..k * n).map(|i| h(i, 2)).collect();
        let bits = |v: &[f32]| -> Vec<u8> {
            v.iter()
                .flat_map(|x| half::f16::from_f32(*x).to_bits().to_le_bytes())
                .collect()
        };
        let dev = &self.inner.device;
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let run = || -> Result<Vec<u8>> {
            let (ba, bb) = (self.upload(&bits(&a))?, self.upload(&bits(&b))?);
            let out = self.create_buffer((m * n * 2) as u64, Some("coop probe"))?;
            let (sa, sb) = ([m, k], [k, n]);
            let (ta, tb) = ([k as isize, 1], [n as isize, 1]);
            let av = Strided {
                buffer: &ba,
                window: None,
                dtype: DType::F16,
                shape: &sa,
                strides: &ta,
                offset: 0,
            };
            let bv = Strided {
                buffer: &bb,
                window: None,
                dtype: DType::F16,
                shape: &sb,
                strides: &tb,
                offset: 0,
            };
            let so = [m, n];
            let o = Contig {
                buffer: &out,
                window: None,
                dtype: DType::F16,
                shape: &so,
            };
            let mut batch = Batch::new();
            self.matmul(&mut batch, &av, &bv, None, 1.0, 0.0, &o)?;
            self.submit(batch)?;
            self.read_blocking(&out, 0, (m * n * 2) as u64)
        };
        let got = run();
        if pollster::block_on(scope.pop()).is_some() {
            return false;
        }
        let Ok(got) = got else { return false };
        let mut want = Vec::with_capacity(m * n * 2);
        for i in 0..m {
            for j in 0..n {
                let s: f32 = (0..k).map(|kk| a[i * k + kk] * b[kk * n + j]).sum();
                want.extend(half::f16::from_f32(s).to_bits().to_le_bytes());
            }
        }
        got == want
    }

    /// Runs the hardware f16 conversions (`pack2x16float`, `unpack2x16float`, whose
    /// rounding, subnormals and overflow WGSL leaves to the implementation, as the
    /// kernels write them) on every f16 value, every f16 midpoint and its f32 neighbours, the
    /// overflow threshold and NaN/inf, and compares with correctly rounded results.
    /// False on any difference (or any error): the kernels then convert by hand.
    #[cfg(not(target_arch = "wasm32"))]
    fn probe_f16(&self) -> bool {
        let (inputs, want) = f16_probe_cases();
        let dev = &self.inner.device;
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let src = "\
            @group(0) @binding(0) var<storage, read> I: array<u32>;\n\
            @group(0) @binding(1) var<storage, read_write> O: array<u32>;\n\
            fn ex_f16(w: u32, j: u32) -> f32 { let h = unpack2x16float(w); return select(h.x, h.y, j != 0u); }\n\
            fn st_f16(v: f32) -> u32 { return pack2x16float(vec2<f32>(v, 0.0)); }\n\
            @compute @workgroup_size(64)\n\
            fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n\
                let i = g.x + g.y * 4194240u;\n\
                if (i < 32768u) {\n\
                    // Every f16 bit pattern, two per word, to f32.\n\
                    O[2u * i] = bitcast<u32>(ex_f16(I[i], 0u));\n\
                    O[2u * i + 1u] = bitcast<u32>(ex_f16(I[i], 1u));\n\
                } else if (i < arrayLength(&I)) {\n\
                    O[32768u + i] = st_f16(bitcast<f32>(I[i]));\n\
                }\n\
            }\n";
        let module = dev.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("wmx-kernels f16 probe"),
            source: wgpu::ShaderSource::Wgsl(src.into()),
        });
        let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("wmx-kernels f16 probe"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        if pollster::block_on(scope.pop()).is_some() {
            return false;
        }
        let Ok(input) = self.upload(bytemuck::cast_slice(&inputs)) else {
            return false;
        };
        let out_words = 32768 + inputs.len();
        // Padded: arrayLength(&I) counts the upload's padding words too.
        let Ok(out) = self.create_buffer(out_words as u64 * 4 + 16, Some("f16 probe")) else {
            return false;
        };
        let bg = dev.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: input.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: out.as_entire_binding(),
                },
            ],
        });
        let mut enc = dev.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bg, &[]);
            let Ok(groups) = self.grid((inputs.len() as u64).div_ceil(64)) else {
                return false;
            };
            // The shader's row pitch (4194240 = 65535 * 64) assumes 65535 per row.
            if groups[1] > 1 && groups[0] != 65535 {
                return false;
            }
            pass.dispatch_workgroups(groups[0], groups[1], 1);
        }
        self.inner.queue.submit([enc.finish()]);
        let Ok(bytes) = self.read_blocking(&out, 0, out_words as u64 * 4) else {
            return false;
        };
        let got: &[u32] = bytemuck::cast_slice(&bytes);
        let nan32 = |w: u32| (w & 0x7fff_ffff) > 0x7f80_0000;
        let nan16 = |w: u32| (w & 0x7fff) > 0x7c00;
        for h in 0..65536usize {
            let w = want[h];
            if got[h] != w && !(nan32(w) && nan32(got[h])) {
                return false;
            }
        }
        for i in 32768..inputs.len() {
            let (g, w) = (got[32768 + i], want[32768 + i]);
            // The upper half must be zero (it is ORed into packed words).
            if g != w && !(nan16(w) && nan16(g) && g >> 16 == 0) {
                return false;
            }
        }
        true
    }
}

/// Inputs of the f16 probe (32768 words holding every f16 pattern, then f32 values)
/// and the wanted outputs, indexed like the probe's output buffer.
#[cfg(not(target_arch = "wasm32"))]
fn f16_probe_cases() -> (Vec<u32>, Vec<u32>) {
    use half::f16;
    let mut inputs: Vec<u32> = (0..32768u32)
        .map(|i| (2 * i) | ((2 * i + 1) << 16))
        .collect();
    let mut vals: Vec<f32> = Vec::new();
    for h in 0..0x7bffu16 {
        let a = f16::from_bits(h).to_f32();
        let b = f16::from_bits(h + 1).to_f32();
        // Exact: the midpoint of two neighbouring f16 values fits in an f32.
        let mid = ((a as f64 + b as f64) / 2.0) as f32;
        for v in [a, mid, next_down(mid), next_up(mid)] {
            vals.push(v);
            vals.push(-v);
        }
    }
    vals.extend([
        65504.0,
        65519.996,
        65520.0,
        65536.0,
        1e30,
        f32::MAX,
        -65520.0,
    ]);
    vals.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN]);
    vals.extend([
        2.0f32.powi(-25),
        next_up(2.0f32.powi(-25)),
        2.0f32.powi(-26),
    ]);
    inputs.extend(vals.iter().map(|v| v.to_bits()));
    // Output word h < 65536: f32 bits of f16 pattern h; word 32768 + i: st_f16(input i).
    let mut want = vec![0u32; 32768 + inputs.len()];
    for (h, w) in want.iter_mut().take(65536).enumerate() {
        *w = f16::from_bits(h as u16).to_f32().to_bits();
    }
    for i in 32768..inputs.len() {
        want[32768 + i] = f16::from_f32(f32::from_bits(inputs[i])).to_bits() as u32;
    }
    (inputs, want)
}

#[cfg(not(target_arch = "wasm32"))]
fn next_up(x: f32) -> f32 {
    f32::from_bits(x.to_bits() + 1)
}

#[cfg(not(target_arch = "wasm32"))]
fn next_down(x: f32) -> f32 {
    f32::from_bits(x.to_bits() - 1)
}

/// The subgroup size the cooperative-matrix matmul would run with on `adapter`, or 0:
/// it needs `wanted`, the experimental feature, f16 and subgroups, a 16 x 16 x 16
/// configuration with f16 operands and f32 accumulators, and one fixed subgroup size.
fn coop_subgroup(adapter: &wgpu::Adapter, wanted: bool) -> u32 {
    let need = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
        | wgpu::Features::SHADER_F16
        | wgpu::Features::SUBGROUP;
    if !wanted || !adapter.features().contains(need) {
        return 0;
    }
    let listed = adapter.cooperative_matrix_properties().iter().any(|p| {
        (p.m_size, p.n_size, p.k_size) == (16, 16, 16)
            && p.ab_type == wgpu::CooperativeScalarType::F16
            && p.cr_type == wgpu::CooperativeScalarType::F32
    });
    let info = adapter.get_info();
    let sg = info.subgroup_min_size;
    if listed && sg == info.subgroup_max_size && (8..=128).contains(&sg) {
        sg
    } else {
        0
    }
}

/// Bytes bound for a parameter list of `words` words.
fn params_binding(words: usize) -> usize {
    (words.max(1) * 4).next_power_of_two().max(PARAM_BINDING)
}
