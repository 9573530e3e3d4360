//! The wgpu [`Driver`]: buffers, readback, bind groups and submission. Opening
//! an adapter and the probes that choose the kernels' hardware paths are in
//! `wgpu_open.rs`.

use crate::driver::{Batch, Bound, Dispatch, Driver, FxMap};
use crate::{Error, Result};
use std::collections::HashMap;
use std::future::Future;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};

/// How [`crate::Kernels::request`] picks and opens an adapter.
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
    /// Add f32 in scatter_add with the hardware's float atomics where the adapter
    /// has them (`SHADER_FLOAT32_ATOMIC`); default on, off with `WMX_ATOMIC_F32=0`
    /// (the compare-exchange loop every adapter runs).
    pub atomic_f32: bool,
    /// Which adapter: an index into the adapters sorted by preference (`Some(i)`,
    /// default from `WMX_ADAPTER`), else the launcher's local rank (`mpirun`'s
    /// `OMPI_COMM_WORLD_LOCAL_RANK`, MPICH's `MPI_LOCALRANKID`, Slurm's
    /// `SLURM_LOCALID`) modulo the adapters of the preferred kind, so that ranks on
    /// one host spread over its GPUs; else the first.
    pub adapter_index: Option<usize>,
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
            atomic_f32: std::env::var("WMX_ATOMIC_F32").as_deref() != Ok("0"),
            adapter_index: std::env::var("WMX_ADAPTER")
                .ok()
                .and_then(|s| s.trim().parse().ok()),
        }
    }
}

/// wgpu as the kernels' [`Driver`]: a device and its queue, with the bind group
/// layouts, bind groups and parameters buffer the submit path reuses.
pub struct Wgpu {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    limits: wgpu::Limits,
    /// Bind group layouts by (outputs, inputs).
    layouts: Mutex<HashMap<(usize, usize), wgpu::BindGroupLayout>>,
    /// Parameters buffer and bind groups reused by `submit`.
    submit: Mutex<SubmitState>,
    /// Buffers whose allocation the device refused after the fact (in the browser
    /// out of memory is reported asynchronously): never reused (`Driver::refused`).
    refused: Arc<Mutex<std::collections::HashSet<wgpu::Buffer>>>,
    /// Where an allocation refused after the fact is reported (`on_error`'s).
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    report: Arc<Mutex<Option<ErrorSink>>>,
    /// The staging buffer of the last `read_into` (at most `READ_CHUNK`; the host
    /// path of collectives reads repeatedly), kept for the next read: creating
    /// one of 64 MiB took 36 ms on an H200 (bench/NOTES.md, run 97). `read`
    /// (arrays read by the user) uses it when there is one, and keeps none.
    readback: Arc<Mutex<Option<wgpu::Buffer>>>,
}

/// A handler of errors that arrive after the call causing them.
type ErrorSink = Arc<dyn Fn(String) + Send + Sync>;

/// A compiled wgpu compute pipeline and its bind group layout.
pub struct WgpuPipeline {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    label: String,
}

/// Bind groups kept by [`crate::Kernels::submit`] (dropped wholesale past this many).
const BIND_GROUP_CACHE: usize = 2048;
/// Smallest parameter binding (bytes); larger parameter lists bind the next power of two.
pub(crate) const PARAM_BINDING: usize = 256;

/// A bind group is fixed by its layout, the parameter binding's size (the offset is
/// dynamic) and the buffers bound 1.. (output, inputs).
#[derive(Clone, PartialEq, Eq, Hash)]
struct BindKey {
    layout: wgpu::BindGroupLayout,
    params_size: u32,
    buffers: Bound<Wgpu>,
}

/// State of the submit path. Parameter lists live in one buffer, each written once
/// and found again by content (repeated launches of the same ops write nothing, so
/// their submits carry no copy); new lists are appended and written with one
/// `Queue::write_buffer` per submit, which wgpu orders after the work of earlier
/// submits and before this one. When the buffer is full it starts over from offset
/// 0 (or grows). Bind groups point into it with a dynamic offset, so they depend
/// only on the bound buffers.
#[derive(Default)]
pub(crate) struct SubmitState {
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

/// The largest staging buffer of a read (bigger reads go through it in turns: a
/// submit and a map per chunk, a few percent of a large read's time).
const READ_CHUNK: u64 = 64 << 20;

/// The smallest staging buffer a read falls back to when the device is full.
const MIN_READ_CHUNK: u64 = 1 << 20;

impl Driver for Wgpu {
    const NAME: &'static str = "webgpu";
    type Buffer = wgpu::Buffer;
    type Pipeline = WgpuPipeline;
    type Timestamps = wgpu::QuerySet;

