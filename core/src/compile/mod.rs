//! Execution modes and compiled functions (MLX's `compile`).
//!
//! - [`Mode`]: compiled (the default: ops build a graph, and [`eval`](crate::eval)
//!   computes it with the graph's elementwise chains fused into generated
//!   kernels), lazy (the graph computed op by op, one library kernel each), eager
//!   (every op computes its result when it is made, so an error comes from the op
//!   that caused it). Set by `WMX_MODE=compiled|lazy|eager`, [`set_mode`], or
//!   [`with_mode`] for a scope; a [`Compiled`] function can fix its own with
//!   [`Compiled::mode`].
//! - [`compile`]: the first call for a signature (argument shapes, strides, dtypes
//!   and device) traces the function, simplifies the graph (common subexpressions
//!   merged, constants computed once and kept) and, on a backend that fuses (the
//!   WebGPU one), groups each maximal elementwise subgraph into one
//!   [`FusedKernel`]: one generated kernel, one read of each input, one write.
//!   Later calls with the signature replay the plan, skipping the planning that
//!   compiled mode does at every eval. The CPU backend replays the simplified
//!   graph with its own kernels.
//! - [`async_eval`] submits work without waiting; [`synchronize`] waits.
//!
//! `docs/COMPILE.md` is the user's guide.

mod fused;
mod program;

pub use fused::{FusedKernel, FusedOp, FusedStep};

use crate::{Array, DType, Device, Error, Result};
use program::Program;
pub(crate) use program::fuse_pending;
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// How ops and compiled functions execute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Ops build a graph; `eval` (or a read) computes it op by op, each with the
    /// library's own kernel (compare with it, or debug, when fusion is in doubt).
    /// Compiled functions trace once per signature and replay.
    Lazy,
    /// Every op computes its result when it is made: slower, but an error is
    /// returned by the op that caused it. Compiled functions run uncompiled.
    Eager,
    /// The default: as lazy, and every `eval` also fuses the elementwise chains of
    /// the pending graph into generated kernels (on backends that fuse), with no
    /// [`compile`] needed. Each step is rounded to its dtype as its own kernel
    /// would store it; a GPU compiler may still contract a product and a sum
    /// inside one kernel (the sum then differs by at most half a unit in the last
    /// place of the product, and is the correctly rounded one).
    Compiled,
}

impl Mode {
    /// Parses `lazy`, `eager` or `compiled` (the values of `WMX_MODE`).
    pub fn parse(s: &str) -> Result<Mode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "lazy" => Ok(Mode::Lazy),
            "eager" => Ok(Mode::Eager),
            "compiled" => Ok(Mode::Compiled),
            _ => Err(Error::invalid(
                "WMX_MODE",
                format!("{s:?} is not one of lazy, eager, compiled"),
            )),
        }
    }

    fn code(self) -> u8 {
        self as u8 + 1
    }

    fn from_code(c: u8) -> Option<Mode> {
        [Mode::Lazy, Mode::Eager, Mode::Compiled]
            .get((c as usize).wrapping_sub(1))
            .copied()
    }
}

/// The mode set by [`set_mode`] (0: none, use the environment).
static GLOBAL: AtomicU8 = AtomicU8::new(0);
static ENV: OnceLock<Result<Mode>> = OnceLock::new();

thread_local! {
    static SCOPED: Cell<Option<Mode>> = const { Cell::new(None) };
    /// Depth of compile traces running on this thread.
    static COMPILING: Cell<usize> = const { Cell::new(0) };
}

/// True while [`compile`] traces a function on this thread.
pub(crate) fn compiling() -> bool {
    COMPILING.with(Cell::get) > 0
}

/// Runs `f` marked as a compile trace.
fn compiling_scope<R>(f: impl FnOnce() -> R) -> R {
    crate::transforms::counted(&COMPILING, f)
}

