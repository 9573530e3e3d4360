//! Kernels users write in a few lines of WGSL: [`WgslKernel`], the counterpart of
//! MLX's `mx.fast.metal_kernel`.

use crate::{CustomEval, GpuBuffer, kerr};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use wmx_core::{Array, CustomPrimitive, DType, Error, GpuContext, Result};
use wmx_kernels as k;
use wmx_kernels::Driver;

/// A template parameter of a [`WgslKernel`]: the kernel is specialised (and
/// compiled once) per distinct set of values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Template {
    /// A type: `alias NAME = f32;` (f32, f16, i32 or u32).
    DType(DType),
    /// `const NAME: i32 = value;`
    Int(i32),
    /// `const NAME: u32 = value;`
    Uint(u32),
    /// `const NAME: f32 = value;`
    Float(f32),
    /// `const NAME: bool = value;`
    Bool(bool),
}

/// How one call of a [`WgslKernel`] runs: the outputs, the threads, the template.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// Each output's shape and dtype (f32, f16, i32 or u32), in the kernel's order.
    pub outputs: Vec<(Vec<usize>, DType)>,
    /// Threads in each dimension (not workgroups); each runs the body once.
    pub grid: [u32; 3],
    /// Threads per workgroup (at most the device's limit, usually 256 in all).
    pub workgroup: [u32; 3],
    /// Template parameters by name.
    pub template: Vec<(String, Template)>,
    /// A value every output holds before the kernel runs (else their contents
    /// are unspecified until written): the start of an accumulation.
    pub init_value: Option<f64>,
}

impl Launch {
    /// One thread per output element in workgroups of 256, no template: the
    /// usual elementwise launch (`global_id.x` is the output's row-major index).
    pub fn elementwise(shape: &[usize], dtype: DType) -> Launch {
        let n = wmx_core::layout::numel(shape);
        Launch {
            outputs: vec![(shape.to_vec(), dtype)],
            grid: [u32::try_from(n).unwrap_or(u32::MAX), 1, 1],
            workgroup: [256, 1, 1],
            template: Vec::new(),
            init_value: None,
        }
    }
    /// Adds an output (after those already there).
    pub fn output(mut self, shape: &[usize], dtype: DType) -> Launch {
        self.outputs.push((shape.to_vec(), dtype));
        self
    }
    /// Fills every output with `value` before the kernel runs.
    pub fn init_value(mut self, value: f64) -> Launch {
        self.init_value = Some(value);
        self
    }
    /// Adds a template parameter.
    pub fn template(mut self, name: &str, value: Template) -> Launch {
        self.template.push((name.to_string(), value));
        self
    }
}

/// A WGSL kernel body wrapped by wmx: bindings, shape and stride helpers and the
/// entry point are generated (see [`k::KernelSource`] for every name in scope),
/// the module is specialised per input dtypes and ranks and template values,
/// validated by naga when called (an invalid body is an `Err` with naga's message
/// at [`WgslKernel::call`]), compiled once per device and run inside wmx's batch.
/// Natively and in the browser; on a WebGPU device only.
///
/// ```no_run
/// use wmx_core::{Array, DType};
/// use wmx_webgpu::{Launch, WgslKernel};
/// # fn main() -> wmx_core::Result<()> {
/// let dev = wmx_webgpu::open()?;
/// let x = Array::from_slice_on(&[0.0f32, 1.0, 2.0], &[3], &dev)?;
/// // y = exp(x) * SCALE, reading x through its layout (any view works).
/// let k = WgslKernel::new("scaled_exp", &["x"], &["y"], "
///     let i = global_id.x;
///     y[i] = exp(x[x_loc(i)]) * T(SCALE);
/// ").row_contiguous(false);
/// let launch = Launch::elementwise(x.shape(), DType::F32)
///     .template("T", wmx_webgpu::Template::DType(DType::F32))
///     .template("SCALE", wmx_webgpu::Template::Float(2.0));
/// let y = k.call(&[&x], &launch)?.remove(0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct WgslKernel {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    name: String,
    inputs: Vec<String>,
    outputs: Vec<String>,
    body: String,
    header: String,
    row_contiguous: bool,
    guard: bool,
    atomic_outputs: bool,
    /// Validated sources by specialisation.
    sources: Mutex<HashMap<Spec, Arc<str>>>,
}

