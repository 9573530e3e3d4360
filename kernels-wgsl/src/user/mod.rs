//! Kernels written by users: whole WGSL modules ([`Kernels::user_pipeline`],
//! recorded with [`Batch::dispatch_user`]), and kernel bodies that wmx wraps in
//! bindings, shape and stride helpers and an entry point ([`KernelSource`]).

use crate::driver::Driver;
use crate::driver::{Batch, MAX_USER_BUFFERS};
use crate::driver::{Bound, Dispatch};
use crate::{DType, Error, Kernels, Result};
use std::fmt::Write;
use std::sync::Arc;

/// A user's WGSL module and how it binds its buffers, for [`Kernels::user_pipeline`].
///
/// Bindings of `@group(0)`: `@binding(0)` may declare the parameters as
/// `var<storage, read> p: array<u32>` (the words passed to [`Batch::dispatch_user`]);
/// bindings `1..=outputs` are `var<storage, read_write>` outputs and the next
/// `inputs` bindings `var<storage, read>` inputs. A module need not declare every
/// binding.
#[derive(Debug, Clone, Copy)]
pub struct UserModule<'a> {
    /// Names the module in errors and in wgpu's labels.
    pub label: &'a str,
    /// WGSL source.
    pub source: &'a str,
    /// The `@compute` entry point.
    pub entry: &'a str,
    /// Writable buffers, bound at 1..
    pub outputs: usize,
    /// Read-only buffers, bound after the outputs.
    pub inputs: usize,
}

/// Cache key of a user pipeline: the module is compiled once per source, entry
/// point and binding counts. The source enters as a hash (looked up per dispatch,
/// it would otherwise be copied and hashed whole twice); the cached entry keeps the
/// source to compare on a hit.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct UserKey {
    source_hash: u64,
    entry: String,
    outputs: usize,
    inputs: usize,
}

/// A cached user pipeline and the source it was compiled from.
pub(crate) struct UserEntry<D: Driver> {
    source: Box<str>,
    pipe: Arc<D::Pipeline>,
}

/// The compiled user pipelines (a family cache of the kernel core).
type UserCache<D> = crate::driver::FxMap<UserKey, UserEntry<D>>;

fn source_hash(s: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    s.hash(&mut h);
    h.finish()
}

/// A compiled user module, ready to record with [`Batch::dispatch_user`]. Cheap to
/// clone.
pub struct UserPipeline<D: Driver = crate::Wgpu> {
    pipe: Arc<D::Pipeline>,
    label: Arc<str>,
    outputs: usize,
    inputs: usize,
    max_groups: u32,
}

impl<D: Driver> Clone for UserPipeline<D> {
    fn clone(&self) -> Self {
        UserPipeline {
            pipe: self.pipe.clone(),
            label: self.label.clone(),
            outputs: self.outputs,
            inputs: self.inputs,
            max_groups: self.max_groups,
        }
    }
}

impl<D: Driver> std::fmt::Debug for UserPipeline<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserPipeline")
            .field("label", &self.label)
            .field("outputs", &self.outputs)
            .field("inputs", &self.inputs)
            .finish()
    }
}

impl<D: Driver> Kernels<D> {
    /// Compiles a user's module (see [`UserModule`] for its bindings), once per
    /// source: naga validates it first, so an invalid module is an `Err` carrying
    /// naga's message with the offending line, returned here and not by a later
    /// call. Unlike the library's kernels, user code keeps wgpu's bounds checks.
    pub fn user_pipeline(&self, m: &UserModule<'_>) -> Result<UserPipeline<D>> {
        if let Some(budget) = self.inner.caps.loop_budget {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                eprintln!(
                    "wmx: adapter '{}' stops a shader's loops after {budget} iterations per \
                     invocation, silently: user kernels must loop less (docs/EXTENDING.md)",
                    self.inner.caps.adapter_name
                )
            });
        }
        let max = self.max_user_buffers();
        if m.outputs + m.inputs > max {
            return Err(Error::Shape(format!(
                "{}: {} outputs and {} inputs exceed the {max} buffers a kernel can bind here",
                m.label, m.outputs, m.inputs
            )));
        }
        let key = UserKey {
            source_hash: source_hash(m.source),
            entry: m.entry.to_string(),
            outputs: m.outputs,
            inputs: m.inputs,
        };
        let cached = self.family_cache(|c: &mut UserCache<D>| {
            c.get(&key)
                .filter(|e| &*e.source == m.source)
                .map(|e| e.pipe.clone())
        });
        let pipe = match cached {
            Some(p) => p,
            None => {
                let p = Arc::new(self.compile_module(
                    m.label,
                    m.source,
                    m.entry,
                    (m.outputs, m.inputs),
                    &[],
                    false,
                )?);
                let entry = UserEntry {
                    source: m.source.into(),
                    pipe: p.clone(),
                };
                // On a hash collision the newer source takes the slot.
                self.family_cache(|c: &mut UserCache<D>| c.insert(key, entry));
                p
            }
        };
        Ok(UserPipeline {
            pipe,
            label: m.label.into(),
            outputs: m.outputs,
            inputs: m.inputs,
            max_groups: self.inner.caps.max_workgroups_per_dim,
        })
    }

    /// Buffers one user kernel may bind on this device (outputs plus inputs).
    pub fn max_user_buffers(&self) -> usize {
        (self.inner.caps.max_storage_buffers as usize)
            .saturating_sub(1)
            .min(MAX_USER_BUFFERS)
    }

    /// Number of compiled user pipelines.
    pub fn user_pipeline_count(&self) -> usize {
        self.family_cache(|c: &mut UserCache<D>| c.len())
    }
}