    fn create_buffer(&self, size: u64, label: Option<&str>) -> Result<wgpu::Buffer> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let b = self.device.create_buffer(&wgpu::BufferDescriptor {
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
        // The browser cannot wait: the buffer is handed on, and if the scope reports
        // out of memory it is marked refused (never pooled again) and the error
        // reported, so the next check is an Err with the byte count.
        #[cfg(target_arch = "wasm32")]
        {
            let pop = scope.pop();
            let (refused, report, buf) = (self.refused.clone(), self.report.clone(), b.clone());
            wasm_bindgen_futures::spawn_local(async move {
                if let Some(e) = pop.await {
                    refused.lock().unwrap().insert(buf);
                    if let Some(r) = report.lock().unwrap().clone() {
                        r(format!("{} ({e})", Error::OutOfMemory { bytes: size }));
                    }
                }
            });
        }
        Ok(b)
    }

    fn upload(&self, bytes: &[u8], size: u64) -> Result<wgpu::Buffer> {
        let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
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

    fn write_buffer(&self, buffer: &wgpu::Buffer, offset: u64, bytes: &[u8]) {
        self.queue.write_buffer(buffer, offset, bytes);
    }

    /// Copies the range into a staging buffer, maps it and copies out, at most
    /// 64 MiB at a time through one staging buffer (smaller when the
    /// device cannot allocate that much): reading an array never needs a second
    /// copy of it on the device, which fails when the device is nearly full. On
    /// native the device is polled; in the browser the map callbacks are awaited.
    fn read(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> impl Future<Output = Result<Vec<u8>>> + Send {
        let this = self.clone_handles();
        let buffer = buffer.clone();
        async move {
            let mut out = Vec::new();
            out.try_reserve_exact(size as usize).map_err(|_| {
                Error::Map(format!(
                    "out of memory: {size} bytes of host memory for a read"
                ))
            })?;
            this.read_chunks(&buffer, offset, size, false, |bytes| {
                out.extend_from_slice(bytes)
            })
            .await?;
            Ok(out)
        }
    }

    async fn read_into(&self, buffer: &wgpu::Buffer, offset: u64, out: &mut [u8]) -> Result<()> {
        let mut at = 0;
        let size = out.len() as u64;
        self.clone_handles()
            .read_chunks(buffer, offset, size, true, |bytes| {
                out[at..at + bytes.len()].copy_from_slice(bytes);
                at += bytes.len();
            })
            .await
    }

    fn timestamps(&self, count: u32) -> Option<wgpu::QuerySet> {
        let need =
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
        (self.device.features().contains(need) && count > 0).then(|| {
            self.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("wmx-kernels profile"),
                ty: wgpu::QueryType::Timestamp,
                count,
            })
        })
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn read_timestamps(&self, set: &wgpu::QuerySet, count: u32) -> Result<Vec<f64>> {
        let bytes = 8 * count as u64;
        let buf = |usage| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("wmx-kernels profile"),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        let resolve = buf(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC);
        let read = buf(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.resolve_query_set(set, 0..count, &resolve, 0);
        enc.copy_buffer_to_buffer(&resolve, 0, &read, 0, bytes);
        self.queue.submit([enc.finish()]);
        read.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Map(e.to_string()))?;
        let period = self.queue.get_timestamp_period() as f64;
        let ticks: Vec<f64> = {
            let view = read
                .slice(..)
                .get_mapped_range()
                .map_err(|e| Error::Map(e.to_string()))?;
            view.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()) as f64 * period)
                .collect()
        };
        read.unmap();
        Ok(ticks)
    }

    fn pipeline_label(p: &WgpuPipeline) -> &str {
        &p.label
    }

