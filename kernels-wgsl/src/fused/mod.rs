//! Fused elementwise kernels: a chain of unary, binary, select, cast and axpby
//! steps computed per element in one generated module ([`Kernels::fused`]). Each
//! step calls the same function the single-op kernel would (`exp_f32`,
//! `add_i32`, the cast rules) and rounds its result to its dtype as a store would,
//! so the fused result equals the unfused chain's (up to the multiply-add
//! contraction the compiler may apply within one kernel).

use crate::compose::{
    COMMON, InputCode, MUL_WIDE, ModuleSpec, WORDS, compose_with, f16_helpers, tree_shake,
};
use crate::driver::Driver;
use crate::driver::{Batch, Binding, Work};
use crate::dtype::{Ct, DType, Words};
use crate::elementwise::{BINARY_WGSL as BINARY, UNARY_WGSL as UNARY};
use crate::kernels::MAX_GROUPS;
use crate::layout::{Contig, Strided};
use crate::layout::{check_out, check_view};
use crate::ops;
use crate::{Error, Kernels, Result};
use std::fmt::Write;
use std::sync::Arc;
use wmx_spec::{BinaryOp, FusedOp, FusedStep, ReduceOp};

/// A fused elementwise kernel: inputs of the output's shape and the steps; the
/// last step is the output, or the value `outputs` names, or with two or more the
/// values it lists, one after the other in one output of shape
/// `[outputs.len(), ...]` (32-bit steps of one dtype).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FusedSpec {
    /// The inputs' dtypes.
    pub inputs: Vec<DType>,
    /// The steps.
    pub steps: Vec<FusedStep>,
    /// The values stored (indices counting the inputs, then the steps); empty:
    /// the last step's.
    pub outputs: Vec<usize>,
}

/// How the kernel reads one input, from its strides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputRead {
    /// One element for all (every stride of an extent above 1 is zero).
    Scalar,
    /// Row-major with the output: element `offset + i`.
    Dense,
    /// Any other strides: the index is computed from the shape.
    Strided,
}

/// A fused kernel feeding a reduction ([`Kernels::fused_reduce`]).
pub(crate) struct Prologue<'a, B> {
    pub(crate) key: FusedKey,
    /// The scalars' parameter words (empty when they are literals).
    pub(crate) constants: Vec<u32>,
    pub(crate) buffers: &'a [Binding<B>],
    pub(crate) shape: &'a [usize],
    pub(crate) inputs: &'a [&'a Strided<'a, B>],
}

/// Cache key of a fused pipeline.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct FusedKey {
    /// The program; with `params`, its scalars zeroed (they are parameter words).
    /// Shared with the caller's: a dispatch clones no steps to find its pipeline.
    spec: Arc<FusedSpec>,
    /// The steps' scalars are parameter words rather than literals.
    params: bool,
    reads: Vec<InputRead>,
    /// The binding each input reads.
    bind: Vec<u8>,
    /// A reduction reading the kernel's values (its first pass, and where its
    /// parameters end: the prologue's start there).
    pub(crate) reduce: Option<(ModuleSpec, usize)>,
}

/// The compiled fused pipelines (a family cache of the kernel core).
type FusedCache<D> = crate::driver::FxMap<FusedKey, std::sync::Arc<<D as Driver>::Pipeline>>;

/// Literal pipelines made per program shape (the key of its parameter form).
type LiteralCounts = crate::driver::FxMap<FusedKey, usize>;

/// Pipelines with literal scalars a program shape gets before its new scalar values
/// become parameter words: literals run fastest (3-7 % on compiled GELU f32, bench
/// run 48), parameters keep a changing scalar (a learning rate, a step count) from
/// compiling and keeping a pipeline per value.
const LITERAL_VARIANTS: usize = 4;

/// Parameter words a step's scalars take.
fn constant_words(op: &FusedOp) -> usize {
    match op {
        FusedOp::Const(_) => 1,
        FusedOp::Axpby { .. } => 2,
        _ => 0,
    }
}

fn read_of(shape: &[usize], strides: &[isize]) -> InputRead {
    match crate::layout::dense_or_scalar(shape, strides) {
        Some(true) => InputRead::Scalar,
        Some(false) => InputRead::Dense,
        None => InputRead::Strided,
    }
}