/// The error of an eval inside a compile trace.
pub(crate) fn evaluated_while_compiling() -> Error {
    Error::invalid(
        "compile",
        "the function evaluated an array made while it was traced (eval, item or a read): \
         its graph would depend on the data; call it uncompiled",
    )
}

/// `WMX_MODE` as parsed (compiled when unset); an invalid value is an `Err`, which
/// [`eval`](crate::eval) returns.
pub(crate) fn env_mode() -> &'static Result<Mode> {
    ENV.get_or_init(|| match std::env::var("WMX_MODE") {
        Ok(s) => Mode::parse(&s),
        Err(_) => Ok(Mode::Compiled),
    })
}

/// The mode in force on this thread: [`with_mode`]'s scope, else [`set_mode`]'s,
/// else `WMX_MODE`, else compiled.
pub fn mode() -> Mode {
    if let Some(m) = SCOPED.with(Cell::get) {
        return m;
    }
    if let Some(m) = Mode::from_code(GLOBAL.load(Ordering::Relaxed)) {
        return m;
    }
    env_mode().as_ref().copied().unwrap_or(Mode::Compiled)
}

/// Sets the mode for every thread (a [`with_mode`] scope still wins).
pub fn set_mode(mode: Mode) {
    GLOBAL.store(mode.code(), Ordering::Relaxed);
}

/// Runs `f` with `mode` on this thread.
pub fn with_mode<R>(mode: Mode, f: impl FnOnce() -> R) -> R {
    crate::scoped::with_cell(&SCOPED, Some(mode), f)
}

thread_local! {
    /// Set while a [`Program`] replays on this thread.
    static REPLAYING: Cell<bool> = const { Cell::new(false) };
}

/// True while a compiled function replays its plan on this thread: the nodes it
/// makes are already fused.
pub(crate) fn replaying() -> bool {
    REPLAYING.with(Cell::get)
}

/// Runs `f` as a replay (see [`replaying`]).
fn as_replay<R>(f: impl FnOnce() -> R) -> R {
    crate::scoped::with_cell(&REPLAYING, true, f)
}

/// Fused kernels compiled mode has made at eval, in this process.
static FUSED_IN_EVAL: AtomicUsize = AtomicUsize::new(0);

/// How many fused kernels [`Mode::Compiled`] has made at eval so far in this
/// process (for inspection and tests; a [`Compiled`] function reports its own
/// with [`Compiled::report`]).
pub fn fused_at_eval() -> usize {
    FUSED_IN_EVAL.load(Ordering::Relaxed)
}

/// A new node as an op returns it: computed now in eager mode (not while a
/// transform traces), so the op that made it returns its error.
pub(crate) fn made(a: Array) -> Result<Array> {
    if mode() == Mode::Eager && !crate::transforms::tracing() {
        crate::eval(std::slice::from_ref(&a))?;
    }
    Ok(a)
}

/// Computes `outputs` like [`eval`](crate::eval) and submits the work to the
/// devices now, without waiting for it: a training loop can build step n+1 while
/// the GPU runs step n. A later read (or [`synchronize`]) waits for the results.
pub fn async_eval(outputs: &[Array]) -> Result<()> {
    crate::eval(outputs)?;
    let mut devices: Vec<&Device> = Vec::new();
    for o in outputs {
        if !devices.contains(&o.device()) {
            devices.push(o.device());
        }
    }
    for d in devices {
        d.backend().commit()?;
    }
    Ok(())
}

/// Waits until the default device has finished all submitted work
/// ([`Device::synchronize`] for another device).
pub fn synchronize() -> Result<()> {
    crate::default_device()?.synchronize()
}

type Function = dyn Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync;

/// What a trace is specialised to: each argument's shape, strides and dtype (not
/// its offset: views at another offset replay shifted), and the device.
#[derive(Clone, PartialEq)]
struct Signature {
    args: Vec<(Vec<usize>, Vec<isize>, DType)>,
    device: Device,
}

