//! The 64-bit dtypes: f64 on adapters with `SHADER_F64`, and i64 on every adapter
//! as pairs of `u32` words with its arithmetic written out (`int64.wgsl`). The
//! kernels of `wide.wgsl` compute on either (elementwise ops, casts, reductions,
//! scans, sort keys, scatter-add), `f64.wgsl` holds the f64 math and the f64-only
//! kernels (matmul, row ops), and the word kernels move the data as pairs of
//! words (copies, select, gather, scatter, concatenate, slice updates), a view of
//! `[.., n]` 64-bit elements being a view of `[.., n, 2]` words.
//!
//! Each public family method of [`Kernels`] sends 64-bit dtypes here after its own
//! checks.

use crate::compose::{Family, Op, tree_shake};
use crate::driver::Driver;
use crate::driver::{Batch, Binding};
use crate::dtype::{DType, is_wide};
use crate::elementwise::{BINARY_WGSL, COPY, SELECT, UNARY_WGSL};
use crate::kernels::Kernels;
use crate::kernels::MAX_GROUPS;
use crate::layout::{Contig, Strided};
use crate::layout::{Pairs, check_out, contiguous_strides, pair_out, pair_shape};
use crate::{Error, Result};
use std::sync::Arc;
use wmx_spec::{ArgReduceOp, BinaryOp, NormOp, ReduceOp, UnaryOp};

const WIDE_WGSL: &str = include_str!("wide.wgsl");
const F64_WGSL: &str = include_str!("f64.wgsl");
const INT64_WGSL: &str = include_str!("int64.wgsl");

/// WGSL element type of a binding, or of a module's elements (`E`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ty {
    F64,
    I64,
    U64,
    U32,
}

impl Ty {
    fn of(d: DType) -> Ty {
        match d {
            DType::F64 => Ty::F64,
            DType::I64 => Ty::I64,
            DType::U64 => Ty::U64,
            _ => Ty::U32,
        }
    }
    /// The dtype of an element type.
    fn dtype(self) -> DType {
        match self {
            Ty::F64 => DType::F64,
            Ty::I64 => DType::I64,
            Ty::U64 => DType::U64,
            Ty::U32 => DType::U32,
        }
    }
    fn wgsl(self) -> &'static str {
        match self {
            Ty::F64 => "f64",
            Ty::I64 | Ty::U64 => "vec2<u32>",
            Ty::U32 => "u32",
        }
    }
    /// Suffix of the ops' functions on this type (`add_d`, `add_l`, `add_ul`).
    fn suffix(self) -> &'static str {
        match self {
            Ty::F64 => "d",
            Ty::U64 => "ul",
            _ => "l",
        }
    }
}

/// One module of `wide.wgsl` (or `f64.wgsl`): its entry point, the element type
/// `E`, the types of the output and the inputs (bound at 2..), and the prelude's
/// code (`op`, `ident`, ...).
struct Module<'a> {
    entry: &'static str,
    elem: Ty,
    out: Ty,
    ins: &'a [Ty],
    code: &'a str,
}

impl Module<'_> {
    /// Whether the module computes in f64 (the adapter needs `SHADER_F64`).
    fn f64(&self) -> bool {
        self.elem == Ty::F64 || self.out == Ty::F64 || self.ins.contains(&Ty::F64)
    }
}