impl FusedSpec {
    /// The words of the steps' scalars, in step order (after the value parameters
    /// when they are parameters).
    fn constants(&self) -> Vec<u32> {
        let mut w = Vec::new();
        for s in &self.steps {
            match s.op {
                FusedOp::Const(v) => w.push(crate::dtype::scalar_bits(v, s.dtype)),
                FusedOp::Axpby { alpha, beta } => {
                    w.extend([(alpha as f32).to_bits(), (beta as f32).to_bits()])
                }
                _ => {}
            }
        }
        w
    }

    /// The spec with every scalar zero: the key of its parameter form.
    fn without_constants(&self) -> FusedSpec {
        let mut spec = self.clone();
        for s in &mut spec.steps {
            match &mut s.op {
                FusedOp::Const(v) => *v = 0.0,
                FusedOp::Axpby { alpha, beta } => (*alpha, *beta) = (0.0, 0.0),
                _ => {}
            }
        }
        spec
    }

    /// The first word of step `k`'s scalars among [`FusedSpec::constants`].
    fn constant_slot(&self, k: usize) -> usize {
        self.steps[..k].iter().map(|s| constant_words(&s.op)).sum()
    }

    /// The dtype of value `v`.
    fn dtype_of(&self, v: usize) -> Result<DType> {
        let n = self.inputs.len();
        if v < n {
            return Ok(self.inputs[v]);
        }
        self.steps
            .get(v - n)
            .map(|s| s.dtype)
            .ok_or_else(|| Error::Shape(format!("fused: value {v} does not exist")))
    }

    /// The output's dtype.
    pub fn output(&self) -> Result<DType> {
        let last = self
            .steps
            .last()
            .map(|s| s.dtype)
            .ok_or_else(|| Error::Shape("fused: a kernel without steps".into()))?;
        if self.outputs.is_empty() {
            return Ok(last);
        }
        let d = self.dtype_of(self.outputs[0])?;
        for &v in &self.outputs {
            let dv = self.dtype_of(v)?;
            if dv != d || v < self.inputs.len() {
                return Err(Error::Shape(format!(
                    "fused: outputs {:?} are not steps of one dtype",
                    self.outputs
                )));
            }
        }
        Ok(d)
    }

    /// Whether it stores several values (an output of `[outputs, ...]`).
    pub fn several(&self) -> bool {
        self.outputs.len() > 1
    }

    /// The WGSL function of step `k` (`fn s{k}(a, b, c) -> C`), after checking its
    /// op and dtypes; its scalars literals, or parameter words (`cparam`) with
    /// `params`.
    fn step_fn(&self, k: usize, params: bool) -> Result<String> {
        let s = &self.steps[k];
        let n = self.inputs.len();
        for &a in &s.args {
            if a >= n + k {
                return Err(Error::Shape(format!(
                    "fused step {k} reads value {a}, not computed before it"
                )));
            }
        }
        let want = |m: usize| -> Result<()> {
            if s.args.len() == m {
                Ok(())
            } else {
                Err(Error::Shape(format!(
                    "fused step {k} ({:?}) takes {m} arguments, got {}",
                    s.op,
                    s.args.len()
                )))
            }
        };
        let d = |i: usize| self.dtype_of(s.args[i]);
        let undefined = |op: &str, d: DType| Error::OpNotDefined {
            op: op.to_string(),
            dtype: d.name(),
        };
        let mismatch = |what: &str| {
            Error::Shape(format!(
                "fused step {k} ({:?}): {what}, output {}",
                s.op, s.dtype
            ))
        };
        let co = s.dtype.ct().wgsl();
        Ok(match &s.op {
            FusedOp::Unary(op) => {
                want(1)?;
                let a = d(0)?;
                if !op.supports(a) {
                    return Err(undefined(op.name(), a));
                }
                let out = if op.outputs_bool() { DType::Bool } else { a };
                if out != s.dtype {
                    return Err(mismatch(&format!("input {a}")));
                }
                format!(
                    "fn s{k}(a: {}) -> {co} {{ return {}; }}",
                    a.ct().wgsl(),
                    ops::unary_expr(*op, a, UNARY)
                )
            }
            FusedOp::Binary(op) => {
                want(2)?;
                let (a, b) = (d(0)?, d(1)?);
                if a != b {
                    return Err(mismatch(&format!("inputs {a} and {b}")));
                }
                if !op.supports(a) {
                    return Err(undefined(op.name(), a));
                }
                let out = if op.outputs_bool() { DType::Bool } else { a };
                if out != s.dtype {
                    return Err(mismatch(&format!("inputs {a}")));
                }
                let ct = a.ct().wgsl();
                let e = ops::binary_expr(*op, a.ct());
                if a.ct() == Ct::F32 && folds_equal_args(*op) {
                    format!(
                        "fn s{k}(a: f32, b0: f32) -> {co} {{ let b = {}; return {e}; }}",
                        unseen("b0")
                    )
                } else {
                    format!("fn s{k}(a: {ct}, b: {ct}) -> {co} {{ return {e}; }}")
                }
            }
            FusedOp::Select => {
                want(3)?;
                let (c, x, y) = (d(0)?, d(1)?, d(2)?);
                if c != DType::Bool || x != y || x != s.dtype {
                    return Err(mismatch(&format!("inputs {c}, {x}, {y}")));
                }
                format!(
                    "fn s{k}(a: u32, b: {co}, c: {co}) -> {co} {{ return select(c, b, a != 0u); }}"
                )
            }
            FusedOp::Cast => {
                want(1)?;
                let a = d(0)?;
                format!(
                    "fn s{k}(a: {}) -> {co} {{ return {}; }}",
                    a.ct().wgsl(),
                    ops::cast_expr(a, s.dtype)
                )
            }
            FusedOp::Axpby { alpha, beta } => {
                let (mut alpha, mut beta) = (
                    format!("{}u", (*alpha as f32).to_bits()),
                    format!("{}u", (*beta as f32).to_bits()),
                );
                if params {
                    let j = self.constant_slot(k);
                    (alpha, beta) = (format!("cparam({j}u)"), format!("cparam({}u)", j + 1));
                }
                want(2)?;
                let (a, b) = (d(0)?, d(1)?);
                if !a.is_float() || a != b || a != s.dtype {
                    return Err(undefined("axpby", a));
                }
                format!(
                    "fn s{k}(a: f32, b0: f32) -> f32 {{ let b = {}; \
                     return bitcast<f32>({alpha}) * a + bitcast<f32>({beta}) * b; }}",
                    unseen("b0")
                )
            }
            FusedOp::Const(v) => {
                want(0)?;
                let v = if params {
                    format!("cparam({}u)", self.constant_slot(k))
                } else {
                    format!("{}u", crate::dtype::scalar_bits(*v, s.dtype))
                };
                format!(
                    "fn s{k}() -> {co} {{ return ex_{}({v}, 0u); }}",
                    s.dtype.storage()
                )
            }
        })
    }
}