impl Signature {
    /// Whether `inputs` on `device` have this signature.
    fn matches(&self, inputs: &[Array], device: &Device) -> bool {
        self.device == *device
            && self.args.len() == inputs.len()
            && self
                .args
                .iter()
                .zip(inputs)
                .all(|((shape, strides, dtype), x)| {
                    x.dtype() == *dtype && x.shape() == &shape[..] && x.layout().strides == *strides
                })
    }
}

/// A function compiled by [`compile`]: call it like the function.
pub struct Compiled {
    f: Arc<Function>,
    mode: Option<Mode>,
    limit: usize,
    shapeless: bool,
    /// Most recently used first.
    cache: Mutex<Vec<(Signature, Arc<Program>)>>,
    traces: AtomicUsize,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("mode", &self.mode)
            .field("cache_limit", &self.limit)
            .field("cached", &self.cache_len())
            .field("traces", &self.traces())
            .finish()
    }
}

/// Compiles `f` (MLX's `mx.compile`): see the [module docs](self). `f` must be a
/// pure function of its arguments and of arrays it captures (those are constants
/// of the trace); one that reads data to decide what to compute (`item`, `eval`)
/// cannot be traced, and its call returns an `Err` saying so.
///
/// ```
/// # use wmx_core as wmx;
/// let gelu = wmx::compile(|a: &[wmx::Array]| {
///     let x = &a[0];
///     let x3 = &(x * x) * x;
///     let inner = &(x + &(&x3 * 0.044715)) * 0.7978845608;
///     Ok(vec![&(x * 0.5) * &(&wmx::tanh(&inner)? + 1.0)])
/// });
/// let x = wmx::Array::from_slice(&[-1.0f32, 0.0, 2.0], &[3])?;
/// let y = gelu.call(&[x])?;
/// assert!((y[0].to_vec::<f32>()?[2] - 1.9546).abs() < 1e-3);
/// # Ok::<(), wmx::Error>(())
/// ```
pub fn compile<F>(f: F) -> Compiled
where
    F: Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync + 'static,
{
    Compiled {
        f: Arc::new(f),
        mode: None,
        limit: 64,
        shapeless: false,
        cache: Mutex::new(Vec::new()),
        traces: AtomicUsize::new(0),
    }
}

/// What compiling did for one signature ([`Compiled::report`]).
#[derive(Debug, Clone)]
pub struct CompileReport {
    /// Ops the trace recorded.
    pub traced_ops: usize,
    /// Nodes a call makes now (each fused kernel counts once).
    pub nodes: usize,
    /// The fused kernels, in order.
    pub kernels: Vec<FusedReport>,
}

/// One fused kernel of a [`CompileReport`].
#[derive(Debug, Clone)]
pub struct FusedReport {
    /// The steps.
    pub kernel: Arc<FusedKernel>,
    /// The generated source on this device (WGSL on WebGPU), where it has one.
    pub source: Option<String>,
}

impl Compiled {
    /// Runs this function in `mode` whatever the thread's mode is (eager: call it
    /// uncompiled, op by op).
    pub fn mode(mut self, mode: Mode) -> Compiled {
        self.mode = Some(mode);
        self
    }

    /// Re-uses a trace for arguments of other shapes where that is sound (MLX's
    /// `shapeless`): when the function is purely elementwise on arguments of one
    /// shape, with scalar constants; other functions still trace per shape.
    pub fn shapeless(mut self, on: bool) -> Compiled {
        self.shapeless = on;
        self
    }

    /// Keeps at most `n` traces (least recently used evicted first; default 64).
    pub fn cache_limit(mut self, n: usize) -> Compiled {
        self.limit = n.max(1);
        self
    }