/// A contiguous scratch array: written through [`Temp::out`], read through
/// [`Temp::view`].
pub(crate) struct Temp<B> {
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
    pub(crate) fn view(&self) -> Strided<'_, B> {
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

/// The words of `v` as an element of `t` (integers truncated and saturated as a
/// cast, NaN to 0).
fn words_of(v: f64, t: Ty) -> [u32; 2] {
    let b = match t {
        Ty::F64 => v.to_bits(),
        Ty::U64 => v as u64,
        _ => v as i64 as u64,
    };
    [b as u32, (b >> 32) as u32]
}

/// `op` of the cast of elements of `t` to bool (nonzero; NaN is true).
fn truth_code(t: Ty) -> String {
    let f = if t == Ty::F64 { "nz_d" } else { "nz_l" };
    format!("fn op(a: {}) -> bool {{ return {f}(a); }}\n", t.wgsl())
}

fn unsupported(dtype: DType, what: &str) -> Error {
    Error::UnsupportedDType {
        dtype: dtype.name(),
        reason: format!("{what} has no {dtype} kernel"),
    }
}

/// The WGSL of unary `op` on elements of `t` (bool ops give `bool`): `{op}_d`
/// or `{op}_l`, beside the op's other forms in `unary.wgsl` (or, for math the
/// library shares, in `f64.wgsl`); `None` where the op is not defined on `t`.
fn unary_code(op: UnaryOp, t: Ty) -> Option<String> {
    if !op.supports(t.dtype()) {
        return None;
    }
    let e = t.wgsl();
    let o = if op.outputs_bool() { "bool" } else { e };
    let s = t.suffix();
    Some(format!("fn op(a: {e}) -> {o} {{ return {op}_{s}(a); }}\n"))
}

/// The WGSL of binary `op` on two elements of `t`: `{op}_d`/`{op}_l` in
/// `binary.wgsl` (or `f64.wgsl`); `None` for the ops not defined on `t`.
fn binary_code(op: BinaryOp, t: Ty) -> Option<String> {
    if !op.supports(t.dtype()) {
        return None;
    }
    let e = t.wgsl();
    let o = if op.outputs_bool() { "bool" } else { e };
    let s = t.suffix();
    Some(format!(
        "fn op(a: {e}, b: {e}) -> {o} {{ return {op}_{s}(a, b); }}\n"
    ))
}

/// Where a module finds its functions: the generic kernels, the 64-bit integer
/// words, the f64 math where it computes in f64, and the ops' forms beside their
/// word-kernel forms (tree-shaking keeps what is called).
fn sources(f64: bool) -> String {
    if f64 {
        [WIDE_WGSL, INT64_WGSL, F64_WGSL, UNARY_WGSL, BINARY_WGSL].concat()
    } else {
        [WIDE_WGSL, INT64_WGSL, UNARY_WGSL, BINARY_WGSL].concat()
    }
}

/// Identity and combination of reduction or scan `op` on elements of `t`.
fn reduce_code(op: ReduceOp, t: Ty) -> Option<&'static str> {
    Some(match (op, t) {
        (ReduceOp::Sum, Ty::F64) => {
            "fn ident() -> f64 { return 0.0lf; }\nfn combine(a: f64, b: f64) -> f64 { return a + b; }\n"
        }
        (ReduceOp::Prod, Ty::F64) => {
            "fn ident() -> f64 { return 1.0lf; }\nfn combine(a: f64, b: f64) -> f64 { return a * b; }\n"
        }
        (ReduceOp::Max, Ty::F64) => {
            "fn ident() -> f64 { return -inf_d(); }\nfn combine(a: f64, b: f64) -> f64 { return max_d(a, b); }\n"
        }
        (ReduceOp::Min, Ty::F64) => {
            "fn ident() -> f64 { return inf_d(); }\nfn combine(a: f64, b: f64) -> f64 { return min_d(a, b); }\n"
        }
        (ReduceOp::Max, Ty::U64) => {
            "fn ident() -> vec2<u32> { return vec2<u32>(0u, 0u); }\nfn combine(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return maximum_ul(a, b); }\n"
        }
        (ReduceOp::Min, Ty::U64) => {
            "fn ident() -> vec2<u32> { return vec2<u32>(0xffffffffu, 0xffffffffu); }\nfn combine(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return minimum_ul(a, b); }\n"
        }
        (ReduceOp::Sum, _) => {
            "fn ident() -> vec2<u32> { return vec2<u32>(0u, 0u); }\nfn combine(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return add64(a, b); }\n"
        }
        (ReduceOp::Prod, _) => {
            "fn ident() -> vec2<u32> { return vec2<u32>(1u, 0u); }\nfn combine(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return mul64(a, b); }\n"
        }
        (ReduceOp::Max, _) => {
            "fn ident() -> vec2<u32> { return vec2<u32>(0u, 0x80000000u); }\nfn combine(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return maximum_l(a, b); }\n"
        }
        (ReduceOp::Min, _) => {
            "fn ident() -> vec2<u32> { return vec2<u32>(0xffffffffu, 0x7fffffffu); }\nfn combine(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return minimum_l(a, b); }\n"
        }
        // Logical reductions read truth values as u32 0/1 words (the word kernels).
        (ReduceOp::All | ReduceOp::Any, _) => return None,
    })
}