/// Whether a compiler may fold `op(x, x)` to a constant that is wrong for some
/// `x`: NVIDIA's folds a fused kernel's `x / x` to 1, which is NaN for 0 and inf
/// (and `x - x` to 0 would be wrong for inf). Their second operand goes through
/// [`unseen`], as two loads of one array do in the library's kernels.
fn folds_equal_args(op: BinaryOp) -> bool {
    matches!(
        op,
        BinaryOp::Subtract | BinaryOp::Divide | BinaryOp::FloorDivide | BinaryOp::Remainder
    )
}

/// The f32 `e` through a zero the compiler cannot see (as in [`rnd_f16_def`]), so
/// it cannot prove `e` equal to another value.
fn unseen(e: &str) -> String {
    format!("bitcast<f32>(bitcast<u32>({e}) ^ (P[FB] >> 31u))")
}

/// Rounds a compute value to its dtype, as storing and loading it would (f16
/// through `rnd_f16`, see [`rnd_f16_def`]).
fn round(d: DType, e: &str) -> String {
    match d.size() {
        4 => e.to_string(),
        _ if d == DType::F16 => format!("rnd_f16({e})"),
        _ => format!("ex_{0}(st_{0}({e}), 0u)", d.storage()),
    }
}

/// `rnd_f16`: an f32 rounded to f16 and back. NVIDIA's compiler folds both
/// `unpack2x16float(pack2x16float(v))` and `f32(f16(v))` back to `v` inside a
/// kernel (neither rounds there), and the software conversions made a compiled
/// 9-step f16 chain 5-7x slower on the H200. So the hardware pair goes through a
/// zero the compiler cannot see: the kernel's element count (`P[FB]`, at most
/// 2^30: the backend cuts larger arrays into pieces) shifted right by 31. (The
/// binding's `arrayLength` shifted so did not do: the driver knows its bound.)
pub(crate) fn rnd_f16_def(hw: bool) -> &'static str {
    if hw {
        "fn rnd_f16(v: f32) -> f32 { \
         return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0)) ^ (P[FB] >> 31u)).x; }\n"
    } else {
        "fn rnd_f16(v: f32) -> f32 { return f16_val(f16_bits(v)); }\n"
    }
}

