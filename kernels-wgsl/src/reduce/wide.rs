//! The 64-bit reductions, arg reductions and scans: one workgroup per output
//! (or per chunk of a long reduction, reduced again), and one per scanned line
//! (`wide.wgsl`; the shared core is `crate::wide`).

use crate::Result;
use crate::driver::{Batch, Driver};
use crate::dtype::DType;
use crate::elementwise::BINARY_WGSL;
use crate::kernels::{Kernels, MAX_GROUPS};
use crate::layout::{Contig, Strided};
use crate::wide::{Listed, Module, Ty, unsupported};
use wmx_spec::{ArgReduceOp, ReduceOp};

/// The family's 64-bit kernels and the op forms they call (`maximum_l`, ...).
const SRC: &[&str] = &[include_str!("wide.wgsl"), BINARY_WGSL];

/// Identity and combination of reduction or scan `op` on elements of `t`.
pub(crate) fn reduce_code(op: ReduceOp, t: Ty) -> Option<&'static str> {
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

/// The family's 64-bit modules, for the naga tests.
pub(crate) fn listed() -> Vec<Listed> {
    let mut l = Vec::new();
    let mut add = |entry, t: Ty, out, code: String| {
        l.push(Listed {
            entry,
            elem: t,
            out,
            ins: vec![t],
            code,
            src: SRC,
        });
    };
    for t in [Ty::F64, Ty::I64, Ty::U64] {
        for &op in ReduceOp::ALL {
            if let Some(code) = reduce_code(op, t) {
                add("reduce", t, t, code.to_string());
                add("scan", t, t, code.to_string());
            }
        }
        for &op in ArgReduceOp::ALL {
            add("argreduce", t, Ty::U32, arg_code(op, t));
        }
    }
    l
}

impl<D: Driver> Kernels<D> {
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
            src: SRC,
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
            src: SRC,
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
}