/// `better` and `isnan_e` of an arg reduction on elements of `t`.
fn arg_code(op: ArgReduceOp, t: Ty) -> String {
    let (a, b) = if op == ArgReduceOp::ArgMax {
        ("a", "b")
    } else {
        ("b", "a")
    };
    match t {
        Ty::F64 => format!(
            "fn better(a: f64, b: f64) -> bool {{ return {a} < {b}; }}\n\
             fn isnan_e(x: f64) -> bool {{ return isnan_d(x); }}\n"
        ),
        _ => format!(
            "fn better(a: vec2<u32>, b: vec2<u32>) -> bool {{ return less_{s}({a}, {b}); }}\n\
             fn isnan_e(x: vec2<u32>) -> bool {{ return false; }}\n",
            s = t.suffix()
        ),
    }
}

/// `start` and `at` of `gen` on elements of `t`: the scalars `start + i * step`.
fn gen_code(t: Ty) -> &'static str {
    match t {
        Ty::F64 => {
            "fn start() -> f64 { return scalar(0u); }\n\
             fn at(i: u32) -> f64 { return scalar(0u) + f64(i) * scalar(1u); }\n"
        }
        _ => {
            "fn start() -> vec2<u32> { return vec2<u32>(P[4], P[5]); }\n\
             fn at(i: u32) -> vec2<u32> { return add64(start(), mul64(vec2<u32>(i, 0u), vec2<u32>(P[6], P[7]))); }\n"
        }
    }
}