/// Uses f16 anywhere (its conversions must be in the module).
fn uses_f16(spec: &FusedSpec) -> bool {
    spec.inputs.contains(&DType::F16) || spec.steps.iter().any(|s| s.dtype == DType::F16)
}

/// The prelude computing the kernel's value at row-major element `i`: the input
/// bindings (input `i` reads binding `2 + bind[i]`; views of one buffer share one),
/// the loads, one function per step, and `fn value(i)`. Its parameters start at
/// `P[FB]`: `[n, rank, shape[rank], then per input: offset, strides[rank]]`.
pub(crate) fn value_prelude(
    spec: &FusedSpec,
    reads: &[InputRead],
    bind: &[u8],
    base: usize,
    params: bool,
) -> Result<String> {
    let out = spec.output()?;
    let mut p = String::new();
    let nb = bind.iter().map(|b| *b as usize + 1).max().unwrap_or(0);
    for b in 0..nb {
        writeln!(
            p,
            "@group(0) @binding({}) var<storage, read> I{b}: array<u32>;",
            b + 2
        )
        .unwrap();
    }
    writeln!(p, "const FB: u32 = {base}u;").unwrap();
    if params {
        // The steps' scalars follow the value parameters (see `value_params`).
        writeln!(
            p,
            "fn cparam(j: u32) -> u32 {{ let rank = P[FB + 1u]; return P[FB + 2u + rank + {}u * (rank + 1u) + j]; }}",
            spec.inputs.len()
        )
        .unwrap();
    }
    p.push_str(
        "fn sidx(i: u32, base: u32) -> u32 {\n    let rank = P[FB + 1u];\n    var r = i;\n    var off = P[base];\n    \
         for (var d = rank; d > 0u; d--) {\n        let e = P[FB + 1u + d];\n        \
         off += (r % e) * P[base + d];\n        r = r / e;\n    }\n    return off;\n}\n",
    );
    for (i, d) in spec.inputs.iter().enumerate() {
        let l = d.log_epw();
        let mask = (1u32 << l) - 1;
        let b = bind[i];
        writeln!(
            p,
            "fn ld{i}(e: u32) -> {} {{ return ex_{}(I{b}[e >> {l}u], e & {mask}u); }}",
            d.ct().wgsl(),
            d.storage()
        )
        .unwrap();
    }
    for k in 0..spec.steps.len() {
        p.push_str(&spec.step_fn(k, params)?);
        p.push('\n');
    }
    let packed = spec.several() && out.log_epw() > 0;
    if !spec.several() {
        writeln!(p, "fn value(i: u32) -> {} {{", out.ct().wgsl()).unwrap();
    } else if packed {
        writeln!(
            p,
            "fn value(i: u32) -> array<u32, {}> {{",
            spec.outputs.len()
        )
        .unwrap();
    } else {
        p.push_str("fn value(i: u32) {\n");
    }
    p.push_str("    let rank = P[FB + 1u];\n");
    let n_in = spec.inputs.len();
    for (i, r) in reads.iter().enumerate() {
        let at = format!("FB + 2u + rank + {i}u * (rank + 1u)");
        let idx = match r {
            InputRead::Scalar => format!("P[{at}]"),
            InputRead::Dense => format!("P[{at}] + i"),
            InputRead::Strided => format!("sidx(i, {at})"),
        };
        writeln!(p, "    let v{i} = ld{i}({idx});").unwrap();
    }
    for (k, s) in spec.steps.iter().enumerate() {
        let args: Vec<String> = s.args.iter().map(|a| format!("v{a}")).collect();
        let call = format!("s{k}({})", args.join(", "));
        writeln!(p, "    let v{} = {};", n_in + k, round(s.dtype, &call)).unwrap();
    }
    if !spec.several() {
        let v = spec.outputs.first().copied();
        writeln!(
            p,
            "    return v{};\n}}",
            v.unwrap_or(n_in + spec.steps.len() - 1)
        )
        .unwrap();
    } else if packed {
        // Several narrow outputs: their bits, packed into words by the entry point.
        let bits: Vec<String> = spec.outputs.iter().map(|v| format!("st_o(v{v})")).collect();
        writeln!(
            p,
            "    return array<u32, {}>({});\n}}",
            spec.outputs.len(),
            bits.join(", ")
        )
        .unwrap();
    } else {
        // Several outputs: stored here, output j at `j * n + i` (32-bit words).
        for (j, v) in spec.outputs.iter().enumerate() {
            writeln!(p, "    O[{j}u * P[FB] + i] = st_o(v{v});").unwrap();
        }
        p.push_str("}\n");
    }
    Ok(p)
}