/// What a source is specialised on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Spec {
    inputs: Vec<(DType, usize)>,
    outputs: Vec<(DType, usize)>,
    workgroup: [u32; 3],
    /// Template values, as their Debug text (f32 has no Eq).
    template: Vec<(String, String)>,
}

/// Distinct specialisations one kernel keeps (beyond it the cache starts over).
const MAX_SPECS: usize = 256;

impl WgslKernel {
    /// A kernel named `name` (errors and labels) reading the arrays `inputs` and
    /// writing the arrays `outputs`, whose entry point runs `body`.
    pub fn new(name: &str, inputs: &[&str], outputs: &[&str], body: &str) -> WgslKernel {
        WgslKernel {
            inner: Arc::new(Inner {
                name: name.to_string(),
                inputs: inputs.iter().map(|s| s.to_string()).collect(),
                outputs: outputs.iter().map(|s| s.to_string()).collect(),
                body: body.to_string(),
                header: String::new(),
                row_contiguous: true,
                guard: true,
                atomic_outputs: false,
                sources: Mutex::new(HashMap::new()),
            }),
        }
    }

    fn with(self, f: impl FnOnce(&mut Inner)) -> WgslKernel {
        let i = &self.inner;
        let mut inner = Inner {
            name: i.name.clone(),
            inputs: i.inputs.clone(),
            outputs: i.outputs.clone(),
            body: i.body.clone(),
            header: i.header.clone(),
            row_contiguous: i.row_contiguous,
            guard: i.guard,
            atomic_outputs: i.atomic_outputs,
            sources: Mutex::new(HashMap::new()),
        };
        f(&mut inner);
        WgslKernel {
            inner: Arc::new(inner),
        }
    }

    /// WGSL placed before the entry point (helper functions, constants).
    pub fn header(self, source: &str) -> WgslKernel {
        self.with(|i| i.header = source.to_string())
    }

    /// Whether inputs are made row-contiguous first (default `true`, as MLX's
    /// `ensure_row_contiguous`): then `x[i]` is element `i`. With `false` the
    /// kernel reads views in place through `x_loc(i)` (or `x_offset`/`x_stride`).
    pub fn row_contiguous(self, on: bool) -> WgslKernel {
        self.with(|i| i.row_contiguous = on)
    }

    /// Whether threads past `grid` return before the body (default `true`). Turn
    /// it off for a body with barriers, and compare `global_id` with `grid` there.
    pub fn guard(self, on: bool) -> WgslKernel {
        self.with(|i| i.guard = on)
    }

