//! Metal as the kernel library's [`Driver`] (Apple only): shared-storage buffers,
//! kernels translated from WGSL and compiled once, and each batch of dispatches
//! encoded into one command buffer.
//!
//! Ordering follows wgpu's: command buffers run in the order they are committed on
//! the one queue, so a write ([`Driver::write_buffer`], a blit in a command buffer of
//! its own) lands after the work submitted before it and before the next batch, and
//! a read waits (through a completion handler) for the work submitted before it.

use crate::msl::{self, MslKernel, SIZES_SLOT};
use block2::RcBlock;
use futures::channel::oneshot;
use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_foundation::NSString;
use objc2_metal::{
    MTLBlitCommandEncoder, MTLBuffer, MTLCommandBuffer, MTLCommandBufferStatus, MTLCommandEncoder,
    MTLCommandQueue, MTLComputeCommandEncoder, MTLComputePipelineState,
    MTLCreateSystemDefaultDevice, MTLDevice, MTLLibrary, MTLResourceOptions, MTLSize,
};
use std::ffi::c_void;
use std::future::Future;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use wmx_kernels::{Batch, Caps, Driver, DriverBuffer, Error, Kernels, Result, Target};

/// Parameter lists up to this many bytes go inline (`setBytes`, limited to 4 KiB);
/// longer ones in a buffer of their own.
const INLINE_PARAMS: usize = 4096;

/// A buffer in `MTLStorageModeShared`: the CPU reads what the GPU wrote without a
/// copy once the command buffer that wrote it has completed.
#[derive(Clone)]
pub struct MetalBuffer {
    raw: Retained<ProtocolObject<dyn MTLBuffer>>,
    len: u64,
}

// SAFETY: Metal buffers may be used from any thread (Apple: MTLResource objects are
// thread-safe); their contents are touched only after the GPU work on them is done
// (reads wait for completion, writes go through the queue).
unsafe impl Send for MetalBuffer {}
// SAFETY: as for Send.
unsafe impl Sync for MetalBuffer {}

impl PartialEq for MetalBuffer {
    fn eq(&self, other: &Self) -> bool {
        Retained::as_ptr(&self.raw) == Retained::as_ptr(&other.raw)
    }
}
impl Eq for MetalBuffer {}
impl std::hash::Hash for MetalBuffer {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        Retained::as_ptr(&self.raw).hash(h);
    }
}
impl std::fmt::Debug for MetalBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MetalBuffer({} bytes)", self.len)
    }
}

impl MetalBuffer {
    /// `len` bytes at `offset`, which lie inside the buffer, once no GPU work
    /// writes them.
    fn copy_out(&self, offset: u64, len: u64) -> Vec<u8> {
        let mut out = vec![0u8; len as usize];
        // SAFETY: the range lies inside the buffer (checked by the kernel library)
        // and the work writing it has completed (the caller waited).
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.raw
                    .contents()
                    .as_ptr()
                    .cast::<u8>()
                    .add(offset as usize),
                out.as_mut_ptr(),
                len as usize,
            );
        }
        out
    }
}

impl DriverBuffer for MetalBuffer {
    fn byte_size(&self) -> u64 {
        self.len
    }
    fn destroy(&self) {
        // Freed when the last handle goes; Metal has no explicit destroy.
    }
}

/// A compiled kernel and what its encoder needs.
pub struct MetalPipeline {
    state: Retained<ProtocolObject<dyn MTLComputePipelineState>>,
    kernel: MslKernel,
}

/// Metal has no timestamps inside a batch here: this type has no values.
#[derive(Clone, Copy, Debug)]
pub enum NoTimestamps {}

type Handler = Arc<dyn Fn(String) + Send + Sync>;

/// The system's default Metal device and its queue.
pub struct Metal {
    device: Retained<ProtocolObject<dyn MTLDevice>>,
    queue: Retained<ProtocolObject<dyn MTLCommandQueue>>,
    target: Target,
    /// The last command buffer committed (waited on by [`Driver::poll_wait`]).
    last: Mutex<Option<Retained<ProtocolObject<dyn MTLCommandBuffer>>>>,
    /// Where a failed command buffer's error goes.
    error: Mutex<Option<Handler>>,
}