    fn compile(
        &self,
        label: &str,
        source: &str,
        entry: &str,
        (outputs, inputs): (usize, usize),
        constants: &[(&str, f64)],
        trusted: bool,
    ) -> Result<WgpuPipeline> {
        let dev = &self.device;
        #[cfg(not(target_arch = "wasm32"))]
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(label),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        };
        let module = if trusted {
            // SAFETY: the library's generated modules loop only below their element
            // counts, and their callers check every view against its buffer.
            unsafe {
                dev.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
            }
        } else {
            dev.create_shader_module(desc)
        };
        let layout = self.layout(outputs, inputs);
        let pl = dev.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(label),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(label),
            layout: Some(&pl),
            module: &module,
            entry_point: Some(entry),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants,
                zero_initialize_workgroup_memory: !trusted,
            },
            cache: None,
        });
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Validation(format!("{label}: {e}")));
        }
        Ok(WgpuPipeline {
            pipeline,
            layout,
            label: label.to_string(),
        })
    }

    fn submit(&self, batch: Batch<Wgpu>) -> Result<()> {
        let dev = &self.device;
        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("wmx-kernels"),
        });
        #[cfg(not(target_arch = "wasm32"))]
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        // Held until the submit: a second thread's parameters must not overwrite ours
        // before our commands are queued.
        let mut st = self.submit.lock().unwrap();
        let st = &mut *st;
        if !batch.dispatches.is_empty() {
            let start = self.place_params(st, &batch)?;
            let params = st.params.clone().expect("placed above");
            if !st.bytes.is_empty() {
                self.queue.write_buffer(&params, start as u64, &st.bytes);
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
            encode_passes(&batch, &mut enc, |i| (&groups[i], offsets[i]));
        } else {
            encode_passes(&batch, &mut enc, |_| unreachable!("no dispatches"));
        }
        self.queue.submit([enc.finish()]);
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Validation(e.to_string()));
        }
        Ok(())
    }

    fn poll_wait(&self) {
        let _ = self.device.poll(wgpu::PollType::wait_indefinitely());
    }

    fn poll(&self) {
        let _ = self.device.poll(wgpu::PollType::Poll);
    }

    fn on_done(&self, f: Box<dyn FnOnce() + Send>) {
        self.queue.on_submitted_work_done(f);
    }

    fn on_error(
        &self,
        error: Box<dyn Fn(String) + Send + Sync>,
        lost: Box<dyn Fn(String) + Send + Sync>,
    ) {
        let error: ErrorSink = Arc::from(error);
        *self.report.lock().unwrap() = Some(error.clone());
        self.device
            .on_uncaptured_error(Arc::new(move |e: wgpu::Error| error(e.to_string())));
        self.device.set_device_lost_callback(move |reason, msg| {
            lost(format!("device lost ({reason:?}): {msg}"));
        });
    }

    fn clear_bindings(&self) {
        self.submit.lock().unwrap().bind_groups.clear();
    }

    fn clear_staging(&self) {
        if let Some(b) = self
            .readback
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            b.destroy();
        }
    }

    fn refused(&self, buffer: &wgpu::Buffer) -> bool {
        let mut r = self.refused.lock().unwrap();
        !r.is_empty() && r.remove(buffer)
    }
}

impl Wgpu {
    /// The driver of an opened device with these limits.
    pub(crate) fn new(device: wgpu::Device, queue: wgpu::Queue, limits: wgpu::Limits) -> Wgpu {
        Wgpu {
            device,
            queue,
            limits,
            layouts: Mutex::new(HashMap::new()),
            submit: Mutex::new(SubmitState::default()),
            refused: Arc::default(),
            readback: Arc::default(),
            report: Arc::default(),
        }
    }
    /// Marks `buffer` as refused by the device, as the browser's asynchronous out
    /// of memory does: a testing aid (native allocations fail at once).
    #[doc(hidden)]
    pub fn refuse_for_test(&self, buffer: &wgpu::Buffer) {
        self.refused.lock().unwrap().insert(buffer.clone());
    }

