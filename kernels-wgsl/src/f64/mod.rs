//! f64 on adapters with `SHADER_F64`: the kernels of `f64.wgsl` compute (elementwise
//! ops, casts, reductions, scans, matmul, row ops, scatter-add, sort keys), and the
//! word kernels move f64 data as pairs of `u32` words (copies, select, gather,
//! scatter, concatenate, slice updates), a view of `[.., n]` f64 being a view of
//! `[.., n, 2]` words.
//!
//! Each public family method of [`Kernels`] sends f64 here after its own checks.

use crate::compose::{Family, Op, tree_shake};
use crate::driver::Driver;
use crate::driver::{Batch, Binding};
use crate::dtype::DType;
use crate::elementwise::{BINARY_WGSL, COPY, SELECT, UNARY_WGSL};
use crate::kernels::Kernels;
use crate::kernels::MAX_GROUPS;
use crate::layout::{Contig, Strided};
use crate::layout::{Pairs, check_out, contiguous_strides, pair_out, pair_shape};
use crate::{Error, Result};
use std::sync::Arc;
use wmx_spec::{ArgReduceOp, BinaryOp, NormOp, ReduceOp, UnaryOp};

const F64_WGSL: &str = include_str!("f64.wgsl");

/// WGSL element type of a binding.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ty {
    F64,
    U32,
}

impl Ty {
    fn wgsl(self) -> &'static str {
        match self {
            Ty::F64 => "f64",
            Ty::U32 => "u32",
        }
    }
}

/// One module of `f64.wgsl`: its entry point, the element types of the output and
/// the inputs (bound at 2..), and the prelude's code (`op`, `ident`, ...).
struct Module<'a> {
    entry: &'static str,
    out: Ty,
    ins: &'a [Ty],
    code: &'a str,
}

/// A contiguous scratch array: written through [`Temp::out`], read through
/// [`Temp::view`].
struct Temp<B> {
    buffer: B,
    dtype: DType,
    shape: Vec<usize>,
    strides: Vec<isize>,
}

impl<B> Temp<B> {
    fn out(&self) -> Contig<'_, B> {
        Contig {
            buffer: &self.buffer,
            window: None,
            dtype: self.dtype,
            shape: &self.shape,
        }
    }
    fn view(&self) -> Strided<'_, B> {
        Strided {
            buffer: &self.buffer,
            window: None,
            dtype: self.dtype,
            shape: &self.shape,
            strides: &self.strides,
            offset: 0,
        }
    }
    /// Sub-array `i` along the first axis.
    fn part(&self, i: usize) -> Strided<'_, B> {
        Strided {
            shape: &self.shape[1..],
            strides: &self.strides[1..],
            offset: i * self.strides[0] as usize,
            ..self.view()
        }
    }
}

/// `[2, shape..]`: two arrays of `shape`.
fn pair_shape_front(shape: &[usize]) -> Vec<usize> {
    std::iter::once(2).chain(shape.iter().copied()).collect()
}

fn bits(v: f64) -> [u32; 2] {
    let b = v.to_bits();
    [b as u32, (b >> 32) as u32]
}

fn unsupported(what: &str) -> Error {
    Error::UnsupportedDType {
        dtype: "f64",
        reason: format!("{what} has no f64 kernel"),
    }
}

/// The WGSL of unary `op` on `a: f64` (bool ops give `bool`): `{op}_d`, beside the
/// op's other functions in `unary.wgsl` (or, for math the library shares, in
/// `f64.wgsl`).
fn unary_code(op: UnaryOp) -> String {
    let t = if op.outputs_bool() { "bool" } else { "f64" };
    format!("fn op(a: f64) -> {t} {{ return {op}_d(a); }}\n")
}

/// The WGSL of binary `op` on `a, b: f64`: `{op}_d` in `binary.wgsl` (or
/// `f64.wgsl`); `None` for the ops not defined on floats.
fn binary_code(op: BinaryOp) -> Option<String> {
    if !op.supports(DType::F64) {
        return None;
    }
    let t = if op.outputs_bool() { "bool" } else { "f64" };
    Some(format!(
        "fn op(a: f64, b: f64) -> {t} {{ return {op}_d(a, b); }}\n"
    ))
}