// SAFETY: MTLDevice and MTLCommandQueue are thread-safe; the command buffer kept in
// `last` is only committed-and-waited-on, which Metal allows from any thread.
unsafe impl Send for Metal {}
// SAFETY: as for Send.
unsafe impl Sync for Metal {}

fn err(msg: impl Into<String>) -> Error {
    Error::RequestDevice(msg.into())
}

impl Metal {
    /// Opens the system's default Metal device (an `Err` where there is none) as a
    /// kernel library.
    pub fn open() -> Result<Kernels<Metal>> {
        let device = MTLCreateSystemDefaultDevice()
            .ok_or_else(|| Error::NoAdapter("no Metal device".into()))?;
        let queue = device
            .newCommandQueue()
            .ok_or_else(|| err("could not create a Metal command queue"))?;
        // Apple GPUs run simdgroup functions (MSL 2.1+), so the subgroup kernels;
        // f16 is converted in software until a probe checks the hardware's rounding.
        let target = Target {
            subgroups: true,
            // simdgroups of 32: eight to a workgroup.
            radix_wg: 256,
            ..Target::default()
        };
        let threads = device.maxThreadsPerThreadgroup();
        let max_buffer = device.maxBufferLength() as u64;
        let caps = Caps {
            f16: true,
            f64: false,
            subgroups: true,
            subgroup_size: 32,
            timestamps: false,
            // The kernels index u32 words of one binding; NVIDIA's 2 GiB - 4 keeps
            // them in the range the suite exercises.
            max_storage_binding: max_buffer.min((1 << 31) - 4),
            max_buffer,
            max_workgroups_per_dim: 65535,
            max_invocations: threads.width.min(1024) as u32,
            max_storage_buffers: 8,
            max_workgroup_storage: device.maxThreadgroupMemoryLength() as u32,
            offset_align: 256,
            backend: wgpu::Backend::Metal,
            adapter_name: device.name().to_string(),
            loop_budget: None,
            device_type: if device.hasUnifiedMemory() {
                wgpu::DeviceType::IntegratedGpu
            } else {
                wgpu::DeviceType::DiscreteGpu
            },
        };
        let driver = Metal {
            device,
            queue,
            target,
            last: Mutex::new(None),
            error: Mutex::new(None),
        };
        Kernels::with_driver(driver, caps, target)
    }

    fn command_buffer(&self) -> Result<Retained<ProtocolObject<dyn MTLCommandBuffer>>> {
        self.queue
            .commandBuffer()
            .ok_or_else(|| Error::Validation("could not create a Metal command buffer".into()))
    }

    /// Commits `cb` after adding a handler that reports its failure (and runs
    /// `then`, if given, once it completed).
    fn commit(
        &self,
        cb: Retained<ProtocolObject<dyn MTLCommandBuffer>>,
        then: Option<Box<dyn FnOnce() + Send>>,
    ) {
        let report = self.error.lock().unwrap().clone();
        let then = Mutex::new(then);
        let block = RcBlock::new(move |cb: NonNull<ProtocolObject<dyn MTLCommandBuffer>>| {
            // SAFETY: Metal passes the completed command buffer, alive for the call.
            let cb = unsafe { cb.as_ref() };
            if cb.status() == MTLCommandBufferStatus::Error {
                let msg = cb
                    .error()
                    .map(|e| e.localizedDescription().to_string())
                    .unwrap_or_else(|| "unknown error".into());
                if let Some(r) = &report {
                    r(format!("Metal command buffer failed: {msg}"));
                }
            }
            if let Some(f) = then.lock().unwrap().take() {
                f();
            }
        });
        // SAFETY: the block is retained by the command buffer until it has run.
        unsafe { cb.addCompletedHandler(RcBlock::as_ptr(&block)) };
        cb.commit();
        *self.last.lock().unwrap() = Some(cb);
    }

    /// A receiver that completes once the work committed so far has finished.
    fn completion(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        match self.command_buffer() {
            Ok(cb) => self.commit(
                cb,
                Some(Box::new(move || {
                    let _ = tx.send(());
                })),
            ),
            Err(_) => {
                self.poll_wait();
                let _ = tx.send(());
            }
        }
        rx
    }
}