    /// Binding 0 the parameters, then `outputs` writable buffers, then `inputs`
    /// read-only ones.
    fn layout(&self, outputs: usize, inputs: usize) -> wgpu::BindGroupLayout {
        let mut layouts = self.layouts.lock().unwrap();
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
                self.device
                    .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: Some("wmx-kernels"),
                        entries: &entries,
                    })
            })
            .clone()
    }

    /// Finds or places every parameter list of `batch` in the parameters buffer:
    /// fills `st.offsets` and `st.bytes` (the new lists, to be written at the
    /// returned byte offset).
    fn place_params(&self, st: &mut SubmitState, batch: &Batch<Wgpu>) -> Result<usize> {
        let align = self.limits.min_storage_buffer_offset_alignment.max(4) as usize;
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
                if size > self.limits.max_storage_buffer_binding_size {
                    return Err(Error::BufferTooLarge {
                        bytes: size,
                        limit: self.limits.max_storage_buffer_binding_size,
                        what: "kernel parameters of one batch",
                    });
                }
                st.params = Some(self.device.create_buffer(&wgpu::BufferDescriptor {
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

    /// Parameter offsets (aligned for dynamic offsets) and bytes of a batch; returns
    /// the buffer size needed (0 for an empty batch).
    pub(crate) fn layout_params(
        &self,
        batch: &Batch<Wgpu>,
        offsets: &mut Vec<u32>,
        bytes: &mut Vec<u8>,
    ) -> u64 {
        offsets.clear();
        bytes.clear();
        if batch.dispatches.is_empty() {
            return 0;
        }
        let align = self.limits.min_storage_buffer_offset_alignment.max(4) as usize;
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

    pub(crate) fn bind_group(&self, d: &Dispatch<Wgpu>, params: &wgpu::Buffer) -> wgpu::BindGroup {
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
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &d.pipe.layout,
            entries: &entries,
        })
    }
}

/// Records `batch` into `enc`: one compute pass per run of dispatches between
/// timestamps; `bind(i)` gives dispatch `i`'s bind group and parameter offset.
pub(crate) fn encode_passes<'b>(
    batch: &Batch<Wgpu>,
    enc: &mut wgpu::CommandEncoder,
    mut bind: impl FnMut(usize) -> (&'b wgpu::BindGroup, u32),
) {
    let n = batch.dispatches.len();
    let mut stamps = batch.stamps.iter().peekable();
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
        let mut last_pipe: Option<&Arc<WgpuPipeline>> = None;
        let mut last_bind: Option<(&wgpu::BindGroup, u32)> = None;
        for (j, d) in batch.dispatches[i..end].iter().enumerate() {
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

/// Bytes bound for a parameter list of `words` words.
pub(crate) fn params_binding(words: usize) -> usize {
    (words.max(1) * 4).next_power_of_two().max(PARAM_BINDING)
}

/// The device and queue, for reads that outlive a borrow of the driver.
struct Handles {
    dev: wgpu::Device,
    queue: wgpu::Queue,
    readback: Arc<Mutex<Option<wgpu::Buffer>>>,
}

impl Wgpu {
    fn clone_handles(&self) -> Handles {
        Handles {
            dev: self.device.clone(),
            queue: self.queue.clone(),
            readback: self.readback.clone(),
        }
    }
}

impl Handles {
    /// Copies the range into a staging buffer, maps it and hands each mapped
    /// chunk to `sink`, at most 64 MiB at a time through one staging buffer
    /// (smaller when the device cannot allocate that much): reading an array never
    /// needs a second copy of it on the device, which fails when the device is
    /// nearly full. On native the device is polled; in the browser the map
    /// callbacks are awaited. With `keep`, the staging buffer stays for the next
    /// read.
    async fn read_chunks(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        size: u64,
        keep: bool,
        mut sink: impl FnMut(&[u8]),
    ) -> Result<()> {
        let (dev, queue) = (&self.dev, &self.queue);
        if size == 0 {
            return Ok(());
        }
        let mut chunk = size.min(READ_CHUNK);
        let kept = self
            .readback
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .filter(|b| b.size() >= chunk);
        let reused = kept.is_some();
        let staging = if let Some(b) = kept {
            chunk = b.size();
            b
        } else {
            loop {
                let scope = dev.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
                let staging = dev.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("wmx-kernels readback"),
                    size: chunk,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                if scope.pop().await.is_none() {
                    break staging;
                }
                staging.destroy();
                if chunk <= MIN_READ_CHUNK {
                    return Err(Error::OutOfMemory { bytes: chunk });
                }
                chunk = (chunk / 2).max(MIN_READ_CHUNK).next_multiple_of(4);
            }
        };
        let mut done = 0;
        while done < size {
            let len = (size - done).min(chunk);
            let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wmx-kernels read"),
            });
            enc.copy_buffer_to_buffer(buffer, offset + done, &staging, 0, len);
            queue.submit([enc.finish()]);
            let (tx, rx) = futures::channel::oneshot::channel();
            staging
                .slice(..len)
                .map_async(wgpu::MapMode::Read, move |r| {
                    let _ = tx.send(r);
                });
            #[cfg(not(target_arch = "wasm32"))]
            dev.poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| Error::Map(e.to_string()))?;
            rx.await
                .map_err(|_| Error::Map("map callback dropped".into()))?
                .map_err(|e| Error::Map(e.to_string()))?;
            {
                let view = staging
                    .slice(..len)
                    .get_mapped_range()
                    .map_err(|e| Error::Map(e.to_string()))?;
                sink(&view);
            }
            staging.unmap();
            done += len;
        }
        // Kept for the next read, the larger of two; a kept one taken goes back.
        let mut slot = self.readback.lock().unwrap_or_else(|e| e.into_inner());
        if !keep && !reused {
            staging.destroy();
            return Ok(());
        }
        match slot.as_ref() {
            Some(old) if old.size() >= staging.size() => staging.destroy(),
            _ => {
                if let Some(old) = slot.replace(staging) {
                    old.destroy();
                }
            }
        }
        Ok(())
    }
}