/// The parameters of [`value_prelude`] for `inputs` of `shape`, then `constants`
/// (the scalars' words when they are parameters).
pub(crate) fn value_params<B>(
    shape: &[usize],
    inputs: &[&Strided<B>],
    constants: &[u32],
    params: &mut Vec<u32>,
) {
    let n = crate::layout::numel(shape);
    params.extend([n as u32, shape.len() as u32]);
    params.extend(shape.iter().map(|d| *d as u32));
    for x in inputs {
        params.push(x.offset as u32);
        params.extend(x.strides.iter().map(|s| *s as i32 as u32));
    }
    params.extend(constants);
}

/// The module of a fused kernel: `spec` reading its inputs as `reads` through
/// bindings `bind`, either elementwise (entry point `fused`) or as the first pass
/// of the reduction module `reduce` whose own parameters end at word `.1` (its
/// entry point; its input `a` is the kernel's value).
pub fn compose_module(
    spec: &FusedSpec,
    reads: &[InputRead],
    bind: &[u8],
    reduce: Option<(&ModuleSpec, usize)>,
    target: crate::Target,
) -> Result<String> {
    compose_module_with(spec, reads, bind, reduce, target, false)
}

/// [`compose_module`], the scalars parameter words with `params`.
fn compose_module_with(
    spec: &FusedSpec,
    reads: &[InputRead],
    bind: &[u8],
    reduce: Option<(&ModuleSpec, usize)>,
    target: crate::Target,
    params: bool,
) -> Result<String> {
    let wide = spec
        .inputs
        .iter()
        .chain(spec.steps.iter().map(|s| &s.dtype));
    if let Some(d) = wide.into_iter().find(|d| crate::dtype::is_wide(**d)) {
        return Err(Error::UnsupportedDType {
            dtype: d.name(),
            reason: format!("fused kernels compute in 32 bits ({d} runs op by op)"),
        });
    }
    if reads.len() != spec.inputs.len() || bind.len() != spec.inputs.len() {
        return Err(Error::Shape(format!(
            "fused: {} reads and {} bindings for {} inputs",
            reads.len(),
            bind.len(),
            spec.inputs.len()
        )));
    }
    let Some((m, base)) = reduce else {
        return fused_source(spec, reads, bind, target.f16, params);
    };
    if spec.several() {
        return Err(Error::Shape(
            "fused: a reduction reads a kernel of one output".into(),
        ));
    }
    if !matches!(m.op, crate::compose::Op::Reduce(_)) || m.inputs.first() != Some(&spec.output()?) {
        return Err(Error::Shape(format!(
            "fused: {:?} of {:?} cannot read a kernel giving {}",
            m.family,
            m.inputs,
            spec.output()?
        )));
    }
    let mut code = value_prelude(spec, reads, bind, base, params)?;
    code.push_str("fn ld_a(i: u32) -> CA { return value(i); }\n");
    if uses_f16(spec) {
        code.push_str(rnd_f16_def(m.target.f16));
    }
    let input = InputCode {
        code: &code,
        f16: uses_f16(spec),
        files: &[UNARY, BINARY],
    };
    compose_with(m, Some(input))
}

/// The entry point of an elementwise fused module. One invocation per output word
/// (packed outputs never share a word); four words per iteration, all computed
/// before any is stored, so each invocation has four sets of loads in flight (one
/// word at a time left the H200 latency-bound at about half the copy rate).
const FUSED_MAIN: &str = "@compute @workgroup_size(WG)
fn fused(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
         @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    let nw = (n + EPO - 1u) / EPO;
    let nf = n / EPO;
    let t = thread_count(nwg);
    var w = thread_index(lid, wid, nwg);
    for (; w + 3u * t < nf; w += 4u * t) {
        var r0 = 0u;
        var r1 = 0u;
        var r2 = 0u;
        var r3 = 0u;
        for (var j = 0u; j < EPO; j++) {
            r0 = put(r0, j, st_o(value(w * EPO + j)));
            r1 = put(r1, j, st_o(value((w + t) * EPO + j)));
            r2 = put(r2, j, st_o(value((w + 2u * t) * EPO + j)));
            r3 = put(r3, j, st_o(value((w + 3u * t) * EPO + j)));
        }
        O[w] = r0;
        O[w + t] = r1;
        O[w + 2u * t] = r2;
        O[w + 3u * t] = r3;
    }
    for (; w < nw; w += t) {
        let i0 = w * EPO;
        var word = 0u;
        if (EPO > 1u && i0 + EPO > n) { word = O[w]; }
        for (var j = 0u; j < EPO; j++) {
            if (i0 + j < n) { word = put(word, j, st_o(value(i0 + j))); }
        }
        O[w] = word;
    }
}
";