    /// Whether outputs are `array<atomic<T>>` (i32 or u32) for bodies that
    /// accumulate with `atomicAdd`, `atomicMax`, ... (default `false`; MLX's
    /// `atomic_outputs`). Usually with [`Launch::init_value`].
    pub fn atomic_outputs(self, on: bool) -> WgslKernel {
        self.with(|i| i.atomic_outputs = on)
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The generated WGSL for these inputs and launch (what [`WgslKernel::call`]
    /// compiles), for reading and debugging.
    pub fn source(&self, inputs: &[&Array], launch: &Launch) -> Result<String> {
        let spec = self.spec(inputs, launch)?;
        Ok(self.generate(&spec, launch)?.to_string())
    }

    /// The outputs computed by the kernel from `inputs` (lazy, on the inputs'
    /// WebGPU device; one dispatch writes them all). Bad names, dtypes, sizes or
    /// WGSL are an `Err` here.
    pub fn call(&self, inputs: &[&Array], launch: &Launch) -> Result<Vec<Array>> {
        let name = &self.inner.name;
        let spec = self.spec(inputs, launch)?;
        let device = match inputs.first() {
            Some(x) => x.device().clone(),
            None => wmx_core::default_device()?,
        };
        if crate::backend(&device).is_none() {
            return Err(Error::Invalid {
                op: "wgsl_kernel",
                msg: format!("kernel {name} runs on a WebGPU device, not on {device}"),
            });
        }
        if let Some(x) = inputs.iter().find(|x| x.device() != &device) {
            return Err(Error::Invalid {
                op: "wgsl_kernel",
                msg: format!(
                    "kernel {name}: inputs on {device} and {}: move them to one device",
                    x.device()
                ),
            });
        }
        let source = self.generate(&spec, launch)?;
        let ins = inputs
            .iter()
            .map(|x| {
                if self.inner.row_contiguous {
                    wmx_core::contiguous(x)
                } else {
                    Ok((*x).clone())
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let extra: Extra = Arc::new(Mutex::new(Vec::new()));
        let prim = KernelCall {
            kernel: self.clone(),
            source,
            launch: launch.clone(),
            extra: extra.clone(),
        };
        // Output 0 is the kernel's node; the others are nodes taking the buffers
        // the kernel wrote (they depend on it, so it runs first).
        wmx_core::with_device(&device, || {
            let (shape, dtype) = &launch.outputs[0];
            let first = wmx_core::custom(Arc::new(prim), &ins, shape, *dtype)?;
            let mut outs = vec![first.clone()];
            for (j, (shape, dtype)) in launch.outputs.iter().enumerate().skip(1) {
                let sibling = Sibling {
                    name: format!("{name}:{}", self.inner.outputs[j]),
                    extra: extra.clone(),
                    index: j - 1,
                };
                let only = std::slice::from_ref(&first);
                outs.push(wmx_core::custom(Arc::new(sibling), only, shape, *dtype)?);
            }
            Ok(outs)
        })
    }

    fn spec(&self, inputs: &[&Array], launch: &Launch) -> Result<Spec> {
        let i = &self.inner;
        if launch.outputs.len() != i.outputs.len() {
            return Err(Error::Invalid {
                op: "wgsl_kernel",
                msg: format!(
                    "kernel {} writes {} outputs ({}), the launch describes {}",
                    i.name,
                    i.outputs.len(),
                    i.outputs.join(", "),
                    launch.outputs.len()
                ),
            });
        }
        if inputs.len() != i.inputs.len() {
            return Err(Error::Invalid {
                op: "wgsl_kernel",
                msg: format!(
                    "kernel {} takes {} inputs ({}), got {}",
                    i.name,
                    i.inputs.len(),
                    i.inputs.join(", "),
                    inputs.len()
                ),
            });
        }
        for (n, v) in &launch.template {
            if let Template::DType(d) = v {
                user_dtype(*d).map_err(|_| Error::Invalid {
                    op: "wgsl_kernel",
                    msg: format!(
                        "kernel {}: template type {n} is {d}, which WGSL cannot hold",
                        i.name
                    ),
                })?;
            }
        }
        Ok(Spec {
            inputs: inputs.iter().map(|x| (x.dtype(), x.ndim())).collect(),
            outputs: launch.outputs.iter().map(|(s, d)| (*d, s.len())).collect(),
            workgroup: launch.workgroup,
            template: launch
                .template
                .iter()
                .map(|(n, v)| (n.clone(), format!("{v:?}")))
                .collect(),
        })
    }

    /// The generator's view of a specialisation: its arrays, then its template.
    fn source_spec<'a>(
        &'a self,
        args: &'a [k::KernelArg<'a>],
        template: &'a [(&'a str, k::TemplateArg)],
        workgroup: [u32; 3],
    ) -> k::KernelSource<'a> {
        let i = &self.inner;
        let n = i.inputs.len();
        k::KernelSource {
            name: &i.name,
            header: &i.header,
            body: &i.body,
            inputs: &args[..n],
            outputs: &args[n..],
            template,
            workgroup,
            guard: i.guard,
            atomic_outputs: i.atomic_outputs,
        }
    }

