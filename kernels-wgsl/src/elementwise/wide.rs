//! The 64-bit elementwise kernels: ops on f64, i64 and u64, casts to and from
//! them (SEMANTICS.md's rules), `fill`/`arange`, f64 `axpby`, and 64-bit indices
//! narrowed for the index kernels (`wide.wgsl`; the shared core is `crate::wide`).

use crate::compose::{Family, Op};
use crate::driver::{Batch, Driver};
use crate::dtype::{DType, is_wide};
use crate::elementwise::{BINARY_WGSL, COPY, SELECT, UNARY_WGSL};
use crate::kernels::Kernels;
use crate::layout::{Contig, Pairs, Strided, check_out, pair_out, pair_shape};
use crate::wide::{Listed, Module, Temp, Ty, map_params, unsupported};
use crate::{Error, Result};
use wmx_spec::{BinaryOp, UnaryOp};

/// The family's 64-bit kernels and the op forms they call (`{op}_d`, `{op}_l`).
const SRC: &[&str] = &[include_str!("wide.wgsl"), UNARY_WGSL, BINARY_WGSL];

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

/// The family's 64-bit modules, for the naga tests.
pub(crate) fn listed() -> Vec<Listed> {
    let u = Ty::U32;
    let mut l = Vec::new();
    let mut add = |entry, elem, out, ins: Vec<Ty>, code: String| {
        l.push(Listed {
            entry,
            elem,
            out,
            ins,
            code,
            src: SRC,
        });
    };
    for t in [Ty::F64, Ty::I64, Ty::U64] {
        for &op in UnaryOp::ALL {
            if let Some(code) = unary_code(op, t) {
                let (e, o) = if op.outputs_bool() {
                    ("pack1", u)
                } else {
                    ("map1", t)
                };
                add(e, t, o, vec![t], code);
            }
        }
        for &op in BinaryOp::ALL {
            if let Some(code) = binary_code(op, t) {
                let (e, o) = if op.outputs_bool() {
                    ("pack2", u)
                } else {
                    ("map2", t)
                };
                add(e, t, o, vec![t, t], code);
            }
        }
        add("pack1", t, u, vec![t], truth_code(t));
        add("gen", t, t, vec![], gen_code(t).to_string());
    }
    for &(from, to, f) in CASTS {
        add(
            "map1",
            elem_of(to, &[from]),
            to,
            vec![from],
            cast_code(from, to, f),
        );
    }
    let f = Ty::F64;
    add("map2", f, f, vec![f, f], AXPBY.to_string());
    l
}

/// `op` of f64 `axpby`: `alpha * a + beta * b`, the scalars from the parameters.
const AXPBY: &str = "fn op(a: f64, b: f64) -> f64 { return scalar(0u) * a + scalar(1u) * b; }\n";

impl<D: Driver> Kernels<D> {
    /// `out = code(x[, y])` elementwise through `map1`/`map2` (or `pack1`/`pack2`
    /// for bool outputs), `x` and `y` of `out`'s shape and of the types `tys`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn wide_map(
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
            src: SRC,
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
        let tys = [Ty::F64, Ty::F64];
        self.wide_map(b, AXPBY, &[x, y], &tys, out, [alpha, beta])
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
            src: SRC,
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
}
