//! What a custom primitive's WebGPU code receives: [`CustomEval`].

use crate::pool::Shared;
use crate::{GpuBackend, GpuBuffer, kerr, new_output};
use std::sync::Arc;
use wmx_core::{CustomPrimitive, DType, GpuContext, Layout, Result, View};
use wmx_kernels as k;
use wmx_kernels::{Driver, Wgpu};

/// An input of a custom primitive on the GPU.
#[derive(Debug, Clone)]
pub struct GpuInput<B = wgpu::Buffer> {
    /// The buffer holding the elements (bind it read-only).
    pub buffer: B,
    /// Element type. Bool, u8 and bf16 are packed four or two to a u32 word.
    pub dtype: DType,
    /// Shape, strides and offset, in elements.
    pub layout: Layout,
}

/// The output of a custom primitive on the GPU: a fresh buffer of at least
/// `numel(shape) * dtype.size()` bytes (rounded up to whole u32 words), to be
/// filled row-major.
#[derive(Debug, Clone)]
pub struct GpuOutput<B = wgpu::Buffer> {
    /// The buffer to write.
    pub buffer: B,
    /// Element type.
    pub dtype: DType,
    /// Row-major shape.
    pub shape: Vec<usize>,
}

/// The context of [`CustomPrimitive::eval_webgpu`]: take it with
/// `gpu.get::<CustomEval>()?` (on `wmx-metal`, `CustomEval<wmx_metal::Metal>`, whose
/// buffers are Metal's). Dispatches go into wmx's current batch, in order
/// after the kernels of the primitive's inputs and before its consumers': the
/// primitive costs no submit and no host round trip. If the code returns an `Err`
/// (or panics), what it recorded is dropped.
///
/// ```no_run
/// # use wmx_core::{GpuContext, Result};
/// # use wmx_webgpu::{CustomEval, UserModule};
/// # fn eval_webgpu(gpu: &mut GpuContext<'_>) -> Result<()> {
/// let ev = gpu.get::<CustomEval>()?;
/// let pipe = ev.pipeline(&UserModule {
///     label: "double",
///     source: "@group(0) @binding(1) var<storage, read_write> y: array<f32>;
///              @group(0) @binding(2) var<storage, read> x: array<f32>;
///              @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) {
///                  if (i.x < arrayLength(&x)) { y[i.x] = 2.0 * x[i.x]; }
///              }",
///     entry: "main",
///     outputs: 1,
///     inputs: 1,
/// })?;
/// let (y, x) = (ev.output().buffer.clone(), ev.inputs()[0].buffer.clone());
/// let n = ev.output().shape.iter().product::<usize>() as u32;
/// ev.dispatch(&pipe, &[&y, &x], &[], [n.div_ceil(64), 1, 1])
/// # }
/// ```
pub struct CustomEval<D: Driver = Wgpu> {
    pub(crate) kernels: k::Kernels<D>,
    shared: Arc<Shared<D>>,
    pub(crate) batch: k::Batch<D>,
    pub(crate) inputs: Vec<GpuInput<D::Buffer>>,
    pub(crate) output: GpuOutput<D::Buffer>,
    /// A buffer standing for the output instead of `output` ([`CustomEval::set_output`]).
    replaced: Option<GpuBuffer<D>>,
}