    /// Calls the function: the first call for a signature traces and plans it,
    /// later calls replay. Results are lazy, like the function's own.
    pub fn call(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        let mode = self.mode.unwrap_or_else(mode);
        // Inside a transform the function is traced by it: run it as written.
        if mode == Mode::Eager || crate::transforms::tracing() {
            return with_mode(mode, || (self.f)(inputs));
        }
        let (p, shape) = self.program(inputs)?;
        as_replay(|| p.replay(inputs, shape.as_deref()))
    }

    /// Like [`call`](Self::call) for a function of one argument and one result.
    pub fn call1(&self, x: &Array) -> Result<Array> {
        let mut out = self.call(std::slice::from_ref(x))?;
        if out.len() != 1 {
            return Err(Error::invalid(
                "compile",
                format!("call1: the function returned {} arrays", out.len()),
            ));
        }
        Ok(out.remove(0))
    }

    /// What compiling does for `inputs`' signature (tracing it if needed): op
    /// counts before and after, and each fused kernel with its generated source.
    pub fn report(&self, inputs: &[Array]) -> Result<CompileReport> {
        let (p, _) = self.program(inputs)?;
        let device = p.device.clone();
        let kernels = p
            .fused(inputs)
            .into_iter()
            .map(|(kernel, ins)| {
                let views: Vec<(DType, crate::Layout)> = ins
                    .iter()
                    .map(|a| (a.dtype(), a.layout().clone()))
                    .collect();
                let source = device.backend().fused_source(&kernel, &views);
                FusedReport { kernel, source }
            })
            .collect();
        Ok(CompileReport {
            traced_ops: p.traced_steps,
            nodes: p.nodes(),
            kernels,
        })
    }

    /// Traces held now.
    pub fn cache_len(&self) -> usize {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Traces made so far (a call that hit the cache made none).
    pub fn traces(&self) -> usize {
        self.traces.load(Ordering::Relaxed)
    }

    /// The program for `inputs`, and the shape to replay it at when it was traced
    /// for another (shapeless).
    fn program(&self, inputs: &[Array]) -> Result<(Arc<Program>, Option<Vec<usize>>)> {
        let device = match inputs.first() {
            Some(x) => x.device().clone(),
            None => crate::default_device()?,
        };
        if let Some(x) = inputs.iter().find(|x| x.device() != &device) {
            return Err(Error::invalid(
                "compile",
                format!(
                    "arguments on {} and {}: a compiled function runs on one device",
                    device.name(),
                    x.device().name()
                ),
            ));
        }
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            // Compared in place: a step's arguments (every parameter) are many.
            if let Some(i) = cache.iter().position(|(s, _)| s.matches(inputs, &device)) {
                let hit = cache.remove(i);
                let p = hit.1.clone();
                cache.insert(0, hit);
                return Ok((p, None));
            }
        }
        let sig = Signature {
            args: inputs
                .iter()
                .map(|x| (x.shape().to_vec(), x.layout().strides.clone(), x.dtype()))
                .collect(),
            device: device.clone(),
        };
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            let one_shape = inputs.iter().all(|x| x.shape() == inputs[0].shape());
            if self.shapeless && one_shape && !inputs.is_empty() {
                let same_types = |s: &Signature| {
                    s.device == sig.device
                        && s.args.len() == sig.args.len()
                        && s.args.iter().zip(&sig.args).all(|(a, b)| a.2 == b.2)
                };
                if let Some(i) = cache
                    .iter()
                    .position(|(s, p)| same_types(s) && p.shape_free())
                {
                    let hit = cache.remove(i);
                    let p = hit.1.clone();
                    cache.insert(0, hit);
                    return Ok((p, Some(inputs[0].shape().to_vec())));
                }
            }
        }
        // Traced outside the lock: the function may call other compiled functions.
        let p = Arc::new(compiling_scope(|| {
            Program::trace(&*self.f, inputs, &device)
        })?);
        self.traces.fetch_add(1, Ordering::Relaxed);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.insert(0, (sig, p.clone()));
        cache.truncate(self.limit);
        Ok((p, None))
    }
}
