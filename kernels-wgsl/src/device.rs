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
        }
    }
}

/// A strided input view: `shape` and `strides` in elements (0 broadcasts, negative
/// strides allowed), starting `offset` elements into `buffer`.
#[derive(Clone, Copy, Debug)]
pub struct Strided<'a> {
    /// The buffer (bound whole).
    pub buffer: &'a wgpu::Buffer,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: &'a [usize],
    /// Strides in elements.
    pub strides: &'a [isize],
    /// Offset of element `[0, 0, ...]` in elements.
    pub offset: usize,
}

/// A contiguous row-major output starting at element 0 of `buffer`.
#[derive(Clone, Copy, Debug)]
pub struct Contig<'a> {
    /// The buffer (bound whole; bytes past the output are left as they were).
    pub buffer: &'a wgpu::Buffer,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: &'a [usize],
}

impl Contig<'_> {
    pub(crate) fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

pub(crate) struct Pipe {
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) layout: wgpu::BindGroupLayout,
}

pub(crate) struct Dispatch {
    pub(crate) pipe: Arc<Pipe>,
    /// Bindings 1.. (output, then inputs).
    pub(crate) buffers: Vec<wgpu::Buffer>,
    pub(crate) params: Vec<u32>,
    pub(crate) groups: [u32; 2],
}

/// Recorded dispatches; nothing runs until [`Kernels::submit`] or [`Kernels::encode`].
#[derive(Default)]
pub struct Batch {
    pub(crate) dispatches: Vec<Dispatch>,
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
    /// True if nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.dispatches.is_empty()
    }
}