    /// The arrays of a specialisation: inputs, then the outputs.
    fn args(
        &self,
        inputs: &[(DType, usize)],
        outputs: &[(DType, usize)],
    ) -> Result<Vec<k::KernelArg<'_>>> {
        let i = &self.inner;
        let kd = |d: DType, what: &str| {
            user_dtype(d).map_err(|_| Error::Invalid {
                op: "wgsl_kernel",
                msg: format!("kernel {}: {what} is {d}, which WGSL cannot hold", i.name),
            })
        };
        let names = i.inputs.iter().chain(&i.outputs);
        inputs
            .iter()
            .chain(outputs)
            .zip(names)
            .map(|(&(d, ndim), n)| {
                Ok(k::KernelArg {
                    name: n,
                    dtype: kd(d, n)?,
                    ndim,
                })
            })
            .collect()
    }

    /// The naga-validated source of a specialisation (cached per kernel).
    fn generate(&self, spec: &Spec, launch: &Launch) -> Result<Arc<str>> {
        let i = &self.inner;
        if let Some(s) = i.sources.lock().unwrap().get(spec) {
            return Ok(s.clone());
        }
        let bad = |e: k::Error| Error::Invalid {
            op: "wgsl_kernel",
            msg: e.to_string(),
        };
        let args = self.args(&spec.inputs, &spec.outputs)?;
        let template = template_args(&launch.template);
        let src = self
            .source_spec(&args, &template, spec.workgroup)
            .wgsl()
            .map_err(bad)?;
        k::validate_wgsl(&i.name, &src, "wmx_main").map_err(bad)?;
        let src: Arc<str> = src.into();
        let mut cache = i.sources.lock().unwrap();
        if cache.len() >= MAX_SPECS {
            cache.clear();
        }
        cache.insert(spec.clone(), src.clone());
        Ok(src)
    }
}

/// `d`, or an `Err` for i64/u64, which user kernels cannot bind (the library's
/// own kernels hold them as pairs of words).
fn user_dtype(d: DType) -> Result<DType> {
    if matches!(d, DType::I64 | DType::U64) {
        return Err(Error::Invalid {
            op: "wgsl_kernel",
            msg: format!("{d} has no WGSL type"),
        });
    }
    Ok(d)
}

fn template_args(t: &[(String, Template)]) -> Vec<(&str, k::TemplateArg)> {
    t.iter()
        .map(|(n, v)| {
            let a = match *v {
                // user_dtype fails only for i64/u64, which `args` rejects for arrays; a
                // template type gets the same message from the generator.
                Template::DType(d) => {
                    k::TemplateArg::DType(user_dtype(d).unwrap_or(k::DType::Bool))
                }
                Template::Int(x) => k::TemplateArg::Int(x),
                Template::Uint(x) => k::TemplateArg::Uint(x),
                Template::Float(x) => k::TemplateArg::Float(x),
                Template::Bool(x) => k::TemplateArg::Bool(x),
            };
            (n.as_str(), a)
        })
        .collect()
}

/// Buffers of outputs 1.. written by a kernel call, until their nodes take them.
type Extra = Arc<Mutex<Vec<Option<Box<dyn std::any::Any + Send>>>>>;

/// One call of a [`WgslKernel`], as a custom primitive: output 0 is its own.
#[derive(Debug)]
pub(crate) struct KernelCall {
    kernel: WgslKernel,
    source: Arc<str>,
    launch: Launch,
    extra: Extra,
}

impl CustomPrimitive for KernelCall {
    fn name(&self) -> &str {
        &self.kernel.inner.name
    }

    fn eval_webgpu(&self, gpu: &mut GpuContext<'_>) -> Result<()> {
        self.run(gpu.get::<CustomEval>()?)
    }
}