/// Where f64 modules find their functions: the f64 math, and the ops' `_d`
/// functions beside their word-kernel forms (tree-shaking keeps what is called).
fn f64_sources() -> String {
    [F64_WGSL, UNARY_WGSL, BINARY_WGSL].concat()
}

/// Identity and combination of reduction or scan `op`.
fn reduce_code(op: ReduceOp) -> Option<&'static str> {
    Some(match op {
        ReduceOp::Sum => {
            "fn ident() -> f64 { return 0.0lf; }\nfn combine(a: f64, b: f64) -> f64 { return a + b; }\n"
        }
        ReduceOp::Prod => {
            "fn ident() -> f64 { return 1.0lf; }\nfn combine(a: f64, b: f64) -> f64 { return a * b; }\n"
        }
        ReduceOp::Max => {
            "fn ident() -> f64 { return -inf_d(); }\nfn combine(a: f64, b: f64) -> f64 { return max_d(a, b); }\n"
        }
        ReduceOp::Min => {
            "fn ident() -> f64 { return inf_d(); }\nfn combine(a: f64, b: f64) -> f64 { return min_d(a, b); }\n"
        }
        // Logical reductions of f64 read it as u32 0/1 words (the word kernels).
        ReduceOp::All | ReduceOp::Any => return None,
    })
}

/// Elementwise parameters: `[n, rank, off_a, off_b, s0, s1, s2, s3, shape,
/// strides...]` for views of `shape` (collapsed by the caller or not).
fn map_params<B>(shape: &[usize], views: &[&Strided<B>], scalars: [f64; 2]) -> Vec<u32> {
    let [a, b] = scalars.map(bits);
    let mut p = vec![
        crate::layout::numel(shape) as u32,
        shape.len() as u32,
        views.first().map_or(0, |v| v.offset as u32),
        views.get(1).map_or(0, |v| v.offset as u32),
        a[0],
        a[1],
        b[0],
        b[1],
    ];
    p.extend(shape.iter().map(|&d| d as u32));
    for v in views {
        p.extend(v.strides.iter().map(|&s| s as i32 as u32));
    }
    p
}

/// The generated head of module `m`: workgroup size, bindings and op code.
fn prelude(m: &Module, wg: u32) -> String {
    let mut p = format!(
        "const WG: u32 = {wg}u;\n@group(0) @binding(0) var<storage, read> P: array<u32>;\n\
         @group(0) @binding(1) var<storage, read_write> O: array<{}>;\n",
        m.out.wgsl()
    );
    for (i, t) in m.ins.iter().enumerate() {
        p.push_str(&format!(
            "@group(0) @binding({}) var<storage, read> {}: array<{}>;\n",
            i + 2,
            ["A", "B", "C"][i],
            t.wgsl()
        ));
    }
    p.push_str(m.code);
    p
}