/// `key` of the sort keys of elements of `t`.
fn key_code(t: Ty) -> String {
    let s = t.suffix();
    format!("fn key(lo: u32, hi: u32) -> vec2<u32> {{ return key_{s}(lo, hi); }}\n")
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

/// The generated head of module `m`: workgroup size, element type, bindings and
/// op code.
fn prelude(m: &Module, wg: u32) -> String {
    let mut p = format!(
        "const WG: u32 = {wg}u;\nalias E = {};\n\
         @group(0) @binding(0) var<storage, read> P: array<u32>;\n\
         @group(0) @binding(1) var<storage, read_write> O: array<{}>;\n",
        m.elem.wgsl(),
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

/// The casts between 64-bit and 32-bit dtypes: `(from, to, WGSL function)`, the
/// function taking and giving words (`u32` or `vec2<u32>`) or `f64`.
const CASTS: &[(Ty, Ty, &str)] = &[
    (Ty::F64, Ty::U32, "to_f32"),
    (Ty::F64, Ty::U32, "to_i32"),
    (Ty::F64, Ty::U32, "to_u32"),
    (Ty::F64, Ty::U32, "to_f32_odd"),
    (Ty::U32, Ty::F64, "from_f32"),
    (Ty::U32, Ty::F64, "from_i32"),
    (Ty::U32, Ty::F64, "from_u32"),
    (Ty::I64, Ty::F64, "from_i64"),
    (Ty::F64, Ty::I64, "to_i64"),
    (Ty::I64, Ty::U32, "i64_to_f32"),
    (Ty::I64, Ty::U32, "i64_to_f32_odd"),
    (Ty::I64, Ty::U32, "low_word"),
    (Ty::U32, Ty::I64, "f32_to_i64"),
    (Ty::U32, Ty::I64, "l_from_i32"),
    (Ty::U32, Ty::I64, "l_from_u32"),
    (Ty::I64, Ty::U32, "i64_to_index"),
    (Ty::U64, Ty::F64, "from_u64"),
    (Ty::F64, Ty::U64, "to_u64"),
    (Ty::U64, Ty::U32, "u64_to_f32"),
    (Ty::U64, Ty::U32, "u64_to_f32_odd"),
    (Ty::U32, Ty::U64, "f32_to_u64"),
    (Ty::U64, Ty::U32, "u64_to_index"),
];

/// The module of cast `f` from `from` to `to` elementwise.
fn cast_code(from: Ty, to: Ty, f: &str) -> String {
    format!(
        "fn op(a: {}) -> {} {{ return {f}(a); }}\n",
        from.wgsl(),
        to.wgsl()
    )
}

/// The element type of a module with these bindings: f64 where any is.
fn elem_of(out: Ty, ins: &[Ty]) -> Ty {
    if out == Ty::F64 || ins.contains(&Ty::F64) {
        Ty::F64
    } else {
        Ty::I64
    }
}

/// Every module of these kernels the library can launch, as `(label, WGSL source,
/// entry point, whether it computes in f64)`, for workgroups of `wg` invocations:
/// for the naga tests.
pub fn wide_modules(wg: u32) -> Vec<(String, String, &'static str, bool)> {
    let u = Ty::U32;
    let mut codes: Vec<(&'static str, Ty, Ty, Vec<Ty>, String)> = Vec::new();
    for t in [Ty::F64, Ty::I64, Ty::U64] {
        for &op in UnaryOp::ALL {
            if let Some(code) = unary_code(op, t) {
                let (e, o) = if op.outputs_bool() {
                    ("pack1", u)
                } else {
                    ("map1", t)
                };
                codes.push((e, t, o, vec![t], code));
            }
        }
        for &op in BinaryOp::ALL {
            if let Some(code) = binary_code(op, t) {
                let (e, o) = if op.outputs_bool() {
                    ("pack2", u)
                } else {
                    ("map2", t)
                };
                codes.push((e, t, o, vec![t, t], code));
            }
        }
        codes.push(("pack1", t, u, vec![t], truth_code(t)));
        for &op in ReduceOp::ALL {
            let Some(code) = reduce_code(op, t).map(str::to_string) else {
                continue;
            };
            codes.push(("reduce", t, t, vec![t], code.clone()));
            codes.push(("scan", t, t, vec![t], code.clone()));
            if op == ReduceOp::Sum {
                codes.push(("scatter_add", t, t, vec![t, u, t], code));
            }
        }
        for &op in ArgReduceOp::ALL {
            codes.push(("argreduce", t, u, vec![t], arg_code(op, t)));
        }
        codes.push(("gen", t, t, vec![], gen_code(t).to_string()));
        codes.push(("keys", t, u, vec![u], key_code(t)));
    }
    for &(from, to, f) in CASTS {
        codes.push((
            "map1",
            elem_of(to, &[from]),
            to,
            vec![from],
            cast_code(from, to, f),
        ));
    }
    let f = Ty::F64;
    let axpby = "fn op(a: f64, b: f64) -> f64 { return scalar(0u) * a + scalar(1u) * b; }\n";
    codes.push(("map2", f, f, vec![f, f], axpby.to_string()));
    for i in 0..NormOp::ALL.len() {
        let code = format!("const NORM_OP: u32 = {i}u;\n");
        codes.push(("norm", f, f, vec![f, f, f], code));
    }
    codes.push(("matmul", f, f, vec![f, f, f], String::new()));
    codes
        .into_iter()
        .map(|(entry, elem, out, ins, code)| {
            let m = Module {
                entry,
                elem,
                out,
                ins: &ins,
                code: &code,
            };
            let p = prelude(&m, wg);
            let src = format!("{p}{}", tree_shake(&p, &sources(m.f64()), entry));
            let label = format!("{} {entry}: {}", elem.wgsl(), code.trim());
            (label, src, entry, m.f64())
        })
        .collect()
}

impl<D: Driver> Kernels<D> {
    /// Whether f64 buffers can be computed on here (`SHADER_F64`).
    pub(crate) fn has_f64(&self) -> bool {
        self.inner.caps.f64
    }

    /// The compiled module `m`, cached by its prelude and entry point.
    fn wide_pipe(&self, m: &Module) -> Result<Arc<D::Pipeline>> {
        if m.f64() && !self.has_f64() {
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
        if let Some(p) = self.inner.wide_pipes.lock().unwrap().get(&key) {
            return Ok(p.clone());
        }
        let source = format!(
            "{prelude}{}",
            tree_shake(&prelude, &sources(m.f64()), m.entry)
        );
        let label = format!("{} {}", m.elem.wgsl(), m.entry);
        let bindings = (1, m.ins.len());
        let pipe =
            Arc::new(self.compile_module(&label, &source, m.entry, bindings, &[], m.f64())?);
        self.inner
            .wide_pipes
            .lock()
            .unwrap()
            .insert(key, pipe.clone());
        Ok(pipe)
    }

    fn wide_record(
        &self,
        b: &mut Batch<D>,
        m: &Module,
        buffers: Vec<Binding<D::Buffer>>,
        params: Vec<u32>,
        groups: u64,
    ) -> Result<()> {
        let pipe = self.wide_pipe(m)?;
        self.record_pipe(b, pipe, buffers, params, groups.max(1))
    }

    /// Workgroups for `n` items of a grid-stride kernel.
    fn wide_groups(&self, n: usize) -> u64 {
        (n as u64).div_ceil(self.wg() as u64).min(MAX_GROUPS)
    }

    /// A contiguous scratch array of `shape` and `dtype` (freed when the batch
    /// that uses it is done).
    fn wide_temp(&self, shape: &[usize], dtype: DType) -> Result<Temp<D::Buffer>> {
        let n: usize = shape.iter().product();
        let bytes = (n.max(1) * dtype.size()).div_ceil(16) * 16;
        Ok(Temp {
            buffer: self.create_buffer(bytes as u64, Some("wmx 64-bit temporary"))?,
            dtype,
            shape: shape.to_vec(),
            strides: contiguous_strides(shape),
        })
    }

    /// `x` copied (cast) into a contiguous scratch array of `dtype`.
    fn wide_widen(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        dtype: DType,
    ) -> Result<Temp<D::Buffer>> {
        let t = self.wide_temp(x.shape, dtype)?;
        self.copy(b, x, &t.out())?;
        Ok(t)
    }

    /// `out = code(x[, y])` elementwise through `map1`/`map2` (or `pack1`/`pack2`
    /// for bool outputs), `x` and `y` of `out`'s shape and of the types `tys`.
    #[allow(clippy::too_many_arguments)]
    fn wide_map(
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
        // 64-bit outputs are arrays of their type; 32-bit ones and packed bools, words.
        let out_ty = Ty::of(out.dtype);
        let entry = match (ins.len(), pack) {
            (1, false) => "map1",
            (2, false) => "map2",
            (1, true) => "pack1",
            _ => "pack2",
        };
        let m = Module {
            entry,
            elem: elem_of(out_ty, tys),
            out: out_ty,
            ins: tys,
            code,
        };
        if n == 0 {
            return self.wide_pipe(&m).map(drop);
        }
        let params = map_params(out.shape, ins, scalars);
        let mut buffers = vec![out.binding()];
        buffers.extend(ins.iter().map(|x| x.binding()));
        let items = if pack { n.div_ceil(4) } else { n };
        self.wide_record(b, &m, buffers, params, self.wide_groups(items))
    }

    /// The elementwise families with a 64-bit input or output (already checked
    /// by `elementwise`).
    pub(crate) fn wide_elementwise(
        &self,
        b: &mut Batch<D>,
        family: &'static Family,
        op: Op,
        ins: &[&Strided<D::Buffer>],
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        if family == &COPY {
            return self.wide_copy(b, ins[0], out);
        }
        if family == &SELECT {
            let (c, x, y) = (Pairs::spread(ins[0]), Pairs::of(ins[1]), Pairs::of(ins[2]));
            let words = pair_shape(out.shape);
            let o = pair_out(out, &words);
            return self.select(b, &c.view(ins[0]), &x.view(ins[1]), &y.view(ins[2]), &o);
        }
        let d = ins[0].dtype;
        let t = Ty::of(d);
        let code = match op {
            Op::Unary(o) if is_wide(d) => unary_code(o, t),
            Op::Binary(o) if is_wide(d) && ins.iter().all(|x| x.dtype == d) => binary_code(o, t),
            _ => None,
        };
        let code = code.ok_or_else(|| unsupported(d, &format!("{family:?} '{op}'")))?;
        let tys = vec![t; ins.len()];
        self.wide_map(b, &code, ins, &tys, out, [0.0; 2])
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
        self.wide_map(b, code, &[x, y], &tys, out, [alpha, beta])
    }

    /// The cast `f` of `x` into `out` (one of [`CASTS`]).
    fn cast_map(
        &self,
        b: &mut Batch<D>,
        f: &str,
        x: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let (from, to) = (Ty::of(x.dtype), Ty::of(out.dtype));
        self.wide_map(b, &cast_code(from, to, f), &[x], &[from], out, [0.0; 2])
    }

    /// i64 or u64 `indices` as i32 for the index kernels: values outside i32's
    /// range become -2^31, out of range of the axis of `axis_len` (< 2^31,
    /// checked).
    pub(crate) fn i64_indices(
        &self,
        b: &mut Batch<D>,
        indices: &Strided<D::Buffer>,
        axis_len: usize,
    ) -> Result<Temp<D::Buffer>> {
        if axis_len > i32::MAX as usize {
            return Err(Error::UnsupportedDType {
                dtype: indices.dtype.name(),
                reason: format!(
                    "{} indices into an axis of {axis_len} (over 2^31 - 1)",
                    indices.dtype
                ),
            });
        }
        let t = self.wide_temp(indices.shape, DType::I32)?;
        let f = if indices.dtype == DType::U64 {
            "u64_to_index"
        } else {
            "i64_to_index"
        };
        self.cast_map(b, f, indices, &t.out())?;
        Ok(t)
    }

    /// Copies and casts with a 64-bit dtype on either side (SEMANTICS.md cast
    /// rules).
    fn wide_copy(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        use DType::*;
        match (x.dtype, out.dtype) {
            // i64 <-> u64 keep the bits.
            (from, to)
                if from == to
                    || (is_wide(from) && is_wide(to) && !from.is_float() && !to.is_float()) =>
            {
                let w = Pairs::of(x);
                let words = pair_shape(out.shape);
                self.copy(b, &w.view(x), &pair_out(out, &words))
            }
            (F64, F32) => self.cast_map(b, "to_f32", x, out),
            (F64, I32) => self.cast_map(b, "to_i32", x, out),
            (F64, U32) => self.cast_map(b, "to_u32", x, out),
            (F64, I64) => self.cast_map(b, "to_i64", x, out),
            (I64, F64) => self.cast_map(b, "from_i64", x, out),
            (I64, F32) => self.cast_map(b, "i64_to_f32", x, out),
            (U64, F64) => self.cast_map(b, "from_u64", x, out),
            (F64, U64) => self.cast_map(b, "to_u64", x, out),
            (U64, F32) => self.cast_map(b, "u64_to_f32", x, out),
            // Integers narrow by keeping the low bits.
            (I64 | U64, I32 | U32) => self.cast_map(b, "low_word", x, out),
            (F32, U64) => self.cast_map(b, "f32_to_u64", x, out),
            (I32, U64) => self.cast_map(b, "l_from_i32", x, out),
            (U32, U64) => self.cast_map(b, "l_from_u32", x, out),
            (F32, F64) => self.cast_map(b, "from_f32", x, out),
            (I32, F64) => self.cast_map(b, "from_i32", x, out),
            (U32, F64) => self.cast_map(b, "from_u32", x, out),
            (F32, I64) => self.cast_map(b, "f32_to_i64", x, out),
            (I32, I64) => self.cast_map(b, "l_from_i32", x, out),
            (U32, I64) => self.cast_map(b, "l_from_u32", x, out),
            (F64 | I64 | U64, Bool) => {
                let t = Ty::of(x.dtype);
                self.wide_map(b, &truth_code(t), &[x], &[t], out, [0.0; 2])
            }
            (F64 | I64 | U64, to) => {
                // f16/bf16 from the f32 rounded to odd (which the word copy rounds
                // correctly onward), u8 from the low word.
                let (mid, f) = match (x.dtype, to.is_float()) {
                    (F64, _) => (F32, "to_f32_odd"),
                    (I64, true) => (F32, "i64_to_f32_odd"),
                    (_, true) => (F32, "u64_to_f32_odd"),
                    _ => (U32, "low_word"),
                };
                let t = self.wide_temp(out.shape, mid)?;
                self.cast_map(b, f, x, &t.out())?;
                self.copy(b, &t.view(), out)
            }
            (from, _) => {
                // f16/bf16 widen exactly to f32, u8/bool to u32.
                let mid = if from.is_float() { F32 } else { U32 };
                let t = self.wide_widen(b, x, mid)?;
                self.wide_copy(b, &t.view(), out)
            }
        }
    }

    /// `out[i] = start + i * step` (`fill`: `start` everywhere) in `out`'s 64-bit
    /// dtype (i64 from the values truncated and saturated).
    pub(crate) fn wide_generate(
        &self,
        b: &mut Batch<D>,
        out: &Contig<D::Buffer>,
        start: f64,
        step: f64,
        fill: bool,
    ) -> Result<()> {
        check_out(out)?;
        let n = out.numel();
        let t = Ty::of(out.dtype);
        let m = Module {
            entry: "gen",
            elem: t,
            out: t,
            ins: &[],
            code: gen_code(t),
        };
        if n == 0 {
            return self.wide_pipe(&m).map(drop);
        }
        // The step of an integer range may be negative: its i64 words wrap right.
        let step_ty = if t == Ty::F64 { t } else { Ty::I64 };
        let ([s0, s1], [t0, t1]) = (words_of(start, t), words_of(step, step_ty));
        let params = vec![n as u32, 0, fill as u32, 0, s0, s1, t0, t1];
        self.wide_record(b, &m, vec![out.binding()], params, self.wide_groups(n))
    }

    /// Reduction `op` of 64-bit `x` over `axes` into `out` (the kept dims).
    pub(crate) fn wide_reduce(
        &self,
        b: &mut Batch<D>,
        op: ReduceOp,
        x: &Strided<D::Buffer>,
        axes: &[usize],
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        if matches!(op, ReduceOp::All | ReduceOp::Any) {
            // Truth values first (the cast to bool), then the bool reduction.
            let t = self.wide_widen(b, x, DType::Bool)?;
            return self.reduce(b, op, &t.view(), axes, out);
        }
        let t = Ty::of(x.dtype);
        let code = reduce_code(op, t).ok_or_else(|| unsupported(x.dtype, op.name()))?;
        let red_n: usize = axes.iter().map(|&d| x.shape[d]).product();
        // At most 64 elements an invocation a pass: longer reductions write
        // partial results, reduced again (more workgroups, and no loop past
        // lavapipe's budget).
        let chunk = 64 * self.wg() as usize;
        if red_n <= chunk {
            return self.wide_rows(b, "reduce", code, x, axes, out, red_n);
        }
        let parts = red_n.div_ceil(chunk);
        let mut shape = out.shape.to_vec();
        shape.push(parts);
        let partial = self.wide_temp(&shape, x.dtype)?;
        self.wide_rows(b, "reduce", code, x, axes, &partial.out(), chunk)?;
        self.wide_reduce(b, op, &partial.view(), &[shape.len() - 1], out)
    }

    /// An `Err` where an invocation of `what` would loop `iterations` times on an
    /// adapter that stops longer loops (lavapipe), instead of a wrong answer.
    fn within_loop_budget(&self, iterations: usize, what: &str) -> Result<()> {
        match self.inner.caps.loop_budget {
            Some(budget) if iterations >= budget as usize => Err(Error::UnsupportedDType {
                dtype: "64-bit",
                reason: format!(
                    "{what} would loop {iterations} times in one invocation; adapter '{}' stops \
                     loops after {budget}",
                    self.inner.caps.adapter_name
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Index of the extreme of 64-bit `x` along `axis` (`argmax`/`argmin`).
    pub(crate) fn wide_arg_reduce(
        &self,
        b: &mut Batch<D>,
        op: ArgReduceOp,
        x: &Strided<D::Buffer>,
        axis: usize,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let code = arg_code(op, Ty::of(x.dtype));
        let steps = 2 * x.shape[axis].div_ceil(self.wg() as usize);
        self.within_loop_budget(steps, &format!("{op} along an axis of {}", x.shape[axis]))?;
        self.wide_rows(b, "argreduce", &code, x, &[axis], out, x.shape[axis])
    }

    /// One workgroup per output of `x` reduced over `axes` (`reduce`,
    /// `argreduce`), or, for `reduce` with a `chunk` shorter than the reduced
    /// elements, one per chunk: `out` then has a trailing axis of the chunks'
    /// partial results.
    #[allow(clippy::too_many_arguments)]
    fn wide_rows(
        &self,
        b: &mut Batch<D>,
        entry: &'static str,
        code: &str,
        x: &Strided<D::Buffer>,
        axes: &[usize],
        out: &Contig<D::Buffer>,
        chunk: usize,
    ) -> Result<()> {
        let t = Ty::of(x.dtype);
        let m = Module {
            entry,
            elem: t,
            out: if entry == "reduce" { t } else { Ty::U32 },
            ins: &[t],
            code,
        };
        let n_out = out.numel();
        if n_out == 0 {
            return self.wide_pipe(&m).map(drop);
        }
        let kept: Vec<usize> = (0..x.shape.len()).filter(|d| !axes.contains(d)).collect();
        let red_n: usize = axes.iter().map(|&d| x.shape[d]).product();
        let parts = red_n.div_ceil(chunk.max(1)).max(1);
        let mut p = vec![
            (n_out / parts) as u32,
            red_n as u32,
            kept.len() as u32,
            axes.len() as u32,
            x.offset as u32,
        ];
        p.extend(kept.iter().map(|&d| x.shape[d] as u32));
        p.extend(kept.iter().map(|&d| x.strides[d] as i32 as u32));
        p.extend(axes.iter().map(|&d| x.shape[d] as u32));
        p.extend(axes.iter().map(|&d| x.strides[d] as i32 as u32));
        p.extend([parts as u32, chunk.max(1) as u32]);
        let groups = (n_out as u64).min(MAX_GROUPS);
        self.wide_record(b, &m, vec![out.binding(), x.binding()], p, groups)
    }

    /// Scan `op` of the row-major 64-bit `x` along `axis`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn wide_scan(
        &self,
        b: &mut Batch<D>,
        op: ReduceOp,
        x: &Strided<D::Buffer>,
        axis: usize,
        reverse: bool,
        inclusive: bool,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let t = Ty::of(x.dtype);
        let code = reduce_code(op, t).ok_or_else(|| unsupported(x.dtype, op.name()))?;
        let m = Module {
            entry: "scan",
            elem: t,
            out: t,
            ins: &[t],
            code,
        };
        let n = out.numel();
        if n == 0 {
            return self.wide_pipe(&m).map(drop);
        }
        let len = x.shape[axis];
        // Each block of WG elements: a load loop step and log2(WG) shuffle steps.
        let wg = self.wg() as usize;
        let steps = len.div_ceil(wg) * (1 + wg.trailing_zeros() as usize);
        self.within_loop_budget(steps, &format!("a {op} scan along an axis of {len}"))?;
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
        self.wide_record(b, &m, vec![out.binding(), x.binding()], p, groups)
    }

    /// Stable argsort of the rows of 64-bit `x` (row-major): two stable passes of
    /// the u32 sort, by the low then the high words of an order-preserving key.
    pub(crate) fn wide_argsort(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let n = out.numel();
        let t = Ty::of(x.dtype);
        let code = key_code(t);
        let m = Module {
            entry: "keys",
            elem: t,
            out: Ty::U32,
            ins: &[Ty::U32],
            code: &code,
        };
        if n == 0 {
            return self.wide_pipe(&m).map(drop);
        }
        // The low key words, then the high ones.
        let keys = self.wide_temp(&pair_shape_front(x.shape), DType::U32)?;
        let params = map_params(x.shape, &[x], [0.0; 2]);
        let kb = keys.out().binding();
        self.wide_record(b, &m, vec![kb, x.binding()], params, self.wide_groups(n))?;
        let first = self.wide_temp(x.shape, DType::U32)?;
        let high = self.wide_temp(x.shape, DType::U32)?;
        let second = self.wide_temp(x.shape, DType::U32)?;
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
                DType::F64,
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
            elem: Ty::F64,
            out: Ty::F64,
            ins: &[Ty::F64, Ty::F64, Ty::F64],
            code: "",
        };
        let tiles = (nb * m.div_ceil(16) * n.div_ceil(16)) as u64;
        let cbind = c.map_or_else(|| a.binding(), |c| c.binding());
        let buffers = vec![out.binding(), a.binding(), bb.binding(), cbind];
        self.wide_record(b, &module, buffers, p, tiles.min(MAX_GROUPS))
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
            elem: Ty::F64,
            out: Ty::F64,
            ins: &[Ty::F64, Ty::F64, Ty::F64],
            code: &code,
        };
        let nd = x.shape.len();
        let len = x.shape[nd - 1];
        let n = out.numel();
        if n == 0 {
            return self.wide_pipe(&module).map(drop);
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
        self.wide_record(b, &module, buffers, p, (rows as u64).min(MAX_GROUPS))
    }

    /// `out = base` with `updates` added at `indices` along `axis`, in `out`'s
    /// 64-bit dtype without atomics: each output element sums the updates aimed at it, in index order
    /// (cost: the output's size times the index extent along `axis`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn wide_scatter_add(
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
            let t = self.wide_widen(b, indices, DType::U32)?;
            return self.wide_scatter_add(b, base, &t.view(), updates, axis, out);
        }
        let t = Ty::of(out.dtype);
        let code =
            reduce_code(ReduceOp::Sum, t).ok_or_else(|| unsupported(out.dtype, "scatter_add"))?;
        let module = Module {
            entry: "scatter_add",
            elem: t,
            out: t,
            ins: &[t, Ty::U32, t],
            code,
        };
        let n = out.numel();
        if n == 0 {
            return self.wide_pipe(&module).map(drop);
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
        self.wide_record(b, &module, buffers, p, self.wide_groups(n))
    }
}
