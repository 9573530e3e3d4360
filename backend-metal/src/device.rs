//! The Metal device (Apple only): shared-storage buffers, a pipeline cache of
//! translated kernels, and batches of dispatches encoded into one command buffer.

use crate::msl::{self, MslKernel, SIZES_SLOT};
use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_foundation::NSString;
use objc2_metal::{
    MTLBuffer, MTLCommandBuffer, MTLCommandBufferStatus, MTLCommandEncoder, MTLCommandQueue,
    MTLComputeCommandEncoder, MTLComputePipelineState, MTLCreateSystemDefaultDevice, MTLDevice,
    MTLLibrary, MTLResourceOptions, MTLSize,
};
use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use wmx_core::{Error, Result};
use wmx_kernels::{ModuleSpec, Target};

fn err(msg: impl Into<String>) -> Error {
    Error::Backend {
        backend: "metal".into(),
        msg: msg.into(),
    }
}

/// A buffer in `MTLStorageModeShared`: the CPU reads what the GPU wrote without a
/// copy once the command buffer that wrote it has completed.
pub struct MetalBuffer {
    raw: Retained<ProtocolObject<dyn MTLBuffer>>,
    len: usize,
}

impl MetalBuffer {
    /// Size in bytes (as asked; Metal may round the allocation up).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A compiled kernel and what its encoder needs.
pub struct Pipeline {
    state: Retained<ProtocolObject<dyn MTLComputePipelineState>>,
    kernel: MslKernel,
}

/// One kernel launch: its buffers in binding order from binding 1 (the parameters,
/// binding 0, go inline), and the threadgroups of the grid.
pub struct Dispatch<'a> {
    /// Buffers for bindings 1, 2, ...
    pub buffers: &'a [&'a MetalBuffer],
    /// The parameter words (binding 0).
    pub params: &'a [u32],
    /// Threadgroups in x, y, z.
    pub groups: [u32; 3],
}

/// The system's default Metal device with its queue and pipeline cache.
pub struct MetalDevice {
    device: Retained<ProtocolObject<dyn MTLDevice>>,
    queue: Retained<ProtocolObject<dyn MTLCommandQueue>>,
    pipelines: Mutex<HashMap<ModuleSpec, Arc<Pipeline>>>,
    target: Target,
}

impl MetalDevice {
    /// Opens the system's default Metal device (an `Err` where there is none).
    pub fn new() -> Result<MetalDevice> {
        let device = MTLCreateSystemDefaultDevice().ok_or_else(|| err("no Metal device"))?;
        let queue = device
            .newCommandQueue()
            .ok_or_else(|| err("could not create a command queue"))?;
        // Apple GPUs run simdgroup functions (MSL 2.1+), so the subgroup kernels.
        let target = Target {
            subgroups: true,
            ..Target::default()
        };
        Ok(MetalDevice {
            device,
            queue,
            pipelines: Mutex::new(HashMap::new()),
            target,
        })
    }

    /// The device's name.
    pub fn name(&self) -> String {
        self.device.name().to_string()
    }

    /// The code-generation choices kernels are composed with on this device.
    pub fn target(&self) -> Target {
        self.target
    }

    /// A zeroed shared buffer of `bytes` bytes.
    pub fn buffer(&self, bytes: usize) -> Result<MetalBuffer> {
        let raw = self
            .device
            .newBufferWithLength_options(bytes.max(4), MTLResourceOptions::StorageModeShared)
            .ok_or_else(|| err(format!("out of memory allocating {bytes} bytes")))?;
        Ok(MetalBuffer { raw, len: bytes })
    }