/// The entry point of a fused module with several outputs (32-bit: one element
/// a word): `value(i)` stores element `i` of each; four elements per iteration.
const FUSED_OUTPUTS_MAIN: &str = "@compute @workgroup_size(WG)
fn fused(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
         @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    let t = thread_count(nwg);
    var i = thread_index(lid, wid, nwg);
    for (; i + 3u * t < n; i += 4u * t) {
        value(i);
        value(i + t);
        value(i + 2u * t);
        value(i + 3u * t);
    }
    for (; i < n; i += t) {
        value(i);
    }
}
";

/// The entry point of a fused module with several narrow outputs (16 or 8 bits,
/// `K` of them; the element count a multiple of a word's): each invocation makes
/// whole words of every output, two words per iteration.
const FUSED_PACKED_MAIN: &str = "@compute @workgroup_size(WG)
fn fused(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
         @builtin(num_workgroups) nwg: vec3<u32>) {
    let nw = P[0] / EPO;
    let t = thread_count(nwg);
    var w = thread_index(lid, wid, nwg);
    for (; w + t < nw; w += 2u * t) {
        var r0: array<u32, K>;
        var r1: array<u32, K>;
        for (var e = 0u; e < EPO; e++) {
            let b0 = value(w * EPO + e);
            let b1 = value((w + t) * EPO + e);
            for (var j = 0u; j < K; j++) {
                r0[j] = put(r0[j], e, b0[j]);
                r1[j] = put(r1[j], e, b1[j]);
            }
        }
        for (var j = 0u; j < K; j++) {
            O[j * nw + w] = r0[j];
            O[j * nw + w + t] = r1[j];
        }
    }
    for (; w < nw; w += t) {
        var r: array<u32, K>;
        for (var e = 0u; e < EPO; e++) {
            let b = value(w * EPO + e);
            for (var j = 0u; j < K; j++) { r[j] = put(r[j], e, b[j]); }
        }
        for (var j = 0u; j < K; j++) { O[j * nw + w] = r[j]; }
    }
}
";

/// The elementwise module for `spec` reading inputs as `reads` through `bind`.
fn fused_source(
    spec: &FusedSpec,
    reads: &[InputRead],
    bind: &[u8],
    f16_hw: bool,
    params: bool,
) -> Result<String> {
    let out = spec.output()?;
    let f16 = uses_f16(spec);
    let mut p = String::from("// ---- generated prelude (fused kernel) ----\n");
    p.push_str("@group(0) @binding(0) var<storage, read> P: array<u32>;\n");
    p.push_str("@group(0) @binding(1) var<storage, read_write> O: array<u32>;\n");
    writeln!(p, "const LO: u32 = {}u;", out.log_epw()).unwrap();
    if f16 {
        p.push_str(f16_helpers(f16_hw));
        p.push_str(rnd_f16_def(f16_hw));
    }
    p.push_str(&value_prelude(spec, reads, bind, 0, params)?);
    writeln!(
        p,
        "fn st_o(v: {}) -> u32 {{ return st_{}(v); }}",
        out.ct().wgsl(),
        out.storage()
    )
    .unwrap();
    if !spec.several() {
        p.push_str(FUSED_MAIN);
    } else if out.log_epw() > 0 {
        writeln!(p, "const K: u32 = {}u;", spec.outputs.len()).unwrap();
        p.push_str(FUSED_PACKED_MAIN);
    } else {
        p.push_str(FUSED_OUTPUTS_MAIN);
    }
    let body = [COMMON, MUL_WIDE, WORDS, UNARY, BINARY].concat();
    let shaken = tree_shake(&p, &body, "fused");
    Ok(format!("{p}{shaken}"))
}