impl KernelCall {
    /// Records the call on any driver (the GPU backend calls this directly, so
    /// WGSL kernels run on wmx-metal too).
    pub(crate) fn run<D: Driver>(&self, ev: &mut CustomEval<D>) -> Result<()> {
        let kn = &self.kernel;
        let l = &self.launch;
        let pipe = ev.pipeline(&k::UserModule {
            label: &kn.inner.name,
            source: &self.source,
            entry: "wmx_main",
            outputs: l.outputs.len(),
            inputs: kn.inner.inputs.len(),
        })?;
        let ins: Vec<(DType, usize)> = ev
            .inputs()
            .iter()
            .map(|x| (x.dtype, x.layout.ndim()))
            .collect();
        let outs: Vec<(DType, usize)> = l.outputs.iter().map(|(s, d)| (*d, s.len())).collect();
        let args = kn.args(&ins, &outs)?;
        let template = template_args(&l.template);
        let src = kn.source_spec(&args, &template, l.workgroup);
        let views: Vec<(usize, &[usize], &[isize])> = ev
            .inputs()
            .iter()
            .map(|x| (x.layout.offset, &x.layout.shape[..], &x.layout.strides[..]))
            .collect();
        let shapes: Vec<&[usize]> = l.outputs.iter().map(|(s, _)| &s[..]).collect();
        let max = ev.kernels().caps().max_workgroups_per_dim;
        let (params, groups) = src.launch(l.grid, &views, &shapes, max).map_err(kerr)?;
        let mut extra = Vec::new();
        let mut bufs = vec![ev.output().buffer.clone()];
        for (shape, dtype) in &l.outputs[1..] {
            let (b, g) = ev.alloc(shape, *dtype)?;
            extra.push(Some(Box::new(b) as Box<dyn std::any::Any + Send>));
            bufs.push(g);
        }
        if let Some(v) = l.init_value {
            for (b, (shape, dtype)) in bufs.iter().zip(&l.outputs) {
                fill(ev, b, wmx_core::layout::numel(shape), *dtype, v)?;
            }
        }
        bufs.extend(ev.inputs().iter().map(|x| x.buffer.clone()));
        let refs: Vec<&D::Buffer> = bufs.iter().collect();
        ev.dispatch(&pipe, &refs, &params, groups)?;
        *self.extra.lock().unwrap() = extra;
        Ok(())
    }
}

/// Output `index + 1` of a kernel call: the buffer the call wrote.
#[derive(Debug)]
pub(crate) struct Sibling {
    name: String,
    extra: Extra,
    index: usize,
}

impl CustomPrimitive for Sibling {
    fn name(&self) -> &str {
        &self.name
    }

    fn eval_webgpu(&self, gpu: &mut GpuContext<'_>) -> Result<()> {
        self.run(gpu.get::<CustomEval>()?)
    }
}

impl Sibling {
    /// Hands on the buffer the call wrote, on any driver.
    pub(crate) fn run<D: Driver>(&self, ev: &mut CustomEval<D>) -> Result<()> {
        let taken = self
            .extra
            .lock()
            .unwrap()
            .get_mut(self.index)
            .and_then(Option::take);
        let b = taken
            .and_then(|b| b.downcast::<GpuBuffer<D>>().ok())
            .ok_or_else(|| Error::Invalid {
                op: "wgsl_kernel",
                msg: format!(
                    "{}: the kernel's call did not produce this output",
                    self.name
                ),
            })?;
        ev.set_output(*b)
    }
}

/// Fills the first `n` elements of `dtype` in `b` with `value`, as u32 words
/// holding its bits (two copies for 16-bit types), recorded into the batch.
fn fill<D: Driver>(
    ev: &mut CustomEval<D>,
    b: &D::Buffer,
    n: usize,
    dtype: DType,
    value: f64,
) -> Result<()> {
    const FILL: &str = "@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) w: vec3<u32>) {
    let i = g.x + g.y * w.x * 256u;
    if (i < p[0]) { out[i] = p[1]; }
}";
    let bits = match dtype {
        DType::F32 => (value as f32).to_bits(),
        DType::I32 => value as i32 as u32,
        DType::U32 => value as u32,
        DType::F16 => {
            let h = wmx_core::f16::from_f64(value).to_bits() as u32;
            h | h << 16
        }
        d => {
            return Err(Error::invalid(
                "wgsl_kernel",
                format!("init_value for a {d} output"),
            ));
        }
    };
    let words = (n * dtype.size()).div_ceil(4);
    let pipe = ev.pipeline(&k::UserModule {
        label: "wmx_fill",
        source: FILL,
        entry: "main",
        outputs: 1,
        inputs: 0,
    })?;
    let groups = ev
        .kernels()
        .grid(words.div_ceil(256) as u64)
        .map_err(kerr)?;
    ev.dispatch(&pipe, &[b], &[words as u32, bits], groups)
}