impl<D: Driver> Batch<D> {
    /// Records a user pipeline over `workgroups`, binding `buffers` (outputs, then
    /// inputs, as the module declared) and the parameter words `params`. An output
    /// must not also be bound as an input.
    pub fn dispatch_user(
        &mut self,
        p: &UserPipeline<D>,
        buffers: &[&D::Buffer],
        params: &[u32],
        workgroups: [u32; 3],
    ) -> Result<()> {
        if buffers.len() != p.outputs + p.inputs {
            return Err(Error::Shape(format!(
                "{}: {} buffers bound, the pipeline declares {} outputs and {} inputs",
                p.label,
                buffers.len(),
                p.outputs,
                p.inputs
            )));
        }
        if let Some(&g) = workgroups.iter().find(|&&g| g > p.max_groups) {
            return Err(Error::Shape(format!(
                "{}: {g} workgroups in one dimension exceed the device's {}",
                p.label, p.max_groups
            )));
        }
        for (i, o) in buffers[..p.outputs].iter().enumerate() {
            if buffers.iter().skip(i + 1).any(|b| b == o) {
                return Err(Error::Shape(format!(
                    "{}: output {i} is bound twice (a dispatch cannot read and write one buffer)",
                    p.label
                )));
            }
        }
        if workgroups.contains(&0) {
            return Ok(());
        }
        let mut bound: Bound<D> = Default::default();
        for (slot, b) in bound.iter_mut().zip(buffers) {
            *slot = Some((*b).into());
        }
        self.dispatches.push(Dispatch {
            pipe: p.pipe.clone(),
            buffers: bound,
            params: params.to_vec(),
            groups: workgroups,
            work: None,
        });
        Ok(())
    }
}

/// A template parameter of a generated kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TemplateArg {
    /// `alias NAME = <wgsl type>;`
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

/// An array a generated kernel binds: its name in the body, element type and rank.
#[derive(Debug, Clone, Copy)]
pub struct KernelArg<'a> {
    /// The name the body uses.
    pub name: &'a str,
    /// Element type: f32, f16, i32 or u32 (the types WGSL can index directly).
    pub dtype: DType,
    /// Number of dimensions.
    pub ndim: usize,
}

/// A kernel body wrapped by wmx (the counterpart of MLX's `metal_kernel`): the
/// generated module declares, for each input `x` of rank `n` and type `T`,
/// `x: array<T>` and the helpers `x_ndim`, `x_shape(d)`, `x_stride(d)` (i32,
/// elements), `x_offset()`, `x_size()` and `x_loc(i)` (the buffer index of the
/// element at row-major position `i`); for each output `y`, `y: array<T>` (writable),
/// `y_ndim`, `y_shape(d)` and `y_size()`. Template parameters become aliases and
/// constants. The body runs with `global_id`, `local_id` and `group_id`
/// (`vec3<u32>`), `local_index: u32` and `grid: vec3<u32>` (the threads asked for)
/// in scope; with `guard`, threads past `grid` return first (a body using barriers
/// sets `guard` off and checks `grid` itself, since barriers need uniform control
/// flow).
#[derive(Debug, Clone, Copy)]
pub struct KernelSource<'a> {
    /// The kernel's name (labels and errors).
    pub name: &'a str,
    /// WGSL placed before the entry point: helper functions, constants.
    pub header: &'a str,
    /// The entry point's body.
    pub body: &'a str,
    /// Inputs, bound read-only in this order.
    pub inputs: &'a [KernelArg<'a>],
    /// Outputs, bound writable in this order.
    pub outputs: &'a [KernelArg<'a>],
    /// Template parameters.
    pub template: &'a [(&'a str, TemplateArg)],
    /// Threads per workgroup.
    pub workgroup: [u32; 3],
    /// Whether threads past `grid` return before the body.
    pub guard: bool,
    /// Outputs declared `array<atomic<T>>` (i32 or u32 only: WGSL has no float
    /// atomics), for bodies that accumulate with `atomicAdd` and friends.
    pub atomic_outputs: bool,
}