impl<D: Driver> Kernels<D> {
    /// Records `out = spec(inputs)`: every input has `out`'s shape (broadcast
    /// through zero strides, any other strides read in place).
    pub fn fused(
        &self,
        b: &mut Batch<D>,
        spec: &Arc<FusedSpec>,
        inputs: &[&Strided<D::Buffer>],
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let od = spec.output()?;
        if od != out.dtype {
            return Err(Error::Shape(format!(
                "fused: the kernel gives {od}, the output is {}",
                out.dtype
            )));
        }
        self.check_dtype(od)?;
        // Several outputs: `out` is `[outputs, ...]` of the inputs' shape.
        let k = spec.outputs.len().max(1);
        let shape = if !spec.several() {
            out.shape
        } else if out.shape.first() == Some(&k) {
            &out.shape[1..]
        } else {
            return Err(Error::Shape(format!(
                "fused: {k} outputs, the output is {:?}",
                out.shape
            )));
        };
        self.check_inputs(spec, inputs, shape)?;
        check_out(out)?;
        let per = crate::layout::numel(shape);
        if spec.several() && !per.is_multiple_of(od.epw()) {
            return Err(Error::Shape(format!(
                "fused: several {od} outputs of {per} elements each do not fill whole words"
            )));
        }
        let (key, buffers, constants) = self.fused_key(spec, inputs)?;
        if buffers.len() + 1 > self.max_user_buffers() {
            return Err(Error::Shape(format!(
                "fused: {} input buffers exceed the {} a kernel can bind here",
                buffers.len(),
                self.max_user_buffers() - 1
            )));
        }
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        if buffers.iter().any(|x| x.buffer == *out.buffer) {
            return Err(Error::Shape(
                "fused: an input shares the output buffer".into(),
            ));
        }
        let pipe = self.fused_pipeline(&key, buffers.len())?;
        let mut params = Vec::new();
        value_params(shape, inputs, &constants, &mut params);
        let words = (n / k).div_ceil(od.epw()) as u64;
        // Four words per invocation (the unrolled loop of FUSED_MAIN) from 1024 words up.
        let groups = words.div_ceil(4 * self.wg() as u64).min(MAX_GROUPS);
        let bound = std::iter::once(out.binding()).chain(buffers);
        self.record_pipe(b, pipe, bound, params, groups)?;
        // Each input read as stored (a broadcast axis once), the output written.
        self.describe(b, || {
            let stored = |x: &Strided<D::Buffer>| {
                let kept = x.shape.iter().zip(x.strides).filter(|(_, s)| **s != 0);
                kept.map(|(d, _)| *d as f64).product::<f64>() * x.dtype.size() as f64
            };
            let read: f64 = inputs.iter().map(|x| stored(x)).sum();
            Work {
                shape: format!("{:?} {od} from {} inputs", out.shape, inputs.len()),
                flop: 0.0,
                bytes: read + (n * od.size()) as f64,
            }
        });
        Ok(())
    }

    /// Records `out = reduce(op, spec(inputs), axes)` (`axes` sorted and unique, `out` of the kept dims and
    /// the op's output dtype): the reduction's first pass computes the kernel's
    /// values as it reads them, so the elementwise result is never stored. Every
    /// input has one shape (broadcast through zero strides).
    #[allow(clippy::too_many_arguments)]
    pub fn fused_reduce(
        &self,
        b: &mut Batch<D>,
        op: ReduceOp,
        spec: &Arc<FusedSpec>,
        inputs: &[&Strided<D::Buffer>],
        axes: &[usize],
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let d = spec.output()?;
        let Some(first) = inputs.first() else {
            return Err(Error::Shape("fused_reduce: a kernel without inputs".into()));
        };
        let shape = first.shape;
        self.check_inputs(spec, inputs, shape)?;
        let (key, buffers, constants) = self.fused_key(spec, inputs)?;
        if buffers.len() + 1 > self.max_user_buffers() {
            return Err(Error::Shape(format!(
                "fused_reduce: {} input buffers exceed the {} a kernel can bind here",
                buffers.len(),
                self.max_user_buffers() - 1
            )));
        }
        if buffers.iter().any(|x| x.buffer == *out.buffer) {
            return Err(Error::Shape(
                "fused_reduce: an input shares the output buffer".into(),
            ));
        }
        if out.numel() == 0 || crate::layout::numel(shape) == 0 {
            // Nothing may run: still validate the steps.
            let n = inputs.len();
            fused_source(spec, &vec![InputRead::Dense; n], &vec![0; n], false, false)?;
        }
        let strides = crate::layout::contiguous_strides(shape);
        let x = Strided {
            buffer: out.buffer,
            window: out.window,
            dtype: d,
            shape,
            strides: &strides,
            offset: 0,
        };
        let pro = Prologue {
            key,
            constants,
            buffers: &buffers,
            shape,
            inputs,
        };
        self.reduce_with(b, op, &x, axes, out, Some(&pro))
    }