pub(crate) struct Inner {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) caps: Caps,
    pub(crate) limits: wgpu::Limits,
    pub(crate) target: Target,
    pipelines: Mutex<HashMap<ModuleSpec, Arc<Pipe>>>,
    layouts: Mutex<HashMap<usize, wgpu::BindGroupLayout>>,
    /// Two scratch buffers for multi-pass reductions (a dispatch cannot read and write
    /// one buffer, so a pass reading one writes the other).
    scratch: Mutex<[Option<wgpu::Buffer>; 2]>,
    /// Bound in place of an input that aliases the output.
    pub(crate) dummy: wgpu::Buffer,
}

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
        let features = adapter.features() & WANTED_FEATURES;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("wmx-kernels"),
                required_features: features,
                required_limits: adapter.limits(),
                ..Default::default()
            })
            .await
            .map_err(|e| Error::RequestDevice(e.to_string()))?;
        let k = Self::from_device(&adapter, device, queue)?;
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
    pub fn from_device(
        adapter: &wgpu::Adapter,
        device: wgpu::Device,
        queue: wgpu::Queue,
    ) -> Result<Kernels> {
        let info = adapter.get_info();
        let features = device.features();
        let limits = device.limits();
        let subgroups = features.contains(wgpu::Features::SUBGROUP);
        let caps = Caps {
            f16: features.contains(wgpu::Features::SHADER_F16),
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
        };
        let dummy = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wmx-kernels dummy"),
            size: 16,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        Ok(Kernels {
            inner: Arc::new(Inner {
                device,
                queue,
                caps,
                limits,
                target,
                pipelines: Mutex::new(HashMap::new()),
                layouts: Mutex::new(HashMap::new()),
                scratch: Mutex::new([None, None]),
                dummy,
            }),
        })
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

    /// Whether `dtype` can be used on this device (`F16` needs `SHADER_F16`).
    pub fn supports(&self, dtype: DType) -> bool {
        dtype != DType::F16 || self.inner.caps.f16
    }

    pub(crate) fn check_dtype(&self, dtype: DType) -> Result<()> {
        if self.supports(dtype) {
            Ok(())
        } else {
            Err(Error::UnsupportedDType {
                dtype: dtype.name(),
                reason: format!(
                    "adapter '{}' lacks the SHADER_F16 feature",
                    self.inner.caps.adapter_name
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
        if bytes > c.max_storage_binding {
            return Err(Error::BufferTooLarge {
                bytes,
                limit: c.max_storage_binding,
                what: "max_storage_buffer_binding_size (buffers are bound whole)",
            });
        }
        Ok(())
    }

    /// Creates a `STORAGE | COPY_SRC | COPY_DST` buffer. The size is rounded up to a
    /// multiple of 16 bytes (at least 16) so the vec4 kernels can read whole vectors;
    /// sizes over the device's buffer or binding limit give [`Error::BufferTooLarge`].
    pub fn create_buffer(&self, bytes: u64, label: Option<&str>) -> Result<wgpu::Buffer> {
        let size = bytes.max(16).div_ceil(16) * 16;
        self.check_size(size)?;
        Ok(self.inner.device.create_buffer(&wgpu::BufferDescriptor {
            label,
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }))
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

    fn layout(&self, inputs: usize) -> wgpu::BindGroupLayout {
        let mut layouts = self.inner.layouts.lock().unwrap();
        layouts
            .entry(inputs)
            .or_insert_with(|| {
                let entry = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
                    binding,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Storage { read_only },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                };
                let mut entries = vec![entry(0, true), entry(1, false)];
                for i in 0..inputs {
                    entries.push(entry(2 + i as u32, true));
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
            return Ok(p.clone());
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
        let layout = self.layout(spec.input_bindings());
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
            .insert(spec.clone(), p.clone());
        Ok(p)
    }

    /// Number of cached pipelines.
    pub fn pipeline_count(&self) -> usize {
        self.inner.pipelines.lock().unwrap().len()
    }

    /// Scratch buffer `which` (0 or 1) of at least `bytes` bytes.
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
                what: "reduction scratch buffer",
            });
        }
        let b = self.create_buffer(size, Some("wmx-kernels scratch"))?;
        s[which] = Some(b.clone());
        Ok(b)
    }

    /// Workgroup grid for `groups` workgroups: 2-D when over the per-dimension limit.
    pub(crate) fn grid(&self, groups: u64) -> [u32; 2] {
        let m = self.inner.caps.max_workgroups_per_dim as u64;
        let groups = groups.max(1);
        let gx = groups.min(m);
        let gy = groups.div_ceil(gx).min(m);
        [gx as u32, gy as u32]
    }

    pub(crate) fn wg(&self) -> u32 {
        self.inner.target.workgroup_size
    }

    pub(crate) fn record(
        &self,
        b: &mut Batch,
        spec: &ModuleSpec,
        buffers: Vec<wgpu::Buffer>,
        params: Vec<u32>,
        groups: u64,
    ) -> Result<()> {
        let pipe = self.pipeline(spec)?;
        let groups = self.grid(groups);
        b.dispatches.push(Dispatch {
            pipe,
            buffers,
            params,
            groups,
        });
        Ok(())
    }

    /// Encodes and submits a batch: one params buffer, one compute pass, one submit.
    pub fn submit(&self, batch: Batch) -> Result<wgpu::SubmissionIndex> {
        let dev = &self.inner.device;
        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("wmx-kernels"),
        });
        #[cfg(not(target_arch = "wasm32"))]
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        self.encode(batch, &mut enc)?;
        let idx = self.inner.queue.submit([enc.finish()]);
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Validation(e.to_string()));
        }
        Ok(idx)
    }

    /// Encodes a batch into `encoder` (one compute pass) without submitting, for
    /// callers that add timestamp queries or other commands.
    pub fn encode(&self, batch: Batch, encoder: &mut wgpu::CommandEncoder) -> Result<()> {
        if batch.dispatches.is_empty() {
            return Ok(());
        }
        let dev = &self.inner.device;
        let align = self.inner.limits.min_storage_buffer_offset_alignment.max(4) as usize;
        let mut offsets = Vec::with_capacity(batch.dispatches.len());
        let mut total = 0usize;
        for d in &batch.dispatches {
            offsets.push(total);
            total += (d.params.len().max(1) * 4).div_ceil(align) * align;
        }
        let params = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wmx-kernels params"),
            size: total as u64,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: true,
        });
        {
            let mut view = params
                .slice(..)
                .get_mapped_range_mut()
                .map_err(|e| Error::Map(e.to_string()))?;
            for (d, off) in batch.dispatches.iter().zip(&offsets) {
                let bytes: &[u8] = bytemuck::cast_slice(&d.params);
                view.slice(*off..*off + bytes.len()).copy_from_slice(bytes);
            }
        }
        params.unmap();
        let groups: Vec<wgpu::BindGroup> = batch
            .dispatches
            .iter()
            .zip(&offsets)
            .map(|(d, off)| {
                let mut entries = vec![wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &params,
                        offset: *off as u64,
                        size: NonZeroU64::new((d.params.len().max(1) * 4) as u64),
                    }),
                }];
                for (i, buf) in d.buffers.iter().enumerate() {
                    entries.push(wgpu::BindGroupEntry {
                        binding: 1 + i as u32,
                        resource: buf.as_entire_binding(),
                    });
                }
                dev.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: None,
                    layout: &d.pipe.layout,
                    entries: &entries,
                })
            })
            .collect();
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("wmx-kernels"),
            timestamp_writes: None,
        });
        for (d, bg) in batch.dispatches.iter().zip(&groups) {
            pass.set_pipeline(&d.pipe.pipeline);
            pass.set_bind_group(0, bg, &[]);
            pass.dispatch_workgroups(d.groups[0], d.groups[1], 1);
        }
        Ok(())
    }
}