/// Words of the generated kernels' parameters before the arrays' own.
const HEAD_WORDS: usize = 4;

fn check_ident(kernel: &str, what: &str, name: &str) -> Result<()> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("wmx_")
        && !name.starts_with("__");
    if ok {
        Ok(())
    } else {
        Err(Error::Shape(format!(
            "{kernel}: {what} name `{name}` is not a WGSL identifier (or starts with the reserved wmx_ or __)"
        )))
    }
}

fn wgsl_type(kernel: &str, name: &str, d: DType) -> Result<&'static str> {
    Ok(match d {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::I32 => "i32",
        DType::U32 => "u32",
        DType::F64 => "f64",
        DType::I64 | DType::U64 => {
            return Err(Error::Shape(format!(
                "{kernel}: `{name}` is {d}, which WGSL has no type for; a kernel binds f32, f16, i32 or u32 arrays: convert with astype"
            )));
        }
        _ => {
            return Err(Error::Shape(format!(
                "{kernel}: `{name}` is {} (stored packed in u32 words); a kernel binds f32, f16, i32 or u32 arrays: convert with astype",
                d.name()
            )));
        }
    })
}

impl KernelSource<'_> {
    /// The full WGSL module, or an `Err` naming a bad name, dtype or size.
    pub fn wgsl(&self) -> Result<String> {
        let k = self.name;
        if self.outputs.is_empty() {
            return Err(Error::Shape(format!("{k}: a kernel needs an output")));
        }
        let mut names: Vec<&str> = Vec::new();
        for a in self.inputs.iter().chain(self.outputs) {
            check_ident(k, "array", a.name)?;
            names.push(a.name);
        }
        for (n, _) in self.template {
            check_ident(k, "template parameter", n)?;
            names.push(n);
        }
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(Error::Shape(format!("{k}: the name `{n}` is used twice")));
            }
        }
        if self.workgroup.contains(&0) {
            return Err(Error::Shape(format!("{k}: a workgroup dimension is 0")));
        }
        let mut f16 = false;
        let mut s = String::new();
        let mut decls = String::new();
        for (n, t) in self.template {
            let _ = match t {
                TemplateArg::DType(d) => {
                    f16 |= *d == DType::F16;
                    writeln!(decls, "alias {n} = {};", wgsl_type(k, n, *d)?)
                }
                TemplateArg::Int(v) => writeln!(decls, "const {n}: i32 = {v};"),
                TemplateArg::Uint(v) => writeln!(decls, "const {n}: u32 = {v}u;"),
                TemplateArg::Float(v) if v.is_finite() => {
                    // Debug prints the shortest text that parses back to v.
                    writeln!(decls, "const {n}: f32 = {v:?};")
                }
                TemplateArg::Float(v) => {
                    return Err(Error::Shape(format!(
                        "{k}: template parameter {n} = {v} is not finite"
                    )));
                }
                TemplateArg::Bool(v) => writeln!(decls, "const {n}: bool = {v};"),
            };
        }
        decls.push_str("@group(0) @binding(0) var<storage, read> wmx_p: array<u32>;\n");
        let mut word = HEAD_WORDS;
        let outs = self.outputs.iter().map(|a| (a, true));
        let ins = self.inputs.iter().map(|a| (a, false));
        for (b, (a, out)) in outs.chain(ins).enumerate() {
            let (n, nd) = (a.name, a.ndim);
            let ty = wgsl_type(k, n, a.dtype)?;
            f16 |= a.dtype == DType::F16;
            let access = if out { "read_write" } else { "read" };
            let elem = if out && self.atomic_outputs {
                if !matches!(a.dtype, DType::I32 | DType::U32) {
                    return Err(Error::Shape(format!(
                        "{k}: atomic output `{n}` is {}; WGSL atomics are i32 or u32",
                        a.dtype.name()
                    )));
                }
                format!("atomic<{ty}>")
            } else {
                ty.to_string()
            };
            let _ = writeln!(
                decls,
                "@group(0) @binding({}) var<storage, {access}> {n}: array<{elem}>;",
                b + 1
            );
            let _ = writeln!(decls, "const {n}_ndim: u32 = {nd}u;");
            if !out {
                let _ = writeln!(decls, "fn {n}_offset() -> u32 {{ return wmx_p[{word}u]; }}");
                word += 1;
            }
            let _ = writeln!(
                decls,
                "fn {n}_shape(d: u32) -> u32 {{ return wmx_p[{word}u + d]; }}"
            );
            let _ = writeln!(
                decls,
                "fn {n}_size() -> u32 {{ var s = 1u; for (var d = 0u; d < {nd}u; d++) {{ s *= {n}_shape(d); }} return s; }}"
            );
            word += nd;
            if !out {
                let _ = writeln!(
                    decls,
                    "fn {n}_stride(d: u32) -> i32 {{ return bitcast<i32>(wmx_p[{word}u + d]); }}"
                );
                let _ = writeln!(
                    decls,
                    "fn {n}_loc(i: u32) -> u32 {{ var r = i; var o = i32({n}_offset()); for (var d = {nd}i - 1; d >= 0; d--) {{ let e = {n}_shape(u32(d)); o += i32(r % e) * {n}_stride(u32(d)); r /= e; }} return u32(o); }}"
                );
                word += nd;
            }
        }
        if f16 {
            s.push_str("enable f16;\n");
        }
        let _ = writeln!(s, "// generated by wmx for kernel `{k}`");
        s.push_str(&decls);
        s.push_str(self.header);
        let [wx, wy, wz] = self.workgroup;
        let guard = if self.guard {
            "    if (any(global_id >= grid)) { return; }\n"
        } else {
            ""
        };
        let _ = write!(
            s,
            "\n@compute @workgroup_size({wx}, {wy}, {wz})
fn wmx_main(@builtin(workgroup_id) wmx_wid: vec3<u32>, @builtin(num_workgroups) wmx_nwg: vec3<u32>,
            @builtin(local_invocation_id) local_id: vec3<u32>, @builtin(local_invocation_index) local_index: u32) {{
    let wmx_fold = wmx_p[3];
    let group_id = vec3<u32>(wmx_wid.x + (wmx_wid.y % wmx_fold) * wmx_nwg.x, wmx_wid.y / wmx_fold, wmx_wid.z);
    let global_id = group_id * vec3<u32>({wx}u, {wy}u, {wz}u) + local_id;
    let grid = vec3<u32>(wmx_p[0], wmx_p[1], wmx_p[2]);
{guard}{{
{}
}}
}}
",
            self.body
        );
        Ok(s)
    }

    /// The parameter words for one launch over `grid` threads, given each input's
    /// (offset, shape, strides) and each output's shape, and the workgroups to
    /// dispatch (x folded into y past `max_groups`).
    pub fn launch(
        &self,
        grid: [u32; 3],
        inputs: &[(usize, &[usize], &[isize])],
        outputs: &[&[usize]],
        max_groups: u32,
    ) -> Result<(Vec<u32>, [u32; 3])> {
        let k = self.name;
        let g: Vec<u64> = (0..3)
            .map(|i| (grid[i] as u64).div_ceil(self.workgroup[i] as u64))
            .collect();
        let fold = g[0].div_ceil(max_groups as u64).max(1);
        let groups = [g[0].div_ceil(fold), g[1] * fold, g[2]];
        if groups.iter().any(|&x| x > max_groups as u64) {
            return Err(Error::Shape(format!(
                "{k}: a grid of {grid:?} threads in workgroups of {:?} needs more than the device's {max_groups} workgroups per dimension",
                self.workgroup
            )));
        }
        let word = |v: usize, what: &str| {
            u32::try_from(v).map_err(|_| {
                Error::Shape(format!(
                    "{k}: {what} {v} does not fit a kernel's 32-bit index"
                ))
            })
        };
        let mut p = vec![grid[0], grid[1], grid[2], fold as u32];
        for (i, (a, shape)) in self.outputs.iter().zip(outputs).enumerate() {
            debug_assert_eq!(a.ndim, shape.len(), "output {i}");
            word(shape.iter().product(), "output size")?;
            for &d in *shape {
                p.push(word(d, "dimension")?);
            }
        }
        for (a, (offset, shape, strides)) in self.inputs.iter().zip(inputs) {
            debug_assert_eq!(a.ndim, shape.len());
            p.push(word(*offset, "offset")?);
            for &d in *shape {
                p.push(word(d, "dimension")?);
            }
            for &st in *strides {
                let v = i32::try_from(st).map_err(|_| {
                    Error::Shape(format!(
                        "{k}: stride {st} does not fit a kernel's 32-bit index"
                    ))
                })?;
                p.push(v as u32);
            }
        }
        Ok((p, groups.map(|x| x as u32)))
    }
}