/// Every f64 module the library can launch, as `(label, WGSL source, entry
/// point)`, for workgroups of `wg` invocations: for the naga tests.
pub fn f64_modules(wg: u32) -> Vec<(String, String, &'static str)> {
    let f = Ty::F64;
    let u = Ty::U32;
    let mut codes: Vec<(&'static str, Ty, Vec<Ty>, String)> = Vec::new();
    for &op in UnaryOp::ALL {
        let code = unary_code(op);
        let e = if op.outputs_bool() { "pack1" } else { "map1" };
        codes.push((e, if e == "pack1" { u } else { f }, vec![f], code));
    }
    for &op in BinaryOp::ALL {
        if let Some(code) = binary_code(op) {
            let e = if op.outputs_bool() { "pack2" } else { "map2" };
            codes.push((e, if e == "pack2" { u } else { f }, vec![f, f], code));
        }
    }
    for g in ["to_f32", "to_i32", "to_u32", "to_f32_odd"] {
        let code = format!("fn op(a: f64) -> u32 {{ return {g}(a); }}\n");
        codes.push(("map1", u, vec![f], code));
    }
    let truth = "fn op(a: f64) -> bool { return nz_d(a); }\n".to_string();
    codes.push(("pack1", u, vec![f], truth));
    for g in ["from_f32", "from_i32", "from_u32"] {
        let code = format!("fn op(a: u32) -> f64 {{ return {g}(a); }}\n");
        codes.push(("map1", f, vec![u], code));
    }
    for &op in ReduceOp::ALL {
        let Some(code) = reduce_code(op).map(str::to_string) else {
            continue;
        };
        codes.push(("reduce", f, vec![f], code.clone()));
        codes.push(("scan", f, vec![f], code));
    }
    for cmp in ['>', '<'] {
        let code = format!("fn better(a: f64, b: f64) -> bool {{ return b {cmp} a; }}\n");
        codes.push(("argreduce", u, vec![f], code));
    }
    for i in 0..NormOp::ALL.len() {
        codes.push((
            "norm",
            f,
            vec![f, f, f],
            format!("const NORM_OP: u32 = {i}u;\n"),
        ));
    }
    codes.push(("gen", f, vec![], String::new()));
    codes.push(("keys", u, vec![u], String::new()));
    codes.push(("matmul", f, vec![f, f, f], String::new()));
    codes.push(("scatter_add", f, vec![f, u, f], String::new()));
    codes
        .into_iter()
        .map(|(entry, out, ins, code)| {
            let m = Module {
                entry,
                out,
                ins: &ins,
                code: &code,
            };
            let p = prelude(&m, wg);
            let src = format!("{p}{}", tree_shake(&p, &f64_sources(), entry));
            (format!("f64 {entry}: {}", code.trim()), src, entry)
        })
        .collect()
}

impl<D: Driver> Kernels<D> {
    /// Whether f64 buffers can be computed on here (`SHADER_F64`).
    pub(crate) fn has_f64(&self) -> bool {
        self.inner.caps.f64
    }

    /// The compiled module `m`, cached by its prelude and entry point.
    fn f64_pipe(&self, m: &Module) -> Result<Arc<D::Pipeline>> {
        if !self.has_f64() {
            return Err(Error::UnsupportedDType {
                dtype: "f64",
                reason: format!(
                    "adapter '{}' lacks the SHADER_F64 feature",
                    self.inner.caps.adapter_name
                ),
            });
        }
        let prelude = prelude(m, self.wg());
        let key = format!("{}\n{prelude}", m.entry);
        if let Some(p) = self.inner.f64_pipes.lock().unwrap().get(&key) {
            return Ok(p.clone());
        }
        let source = format!("{prelude}{}", tree_shake(&prelude, &f64_sources(), m.entry));
        let label = format!("f64 {}", m.entry);
        let pipe =
            Arc::new(self.compile_module(&label, &source, m.entry, (1, m.ins.len()), &[], true)?);
        self.inner
            .f64_pipes
            .lock()
            .unwrap()
            .insert(key, pipe.clone());
        Ok(pipe)
    }

    fn f64_record(
        &self,
        b: &mut Batch<D>,
        m: &Module,
        buffers: Vec<Binding<D::Buffer>>,
        params: Vec<u32>,
        groups: u64,
    ) -> Result<()> {
        let pipe = self.f64_pipe(m)?;
        self.record_pipe(b, pipe, buffers, params, groups.max(1))
    }

    /// Workgroups for `n` items of a grid-stride kernel.
    fn f64_groups(&self, n: usize) -> u64 {
        (n as u64).div_ceil(self.wg() as u64).min(MAX_GROUPS)
    }

    /// A contiguous scratch array of `shape` and `dtype` (freed when the batch
    /// that uses it is done).
    fn f64_temp(&self, shape: &[usize], dtype: DType) -> Result<Temp<D::Buffer>> {
        let n: usize = shape.iter().product();
        let bytes = (n.max(1) * dtype.size()).div_ceil(16) * 16;
        Ok(Temp {
            buffer: self.create_buffer(bytes as u64, Some("wmx f64 temporary"))?,
            dtype,
            shape: shape.to_vec(),
            strides: contiguous_strides(shape),
        })
    }

    /// `x` copied (cast) into a contiguous scratch array of `dtype`.
    fn f64_widen(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        dtype: DType,
    ) -> Result<Temp<D::Buffer>> {
        let t = self.f64_temp(x.shape, dtype)?;
        self.copy(b, x, &t.out())?;
        Ok(t)
    }

    /// `out = code(x[, y])` elementwise through `map1`/`map2` (or `pack1`/`pack2`
    /// for bool outputs), `x` and `y` of `out`'s shape.
    #[allow(clippy::too_many_arguments)]
    fn f64_map(
        &self,
        b: &mut Batch<D>,
        code: &str,
        ins: &[&Strided<D::Buffer>],
        tys: &[Ty],
        out: &Contig<D::Buffer>,
        scalars: [f64; 2],
    ) -> Result<()> {
        let n = out.numel();
        let pack = out.dtype == DType::Bool;
        // f64 outputs are f64 arrays; 32-bit ones and packed bools, words.
        let out_ty = if out.dtype == DType::F64 {
            Ty::F64
        } else {
            Ty::U32
        };
        let entry = match (ins.len(), pack) {
            (1, false) => "map1",
            (2, false) => "map2",
            (1, true) => "pack1",
            _ => "pack2",
        };
        let m = Module {
            entry,
            out: out_ty,
            ins: tys,
            code,
        };
        if n == 0 {
            return self.f64_pipe(&m).map(drop);
        }
        let params = map_params(out.shape, ins, scalars);
        let mut buffers = vec![out.binding()];
        buffers.extend(ins.iter().map(|x| x.binding()));
        let items = if pack { n.div_ceil(4) } else { n };
        self.f64_record(b, &m, buffers, params, self.f64_groups(items))
    }

    /// The elementwise families with an f64 input or output (already checked by
    /// `elementwise`).
    pub(crate) fn f64_elementwise(
        &self,
        b: &mut Batch<D>,
        family: &'static Family,
        op: Op,
        ins: &[&Strided<D::Buffer>],
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        if family == &COPY {
            self.f64_copy(b, ins[0], out)
        } else if family == &SELECT {
            let (c, x, y) = (Pairs::spread(ins[0]), Pairs::of(ins[1]), Pairs::of(ins[2]));
            let words = pair_shape(out.shape);
            let o = pair_out(out, &words);
            self.select(b, &c.view(ins[0]), &x.view(ins[1]), &y.view(ins[2]), &o)
        } else if let Op::Unary(op) = op {
            self.f64_map(b, &unary_code(op), ins, &[Ty::F64], out, [0.0; 2])
        } else if let Op::Binary(o) = op {
            let code = binary_code(o).ok_or_else(|| unsupported(op.name()))?;
            let tys = [Ty::F64, Ty::F64];
            self.f64_map(b, &code, ins, &tys, out, [0.0; 2])
        } else {
            Err(unsupported(&format!("{family:?} '{op}'")))
        }
    }

    /// `out = alpha * x + beta * y` in f64.
    pub(crate) fn f64_axpby(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        y: &Strided<D::Buffer>,
        alpha: f64,
        beta: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let code = "fn op(a: f64, b: f64) -> f64 { return scalar(0u) * a + scalar(1u) * b; }\n";
        let tys = [Ty::F64, Ty::F64];
        self.f64_map(b, code, &[x, y], &tys, out, [alpha, beta])
    }

    /// Copies and casts with f64 on either side (SEMANTICS.md cast rules).
    fn f64_copy(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        use DType::*;
        match (x.dtype, out.dtype) {
            (F64, F64) => {
                let w = Pairs::of(x);
                let words = pair_shape(out.shape);
                self.copy(b, &w.view(x), &pair_out(out, &words))
            }
            (F64, F32 | I32 | U32) => {
                let f = match out.dtype {
                    F32 => "to_f32",
                    I32 => "to_i32",
                    _ => "to_u32",
                };
                let code = format!("fn op(a: f64) -> u32 {{ return {f}(a); }}\n");
                self.f64_map(b, &code, &[x], &[Ty::F64], out, [0.0; 2])
            }
            (F64, Bool) => {
                let code = "fn op(a: f64) -> bool { return nz_d(a); }\n";
                self.f64_map(b, code, &[x], &[Ty::F64], out, [0.0; 2])
            }
            (F64, _) => {
                // f32 rounded to odd, which the word copy rounds correctly onward.
                let t = self.f64_temp(out.shape, F32)?;
                let code = "fn op(a: f64) -> u32 { return to_f32_odd(a); }\n";
                self.f64_map(b, code, &[x], &[Ty::F64], &t.out(), [0.0; 2])?;
                self.copy(b, &t.view(), out)
            }
            (F32 | I32 | U32, F64) => {
                let f = match x.dtype {
                    F32 => "from_f32",
                    I32 => "from_i32",
                    _ => "from_u32",
                };
                let code = format!("fn op(a: u32) -> f64 {{ return {f}(a); }}\n");
                self.f64_map(b, &code, &[x], &[Ty::U32], out, [0.0; 2])
            }
            (from, _) => {
                // f16/bf16 widen exactly to f32, u8/bool to u32.
                let mid = if from.is_float() { F32 } else { U32 };
                let t = self.f64_widen(b, x, mid)?;
                self.f64_copy(b, &t.view(), out)
            }
        }
    }

    /// `out[i] = start + i * step` (`fill`: `start` everywhere) in f64.
    pub(crate) fn f64_generate(
        &self,
        b: &mut Batch<D>,
        out: &Contig<D::Buffer>,
        start: f64,
        step: f64,
        fill: bool,
    ) -> Result<()> {
        check_out(out)?;
        let n = out.numel();
        let m = Module {
            entry: "gen",
            out: Ty::F64,
            ins: &[],
            code: "",
        };
        if n == 0 {
            return self.f64_pipe(&m).map(drop);
        }
        let [s0, s1] = bits(start);
        let [t0, t1] = bits(step);
        let params = vec![n as u32, 0, fill as u32, 0, s0, s1, t0, t1];
        self.f64_record(b, &m, vec![out.binding()], params, self.f64_groups(n))
    }

    /// Reduction `op` of f64 `x` over `axes` into `out` (the kept dims).
    pub(crate) fn f64_reduce(
        &self,
        b: &mut Batch<D>,
        op: ReduceOp,
        x: &Strided<D::Buffer>,
        axes: &[usize],
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        if matches!(op, ReduceOp::All | ReduceOp::Any) {
            // Truth values first (the cast to bool), then the bool reduction.
            let t = self.f64_widen(b, x, DType::Bool)?;
            return self.reduce(b, op, &t.view(), axes, out);
        }
        let code = reduce_code(op).ok_or_else(|| unsupported(op.name()))?;
        self.f64_rows(b, "reduce", code, x, axes, out)
    }

    /// Index of the extreme of f64 `x` along `axis` (`argmax`/`argmin`).
    pub(crate) fn f64_arg_reduce(
        &self,
        b: &mut Batch<D>,
        op: ArgReduceOp,
        x: &Strided<D::Buffer>,
        axis: usize,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let code = if op == ArgReduceOp::ArgMax {
            "fn better(a: f64, b: f64) -> bool { return b > a; }\n"
        } else {
            "fn better(a: f64, b: f64) -> bool { return b < a; }\n"
        };
        self.f64_rows(b, "argreduce", code, x, &[axis], out)
    }

    /// One workgroup per output of `x` reduced over `axes` (`reduce`, `argreduce`).
    fn f64_rows(
        &self,
        b: &mut Batch<D>,
        entry: &'static str,
        code: &str,
        x: &Strided<D::Buffer>,
        axes: &[usize],
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let out_ty = if entry == "reduce" { Ty::F64 } else { Ty::U32 };
        let m = Module {
            entry,
            out: out_ty,
            ins: &[Ty::F64],
            code,
        };
        let n_out = out.numel();
        if n_out == 0 {
            return self.f64_pipe(&m).map(drop);
        }
        let kept: Vec<usize> = (0..x.shape.len()).filter(|d| !axes.contains(d)).collect();
        let red_n: usize = axes.iter().map(|&d| x.shape[d]).product();
        let mut p = vec![
            n_out as u32,
            red_n as u32,
            kept.len() as u32,
            axes.len() as u32,
            x.offset as u32,
        ];
        p.extend(kept.iter().map(|&d| x.shape[d] as u32));
        p.extend(kept.iter().map(|&d| x.strides[d] as i32 as u32));
        p.extend(axes.iter().map(|&d| x.shape[d] as u32));
        p.extend(axes.iter().map(|&d| x.strides[d] as i32 as u32));
        let groups = (n_out as u64).min(MAX_GROUPS);
        self.f64_record(b, &m, vec![out.binding(), x.binding()], p, groups)
    }

    /// Scan `op` of the row-major f64 `x` along `axis`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn f64_scan(
        &self,
        b: &mut Batch<D>,
        op: ReduceOp,
        x: &Strided<D::Buffer>,
        axis: usize,
        reverse: bool,
        inclusive: bool,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let code = reduce_code(op).ok_or_else(|| unsupported(op.name()))?;
        let m = Module {
            entry: "scan",
            out: Ty::F64,
            ins: &[Ty::F64],
            code,
        };
        let n = out.numel();
        if n == 0 {
            return self.f64_pipe(&m).map(drop);
        }
        let len = x.shape[axis];
        let inner: usize = x.shape[axis + 1..].iter().product();
        let lines = n / len;
        let flags = reverse as u32 | (!inclusive as u32) << 1;
        let p = vec![
            lines as u32,
            len as u32,
            inner as u32,
            x.offset as u32,
            flags,
        ];
        let groups = (lines as u64).min(MAX_GROUPS);
        self.f64_record(b, &m, vec![out.binding(), x.binding()], p, groups)
    }

    /// Stable argsort of the rows of f64 `x` (row-major): two stable passes of
    /// the u32 sort, by the low then the high words of an order-preserving key.
    pub(crate) fn f64_argsort(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let n = out.numel();
        let m = Module {
            entry: "keys",
            out: Ty::U32,
            ins: &[Ty::U32],
            code: "",
        };
        if n == 0 {
            return self.f64_pipe(&m).map(drop);
        }
        // The low key words, then the high ones.
        let keys = self.f64_temp(&pair_shape_front(x.shape), DType::U32)?;
        let params = map_params(x.shape, &[x], [0.0; 2]);
        let kb = keys.out().binding();
        self.f64_record(b, &m, vec![kb, x.binding()], params, self.f64_groups(n))?;
        let first = self.f64_temp(x.shape, DType::U32)?;
        let high = self.f64_temp(x.shape, DType::U32)?;
        let second = self.f64_temp(x.shape, DType::U32)?;
        let axis = x.shape.len() - 1;
        self.argsort(b, &keys.part(0), &first.out())?;
        self.gather(b, &keys.part(1), &first.view(), axis, &high.out())?;
        self.argsort(b, &high.view(), &second.out())?;
        self.gather(b, &first.view(), &second.view(), axis, out)
    }

    /// `out = alpha * a @ bb + beta * c` in f64 (shapes checked by `matmul`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn f64_matmul(
        &self,
        b: &mut Batch<D>,
        a: &Strided<D::Buffer>,
        bb: &Strided<D::Buffer>,
        c: Option<&Strided<D::Buffer>>,
        alpha: f64,
        beta: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        if self.inner.caps.max_invocations < 256 {
            return Err(unsupported(
                "matmul on an adapter with fewer than 256 invocations",
            ));
        }
        let nd = a.shape.len();
        let (m, k, n) = (a.shape[nd - 2], a.shape[nd - 1], bb.shape[nd - 1]);
        let batch = &out.shape[..nd - 2];
        let nb: usize = batch.iter().product();
        let (ab, bbits) = (bits(alpha), bits(beta));
        let cs = c.map_or([0, 0], |c| [c.strides[nd - 2], c.strides[nd - 1]]);
        let mut p = vec![
            m as u32,
            n as u32,
            k as u32,
            nb as u32,
            batch.len() as u32,
            a.offset as u32,
            bb.offset as u32,
            c.map_or(0, |c| c.offset as u32),
            ab[0],
            ab[1],
            bbits[0],
            bbits[1],
            a.strides[nd - 2] as i32 as u32,
            a.strides[nd - 1] as i32 as u32,
            bb.strides[nd - 2] as i32 as u32,
            bb.strides[nd - 1] as i32 as u32,
            cs[0] as i32 as u32,
            cs[1] as i32 as u32,
            c.is_some() as u32,
        ];
        p.extend(batch.iter().map(|&d| d as u32));
        for v in [Some(a), Some(bb), c] {
            let s = v.map_or(&a.strides[..nd - 2], |v| &v.strides[..nd - 2]);
            p.extend(s.iter().map(|&s| s as i32 as u32));
        }
        let module = Module {
            entry: "matmul",
            out: Ty::F64,
            ins: &[Ty::F64, Ty::F64, Ty::F64],
            code: "",
        };
        let tiles = (nb * m.div_ceil(16) * n.div_ceil(16)) as u64;
        let cbind = c.map_or_else(|| a.binding(), |c| c.binding());
        let buffers = vec![out.binding(), a.binding(), bb.binding(), cbind];
        self.f64_record(b, &module, buffers, p, tiles.min(MAX_GROUPS))
    }

    /// Row op `op` of f64 `x` over its last axis.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn f64_normalize(
        &self,
        b: &mut Batch<D>,
        op: NormOp,
        x: &Strided<D::Buffer>,
        params: &[&Strided<D::Buffer>],
        eps: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let code = format!("const NORM_OP: u32 = {}u;\n", op as u32);
        let module = Module {
            entry: "norm",
            out: Ty::F64,
            ins: &[Ty::F64, Ty::F64, Ty::F64],
            code: &code,
        };
        let nd = x.shape.len();
        let len = x.shape[nd - 1];
        let n = out.numel();
        if n == 0 {
            return self.f64_pipe(&module).map(drop);
        }
        let rows = n / len;
        // layer_norm has weight and bias, rms_norm weight: absent ones are marked.
        let (w, bias) = match (op, params) {
            (NormOp::LayerNorm, [w, bias]) => (Some(*w), Some(*bias)),
            (NormOp::LayerNorm | NormOp::RmsNorm, [w]) => (Some(*w), None),
            _ => (None, None),
        };
        let e = bits(eps);
        let none = 0xffff_ffff;
        let mut p = vec![
            len as u32,
            rows as u32,
            (nd - 1) as u32,
            x.offset as u32,
            x.strides[nd - 1] as i32 as u32,
            w.map_or(0, |w| w.offset as u32),
            w.map_or(none, |w| w.strides[0] as i32 as u32),
            bias.map_or(0, |v| v.offset as u32),
            bias.map_or(none, |v| v.strides[0] as i32 as u32),
            e[0],
            e[1],
        ];
        p.extend(x.shape[..nd - 1].iter().map(|&d| d as u32));
        p.extend(x.strides[..nd - 1].iter().map(|&s| s as i32 as u32));
        let bind = |v: Option<&Strided<D::Buffer>>| v.map_or_else(|| x.binding(), |v| v.binding());
        let buffers = vec![out.binding(), x.binding(), bind(w), bind(bias)];
        self.f64_record(b, &module, buffers, p, (rows as u64).min(MAX_GROUPS))
    }

    /// `out = base` with `updates` added at `indices` along `axis`, in f64 without
    /// atomics: each output element sums the updates aimed at it, in index order
    /// (cost: the output's size times the index extent along `axis`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn f64_scatter_add(
        &self,
        b: &mut Batch<D>,
        base: &Strided<D::Buffer>,
        indices: &Strided<D::Buffer>,
        updates: &Strided<D::Buffer>,
        axis: usize,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        if !matches!(indices.dtype, DType::I32 | DType::U32) {
            // The kernel reads whole words: widen u8 indices first.
            let t = self.f64_widen(b, indices, DType::U32)?;
            return self.f64_scatter_add(b, base, &t.view(), updates, axis, out);
        }
        let module = Module {
            entry: "scatter_add",
            out: Ty::F64,
            ins: &[Ty::F64, Ty::U32, Ty::F64],
            code: "",
        };
        let n = out.numel();
        if n == 0 {
            return self.f64_pipe(&module).map(drop);
        }
        let rank = out.shape.len();
        let mut p = vec![
            n as u32,
            rank as u32,
            axis as u32,
            indices.shape[axis] as u32,
            base.offset as u32,
            indices.offset as u32,
            updates.offset as u32,
        ];
        p.extend(out.shape.iter().map(|&d| d as u32));
        for v in [base, indices, updates] {
            p.extend(v.strides.iter().map(|&s| s as i32 as u32));
        }
        let buffers = vec![
            out.binding(),
            base.binding(),
            indices.binding(),
            updates.binding(),
        ];
        self.f64_record(b, &module, buffers, p, self.f64_groups(n))
    }
}