    /// Inputs of the kernel's dtypes, all of `shape`, inside their buffers.
    fn check_inputs(
        &self,
        spec: &FusedSpec,
        inputs: &[&Strided<D::Buffer>],
        shape: &[usize],
    ) -> Result<()> {
        if inputs.len() != spec.inputs.len() {
            return Err(Error::Shape(format!(
                "fused: {} inputs for a kernel of {}",
                inputs.len(),
                spec.inputs.len()
            )));
        }
        for (x, d) in inputs.iter().zip(&spec.inputs) {
            self.check_dtype(x.dtype)?;
            if x.dtype != *d || x.shape != shape {
                return Err(Error::Shape(format!(
                    "fused: input {:?} of {}, the kernel wants {d} of {:?}",
                    x.shape, x.dtype, shape
                )));
            }
            check_view(x, "fused input")?;
        }
        Ok(())
    }

    /// The generated WGSL of `spec` for inputs with these shapes and strides
    /// (views of one buffer are assumed distinct here).
    pub fn fused_wgsl(&self, spec: &FusedSpec, layouts: &[(&[usize], &[isize])]) -> Result<String> {
        let reads: Vec<InputRead> = layouts.iter().map(|(s, st)| read_of(s, st)).collect();
        let bind: Vec<u8> = (0..layouts.len() as u8).collect();
        compose_module(spec, &reads, &bind, None, self.inner.target)
    }

    /// The pipeline key of `spec` on `inputs`, the buffers to bind, and the
    /// scalars' parameter words (empty when they are literals: the first
    /// [`LITERAL_VARIANTS`] sets of values of a program shape).
    #[allow(clippy::type_complexity)]
    fn fused_key(
        &self,
        spec: &Arc<FusedSpec>,
        inputs: &[&Strided<D::Buffer>],
    ) -> Result<(FusedKey, Vec<Binding<D::Buffer>>, Vec<u32>)> {
        let mut buffers: Vec<Binding<D::Buffer>> = Vec::new();
        let mut bind = Vec::with_capacity(inputs.len());
        for x in inputs {
            let b = match buffers.iter().position(|b| *b == x.binding()) {
                Some(b) => b,
                None => {
                    buffers.push(x.binding());
                    buffers.len() - 1
                }
            };
            bind.push(b as u8);
        }
        let reads: Vec<InputRead> = inputs.iter().map(|x| read_of(x.shape, x.strides)).collect();
        let literal = FusedKey {
            spec: spec.clone(),
            params: false,
            reads,
            bind,
            reduce: None,
        };
        if !spec.steps.iter().any(|s| constant_words(&s.op) > 0)
            || self.family_cache(|c: &mut FusedCache<D>| c.contains_key(&literal))
        {
            return Ok((literal, buffers, Vec::new()));
        }
        let constants = spec.constants();
        let shape = FusedKey {
            spec: Arc::new(spec.without_constants()),
            params: true,
            ..literal.clone()
        };
        let fresh = self.family_cache(|c: &mut LiteralCounts| {
            if c.len() >= 4096 {
                c.clear();
            }
            let n = c.entry(shape.clone()).or_insert(0);
            *n += 1;
            *n <= LITERAL_VARIANTS
        });
        if fresh {
            Ok((literal, buffers, Vec::new()))
        } else {
            Ok((shape, buffers, constants))
        }
    }

    /// Number of compiled fused pipelines.
    pub fn fused_pipeline_count(&self) -> usize {
        self.family_cache(|c: &mut FusedCache<D>| c.len())
    }

    pub(crate) fn fused_pipeline(
        &self,
        key: &FusedKey,
        buffers: usize,
    ) -> Result<std::sync::Arc<D::Pipeline>> {
        if let Some(p) = self.family_cache(|c: &mut FusedCache<D>| c.get(key).cloned()) {
            return Ok(p);
        }
        let reduce = key.reduce.as_ref().map(|(m, base)| (m, *base));
        let target = self.inner.target;
        let src =
            compose_module_with(&key.spec, &key.reads, &key.bind, reduce, target, key.params)?;
        let entry = reduce.map_or("fused", |(m, _)| m.entry_point());
        let wg = [("WG", self.wg() as f64)];
        let pipe = std::sync::Arc::new(self.compile_module(
            "wmx fused",
            &src,
            entry,
            (1, buffers),
            &wg,
            true,
        )?);
        self.family_cache(|cache: &mut FusedCache<D>| {
            // A long-running program that compiles many shapes: start over past a bound.
            if cache.len() >= 4096 {
                cache.clear();
            }
            cache.insert(key.clone(), pipe.clone());
        });
        Ok(pipe)
    }
}