impl<D: Driver> CustomEval<D> {
    /// The inputs, in the order the primitive was given them.
    pub fn inputs(&self) -> &[GpuInput<D::Buffer>] {
        &self.inputs
    }
    /// The output to fill.
    pub fn output(&self) -> &GpuOutput<D::Buffer> {
        &self.output
    }
    /// The kernel library, and through it the wgpu device and queue.
    pub fn kernels(&self) -> &k::Kernels<D> {
        &self.kernels
    }
    /// A compiled pipeline of a WGSL module (validated by naga first, compiled once
    /// per source; see [`k::UserModule`] for the bindings).
    pub fn pipeline(&self, m: &k::UserModule<'_>) -> Result<k::UserPipeline<D>> {
        self.kernels.user_pipeline(m).map_err(kerr)
    }
    /// A fresh buffer of `shape`/`dtype` from wmx's pool, as a wmx buffer (hand it
    /// to another node with [`CustomEval::set_output`]) and as the wgpu buffer to bind.
    pub fn alloc(&self, shape: &[usize], dtype: DType) -> Result<(GpuBuffer<D>, D::Buffer)> {
        new_output(&self.shared, wmx_core::layout::numel(shape), dtype)
    }
    /// Makes `buffer` (a wmx buffer, e.g. one written by an earlier node's code)
    /// this primitive's output in place of [`CustomEval::output`]: an `Err` unless
    /// it holds exactly the output's bytes.
    pub fn set_output(&mut self, buffer: GpuBuffer<D>) -> Result<()> {
        let want = (wmx_core::layout::numel(&self.output.shape) * self.output.dtype.size()) as u64;
        if buffer.len_bytes() != want {
            return Err(wmx_core::Error::invalid(
                "custom",
                format!(
                    "set_output: a buffer of {} bytes for an output {:?} {} of {want}",
                    buffer.len_bytes(),
                    self.output.shape,
                    self.output.dtype
                ),
            ));
        }
        self.replaced = Some(buffer);
        Ok(())
    }
    /// Records `pipeline` over `workgroups` into wmx's batch, with `buffers` bound at
    /// 1.. (outputs, then inputs) and the parameter words `params` at binding 0.
    pub fn dispatch(
        &mut self,
        pipeline: &k::UserPipeline<D>,
        buffers: &[&D::Buffer],
        params: &[u32],
        workgroups: [u32; 3],
    ) -> Result<()> {
        self.batch
            .dispatch_user(pipeline, buffers, params, workgroups)
            .map_err(kerr)
    }
}

impl CustomEval<Wgpu> {
    /// The wgpu device (to create buffers of the primitive's own).
    pub fn device(&self) -> &wgpu::Device {
        self.kernels.device()
    }
}

impl<D: Driver> GpuBackend<D> {
    /// [`wmx_core::Backend::custom`]: runs `prim.eval_webgpu` on a [`CustomEval`]
    /// with a batch of its own, then appends that batch to the backend's (dropped if
    /// the code fails). No lock is held while the code runs, so it may evaluate
    /// other arrays of this device: their work is recorded after what came before
    /// this op, and this op's after theirs.
    pub(crate) fn run_custom(
        &self,
        prim: &dyn CustomPrimitive,
        inputs: &[View<'_, GpuBuffer<D>>],
        shape: &[usize],
        dtype: DType,
    ) -> Result<GpuBuffer<D>> {
        self.check()?;
        let inputs = inputs
            .iter()
            .map(|v| {
                Ok(GpuInput {
                    buffer: self.gpu(v.buffer)?,
                    dtype: v.dtype,
                    layout: v.layout.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let (out, g) = new_output(&self.shared, wmx_core::layout::numel(shape), dtype)?;
        let mut ev = CustomEval {
            kernels: self.kernels.clone(),
            shared: self.shared.clone(),
            replaced: None,
            batch: k::Batch::new(),
            inputs,
            output: GpuOutput {
                buffer: g,
                dtype,
                shape: shape.to_vec(),
            },
        };
        // Core's families and WGSL kernels (`WgslKernel`) are this backend's own
        // primitives and run on any driver; other primitives bring code per backend. A failed op's
        // dispatches go with `ev`; the backend's batch never saw them.
        let any: &dyn std::any::Any = prim;
        if let Some(done) = crate::families::eval(any, &mut ev) {
            done
        } else if let Some(call) = any.downcast_ref::<crate::kernel::KernelCall>() {
            call.run(&mut ev)
        } else if let Some(sibling) = any.downcast_ref::<crate::kernel::Sibling>() {
            sibling.run(&mut ev)
        } else if std::any::TypeId::of::<D>() == std::any::TypeId::of::<Wgpu>() {
            prim.eval_webgpu(&mut GpuContext::new(&self.name, &mut ev))
        } else {
            prim.eval_metal(&mut GpuContext::new(&self.name, &mut ev))
        }?;
        let mut batch = self.lock_batch();
        batch.append(std::mem::take(&mut ev.batch));
        if batch.len() >= crate::MAX_BATCH {
            self.submit(&mut batch)?;
        }
        Ok(ev.replaced.take().unwrap_or(out))
    }
}