    /// A shared buffer holding `data`.
    pub fn upload(&self, data: &[u8]) -> Result<MetalBuffer> {
        let b = self.buffer(data.len())?;
        // SAFETY: the buffer is new (no GPU work uses it) and at least data.len() bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                b.raw.contents().as_ptr().cast::<u8>(),
                data.len(),
            );
        }
        Ok(b)
    }

    /// The bytes of `buf`. Callers read only after the work writing it completed
    /// ([`MetalDevice::run`] waits for its command buffer).
    pub fn read(&self, buf: &MetalBuffer) -> Vec<u8> {
        let mut out = vec![0u8; buf.len];
        // SAFETY: the buffer holds at least len bytes; no GPU work is pending on it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                buf.raw.contents().as_ptr().cast::<u8>(),
                out.as_mut_ptr(),
                buf.len,
            );
        }
        out
    }

    /// The cached pipeline of `spec`, translated and compiled on first use.
    pub fn pipeline(&self, spec: &ModuleSpec) -> Result<Arc<Pipeline>> {
        if let Some(p) = self.pipelines.lock().unwrap().get(spec) {
            return Ok(p.clone());
        }
        let kernel = msl::translate(spec).map_err(|e| err(e.0))?;
        let p = Arc::new(self.compile(kernel)?);
        self.pipelines
            .lock()
            .unwrap()
            .insert(spec.clone(), p.clone());
        Ok(p)
    }

    /// Compiles translated MSL into a pipeline.
    pub fn compile(&self, kernel: MslKernel) -> Result<Pipeline> {
        let library = self
            .device
            .newLibraryWithSource_options_error(&NSString::from_str(&kernel.source), None)
            .map_err(|e| err(format!("MSL compile: {}", e.localizedDescription())))?;
        let function = library
            .newFunctionWithName(&NSString::from_str(&kernel.entry))
            .ok_or_else(|| err(format!("no function {} in the MSL", kernel.entry)))?;
        let state = self
            .device
            .newComputePipelineStateWithFunction_error(&function)
            .map_err(|e| err(format!("pipeline: {}", e.localizedDescription())))?;
        Ok(Pipeline { state, kernel })
    }

    /// Encodes `dispatches` in order into one command buffer (one compute encoder:
    /// Metal orders the dispatches and tracks the buffers' hazards), commits it and
    /// waits for it; a GPU error is an `Err`.
    pub fn run(&self, dispatches: &[(Arc<Pipeline>, Dispatch<'_>)]) -> Result<()> {
        let cb = self
            .queue
            .commandBuffer()
            .ok_or_else(|| err("could not create a command buffer"))?;
        let enc = cb
            .computeCommandEncoder()
            .ok_or_else(|| err("could not create a compute encoder"))?;
        for (pipe, d) in dispatches {
            let k = &pipe.kernel;
            enc.setComputePipelineState(&pipe.state);
            let mut sizes = vec![];
            for &(binding, _) in &k.buffers {
                if binding == 0 {
                    // The parameters: at most a few dozen words, inline.
                    let words = if d.params.is_empty() {
                        &[0u32][..]
                    } else {
                        d.params
                    };
                    // SAFETY: the pointer and length describe `words`, which Metal
                    // copies before this call returns.
                    unsafe {
                        enc.setBytes_length_atIndex(
                            NonNull::from(words).cast::<c_void>(),
                            std::mem::size_of_val(words),
                            0,
                        );
                    }
                    continue;
                }
                let buf = d
                    .buffers
                    .get(binding as usize - 1)
                    .ok_or_else(|| err(format!("{}: no buffer for binding {binding}", k.entry)))?;
                // SAFETY: the buffer is retained by the caller until run returns,
                // which waits for the command buffer.
                unsafe { enc.setBuffer_offset_atIndex(Some(&buf.raw), 0, binding as usize) };
                if k.sized.contains(&binding) {
                    sizes.push(buf.len as u32);
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
        cb.commit();
        cb.waitUntilCompleted();
        if cb.status() == MTLCommandBufferStatus::Error {
            let msg = cb
                .error()
                .map(|e| e.localizedDescription().to_string())
                .unwrap_or_else(|| "unknown".into());
            return Err(err(format!("command buffer failed: {msg}")));
        }
        Ok(())
    }
}