impl Driver for Metal {
    const NAME: &'static str = "metal";
    type Buffer = MetalBuffer;
    type Pipeline = MetalPipeline;
    type Timestamps = NoTimestamps;

    fn create_buffer(&self, size: u64, _label: Option<&str>) -> Result<MetalBuffer> {
        let raw = self
            .device
            .newBufferWithLength_options(size as usize, MTLResourceOptions::StorageModeShared)
            .ok_or(Error::OutOfMemory { bytes: size })?;
        Ok(MetalBuffer { raw, len: size })
    }

    fn upload(&self, bytes: &[u8], size: u64) -> Result<MetalBuffer> {
        let b = self.create_buffer(size, None)?;
        // SAFETY: the buffer is new (no GPU work uses it) and holds at least
        // bytes.len() bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                b.raw.contents().as_ptr().cast::<u8>(),
                bytes.len(),
            );
        }
        Ok(b)
    }

    fn write_buffer(&self, buffer: &MetalBuffer, offset: u64, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        // Through the queue, like wgpu's write_buffer: earlier work may still read
        // the buffer, so the CPU must not write it in place.
        let Ok(staging) = self.upload(bytes, bytes.len().div_ceil(16) as u64 * 16) else {
            if let Some(r) = &*self.error.lock().unwrap() {
                r(format!(
                    "out of memory staging a {}-byte write",
                    bytes.len()
                ));
            }
            return;
        };
        let Ok(cb) = self.command_buffer() else {
            return;
        };
        let Some(blit) = cb.blitCommandEncoder() else {
            return;
        };
        // SAFETY: both buffers live until the command buffer completes (it retains
        // them); the range lies inside both (the caller's contract).
        unsafe {
            blit.copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size(
                &staging.raw,
                0,
                &buffer.raw,
                offset as usize,
                bytes.len(),
            );
        }
        blit.endEncoding();
        self.commit(cb, None);
    }

    fn read(
        &self,
        buffer: &MetalBuffer,
        offset: u64,
        len: u64,
    ) -> impl Future<Output = Result<Vec<u8>>> + Send {
        let done = self.completion();
        let buffer = buffer.clone();
        async move {
            done.await
                .map_err(|_| Error::Map("the Metal completion handler was dropped".into()))?;
            // The work writing the buffer has completed.
            let out = buffer.copy_out(offset, len);
            Ok(out)
        }
    }

    fn compile(
        &self,
        label: &str,
        source: &str,
        entry: &str,
        _buffers: (usize, usize),
        constants: &[(&str, f64)],
        trusted: bool,
    ) -> Result<MetalPipeline> {
        let kernel = msl::translate_checked(source, entry, constants, self.target, !trusted)
            .map_err(|e| Error::Validation(format!("{label}: {e}")))?;
        let library = self
            .device
            .newLibraryWithSource_options_error(&NSString::from_str(&kernel.source), None)
            .map_err(|e| {
                Error::Validation(format!(
                    "{label}: MSL compile: {}",
                    e.localizedDescription()
                ))
            })?;
        let function = library
            .newFunctionWithName(&NSString::from_str(&kernel.entry))
            .ok_or_else(|| Error::Validation(format!("{label}: no function {}", kernel.entry)))?;
        let state = self
            .device
            .newComputePipelineStateWithFunction_error(&function)
            .map_err(|e| {
                Error::Validation(format!("{label}: pipeline: {}", e.localizedDescription()))
            })?;
        // A kernel heavy in registers may get fewer threads per threadgroup than
        // its workgroup size: dispatching it would be invalid.
        let threads: u32 = kernel.workgroup_size.iter().product();
        if threads as usize > state.maxTotalThreadsPerThreadgroup() {
            return Err(Error::Validation(format!(
                "{label}: {threads} threads per threadgroup, the pipeline allows {}",
                state.maxTotalThreadsPerThreadgroup()
            )));
        }
        Ok(MetalPipeline { state, kernel })
    }

    fn submit(&self, batch: Batch<Metal>) -> Result<()> {
        if batch.dispatches.is_empty() {
            return Ok(());
        }
        let cb = self.command_buffer()?;
        let enc = cb
            .computeCommandEncoder()
            .ok_or_else(|| Error::Validation("could not create a Metal compute encoder".into()))?;
        // A serial encoder: each dispatch sees what earlier ones wrote (Metal tracks
        // the hazards of these buffers).
        let mut keep = Vec::new();
        for d in &batch.dispatches {
            let k = &d.pipe.kernel;
            enc.setComputePipelineState(&d.pipe.state);
            let mut sizes: Vec<u32> = Vec::new();
            for &(binding, _) in &k.buffers {
                if binding == 0 {
                    let words = if d.params.is_empty() {
                        &[0u32][..]
                    } else {
                        &d.params[..]
                    };
                    let bytes = std::mem::size_of_val(words);
                    if bytes <= INLINE_PARAMS {
                        // SAFETY: the pointer and length describe `words`, which
                        // Metal copies before this call returns.
                        unsafe {
                            enc.setBytes_length_atIndex(
                                NonNull::from(words).cast::<c_void>(),
                                bytes,
                                0,
                            );
                        }
                    } else {
                        let b = self.upload(
                            // SAFETY: u32 words viewed as their bytes.
                            unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), bytes) },
                            bytes.div_ceil(16) as u64 * 16,
                        )?;
                        // SAFETY: `keep` holds the buffer past the commit (and the
                        // command buffer retains it).
                        unsafe { enc.setBuffer_offset_atIndex(Some(&b.raw), 0, 0) };
                        keep.push(b);
                    }
                    if k.sized.contains(&0) {
                        sizes.push(bytes as u32);
                    }
                    continue;
                }
                let bound = d
                    .buffers
                    .get(binding as usize - 1)
                    .and_then(Option::as_ref)
                    .ok_or_else(|| {
                        Error::Validation(format!("{}: no buffer for binding {binding}", k.entry))
                    })?;
                let (start, len) = match bound.window {
                    Some(w) => (w.start, w.len),
                    None => (0, bound.buffer.len),
                };
                // SAFETY: the command buffer retains the buffer until it completes;
                // the kernel library checked the window against the buffer.
                unsafe {
                    enc.setBuffer_offset_atIndex(
                        Some(&bound.buffer.raw),
                        start as usize,
                        binding as usize,
                    )
                };
                if k.sized.contains(&binding) {
                    sizes.push(len.min(u32::MAX as u64) as u32);
                }
            }
            if !k.sized.is_empty() {
                // SAFETY: as for the parameters.
                unsafe {
                    enc.setBytes_length_atIndex(
                        NonNull::from(&sizes[..]).cast::<c_void>(),
                        std::mem::size_of_val(&sizes[..]),
                        SIZES_SLOT as usize,
                    );
                }
            }
            let [x, y, z] = k.workgroup_size.map(|v| v as usize);
            let [gx, gy, gz] = d.groups.map(|v| v as usize);
            enc.dispatchThreadgroups_threadsPerThreadgroup(
                MTLSize {
                    width: gx,
                    height: gy,
                    depth: gz,
                },
                MTLSize {
                    width: x,
                    height: y,
                    depth: z,
                },
            );
        }
        enc.endEncoding();
        self.commit(cb, None);
        drop(keep);
        Ok(())
    }

    fn poll_wait(&self) {
        let last = self.last.lock().unwrap().clone();
        if let Some(cb) = last {
            cb.waitUntilCompleted();
        }
    }

    fn poll(&self) {
        // Completion handlers run on Metal's own threads.
    }

    fn on_done(&self, f: Box<dyn FnOnce() + Send>) {
        match self.command_buffer() {
            Ok(cb) => self.commit(cb, Some(f)),
            Err(_) => {
                self.poll_wait();
                f();
            }
        }
    }

    fn on_error(
        &self,
        error: Box<dyn Fn(String) + Send + Sync>,
        _lost: Box<dyn Fn(String) + Send + Sync>,
    ) {
        *self.error.lock().unwrap() = Some(Arc::from(error));
    }
}
